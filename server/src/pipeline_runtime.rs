//! The text-to-SQL pipeline as the server runs it: the base configuration derived from the
//! server settings and the loaded models, the optional demonstration index, and a per-request
//! [`Pipeline`] bound to that request's cancellation and deadline.

use std::sync::Arc;

use anyhow::{Context, bail};
use quorum_sql::demo_index::DemoIndex;
use quorum_sql::pipeline::{GeneratorConfig, Pipeline, PipelineConfig, PipelineModels, VotingMode};
use quorum_sql::vote::VotingPolicy;

use crate::config::PipelineSettings;
use crate::models::ModelRegistry;
use crate::pipeline_models::{BertSentenceEmbedder, CallScope, EngineGenerator, EngineSelector};
use crate::status::ServiceError;

/// PET-SQL's shot count, used when demonstrations are configured and the settings name none.
const DEFAULT_SHOTS: usize = 9;

#[derive(Debug)]
pub struct PipelineRuntime {
    pub base: PipelineConfig,
    demos: Option<Arc<DemoIndex>>,
}

impl PipelineRuntime {
    /// Builds the base configuration; embeds the demonstrations when configured (blocking).
    pub fn build(settings: &PipelineSettings, models: &Arc<ModelRegistry>) -> anyhow::Result<Self> {
        let raw = &settings.raw;
        let sampling_budget = raw.max_new_tokens.unwrap_or(256);
        let generators: Vec<GeneratorConfig> = models
            .generators()
            .map(|d| {
                let mut g = GeneratorConfig::new(d.spec.name.clone(), d.spec.format);
                g.sampling.max_new_tokens = sampling_budget;
                g
            })
            .collect();
        let first_format = generators
            .first()
            .map(|g| g.format)
            .context("no generator is configured")?;
        let demos = match &settings.demos {
            Some((file, dir)) => Some(Arc::new(build_demos(file, dir, models)?)),
            None => None,
        };
        let shots = if demos.is_some() { DEFAULT_SHOTS } else { 0 };
        let mut base = PipelineConfig::pet_sql(generators);
        base.round1.format = first_format;
        base.round1.shots = raw.round1_shots.unwrap_or(shots);
        base.round2.enabled = raw.round2.unwrap_or(true);
        base.round2.shots = raw.round2_shots.unwrap_or(shots);
        base.revision.enabled = raw.revision.unwrap_or(true);
        base.revision.max_rounds = raw.revision_rounds.unwrap_or(1);
        base.voting = match raw.voting.as_deref().unwrap_or("majority") {
            "none" => VotingMode::None,
            "majority" => VotingMode::Majority,
            "difficulty_aware" => VotingMode::DifficultyAware(VotingPolicy::default()),
            other => bail!("pipeline.voting: unknown mode `{other}`"),
        };
        base.selector.enabled = raw.selector.unwrap_or(models.selector().is_some());
        base.preview_rows = raw.preview_rows.unwrap_or(20);
        let runtime = Self { base, demos };
        // Fail at startup, not on the first request, when the settings cannot work.
        runtime
            .pipeline(runtime.base.clone(), models, scope_for_check())
            .map_err(|e| anyhow::anyhow!("pipeline settings: {e}"))?;
        Ok(runtime)
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
                scope: scope.clone(),
            }),
            embedder: models.embedder.as_ref().map(|m| {
                Arc::new(BertSentenceEmbedder { model: m.clone() })
                    as Arc<dyn quorum_sql::pipeline::Embedder>
            }),
            selector: models.selector().map(|d| {
                Arc::new(EngineSelector {
                    decoder: d.clone(),
                    scope,
                }) as Arc<dyn quorum_sql::pipeline::Selector>
            }),
            demos: self.demos.clone(),
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
    models: &ModelRegistry,
) -> anyhow::Result<DemoIndex> {
    let embedder = models
        .embedder
        .as_ref()
        .context("demonstrations need a model with the `embedder` role")?;
    let examples = quorum_sql::dataset::load_examples(file)
        .with_context(|| format!("loading demonstrations from {}", file.display()))?;
    let started = std::time::Instant::now();
    let index = DemoIndex::build(
        &examples,
        database_dir,
        &BertSentenceEmbedder {
            model: embedder.clone(),
        },
    )
    .context("building the demonstration index")?;
    tracing::info!(
        demos = index.len(),
        secs = started.elapsed().as_secs_f64(),
        "demonstration index ready"
    );
    Ok(index)
}
