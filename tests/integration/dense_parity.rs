//! The dense (safetensors) path against candle-transformers' `qwen2` and `llama` on small random
//! checkpoints written to disk in the Hugging Face layout.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::{llama, qwen2};
use quorum_models::{DecoderModel, MatmulPolicy, greedy_generate};
use quorum_tests::max_abs_diff;
use quorum_weights::load_checkpoint;

use crate::random_decoder::{VOCAB, write_checkpoint};

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
    let prompt: Vec<u32> = (0..23).map(|i| (i * 37 % VOCAB) as u32).collect();
    check_dir(dir.path(), arch, &prompt);
}

/// Our decoder on the checkpoint in `dir` against candle-transformers' reading of the same files:
/// the prompt's logits, then 12 greedy tokens.
pub(crate) fn check_dir(dir: &Path, arch: &str, prompt: &[u32]) {
    let ckpt = load_checkpoint(dir, &Device::Cpu, DType::F32).expect("load dense checkpoint");
    let ours = DecoderModel::load(&ckpt, &Device::Cpu, MatmulPolicy::QuantizedOnly).expect("model");
    let mut reference = Reference::load(dir, arch);
    let out = greedy_generate(&ours, prompt, 12, &[], |_| {}).expect("generate");
    let logits: Vec<f32> = out.prompt_logits.to_vec1().unwrap();
    assert!(
        logits.iter().all(|v| v.is_finite()),
        "{arch}: non-finite logits"
    );
    let ref_logits = reference.forward(prompt, 0);
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
