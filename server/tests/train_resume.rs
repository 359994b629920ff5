//! A long `quorum train` run stopped by `--stop-after-minutes` and taken up again with
//! `--resume`, twice, ends with the adapter and the log of the same run made in one go: through
//! the binary, on the real Qwen2.5-Coder-0.5B and Spider's training data, with reworded
//! questions on.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

/// Runs `quorum train` into `out` with the run's fixed settings and `extra`.
fn train(out: &Path, extra: &[&str]) {
    let status = Command::new(env!("CARGO_BIN_EXE_quorum"))
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
    train(&whole, &[]);
    train(&pieces, &["--stop-after-minutes", "0"]);
    let card: serde_json::Value =
        serde_json::from_slice(&std::fs::read(pieces.join("quorum_adapter.json")).unwrap())
            .unwrap();
    assert_eq!(card["steps"], 1, "the first piece stops after one step");
    train(&pieces, &["--resume", "--stop-after-minutes", "0"]);
    train(&pieces, &["--resume"]);
    assert_eq!(log_without_timings(&pieces), log_without_timings(&whole));
    assert_eq!(log_without_timings(&whole).len(), 3);
    assert!(
        std::fs::read(pieces.join("adapter_model.safetensors")).unwrap()
            == std::fs::read(whole.join("adapter_model.safetensors")).unwrap(),
        "the resumed run's adapter differs from the one made in one go"
    );
}
