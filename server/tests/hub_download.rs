//! `quorum generate` with a hub id, end to end through the binary: offline by default (a clear
//! error, no request), `--download` fetching a tiny model from a fake hub on a loopback port
//! (HF_ENDPOINT, HF_TOKEN) into HF_HUB_CACHE, and the cached model served offline afterwards.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

// The fake hub belongs to the weights crate's tests; shared here as a source file so that it
// does not become part of any crate's API.
#[path = "../../weights/tests/fake_hub/mod.rs"]
mod fake_hub;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

use candle_core::{Device, Tensor};
use fake_hub::{FakeHub, FakeRepo};

const COMMIT: &str = "9d8c7b6a5f4e3d2c1b0a99887766554433221100";
const VOCAB: usize = 32;
const HIDDEN: usize = 32;
const INTER: usize = 64;
const LAYERS: usize = 2;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;

/// A tiny Qwen2 model directory with fixed pseudo-random weights and a word-level tokenizer
/// over `w0..w31`.
fn write_tiny_qwen2(dir: &Path) {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // xorshift64*, mapped to [-1, 1)
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let x = state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        (x as f32 / (1u64 << 23) as f32) - 1.0
    };
    let mut tensors: HashMap<String, Tensor> = HashMap::new();
    let mut put = |name: String, shape: &[usize], scale: f32, offset: f32| {
        let n: usize = shape.iter().product();
        let values: Vec<f32> = (0..n).map(|_| next() * scale + offset).collect();
        tensors.insert(name, Tensor::from_vec(values, shape, &Device::Cpu).unwrap());
    };
    let hd = HIDDEN / HEADS;
    put(
        "model.embed_tokens.weight".into(),
        &[VOCAB, HIDDEN],
        0.5,
        0.0,
    );
    put("lm_head.weight".into(), &[VOCAB, HIDDEN], 0.2, 0.0);
    put("model.norm.weight".into(), &[HIDDEN], 0.1, 1.0);
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}");
        put(
            format!("{p}.self_attn.q_proj.weight"),
            &[HEADS * hd, HIDDEN],
            0.2,
            0.0,
        );
        put(
            format!("{p}.self_attn.k_proj.weight"),
            &[KV_HEADS * hd, HIDDEN],
            0.2,
            0.0,
        );
        put(
            format!("{p}.self_attn.v_proj.weight"),
            &[KV_HEADS * hd, HIDDEN],
            0.2,
            0.0,
        );
        put(
            format!("{p}.self_attn.o_proj.weight"),
            &[HIDDEN, HEADS * hd],
            0.2,
            0.0,
        );
        put(
            format!("{p}.self_attn.q_proj.bias"),
            &[HEADS * hd],
            0.1,
            0.0,
        );
        put(
            format!("{p}.self_attn.k_proj.bias"),
            &[KV_HEADS * hd],
            0.1,
            0.0,
        );
        put(
            format!("{p}.self_attn.v_proj.bias"),
            &[KV_HEADS * hd],
            0.1,
            0.0,
        );
        put(
            format!("{p}.mlp.gate_proj.weight"),
            &[INTER, HIDDEN],
            0.2,
            0.0,
        );
        put(
            format!("{p}.mlp.up_proj.weight"),
            &[INTER, HIDDEN],
            0.2,
            0.0,
        );
        put(
            format!("{p}.mlp.down_proj.weight"),
            &[HIDDEN, INTER],
            0.2,
            0.0,
        );
        put(format!("{p}.input_layernorm.weight"), &[HIDDEN], 0.1, 1.0);
        put(
            format!("{p}.post_attention_layernorm.weight"),
            &[HIDDEN],
            0.1,
            1.0,
        );
    }
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
    let config = serde_json::json!({
        "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": INTER,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "max_position_embeddings": 128,
        "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": false,
        "sliding_window": 128, "max_window_layers": LAYERS, "use_sliding_window": false,
        "hidden_act": "silu", "eos_token_id": 0, "bos_token_id": 0
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let vocab: HashMap<String, u32> = (0..VOCAB as u32).map(|i| (format!("w{i}"), i)).collect();
    let word_level = tokenizers::models::wordlevel::WordLevel::builder()
        .vocab(vocab.into_iter().collect())
        .unk_token("w0".into())
        .build()
        .unwrap();
    let mut tokenizer = tokenizers::Tokenizer::new(word_level);
    tokenizer.with_pre_tokenizer(Some(tokenizers::pre_tokenizers::whitespace::Whitespace {}));
    tokenizer.save(dir.join("tokenizer.json"), false).unwrap();
    std::fs::write(dir.join("generation_config.json"), r#"{"eos_token_id": 0}"#).unwrap();
}

/// `quorum generate --model org/tiny` with only the given hub settings in its environment.
fn generate(home: &Path, endpoint: &str, download: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quorum"));
    cmd.args([
        "generate",
        "--model",
        "org/tiny",
        "--prompt",
        "w3 w5 w7",
        "--max-tokens",
        "6",
    ]);
    if download {
        cmd.arg("--download");
    }
    for var in [
        "HF_HOME",
        "QUORUM_DOWNLOAD",
        "QUORUM_DEVICE",
        "ALL_PROXY",
        "all_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("HF_HUB_CACHE", home.join("hub"))
        .env("HF_ENDPOINT", endpoint)
        .env("HF_TOKEN", "hf_cli_token")
        .env("QUORUM_MODELS_DIR", home.join("models"))
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn generate_fetches_a_missing_hub_model_only_with_download() {
    let model_dir = tempfile::tempdir().unwrap();
    write_tiny_qwen2(model_dir.path());
    let served = FakeRepo::new("org/tiny", COMMIT).with_dir(model_dir.path());
    let mut hub = FakeHub::start(vec![served.clone()]);
    let home = tempfile::tempdir().unwrap();

    // Offline by default: a clear error that names the way out, and no request at all.
    let out = generate(home.path(), &hub.endpoint(), false);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("model `org/tiny` is not in the hub cache")
            && stderr.contains("--download"),
        "{stderr}"
    );
    assert!(hub.requests().is_empty(), "{:?}", hub.requests());

    // --download: fetched into the standard layout, then loaded and run.
    let out = generate(home.path(), &hub.endpoint(), true);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let downloaded = text(&out.stdout);
    assert!(
        downloaded.trim().split(' ').all(|w| w.starts_with('w')) && !downloaded.trim().is_empty(),
        "{downloaded:?}"
    );
    let repo = home.path().join("hub/models--org--tiny");
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main")).unwrap(),
        COMMIT
    );
    let snapshot = repo.join("snapshots").join(COMMIT);
    for (file, bytes) in &served.files {
        assert_eq!(
            &std::fs::read(snapshot.join(file)).unwrap(),
            bytes,
            "{file}"
        );
    }
    let requests = hub.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        assert_eq!(
            request.header("authorization"),
            Some("Bearer hf_cli_token"),
            "{}",
            request.path
        );
    }

    // The hub gone: the cached model runs offline, with the same greedy completion.
    hub.stop();
    let out = generate(home.path(), &hub.endpoint(), false);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), downloaded);
    // ... and `--download` does not ask the hub about a model the cache already holds.
    let out = generate(home.path(), &hub.endpoint(), true);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), downloaded);
}
