//! Pipeline tests with scripted models over the real concert_singer database.

mod flow;
mod switches;
mod voting;
mod warming;

use std::sync::Arc;

use crate::fakes::{FixedSelector, ScriptedGenerator};
use crate::model::GenerationRequest;

use super::{GeneratorConfig, Pipeline, PipelineConfig, PipelineModels, PromptFormat};
pub(crate) use crate::spider_fixture::concert;

pub(crate) const QUESTION: &str = "How many singers do we have?";
/// 6 rows in singer.
pub(crate) const S6: &str = "SELECT count(*) FROM singer";
/// 9 rows in stadium.
pub(crate) const S9: &str = "SELECT count(*) FROM stadium";
/// 10 rows in singer_in_concert.
pub(crate) const S10: &str = "SELECT count(*) FROM singer_in_concert";
/// Fails: no such column.
pub(crate) const BAD: &str = "SELECT nme FROM singer";

/// The two rounds without demos or revision, over RE_p generators with these names, with
/// one greedy fix per failure and no answer prefix when a test turns revision on.
pub(crate) fn config(names: &[&str]) -> PipelineConfig {
    let generators = names
        .iter()
        .map(|n| GeneratorConfig::new(*n, PromptFormat::Rep))
        .collect();
    let mut config = PipelineConfig::new(generators);
    config.revision.enabled = false;
    config.revision.samples = 1;
    config.answer_prefix = false;
    config
}

pub(crate) fn pipeline(
    config: PipelineConfig,
    generator: &Arc<ScriptedGenerator>,
    selector: Option<&Arc<FixedSelector>>,
) -> Pipeline {
    let models = PipelineModels {
        generator: generator.clone(),
        embedder: None,
        selector: selector.map(|s| s.clone() as Arc<dyn super::Selector>),
        demos: None,
        context_encoder: None,
    };
    Pipeline::new(config, models).expect("valid pipeline")
}

/// A generator whose round-1 answer is `presql` and whose round-2 answers come from
/// `finsql(generator name)`; revisions answer `S6`.
pub(crate) fn by_stage(
    presql: &'static str,
    finsql: impl Fn(&str) -> &'static str + Send + Sync + 'static,
) -> Arc<ScriptedGenerator> {
    Arc::new(ScriptedGenerator::new(move |r| {
        Ok(match stage(r) {
            Stage::Round1 => presql.to_owned(),
            Stage::Round2 => finsql(&r.generator).to_owned(),
            Stage::Revision => S6.to_owned(),
        })
    }))
}

/// Which stage a prompt belongs to, recognised by its text (tests use concert_singer, whose
/// full schema shows `stadium`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    Round1,
    Round2,
    Revision,
}

pub(crate) fn stage(request: &GenerationRequest) -> Stage {
    let text = &request.prompt.user;
    if text.contains("【Execution result】") {
        Stage::Revision
    } else if text.contains("stadium") {
        Stage::Round1
    } else {
        Stage::Round2
    }
}
