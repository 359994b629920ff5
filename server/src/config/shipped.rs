//! What the server runs when its configuration names no models: the shipped profiles (their
//! models and voters), the shipped adapters and selector, and where Spider's databases are.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::ensure;
use quorum_sql::pipeline::PromptFormat;

use super::file::{RawGenerator, RawModel, RawPipeline, Role};
use super::profile::Profile;
use crate::model_source::ModelDirs;

/// The shipped LoRA adapters the small profile's voters run, one per prompt format: the
/// format whose voter runs it, the name the configuration gives it, and its
/// directory under the shipped adapters (`ModelDirs::adapters_dir`). Each has its card in that
/// directory; docs/RESULTS.md has their figures. Both were trained on all of train.json with
/// reworded copies and replaced, on dev300, an adapter trained on a few sequences:
/// `coder-rep-s2` replaced `coder-rep-s0` (224) and `coder-mschema-s2` `coder-mschema-s1` (96).
pub const SHIPPED_ADAPTERS: &[(PromptFormat, &str, &str)] = &[
    (PromptFormat::Rep, "rep-s2", "coder-rep-s2"),
    (PromptFormat::MSchema, "mschema-s2", "coder-mschema-s2"),
];

/// A shipped adapter of the selection model (Qwen2.5-Coder-0.5B in every profile), trained by
/// `quorum train --task selector` to choose among the pipeline's split votes (card in its
/// directory).
pub struct ShippedSelector {
    pub name: &'static str,
    pub dir: &'static str,
    /// The `selector_vote_weight` it serves with: the middle of the weights that did best on
    /// the split votes of the training databases held out of its training (its card).
    pub vote_weight: f32,
}

/// Trained on the 0.5B voters' split votes; the small profile serves it.
pub const SELECTOR_S1: ShippedSelector = ShippedSelector {
    name: "select-s1",
    dir: "coder-selector-s1",
    vote_weight: 1.5,
};

/// `SELECTOR_S1` taught the default profile's own split votes (the 1.5B model's PreSQL against
/// its FinSQL); the default and accurate profiles, whose queries the 1.5B model writes, serve
/// it. Its card's held-out votes did not separate the weights, and with the default's two
/// voters every split is one vote against one, where any weight above zero leaves the choice to
/// the selector; it keeps its starting point's weight, which the accurate profile was measured
/// with.
pub const SELECTOR_S2: ShippedSelector = ShippedSelector {
    name: "select-s2",
    dir: "coder-selector-s2",
    vote_weight: 1.5,
};

/// The selector adapter `profile` serves: the one trained on split votes of its generator's
/// queries (each measured on dev300 and dev100, docs/RESULTS.md).
pub fn shipped_selector(profile: Profile) -> &'static ShippedSelector {
    match profile {
        Profile::Default | Profile::Accurate => &SELECTOR_S2,
        Profile::Small => &SELECTOR_S1,
    }
}

/// The shipped adapters `profile` runs, under `dirs.adapters_dir`, by name: the selector's in
/// every profile, the generators' in the small profile. A missing one is an error naming it
/// and every directory searched: without it the profile would serve a different, less
/// accurate product than the one documented, and nothing may degrade silently.
pub(super) fn shipped_adapters(
    profile: Profile,
    dirs: &ModelDirs,
) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let mut found = BTreeMap::new();
    let generators = SHIPPED_ADAPTERS
        .iter()
        .filter(|_| profile == Profile::Small)
        .map(|&(_, name, dir)| (name, dir));
    let selector = shipped_selector(profile);
    for (name, dir) in generators.chain([(selector.name, selector.dir)]) {
        let path = dirs.adapters_dir.join(dir);
        ensure!(
            path.join("adapter_config.json").is_file(),
            "the {profile} profile's adapter `{name}` is not at {} (searched for the shipped \
             adapters in: {}); point --adapters-dir (QUORUM_ADAPTERS_DIR) or QUORUM_HOME at the \
             directory holding {dir}/, or give a configuration that names its own models",
            path.display(),
            dirs.adapters_searched
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        found.insert(name.to_owned(), path);
    }
    Ok(found)
}

/// The profile's models. The default and accurate profiles write SQL with
/// Qwen2.5-Coder-1.5B and keep Qwen2.5-Coder-0.5B as the selector only. The small profile's
/// Qwen2.5-Coder-0.5B writes SQL and selects among split votes; SmolLM2 is loaded beside it
/// for `Inference` calls and as an optional generator (at 135M it mostly writes SQL that
/// fails, so it is not a voter). MiniLM embeds questions in all three. `adapters` are the
/// shipped adapters in place, all trained on Qwen2.5-Coder-0.5B.
pub(super) fn profile_models(
    profile: Profile,
    adapters: &BTreeMap<String, PathBuf>,
) -> Vec<RawModel> {
    let model = |source: &str, roles: Vec<Role>, format: Option<PromptFormat>| RawModel {
        name: None,
        source: source.to_owned(),
        roles,
        device: None,
        format,
        max_model_len: None,
        reencode: None,
        adapters: BTreeMap::new(),
        dtype: None,
        kv_dtype: None,
        gpu_memory_fraction: None,
        batch_invariant: None,
    };
    let embedder = model("all-minilm-l6-v2", vec![Role::Embedder], None);
    match profile {
        Profile::Small => {
            let mut coder = model(
                "qwen2.5-coder-0.5b",
                vec![Role::Generator, Role::Selector],
                Some(PromptFormat::Rep),
            );
            coder.adapters = adapters.clone();
            let smollm = model(
                "smollm2-135m",
                vec![Role::Generator],
                Some(PromptFormat::SimpleDdl),
            );
            vec![coder, smollm, embedder]
        }
        Profile::Default | Profile::Accurate => {
            let writer = model(
                profile.generator_model(),
                vec![Role::Generator],
                Some(PromptFormat::Rep),
            );
            let mut selector = model("qwen2.5-coder-0.5b", vec![Role::Selector], None);
            selector.adapters = adapters.clone();
            vec![writer, selector, embedder]
        }
    }
}

/// The profile's voters. Every profile writes its PreSQL in RE_p (round 1 runs the first
/// voter's model and adapter in that format, [`profile_round1`]). The small and accurate
/// profiles then have one base model write a FinSQL in each of three prompt formats
/// ("generators with different preferences"), so cross-consistency has diverse votes from the
/// models at hand; a small-profile voter runs its format's fine-tuned adapter when that is
/// among `adapters`. The default profile's one voter writes its FinSQL in SimpleDDL, and the
/// vote is between it and the PreSQL: on dev300 the 1.5B model's SimpleDDL FinSQL was its most
/// accurate single query, and two more formats cost 1.7 times the generated tokens a question
/// for no measured gain (docs/RESULTS.md).
pub(super) fn profile_generators(
    profile: Profile,
    adapters: &BTreeMap<String, PathBuf>,
) -> Vec<RawGenerator> {
    let generator = |suffix: &str, format: PromptFormat| RawGenerator {
        name: format!("{}-{suffix}", profile.voter_prefix()),
        model: profile.generator_model().to_owned(),
        format: Some(format),
        temperature: None,
        top_p: None,
        seed: None,
        adapter: SHIPPED_ADAPTERS
            .iter()
            .filter(|_| profile == Profile::Small)
            .find(|(f, name, _)| *f == format && adapters.contains_key(*name))
            .map(|(_, name, _)| (*name).to_owned()),
    };
    match profile {
        Profile::Default => vec![generator("ddl", PromptFormat::SimpleDdl)],
        Profile::Small | Profile::Accurate => vec![
            generator("rep", PromptFormat::Rep),
            generator("mschema", PromptFormat::MSchema),
            generator("ddl", PromptFormat::SimpleDdl),
        ],
    }
}

/// Round 1 of every profile writes its PreSQL in RE_p, unless the configuration sets
/// `round1_format` itself.
pub(super) fn profile_round1(pipeline: &mut RawPipeline) {
    pipeline
        .knobs
        .round1_format
        .get_or_insert(PromptFormat::Rep);
}

/// The default profile revises a failed query only when no voter's query ran, unless the
/// configuration sets `revise_beside_results`: with two voters, the PreSQL and one FinSQL, a
/// fix beside the query that ran can only join it or split the vote for the selector. Those
/// fixes were a quarter of the generated tokens on dev300 and on business-pg; without them
/// dev300 gained one answer and lost one, business-pg lost one (docs/RESULTS.md). The small
/// and accurate profiles, with four voters, revise as before.
pub(super) fn profile_revision(profile: Profile, pipeline: &mut RawPipeline) {
    if profile == Profile::Default {
        pipeline.knobs.revise_beside_results.get_or_insert(false);
    }
}

/// With the profile's shipped selector adapter among `adapters`, its pipeline asks it on split
/// votes, at the vote weight it was validated with (unless the config sets either knob).
/// Without it selection stays off: the untuned base model loses to majority voting.
pub(super) fn profile_selection(
    profile: Profile,
    pipeline: &mut RawPipeline,
    adapters: &BTreeMap<String, PathBuf>,
) {
    let selector = shipped_selector(profile);
    if !adapters.contains_key(selector.name) {
        return;
    }
    pipeline.setup.selector_adapter = Some(selector.name.to_owned());
    pipeline.knobs.selector.get_or_insert(true);
    pipeline
        .knobs
        .selector_vote_weight
        .get_or_insert(selector.vote_weight);
}

/// Where Spider's data is when neither a flag nor `QUORUM_SPIDER_DIR` says: beside the checkout
/// this binary was built from (an absolute path, so the working directory does not matter).
pub const DEFAULT_SPIDER_DIR: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/spider");

/// Spider's dev databases beside the checkout, or under `QUORUM_SPIDER_DIR` (read by the
/// binary and passed in: libraries do not read the environment).
pub fn default_database_dir(spider_dir: Option<PathBuf>) -> PathBuf {
    spider_dir
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SPIDER_DIR))
        .join("database")
}
