//! Downloading hub models into the cache, against a fake hub on a loopback port
//! (`fake_hub`): what lands where, which files are fetched, and what stays offline.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

mod fake_hub;

use std::path::{Path, PathBuf};

use fake_hub::{FakeHub, FakeRepo};
use quorum_weights::{
    HubCache, HubDownload, HubModel, WeightsError, download_hub_model, resolve_hub_model,
};

const COMMIT: &str = "4f2a9c0d1e3b5a7c9e1f3a5b7c9d0e2f4a6b8c0d";

/// Bytes that differ from position to position, so a shifted or truncated copy shows.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn tiny_repo() -> FakeRepo {
    FakeRepo::new("org/tiny", COMMIT)
        .with_file("config.json", r#"{"model_type": "qwen2"}"#)
        .with_file("tokenizer.json", r#"{"version": "1.0"}"#)
        .with_file("tokenizer_config.json", r#"{"chat_template": "x"}"#)
        .with_file("generation_config.json", r#"{"eos_token_id": 1}"#)
        .with_file("model.safetensors", pattern(70_000, 7))
        // Not read by the loader: never fetched.
        .with_file("README.md", "# tiny")
        .with_file("pytorch_model.bin", pattern(100, 9))
}

fn cache(dir: &Path) -> HubCache {
    HubCache {
        root: dir.join("hub"),
    }
}

fn repo_dir(cache: &HubCache, repo_id: &str) -> PathBuf {
    cache
        .root
        .join(format!("models--{}", repo_id.replace('/', "--")))
}

/// The request paths the hub saw, in order.
fn paths(hub: &FakeHub) -> Vec<String> {
    hub.requests().into_iter().map(|r| r.path).collect()
}

#[test]
fn downloads_a_model_directory_into_the_cache_layout() {
    let served = tiny_repo();
    let mut hub = FakeHub::start(vec![served.clone()]);
    let dir = tempfile::tempdir().unwrap();
    let cache = cache(dir.path());
    let model = HubModel::parse("org/tiny").unwrap();

    // Offline resolution looks only at the cache.
    let err = resolve_hub_model(&cache, &model).unwrap_err();
    assert_eq!(err.kind(), "not_in_hub_cache", "{err}");
    assert!(hub.requests().is_empty());

    let mut source = HubDownload::new(hub.endpoint());
    source.token = Some("hf_test_token".into());
    let snapshot = download_hub_model(&cache, &model, &source).unwrap();
    let repo = repo_dir(&cache, "org/tiny");
    assert_eq!(snapshot, repo.join("snapshots").join(COMMIT));
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main")).unwrap(),
        COMMIT
    );
    let fetched = [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
        "model.safetensors",
    ];
    for file in fetched {
        let local = snapshot.join(file);
        assert_eq!(
            std::fs::read(&local).unwrap(),
            served.files[file],
            "{file} differs from what was served"
        );
        // Snapshot entries link to content-addressed blobs, as other hub clients expect.
        let target = std::fs::read_link(&local).unwrap();
        assert!(target.starts_with("../../blobs"), "{file} -> {target:?}");
    }
    for file in ["README.md", "pytorch_model.bin"] {
        assert!(!snapshot.join(file).exists(), "{file} was downloaded");
    }
    let seen = paths(&hub);
    assert_eq!(seen[0], "/api/models/org/tiny/revision/main", "{seen:?}");
    assert!(
        !seen
            .iter()
            .any(|p| p.ends_with("README.md") || p.ends_with(".bin")),
        "{seen:?}"
    );
    // The weights came the way the hub serves large files: a redirect to its storage.
    assert!(
        seen.iter().any(|p| p == "/cdn/org/tiny/model.safetensors"),
        "{seen:?}"
    );
    for request in hub.requests() {
        assert_eq!(
            request.header("authorization"),
            Some("Bearer hf_test_token"),
            "{}",
            request.path
        );
    }

    // A file lost from the snapshot (here: its blob deleted, the link left dangling) is
    // fetched again, and only that file.
    let blob = snapshot.join(std::fs::read_link(snapshot.join("tokenizer.json")).unwrap());
    std::fs::remove_file(blob).unwrap();
    assert_eq!(
        resolve_hub_model(&cache, &model).unwrap_err().kind(),
        "not_in_hub_cache"
    );
    let before = hub.requests().len();
    assert_eq!(
        download_hub_model(&cache, &model, &source).unwrap(),
        snapshot
    );
    let again: Vec<String> = paths(&hub).split_off(before);
    assert_eq!(again[0], "/api/models/org/tiny/revision/main");
    assert!(
        again[1..]
            .iter()
            .all(|p| p == "/org/tiny/resolve/main/tokenizer.json"),
        "{again:?}"
    );
    assert_eq!(
        std::fs::read(snapshot.join("tokenizer.json")).unwrap(),
        served.files["tokenizer.json"]
    );

    // With the hub gone, the cache alone resolves the model.
    hub.stop();
    assert!(std::net::TcpStream::connect(hub.endpoint().trim_start_matches("http://")).is_err());
    assert_eq!(resolve_hub_model(&cache, &model).unwrap(), snapshot);
}

#[test]
fn downloads_every_shard_of_a_sharded_model() {
    let index = serde_json::json!({
        "metadata": {"total_size": 3000},
        "weight_map": {
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
            "model.norm.weight": "model-00002-of-00002.safetensors",
            "lm_head.weight": "model-00002-of-00002.safetensors"
        }
    });
    let served = FakeRepo::new("org/sharded", COMMIT)
        .with_file("config.json", "{}")
        .with_file("tokenizer.json", "{}")
        .with_file("model.safetensors.index.json", index.to_string())
        .with_file("model-00001-of-00002.safetensors", pattern(1000, 1))
        .with_file("model-00002-of-00002.safetensors", pattern(2000, 2));
    let hub = FakeHub::start(vec![served.clone()]);
    let dir = tempfile::tempdir().unwrap();
    let cache = cache(dir.path());
    let model = HubModel::new("org/sharded");
    let snapshot = download_hub_model(&cache, &model, &HubDownload::new(hub.endpoint())).unwrap();
    for (file, bytes) in &served.files {
        assert_eq!(
            &std::fs::read(snapshot.join(file)).unwrap(),
            bytes,
            "{file}"
        );
    }
    assert_eq!(resolve_hub_model(&cache, &model).unwrap(), snapshot);
}

#[test]
fn downloads_only_the_named_file_of_a_gguf_repository() {
    let served = FakeRepo::new("org/tiny-GGUF", COMMIT)
        .with_file("tiny-q8_0.gguf", pattern(5000, 3))
        .with_file("tiny-q4_0.gguf", pattern(3000, 4))
        .with_file("README.md", "# tiny");
    let hub = FakeHub::start(vec![served.clone()]);
    let dir = tempfile::tempdir().unwrap();
    let cache = cache(dir.path());
    let model = HubModel::parse("org/tiny-GGUF:tiny-q8_0.gguf").unwrap();
    let path = download_hub_model(&cache, &model, &HubDownload::new(hub.endpoint())).unwrap();
    assert_eq!(
        path,
        repo_dir(&cache, "org/tiny-GGUF")
            .join("snapshots")
            .join(COMMIT)
            .join("tiny-q8_0.gguf")
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        served.files["tiny-q8_0.gguf"]
    );
    assert!(!path.with_file_name("tiny-q4_0.gguf").exists());
    let seen = paths(&hub);
    assert!(
        seen.iter()
            .all(|p| p.ends_with("/tiny-q8_0.gguf") && !p.starts_with("/api/")),
        "{seen:?}"
    );
    assert_eq!(resolve_hub_model(&cache, &model).unwrap(), path);
}

#[test]
fn what_cannot_be_downloaded_is_a_clear_error() {
    let gguf_only = FakeRepo::new("org/only-GGUF", COMMIT).with_file("m-q8_0.gguf", pattern(10, 5));
    let hub = FakeHub::start(vec![gguf_only, tiny_repo()]);
    let dir = tempfile::tempdir().unwrap();
    let cache = cache(dir.path());
    let source = HubDownload::new(hub.endpoint());
    let download = |spec: &str| -> WeightsError {
        let err = download_hub_model(&cache, &HubModel::parse(spec).unwrap(), &source).unwrap_err();
        assert_eq!(err.kind(), "hub_download", "{err}");
        err
    };

    // A GGUF repository named like a model directory: the error says how to name a file.
    let msg = download("org/only-GGUF").to_string();
    assert!(msg.contains("no config.json"), "{msg}");
    assert!(msg.contains("`org/only-GGUF:FILE`"), "{msg}");
    assert!(msg.contains("m-q8_0.gguf"), "{msg}");

    let msg = download("org/absent").to_string();
    assert!(msg.contains("org/absent") && msg.contains("404"), "{msg}");

    let msg = download("org/tiny:absent.gguf").to_string();
    assert!(msg.contains("absent.gguf") && msg.contains("404"), "{msg}");

    // Nothing half-done is left that offline resolution would take for a model.
    for spec in ["org/only-GGUF", "org/absent", "org/tiny:absent.gguf"] {
        let err = resolve_hub_model(&cache, &HubModel::parse(spec).unwrap()).unwrap_err();
        assert_eq!(err.kind(), "not_in_hub_cache", "{spec}: {err}");
    }
}
