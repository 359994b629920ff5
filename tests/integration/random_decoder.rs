//! Small random Qwen2/Llama checkpoints in the Hugging Face layout, with a word-level
//! tokenizer over `w0..w95`: models whose every shape is tiny, for tests that need a real
//! checkpoint on disk but not a trained one.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};

pub(crate) const VOCAB: usize = 96;
pub(crate) const HIDDEN: usize = 64;
pub(crate) const INTER: usize = 160;
pub(crate) const LAYERS: usize = 2;
pub(crate) const HEADS: usize = 4;
pub(crate) const KV_HEADS: usize = 2;

/// A word-level tokenizer over `w0..w95`: the dense tests feed token ids directly.
pub(crate) fn write_tokenizer(dir: &Path) {
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

pub(crate) fn write_checkpoint(dir: &Path, arch: &str, seed: u64) {
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
