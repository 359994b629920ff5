//! The dense (safetensors) path against candle-transformers' `qwen2` and `llama` on small random
//! checkpoints written to disk in the Hugging Face layout.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::{llama, qwen2};
use quorum_models::{DecoderModel, MatmulPolicy, greedy_generate};
use quorum_tests::max_abs_diff;
use quorum_weights::load_checkpoint;

const VOCAB: usize = 96;
const HIDDEN: usize = 64;
const INTER: usize = 160;
const LAYERS: usize = 2;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;

/// A word-level tokenizer over `w0..w95`: the dense tests feed token ids directly.
fn write_tokenizer(dir: &Path) {
    let vocab: HashMap<String, u32> = (0..VOCAB as u32).map(|i| (format!("w{i}"), i)).collect();
    let model = tokenizers::models::wordlevel::WordLevel::builder()
        .vocab(vocab.into_iter().collect())
        .unk_token("w0".into())
        .build()
        .expect("wordlevel");
    let mut tok = tokenizers::Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(tokenizers::pre_tokenizers::whitespace::Whitespace {}));
    tok.save(dir.join("tokenizer.json"), false)
        .expect("save tokenizer");
}

fn write_checkpoint(dir: &Path, arch: &str, seed: u64) {
    use rand::{Rng, SeedableRng};
    let dev = Device::Cpu;
    // candle cannot seed its CPU generator: draw the weights from a seeded generator here.
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let hd = HIDDEN / HEADS;
    let mut t: HashMap<String, Tensor> = HashMap::new();
    let mut put = |name: String, shape: &[usize], scale: f32| {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| rng.random_range(-1.0f32..1.0) * scale * 1.7)
            .collect();
        t.insert(name, Tensor::from_vec(v, shape, &dev).expect("tensor"));
    };
    put("model.embed_tokens.weight".into(), &[VOCAB, HIDDEN], 0.5);
    put("lm_head.weight".into(), &[VOCAB, HIDDEN], 0.1);
    put("model.norm.weight".into(), &[HIDDEN], 0.1);
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}");
        put(
            format!("{p}.self_attn.q_proj.weight"),
            &[HEADS * hd, HIDDEN],
            0.1,
        );
        put(
            format!("{p}.self_attn.k_proj.weight"),
            &[KV_HEADS * hd, HIDDEN],
            0.1,
        );
        put(
            format!("{p}.self_attn.v_proj.weight"),
            &[KV_HEADS * hd, HIDDEN],
            0.1,
        );
        put(
            format!("{p}.self_attn.o_proj.weight"),
            &[HIDDEN, HEADS * hd],
            0.1,
        );
        if arch == "qwen2" {
            put(format!("{p}.self_attn.q_proj.bias"), &[HEADS * hd], 0.1);
            put(format!("{p}.self_attn.k_proj.bias"), &[KV_HEADS * hd], 0.1);
            put(format!("{p}.self_attn.v_proj.bias"), &[KV_HEADS * hd], 0.1);
        }
        put(format!("{p}.mlp.gate_proj.weight"), &[INTER, HIDDEN], 0.1);
        put(format!("{p}.mlp.up_proj.weight"), &[INTER, HIDDEN], 0.1);
        put(format!("{p}.mlp.down_proj.weight"), &[HIDDEN, INTER], 0.1);
        put(format!("{p}.input_layernorm.weight"), &[HIDDEN], 0.1);
        put(
            format!("{p}.post_attention_layernorm.weight"),
            &[HIDDEN],
            0.1,
        );
    }
    // Norm weights around 1, as trained models have.
    let t: HashMap<String, Tensor> = t
        .into_iter()
        .map(|(k, v)| {
            let v = if k.ends_with("norm.weight") {
                (v + 1.0).expect("shift")
            } else {
                v
            };
            (k, v)
        })
        .collect();
    candle_core::safetensors::save(&t, dir.join("model.safetensors")).expect("save");
    let config = serde_json::json!({
        "model_type": arch, "architectures": [if arch == "qwen2" {"Qwen2ForCausalLM"} else {"LlamaForCausalLM"}],
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": INTER,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "max_position_embeddings": 256, "rope_theta": 10000.0, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": false, "sliding_window": 256, "max_window_layers": LAYERS,
        "use_sliding_window": false, "hidden_act": "silu", "eos_token_id": 1, "bos_token_id": 0
    });
    std::fs::write(dir.join("config.json"), config.to_string()).expect("config");
    write_tokenizer(dir);
}

enum Reference {
    Qwen2(qwen2::ModelForCausalLM),
    Llama(llama::Llama, llama::Cache),
}

impl Reference {
    fn load(dir: &Path, arch: &str) -> Self {
        let cfg: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        let files = [dir.join("model.safetensors")];
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&files, DType::F32, &Device::Cpu) }
            .unwrap();
        if arch == "qwen2" {
            let c: qwen2::Config = serde_json::from_value(cfg).unwrap();
            Self::Qwen2(qwen2::ModelForCausalLM::new(&c, vb).unwrap())
        } else {
            let c: llama::LlamaConfig = serde_json::from_value(cfg).unwrap();
            let c = c.into_config(false);
            let cache = llama::Cache::new(true, DType::F32, &c, &Device::Cpu).unwrap();
            Self::Llama(llama::Llama::load(vb, &c).unwrap(), cache)
        }
    }

    fn forward(&mut self, ids: &[u32], pos: usize) -> Tensor {
        let x = Tensor::new(ids, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        match self {
            Self::Qwen2(m) => m.forward(&x, pos).unwrap().flatten_all().unwrap(),
            Self::Llama(m, c) => m.forward(&x, pos, c).unwrap().flatten_all().unwrap(),
        }
    }
}

fn check(arch: &str) {
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(dir.path(), arch, 7);
    let ckpt =
        load_checkpoint(dir.path(), &Device::Cpu, DType::F32).expect("load dense checkpoint");
    let ours = DecoderModel::load(&ckpt, &Device::Cpu, MatmulPolicy::QuantizedOnly).expect("model");
    let mut reference = Reference::load(dir.path(), arch);
    let prompt: Vec<u32> = (0..23).map(|i| (i * 37 % VOCAB) as u32).collect();
    let out = greedy_generate(&ours, &prompt, 12, &[], |_| {}).expect("generate");
    let ref_logits = reference.forward(&prompt, 0);
    let (diff, scale) = max_abs_diff(&out.prompt_logits, &ref_logits).unwrap();
    assert!(
        diff <= 1e-4 * scale.max(1.0),
        "{arch}: prompt logits differ by {diff} (scale {scale})"
    );
    // Feed our tokens to the reference step by step; its logits must agree at every step.
    let steps = out.tokens.len() - 1;
    for (pos, (step, &t)) in (prompt.len()..).zip(out.tokens.iter().enumerate().take(steps)) {
        let logits = reference.forward(&[t], pos);
        let next = logits.argmax(0).unwrap().to_scalar::<u32>().unwrap();
        assert_eq!(
            next,
            out.tokens[step + 1],
            "{arch}: greedy token {} differs",
            step + 1
        );
    }
}

#[test]
fn dense_qwen2_matches_candle_reference() {
    check("qwen2");
}

#[test]
fn dense_llama_matches_candle_reference() {
    check("llama");
}
