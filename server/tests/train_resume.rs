//! A long `quorum train` run stopped by `--stop-after-minutes` and taken up again with
//! `--resume`, twice, ends with the adapter and the log of the same run made in one go: through
//! the binary, on the real Qwen2.5-Coder-0.5B and Spider's training data, with reworded
//! questions on. The resumable state lands in the user's cache, never beside the adapter.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the models are for this test's user, resolved as the binary does, so that a run with
/// another cache directory still finds them.
fn models_dir() -> PathBuf {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("QUORUM_MODELS_DIR").unwrap_or_else(|| {
        let cache = var("XDG_CACHE_HOME")
            .unwrap_or_else(|| var("HOME").expect("HOME is set").join(".cache"));
        cache.join("quorum/models")
    })
}

/// Runs `quorum train` into `out` with the run's fixed settings and `extra`, with `cache` as
/// the user's cache directory.
fn train(out: &Path, cache: &Path, extra: &[&str]) {
    let status = Command::new(env!("CARGO_BIN_EXE_quorum"))
        .env("XDG_CACHE_HOME", cache)
        .env("QUORUM_MODELS_DIR", models_dir())
        .args([
            "train", "--format", "m_schema", "--limit", "12", "--seed", "3",
        ])
        .args([
            "--steps",
            "3",
            "--grad-accumulation",
            "1",
            "--warmup-steps",
            "1",
        ])
        .args([
            "--max-tokens",
            "384",
            "--rank",
            "4",
            "--augment-share",
            "0.5",
        ])
        .args(["--checkpoint-every", "0"])
        .arg("--out")
        .arg(out)
        .args(extra)
        .status()
        .unwrap();
    assert!(status.success(), "quorum train {extra:?}: {status}");
}

/// The log's lines without their timings, which differ from run to run.
fn log_without_timings(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("train-log.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
            let object = value.as_object_mut().unwrap();
            for key in ["seconds", "tokens_per_s", "elapsed_s"] {
                object.remove(key);
            }
            value
        })
        .collect()
}

#[test]
fn a_run_stopped_twice_and_resumed_ends_as_the_run_made_in_one_go() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, pieces) = (dir.path().join("whole"), dir.path().join("pieces"));
    let cache = dir.path().join("cache");
    train(&whole, &cache, &[]);
    train(&pieces, &cache, &["--stop-after-minutes", "0"]);
    let card: serde_json::Value =
        serde_json::from_slice(&std::fs::read(pieces.join("quorum_adapter.json")).unwrap())
            .unwrap();
    assert_eq!(card["steps"], 1, "the first piece stops after one step");
    train(&pieces, &cache, &["--resume", "--stop-after-minutes", "0"]);
    train(&pieces, &cache, &["--resume"]);
    assert_eq!(log_without_timings(&pieces), log_without_timings(&whole));
    assert_eq!(log_without_timings(&whole).len(), 3);
    assert!(
        std::fs::read(pieces.join("adapter_model.safetensors")).unwrap()
            == std::fs::read(whole.join("adapter_model.safetensors")).unwrap(),
        "the resumed run's adapter differs from the one made in one go"
    );
    // The state of both runs is in the cache, one directory each, and none beside an adapter.
    let states: Vec<_> = std::fs::read_dir(cache.join("quorum/train-state"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(states.len(), 2, "{states:?}");
    assert!(
        states
            .iter()
            .all(|s| s.join("optimizer.safetensors").is_file())
    );
    for out in [&whole, &pieces] {
        let names: Vec<_> = std::fs::read_dir(out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            !names
                .iter()
                .any(|n| n == "checkpoint" || n == "optimizer.safetensors"),
            "training state in the adapter's directory: {names:?}"
        );
    }
}

#[test]
fn resume_without_state_is_refused_with_the_place_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_quorum"))
        .env("XDG_CACHE_HOME", dir.path())
        .args(["train", "--resume", "--steps", "1", "--out"])
        .arg(dir.path().join("never-trained"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("no training state in"), "{err}");
}
