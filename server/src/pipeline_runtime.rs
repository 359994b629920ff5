//! The text-to-SQL pipeline as the server runs it: the base configuration derived from the
//! server settings and the loaded models, the optional demonstration index, and a per-request
//! [`Pipeline`] bound to that request's cancellation and deadline.

use std::sync::Arc;

use std::collections::HashMap;

use anyhow::{Context, ensure};
use quorum_sql::demo_index::{DemoIndex, DemoIndexSource, MaskingMode};
use quorum_sql::pipeline::{GeneratorConfig, Pipeline, PipelineConfig, PipelineModels};

use crate::config::file::RawGenerator;
use crate::config::resolved::PipelineSettings;
use crate::models::ModelRegistry;
use crate::pipeline_models::{
    BertSentenceEmbedder, CallScope, EngineGenerator, EngineSelector, GeneratorTarget,
};
use crate::status::ServiceError;

#[derive(Debug)]
pub struct PipelineRuntime {
    pub base: PipelineConfig,
    demos: Option<Arc<DemoIndex>>,
    /// Generator name → the loaded model (and adapter) that runs it.
    routes: Arc<HashMap<String, GeneratorTarget>>,
    /// The selection model's adapter for choosing among split votes.
    selector_adapter: Option<String>,
}

/// A configured generator and the model behind it.
struct Route {
    config: GeneratorConfig,
    target: GeneratorTarget,
}

/// The configured generators, or one per generator-role model in its own format.
fn generator_routes(raw: &[RawGenerator], models: &ModelRegistry) -> anyhow::Result<Vec<Route>> {
    if raw.is_empty() {
        return Ok(models
            .generators()
            .map(|d| Route {
                config: GeneratorConfig::new(d.spec.name.clone(), d.spec.format),
                target: GeneratorTarget {
                    model: d.spec.name.clone(),
                    adapter: None,
                },
            })
            .collect());
    }
    let mut routes: Vec<Route> = Vec::with_capacity(raw.len());
    for g in raw {
        ensure!(
            !routes.iter().any(|r| r.config.name == g.name),
            "pipeline.generators: two generators are named `{}`",
            g.name
        );
        let decoder = models
            .generators()
            .find(|d| d.spec.name == g.model)
            .with_context(|| {
                format!(
                    "pipeline.generators.{}: no model `{}` with the generator role",
                    g.name, g.model
                )
            })?;
        let mut config =
            GeneratorConfig::new(g.name.clone(), g.format.unwrap_or(decoder.spec.format));
        let defaults = config.sampling;
        config.sampling.temperature = g.temperature.unwrap_or(defaults.temperature);
        config.sampling.top_p = g.top_p.unwrap_or(defaults.top_p);
        config.sampling.seed = g.seed.or(defaults.seed);
        ensure!(
            config.sampling.temperature >= 0.0 && (0.0..=1.0).contains(&config.sampling.top_p),
            "pipeline.generators.{}: temperature must be >= 0 and top_p in 0..=1",
            g.name
        );
        if let Some(adapter) = &g.adapter {
            ensure!(
                decoder.spec.adapters.contains_key(adapter),
                "pipeline.generators.{}: model `{}` has no adapter `{adapter}` (its adapters: {:?})",
                g.name,
                g.model,
                decoder.spec.adapters.keys().collect::<Vec<_>>()
            );
        }
        routes.push(Route {
            config,
            target: GeneratorTarget {
                model: decoder.spec.name.clone(),
                adapter: g.adapter.clone(),
            },
        });
    }
    Ok(routes)
}

/// A pipeline generator as served: the model and adapter behind it and its prompt format.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedGenerator {
    pub name: String,
    pub model: String,
    pub format: String,
    /// `None`: the base model.
    pub adapter: Option<String>,
}

/// The selection model as the pipeline asks it on split votes.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedSelector {
    /// `None`: no model has the selector role.
    pub model: Option<String>,
    pub adapter: Option<String>,
    /// Whether split votes ask it by default (`pipeline.selector`).
    pub enabled: bool,
}

impl PipelineRuntime {
    /// The configured generators in pipeline order, each with the model and adapter it runs.
    pub fn served_generators(&self) -> Vec<ServedGenerator> {
        self.base
            .generators
            .iter()
            .filter_map(|g| {
                let target = self.routes.get(&g.name)?;
                Some(ServedGenerator {
                    name: g.name.clone(),
                    model: target.model.clone(),
                    format: g.format.name(),
                    adapter: target.adapter.clone(),
                })
            })
            .collect()
    }

    /// The selection model, its adapter, and whether split votes ask it by default.
    pub fn served_selector(&self, models: &ModelRegistry) -> ServedSelector {
        ServedSelector {
            model: models.selector().map(|d| d.spec.name.clone()),
            adapter: self.selector_adapter.clone(),
            enabled: self.base.selector.enabled,
        }
    }

    /// What the answer's `settings` add to the knobs: `generator.<name>` and `selector`, each
    /// as `model=M format=F adapter=A` (`adapter=none` for the base model).
    pub fn served_settings(&self, models: &ModelRegistry) -> Vec<(String, String)> {
        let adapter = |a: &Option<String>| a.clone().unwrap_or_else(|| "none".to_owned());
        let mut out: Vec<(String, String)> = self
            .served_generators()
            .into_iter()
            .map(|g| {
                (
                    format!("generator.{}", g.name),
                    format!(
                        "model={} format={} adapter={}",
                        g.model,
                        g.format,
                        adapter(&g.adapter)
                    ),
                )
            })
            .collect();
        let selector = self.served_selector(models);
        if let Some(model) = &selector.model {
            out.push((
                "selector_model".to_owned(),
                format!("model={model} adapter={}", adapter(&selector.adapter)),
            ));
        }
        out
    }

    /// What runs `model` with `adapter`: the generators by name, sorted, then `selector`
    /// when the pipeline's selection calls do.
    pub fn users_of_adapter(
        &self,
        models: &ModelRegistry,
        model: &str,
        adapter: &str,
    ) -> Vec<String> {
        let mut names: Vec<String> = self
            .routes
            .iter()
            .filter(|(_, t)| t.model == model && t.adapter.as_deref() == Some(adapter))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        let selector_uses = self.selector_adapter.as_deref() == Some(adapter)
            && models.selector().is_some_and(|d| d.spec.name == model);
        if selector_uses {
            names.push("selector".to_owned());
        }
        names
    }

    /// Builds the base configuration; embeds the demonstrations when configured (blocking).
    pub fn build(settings: &PipelineSettings, models: &Arc<ModelRegistry>) -> anyhow::Result<Self> {
        let raw = &settings.raw.setup;
        let sampling_budget = raw.max_new_tokens.unwrap_or(256);
        let routes = generator_routes(&raw.generators, models)?;
        let generators: Vec<GeneratorConfig> = routes
            .iter()
            .map(|route| {
                let mut g = route.config.clone();
                g.sampling.max_new_tokens = sampling_budget;
                g
            })
            .collect();
        ensure!(!generators.is_empty(), "no generator is configured");
        let demos = match &settings.demos {
            Some((file, dir)) => Some(Arc::new(build_demos(
                file,
                dir,
                &settings.demos_cache,
                models,
                raw.masking.unwrap_or_default(),
            )?)),
            None => None,
        };
        let mut base = PipelineConfig::new(generators);
        settings
            .raw
            .knobs
            .apply(&mut base)
            .map_err(|e| anyhow::anyhow!("pipeline.{}: {}", e.knob, e.reason))?;
        tracing::info!(
            settings = %quorum_sql::pipeline::PipelineKnobs::of(&base)
                .entries()
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join(" "),
            "pipeline"
        );
        let routes = routes
            .into_iter()
            .map(|r| (r.config.name, r.target))
            .collect();
        let selector_adapter = raw.selector_adapter.clone();
        if let Some(adapter) = &selector_adapter {
            let selector = models
                .selector()
                .context("pipeline.selector_adapter: no model has the selector role")?;
            ensure!(
                selector.spec.adapters.contains_key(adapter),
                "pipeline.selector_adapter: the selector `{}` has no adapter `{adapter}` (its adapters: {:?})",
                selector.spec.name,
                selector.spec.adapters.keys().collect::<Vec<_>>()
            );
        }
        let mut runtime = Self {
            base,
            demos,
            routes: Arc::new(routes),
            selector_adapter,
        };
        // The consistency check explains SQL in English: the generator sub-tasks use.
        runtime.base.consistency.generator = Some(runtime.subtask_generator(None)?);
        // Fail at startup, not on the first request, when the settings cannot work.
        runtime
            .pipeline(runtime.base.clone(), models, scope_for_check())
            .map_err(|e| anyhow::anyhow!("pipeline settings: {e}"))?;
        Ok(runtime)
    }

    /// The configured generator a sub-task asks: `requested` when given, else the first
    /// generator that runs a model without an adapter (the adapters are tuned for writing SQL
    /// from the pipeline's prompts, not for ranking tables or explaining SQL), else the first.
    pub fn subtask_generator(&self, requested: Option<&str>) -> Result<String, ServiceError> {
        if let Some(name) = requested.filter(|n| !n.is_empty()) {
            if !self.routes.contains_key(name) {
                let mut known: Vec<&str> = self.routes.keys().map(String::as_str).collect();
                known.sort_unstable();
                return Err(ServiceError::invalid(
                    "generator",
                    format!(
                        "no generator `{name}` is configured (known: {})",
                        known.join(", ")
                    ),
                ));
            }
            return Ok(name.to_owned());
        }
        let generators = &self.base.generators;
        generators
            .iter()
            .find(|g| {
                self.routes
                    .get(&g.name)
                    .is_some_and(|t| t.adapter.is_none())
            })
            .or_else(|| generators.first())
            .map(|g| g.name.clone())
            .ok_or_else(|| ServiceError::FailedPrecondition {
                what: "a generator".into(),
            })
    }

    /// The generators, as the sub-tasks call them, bound to one request's scope.
    pub fn generator(&self, models: &Arc<ModelRegistry>, scope: CallScope) -> EngineGenerator {
        EngineGenerator {
            models: models.clone(),
            routes: self.routes.clone(),
            scope,
        }
    }

    /// The selection model as the sub-tasks' judge, bound to one request's scope, when a
    /// model has that role: the base model, without the selection adapter.
    pub fn selector(&self, models: &ModelRegistry, scope: CallScope) -> Option<EngineSelector> {
        models.selector().map(|d| EngineSelector {
            decoder: d.clone(),
            adapter: None,
            scope,
        })
    }

    /// A pipeline for one request.
    pub fn pipeline(
        &self,
        config: PipelineConfig,
        models: &Arc<ModelRegistry>,
        scope: CallScope,
    ) -> Result<Pipeline, ServiceError> {
        let pipeline_models = PipelineModels {
            generator: Arc::new(EngineGenerator {
                models: models.clone(),
                routes: self.routes.clone(),
                scope: scope.clone(),
            }),
            embedder: models.embedder.as_ref().map(|m| {
                Arc::new(BertSentenceEmbedder { model: m.clone() })
                    as Arc<dyn quorum_sql::model::Embedder>
            }),
            selector: models.selector().map(|d| {
                Arc::new(EngineSelector {
                    decoder: d.clone(),
                    adapter: self.selector_adapter.clone(),
                    scope,
                }) as Arc<dyn quorum_sql::model::Selector>
            }),
            demos: self.demos.clone(),
            // Relevance masking probes the embedder model (a BERT) for the asked question.
            context_encoder: models.embedder.as_ref().map(|m| {
                Arc::new(BertSentenceEmbedder { model: m.clone() })
                    as Arc<dyn quorum_sql::model::ContextEncoder>
            }),
        };
        Ok(Pipeline::new(config, pipeline_models)?)
    }
}

/// A scope for the startup check, which builds a pipeline but never calls a model.
fn scope_for_check() -> CallScope {
    CallScope {
        runtime: tokio::runtime::Handle::current(),
        cancel: tokio_util::sync::CancellationToken::new(),
        deadline: std::time::Instant::now(),
    }
}

fn build_demos(
    file: &std::path::Path,
    database_dir: &std::path::Path,
    cache: &std::path::Path,
    models: &ModelRegistry,
    masking: MaskingMode,
) -> anyhow::Result<DemoIndex> {
    let embedder = models
        .embedder
        .as_ref()
        .context("demonstrations need a model with the `embedder` role")?;
    let started = std::time::Instant::now();
    let sentence = BertSentenceEmbedder {
        model: embedder.clone(),
    };
    let source = DemoIndexSource {
        train_json: file,
        database_dir,
        embedder_name: &embedder.spec.source,
        masking,
        encoder: Some(&sentence),
    };
    if let Some(dir) = cache.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the demo index directory {}", dir.display()))?;
    }
    let (index, status) = DemoIndex::load_or_build(source, &sentence, cache)
        .with_context(|| format!("the demonstration index from {}", file.display()))?;
    tracing::info!(
        demos = index.len(),
        cache = %cache.display(),
        status = ?status,
        secs = started.elapsed().as_secs_f64(),
        "demonstration index ready"
    );
    Ok(index)
}
