//! The file format, its resolution and the shipped defaults together.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use quorum_models::{CpuPath, DeviceSpec};
use quorum_sql::pipeline::PromptFormat;
use quorum_weights::Reencode;

use super::file::*;
use super::profile::Profile;
use super::resolved::*;
use super::shipped::*;
use crate::model_source::ModelDirs;

#[test]
fn half_precision_needs_a_gpu() {
    use candle_core::DType;
    assert_eq!(
        parse_model_dtype(None, DeviceSpec::Cpu).unwrap(),
        DType::F32
    );
    assert_eq!(
        parse_model_dtype(Some("bf16"), DeviceSpec::Cuda(1)).unwrap(),
        DType::BF16
    );
    let err = parse_model_dtype(Some("bf16"), DeviceSpec::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("need a GPU"), "{err}");
    let err = format!(
        "{:#}",
        parse_model_dtype(Some("int4"), DeviceSpec::Cuda(0)).unwrap_err()
    );
    assert!(err.contains("unknown dtype `int4`"), "{err}");
}

#[test]
fn a_gpu_memory_share_must_be_a_share_and_on_a_gpu() {
    check_gpu_memory_fraction(None, DeviceSpec::Cpu).unwrap();
    check_gpu_memory_fraction(Some(0.9), DeviceSpec::Cuda(0)).unwrap();
    let err = check_gpu_memory_fraction(Some(0.9), DeviceSpec::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("CUDA device") && err.contains("kv_cache_mib"),
        "{err}"
    );
    for bad in [0.0, -0.1, 1.5, f64::NAN] {
        let err = check_gpu_memory_fraction(Some(bad), DeviceSpec::Cuda(0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("(0, 1]"), "{bad}: {err}");
    }
}

#[test]
fn the_pinned_prefix_share_is_a_share_of_the_cache_half_by_default() {
    let share = |v: Option<f64>| {
        resolve_limits(&RawLimits {
            pinned_prefix_share: v,
            ..RawLimits::default()
        })
        .map(|l| l.pinned_prefix_share)
    };
    assert_eq!(share(None).unwrap(), 0.5);
    assert_eq!(share(Some(0.0)).unwrap(), 0.0);
    for bad in [-0.1, 1.5, f64::NAN] {
        let err = share(Some(bad)).unwrap_err().to_string();
        assert!(
            err.contains("limits.pinned_prefix_share must be between 0 and 1"),
            "{bad}: {err}"
        );
    }
}

/// The ConfigMaps of deploy/ are server configs: unknown keys and bad limits fail here
/// rather than in a crash-looping pod.
#[test]
fn deploy_configs_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for file in ["deploy/base/quorum.toml", "deploy/overlays/gpu/quorum.toml"] {
        let raw = RawConfig::from_file(&root.join(file)).expect(file);
        resolve_limits(&raw.limits).expect(file);
        assert!(!raw.models.is_empty(), "{file} names its models");
        assert!(
            raw.server.grace_period_secs.is_some(),
            "{file}: grace period"
        );
        // The adapters it names are the ones the image copies from the checkout.
        for model in &raw.models {
            for path in model.adapters.values() {
                let shipped = path
                    .strip_prefix("/opt/quorum")
                    .unwrap_or_else(|_| panic!("{file}: {} is not in the image", path.display()));
                assert!(
                    root.join(shipped).join("adapter_config.json").is_file(),
                    "{file}: {} is not in the checkout",
                    shipped.display()
                );
            }
        }
    }
}

/// The GPU check's server configuration (scripts/gpu/quorum-gpu.toml) parses once its
/// placeholders are filled, places every model on cuda:0, and names an adapter that ships.
#[test]
fn the_gpu_check_config_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("scripts/gpu/quorum-gpu.toml")).unwrap();
    let text = text
        .replace("@SYN@", "/tmp/synthetic")
        .replace("@REPO@", &root.display().to_string());
    let raw = RawConfig::from_toml_str(&text).unwrap();
    resolve_limits(&raw.limits).unwrap();
    assert_eq!(raw.server.device, Some(DeviceSpec::Cuda(0)));
    assert_eq!(raw.pipeline.setup.generators.len(), 3);
    for model in &raw.models {
        for path in model.adapters.values() {
            assert!(
                path.join("adapter_config.json").is_file(),
                "{}",
                path.display()
            );
        }
    }
}

/// The shipped adapters are in the checkout, and the small profile puts each on its format's
/// voter only when it is there.
#[test]
fn the_small_profile_voters_run_the_shipped_adapters_when_present() {
    let adapters_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
    let shipped = shipped_adapters(Profile::Small, &dirs_with_adapters(&adapters_dir))
        .expect("the checkout ships the adapters");
    assert_eq!(
        shipped.len(),
        SHIPPED_ADAPTERS.len() + 1,
        "every generator adapter ships, the selector's too"
    );
    let models = profile_models(Profile::Small, &shipped);
    assert_eq!(models[0].adapters, shipped);
    let generators = profile_generators(Profile::Small, &shipped);
    let names: Vec<_> = generators.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["qwen-rep", "qwen-mschema", "qwen-ddl"]);
    let adapters: Vec<_> = generators.iter().map(|g| g.adapter.as_deref()).collect();
    assert_eq!(adapters, [Some("rep-s2"), Some("mschema-s2"), None]);
    // None in place: every voter runs the base model.
    let none = BTreeMap::new();
    assert!(profile_models(Profile::Small, &none)[0].adapters.is_empty());
    assert!(
        profile_generators(Profile::Small, &none)
            .iter()
            .all(|g| g.adapter.is_none())
    );
    // Only the RE_p adapter in place: the M-Schema voter runs the base model.
    let mut rep = BTreeMap::new();
    rep.insert("rep-s2".to_owned(), adapters_dir.join("coder-rep-s2"));
    let adapters: Vec<_> = profile_generators(Profile::Small, &rep)
        .iter()
        .map(|g| g.adapter.clone())
        .collect();
    assert_eq!(adapters, [Some("rep-s2".to_owned()), None, None]);
    // Nothing in place: an error that names the adapter and where it was looked for.
    let missing = adapters_dir.join("missing");
    let err = shipped_adapters(Profile::Small, &dirs_with_adapters(&missing))
        .expect_err("no adapters there")
        .to_string();
    assert!(err.contains("`rep-s2`"), "{err}");
    assert!(err.contains("small profile"), "{err}");
    assert!(err.contains("missing"), "{err}");
    assert!(err.contains("--adapters-dir"), "{err}");
}

/// The default profile: the 1.5B model writes the PreSQL in RE_p and one FinSQL in
/// SimpleDDL, and the shipped selector on the 0.5B model, its only adapter, judges a split.
/// The generators' adapters are not needed to start it.
#[test]
fn the_default_profile_writes_two_queries_on_the_bigger_model() {
    let adapters_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
    let shipped = shipped_adapters(Profile::Default, &dirs_with_adapters(&adapters_dir))
        .expect("the checkout ships the selector");
    assert_eq!(
        shipped.keys().collect::<Vec<_>>(),
        [SELECTOR_S2.name],
        "only the selector's adapter, the one taught its own split votes"
    );
    let generators = profile_generators(Profile::Default, &shipped);
    let voters: Vec<_> = generators
        .iter()
        .map(|g| {
            (
                g.name.as_str(),
                g.model.as_str(),
                g.format,
                g.adapter.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        voters,
        [(
            "qwen15-ddl",
            "qwen2.5-coder-1.5b",
            Some(PromptFormat::SimpleDdl),
            None
        )]
    );
    let mut pipeline = RawPipeline::default();
    profile_round1(&mut pipeline);
    assert_eq!(pipeline.knobs.round1_format, Some(PromptFormat::Rep));
    let mut own = RawPipeline::default();
    own.knobs.round1_format = Some(PromptFormat::MSchema);
    profile_round1(&mut own);
    assert_eq!(own.knobs.round1_format, Some(PromptFormat::MSchema));
    // Only the default profile stops revising a failure beside a query that ran, and a
    // configuration's own setting stands.
    for (profile, expected) in [
        (Profile::Default, Some(false)),
        (Profile::Small, None),
        (Profile::Accurate, None),
    ] {
        let mut pipeline = RawPipeline::default();
        profile_revision(profile, &mut pipeline);
        assert_eq!(pipeline.knobs.revise_beside_results, expected, "{profile}");
    }
    own.knobs.revise_beside_results = Some(true);
    profile_revision(Profile::Default, &mut own);
    assert_eq!(own.knobs.revise_beside_results, Some(true));
    let models = profile_models(Profile::Default, &shipped);
    let sources: Vec<_> = models.iter().map(|m| m.source.as_str()).collect();
    assert_eq!(
        sources,
        [
            "qwen2.5-coder-1.5b",
            "qwen2.5-coder-0.5b",
            "all-minilm-l6-v2"
        ]
    );
    assert_eq!(models[1].roles, [Role::Selector]);
    assert_eq!(models[1].adapters, shipped);
}

#[test]
fn relative_paths_in_a_file_are_taken_from_its_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("model.gguf"), b"x").expect("write");
    let file = dir.path().join("quorum.toml");
    std::fs::write(
        &file,
        r#"
[server]
tls_cert = "certs/cert.pem"
adapter_dir = "/abs/adapters"
[[models]]
source = "model.gguf"
roles = ["generator"]
[models.adapters]
sql = "adapters/sql"
[[models]]
source = "qwen2.5-coder-0.5b"
roles = ["selector"]
[databases]
dir = "dbs"
[databases.entries]
sales = "sales.sqlite"
[pipeline]
demos_file = "train.json"
"#,
    )
    .expect("write");
    let raw = RawConfig::from_file(&file).expect("parses");
    let base = crate::model_source::absolute(dir.path());
    assert_eq!(raw.server.tls_cert, Some(base.join("certs/cert.pem")));
    assert_eq!(raw.server.adapter_dir, Some(PathBuf::from("/abs/adapters")));
    assert_eq!(
        raw.models[0].source,
        base.join("model.gguf").display().to_string()
    );
    assert_eq!(raw.models[0].adapters["sql"], base.join("adapters/sql"));
    // A short name that is no file there stays a name.
    assert_eq!(raw.models[1].source, "qwen2.5-coder-0.5b");
    assert_eq!(raw.databases.dir, Some(base.join("dbs")));
    assert_eq!(raw.databases.entries["sales"], base.join("sales.sqlite"));
    assert_eq!(raw.pipeline.setup.demos_file, Some(base.join("train.json")));
}

/// The accurate profile votes with three formats on the 1.5B base model (the shipped
/// generator adapters are the 0.5B model's) and keeps the selector on the 0.5B model, the
/// adapter taught the 1.5B model's split votes.
#[test]
fn the_accurate_profile_votes_on_the_bigger_model_and_keeps_the_shipped_selector() {
    let adapters_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
    let shipped = shipped_adapters(Profile::Accurate, &dirs_with_adapters(&adapters_dir))
        .expect("the checkout ships the selector");
    let generators = profile_generators(Profile::Accurate, &shipped);
    let voters: Vec<_> = generators
        .iter()
        .map(|g| (g.name.as_str(), g.model.as_str(), g.adapter.as_deref()))
        .collect();
    assert_eq!(
        voters,
        [
            ("qwen15-rep", "qwen2.5-coder-1.5b", None),
            ("qwen15-mschema", "qwen2.5-coder-1.5b", None),
            ("qwen15-ddl", "qwen2.5-coder-1.5b", None),
        ]
    );
    let models = profile_models(Profile::Accurate, &shipped);
    let selector = models
        .iter()
        .find(|m| m.roles.contains(&Role::Selector))
        .expect("a selector");
    assert_eq!(selector.source, "qwen2.5-coder-0.5b");
    assert_eq!(
        selector.adapters.keys().collect::<Vec<_>>(),
        [SELECTOR_S2.name]
    );
    assert!(
        models
            .iter()
            .filter(|m| m.roles.contains(&Role::Generator))
            .all(|m| m.source == "qwen2.5-coder-1.5b")
    );
}

/// A profile is chosen by flag or file; without the 1.5B model the accurate profile is an
/// error that says how to fetch it (as the default profile's would be), and a profile beside the configuration's own models is
/// refused rather than one of them silently ignored.
#[test]
fn profiles_parse_and_fail_clearly() {
    let raw = RawConfig::from_toml_str("[server]\nprofile = \"accurate\"\n").unwrap();
    assert_eq!(raw.server.profile, Some(Profile::Accurate));
    assert!(RawConfig::from_toml_str("[server]\nprofile = \"fast\"\n").is_err());
    let adapters_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
    let dirs = dirs_with_adapters(&adapters_dir);
    let err = format!(
        "{:#}",
        resolve(raw, &dirs, Path::new("/nonexistent/db")).unwrap_err()
    );
    assert!(err.contains("qwen2.5-coder-1.5b"), "{err}");
    assert!(err.contains("scripts/fetch-models.sh"), "{err}");
    let mut own = RawConfig::from_toml_str(
        "[[models]]\nsource = \"smollm2-135m\"\nroles = [\"generator\"]\n",
    )
    .unwrap();
    own.apply(Overrides {
        profile: Some(Profile::Default),
        ..Overrides::default()
    });
    let err = resolve(own, &dirs, Path::new("/nonexistent/db"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("profile `default`"), "{err}");
}

fn dirs_with_adapters(dir: &Path) -> ModelDirs {
    let mut dirs = ModelDirs::with_adapter_candidates(
        PathBuf::from("/nonexistent/models"),
        quorum_weights::HubCache {
            root: PathBuf::from("/nonexistent/hub"),
        },
        Vec::new(),
    );
    dirs.set_adapters_dir(dir.to_path_buf());
    dirs
}

/// Each profile's pipeline asks its shipped selector on split votes at its validated weight
/// (the 1.5B profiles the one taught the 1.5B model's votes, the small profile the one trained
/// on its own); a config's own knobs win, and without the adapter selection stays off.
#[test]
fn the_default_pipeline_selects_with_the_shipped_selector_when_present() {
    let adapters_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters");
    for (profile, expected) in [
        (Profile::Default, "select-s2"),
        (Profile::Accurate, "select-s2"),
        (Profile::Small, "select-s1"),
    ] {
        let shipped = shipped_adapters(profile, &dirs_with_adapters(&adapters_dir))
            .expect("the checkout ships the profile's adapters");
        let mut pipeline = RawPipeline::default();
        profile_selection(profile, &mut pipeline, &shipped);
        assert_eq!(
            pipeline.setup.selector_adapter.as_deref(),
            Some(expected),
            "{profile}"
        );
        assert_eq!(pipeline.knobs.selector, Some(true), "{profile}");
        assert_eq!(pipeline.knobs.selector_vote_weight, Some(1.5), "{profile}");
    }
    let shipped = shipped_adapters(Profile::Default, &dirs_with_adapters(&adapters_dir))
        .expect("the checkout ships the selector");
    let mut own = RawPipeline::default();
    own.knobs.selector = Some(false);
    own.knobs.selector_vote_weight = Some(0.5);
    profile_selection(Profile::Default, &mut own, &shipped);
    assert_eq!(
        (own.knobs.selector, own.knobs.selector_vote_weight),
        (Some(false), Some(0.5))
    );
    let mut bare = RawPipeline::default();
    profile_selection(Profile::Default, &mut bare, &BTreeMap::new());
    assert_eq!(bare.setup.selector_adapter, None);
    assert_eq!(bare.knobs.selector, None);
}

#[test]
fn reencode_defaults_by_device_and_rejects_unknown_values() {
    let avx2 = CpuPath::Avx2;
    assert_eq!(
        parse_reencode(None, DeviceSpec::Cpu, avx2).unwrap(),
        Reencode::Kernels
    );
    assert_eq!(
        parse_reencode(None, DeviceSpec::Cpu, CpuPath::Candle).unwrap(),
        Reencode::Slow
    );
    assert_eq!(
        parse_reencode(None, DeviceSpec::Cuda(0), avx2).unwrap(),
        Reencode::Slow
    );
    assert_eq!(
        parse_reencode(Some("none"), DeviceSpec::Cpu, avx2).unwrap(),
        Reencode::None
    );
    assert_eq!(
        parse_reencode(Some("slow"), DeviceSpec::Cpu, avx2).unwrap(),
        Reencode::Slow
    );
    assert_eq!(
        parse_reencode(Some("all"), DeviceSpec::Cpu, avx2).unwrap(),
        Reencode::All
    );
    assert_eq!(
        parse_reencode(Some("kernels"), DeviceSpec::Cpu, avx2).unwrap(),
        Reencode::Kernels
    );
    let err = parse_reencode(Some("q4"), DeviceSpec::Cpu, avx2)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`q4`"), "{err}");
}

#[test]
fn kv_dtype_is_f32_or_f16_and_only_for_the_cpu() {
    use candle_core::DType;
    assert_eq!(parse_kv_dtype(None, DeviceSpec::Cpu).unwrap(), DType::F32);
    assert_eq!(
        parse_kv_dtype(None, DeviceSpec::Cuda(0)).unwrap(),
        DType::F32
    );
    assert_eq!(
        parse_kv_dtype(Some("f16"), DeviceSpec::Cpu).unwrap(),
        DType::F16
    );
    assert_eq!(
        parse_kv_dtype(Some("f32"), DeviceSpec::Cpu).unwrap(),
        DType::F32
    );
    let err = parse_kv_dtype(Some("bf16"), DeviceSpec::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`bf16`") && err.contains("`f16`"), "{err}");
    let err = parse_kv_dtype(Some("f16"), DeviceSpec::Cuda(0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("dtype"), "{err}");
}

#[test]
fn pipeline_masking_and_generator_adapters_parse() {
    let raw: RawPipeline = toml::from_str(
        r#"
masking = "relevance"
selector_adapter = "pick"
[[generators]]
name = "coder-sql"
model = "coder"
adapter = "sql"
"#,
    )
    .unwrap();
    assert_eq!(
        raw.setup.masking,
        Some(quorum_sql::demo_index::MaskingMode::Relevance)
    );
    assert_eq!(raw.setup.generators[0].adapter.as_deref(), Some("sql"));
    assert_eq!(raw.setup.selector_adapter.as_deref(), Some("pick"));
    assert!(toml::from_str::<RawPipeline>("masking = \"semantic\"").is_err());
}

#[test]
fn pipeline_knobs_parse_beside_the_setup_and_unknown_keys_are_refused() {
    let raw: RawPipeline = toml::from_str(
        r#"
voting = "none"
revision_rounds = 2
revision_temperature = 0.5
round1_format = "m_schema"
max_new_tokens = 64
"#,
    )
    .unwrap();
    assert_eq!(raw.knobs.voting, Some(quorum_sql::vote::VotingMode::None));
    assert_eq!(raw.knobs.revision_rounds, Some(2));
    assert_eq!(raw.knobs.revision_temperature, Some(0.5));
    assert_eq!(raw.knobs.round1_format, Some(PromptFormat::MSchema));
    assert_eq!(raw.setup.max_new_tokens, Some(64));
    let err = toml::from_str::<RawPipeline>("revison_rounds = 2")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown pipeline setting `revison_rounds`"),
        "{err}"
    );
    for key in [
        "revision_rounds",
        "max_new_tokens",
        "selector_adapter",
        "generators",
    ] {
        assert!(err.contains(key), "{key} is listed: {err}");
    }
    assert!(toml::from_str::<RawPipeline>("voting = \"loud\"").is_err());
    // A whole number where a real one is meant reads as that number.
    let whole: RawPipeline = toml::from_str("revision_temperature = 1").unwrap();
    assert_eq!(whole.knobs.revision_temperature, Some(1.0));
}

/// Batch invariance is a model's own setting: off unless its entry asks for it, and only a
/// boolean is accepted.
#[test]
fn batch_invariance_is_a_model_setting_off_by_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("model.gguf"), b"x").expect("write");
    let config = |extra: &str| {
        format!(
            "[[models]]\nname = \"steady\"\nsource = \"model.gguf\"\nroles = [\"generator\"]\n\
             {extra}\n[[models]]\nname = \"plain\"\nsource = \"model.gguf\"\n\
             roles = [\"generator\"]\n"
        )
    };
    let file = dir.path().join("quorum.toml");
    std::fs::write(&file, config("batch_invariant = true")).expect("write");
    let raw = RawConfig::from_file(&file).expect("parses");
    let resolved = resolve(raw, &dirs_with_adapters(dir.path()), dir.path()).expect("resolves");
    let invariant: Vec<(&str, bool)> = resolved
        .models
        .iter()
        .map(|m| (m.name.as_str(), m.batch_invariant))
        .collect();
    assert_eq!(invariant, [("steady", true), ("plain", false)]);
    std::fs::write(&file, config("batch_invariant = \"yes\"")).expect("write");
    let err = format!("{:#}", RawConfig::from_file(&file).unwrap_err());
    assert!(err.contains("batch_invariant"), "{err}");
}

#[test]
fn beyond_loopback_without_a_token_is_refused_unless_allowed() {
    use crate::config::resolved::check_exposure;
    use std::net::SocketAddr;
    let any: SocketAddr = "0.0.0.0:50051".parse().unwrap();
    let lo: SocketAddr = "127.0.0.1:9464".parse().unwrap();
    let lo6: SocketAddr = "[::1]:9464".parse().unwrap();
    assert!(check_exposure(false, false, [lo, lo6]).unwrap().is_empty());
    let err = check_exposure(false, false, [lo, any])
        .unwrap_err()
        .to_string();
    assert!(err.contains("refusing to serve 0.0.0.0:50051"), "{err}");
    assert_eq!(check_exposure(false, true, [lo, any]).unwrap(), vec![any]);
    assert!(check_exposure(true, false, [any]).unwrap().is_empty());
}
