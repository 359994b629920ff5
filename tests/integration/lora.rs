//! LoRA adapters on the real SmolLM2: the adapted model equals the model with the adapter
//! merged into its weights (PEFT's definition), and in the engine an adapter changes only the
//! requests that name it, whatever they are batched with.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use quorum_engine::{
    EngineError, EngineEvent, EngineHandle, GenerateRequest, SamplingParams, spawn_engine,
};
use quorum_models::{BatchLayout, DecoderModel, DenseKvCache, MatmulPolicy};
use quorum_tests::{SMOLLM2, model_path};
use quorum_weights::{ChatMessage, StoredTensor, load_checkpoint, load_lora_adapter};

/// SmolLM2-135M: hidden 576, 9 query and 3 kv heads of 64, MLP 1536, 30 layers.
const TARGETS: &[(&str, usize, usize)] = &[
    ("model.layers.0.self_attn.q_proj", 576, 576),
    ("model.layers.0.self_attn.v_proj", 576, 192),
    ("model.layers.3.self_attn.k_proj", 576, 192),
    ("model.layers.7.mlp.down_proj", 1536, 576),
    ("model.layers.21.mlp.up_proj", 576, 1536),
];
const RANK: usize = 8;
const ALPHA: f64 = 16.0;

/// Writes a PEFT adapter directory with random A and B (B zero when `zero_b`, as PEFT
/// initializes it).
pub(crate) fn write_adapter(dir: &Path, seed: u64, zero_b: bool) {
    std::fs::write(
        dir.join("adapter_config.json"),
        format!(
            r#"{{"r": {RANK}, "lora_alpha": {ALPHA}, "peft_type": "LORA",
                "target_modules": ["q_proj", "k_proj", "v_proj", "up_proj", "down_proj"]}}"#
        ),
    )
    .unwrap();
    let dev = Device::Cpu;
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    // Uniform in [-1, 1), reproducible (xorshift): the test must not depend on luck.
    let mut uniform = |n: usize, amplitude: f32| -> Vec<f32> {
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * amplitude
            })
            .collect()
    };
    let mut tensors = std::collections::HashMap::new();
    for (module, fan_in, fan_out) in TARGETS {
        let a = Tensor::from_vec(uniform(RANK * fan_in, 0.1), (RANK, *fan_in), &dev).unwrap();
        let b_amplitude = if zero_b { 0.0 } else { 0.1 };
        let b =
            Tensor::from_vec(uniform(fan_out * RANK, b_amplitude), (*fan_out, RANK), &dev).unwrap();
        tensors.insert(format!("base_model.model.{module}.lora_A.weight"), a);
        tensors.insert(format!("base_model.model.{module}.lora_B.weight"), b);
    }
    candle_core::safetensors::save(&tensors, dir.join("adapter_model.safetensors")).unwrap();
}

fn last_logits(model: &DecoderModel, tokens: &[u32], adapter: Option<usize>) -> Vec<f32> {
    let layout = BatchLayout::from_chunks([(0, 0, tokens.len(), true)]).with_adapters([adapter]);
    let logits = model
        .forward(tokens, &layout, &mut DenseKvCache::new())
        .unwrap();
    logits.squeeze(0).unwrap().to_vec1::<f32>().unwrap()
}

#[test]
fn adapter_equals_merged_weights() {
    let tmp = tempfile::tempdir().unwrap();
    write_adapter(tmp.path(), 1, false);
    let adapter = load_lora_adapter(tmp.path(), "sql", &Device::Cpu, DType::F32).unwrap();
    assert_eq!(adapter.modules.len(), TARGETS.len());

    // Both models run on the same dense f32 weights (dequantized: candle's quantized matmul
    // also quantizes the activations, and SmolLM2's outsized early activations then turn
    // rounding-level differences into visible ones); one adds the adapter at run time, the
    // other has W + (alpha / r) B A baked in.
    let dense = |path: &Path| {
        let mut ckpt = load_checkpoint(path, &Device::Cpu, DType::F32).unwrap();
        let names: Vec<String> = ckpt.tensors.names().map(str::to_string).collect();
        for name in names {
            let t = ckpt.tensors.get(&name).unwrap().to_dense().unwrap();
            ckpt.tensors.insert(name, StoredTensor::Dense(t));
        }
        ckpt
    };
    let base = dense(&model_path(SMOLLM2));
    let mut merged = dense(&model_path(SMOLLM2));
    let scale = ALPHA / RANK as f64;
    for (module, _, _) in TARGETS {
        let name = format!("{module}.weight");
        let w = base.tensors.get(&name).unwrap().to_dense().unwrap();
        let (a, b) = &adapter.modules[*module];
        let mut delta = (b.matmul(a).unwrap() * scale).unwrap();
        // The adapter speaks the Hugging Face row order; this GGUF file stores llama's q/k
        // rows as llama.cpp's converter permutes them: per head, the two rotary halves are
        // interleaved ([heads, 2, head_dim / 2, in] -> [heads, head_dim / 2, 2, in]).
        if let Some(heads) = [("q_proj", 9), ("k_proj", 3)]
            .iter()
            .find(|(p, _)| module.ends_with(p))
            .map(|(_, h)| *h)
        {
            let (out, fan_in) = delta.dims2().unwrap();
            delta = delta
                .reshape((heads, 2, out / heads / 2, fan_in))
                .unwrap()
                .transpose(1, 2)
                .unwrap()
                .reshape((out, fan_in))
                .unwrap();
        }
        merged
            .tensors
            .insert(name, StoredTensor::Dense((w + delta).unwrap()));
    }
    let policy = MatmulPolicy::QuantizedOnly;
    let mut adapted = DecoderModel::load(&base, &Device::Cpu, policy).unwrap();
    let index = adapted.add_adapter(&adapter).unwrap();
    let merged = DecoderModel::load(&merged, &Device::Cpu, policy).unwrap();

    let tokens: Vec<u32> = base
        .tokenizer
        .encode("SELECT name FROM singer WHERE age >", false)
        .unwrap()
        .get_ids()
        .to_vec();
    let with = last_logits(&adapted, &tokens, Some(index));
    let want = last_logits(&merged, &tokens, None);
    let without = last_logits(&adapted, &tokens, None);
    let max_diff = |x: &[f32], y: &[f32]| {
        x.iter()
            .zip(y)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max)
    };
    let err = max_diff(&with, &want);
    let effect = max_diff(&with, &without);
    eprintln!("adapter vs merged: {err}; adapter vs base: {effect}");
    assert!(
        err < 2e-3,
        "adapter vs merged weights: max logit difference {err}"
    );
    assert!(
        effect > 100.0 * err,
        "the adapter barely changes the logits ({effect}) next to the merge error ({err})"
    );
}

fn engine(adapters: &[(&str, &Path)]) -> EngineHandle {
    let mut cfg = quorum_tests::engine_config("smollm2");
    cfg.kv_cache_bytes = 128 << 20;
    cfg.adapters = adapters
        .iter()
        .map(|(n, p)| (n.to_string(), p.to_path_buf()))
        .collect::<BTreeMap<_, _>>();
    spawn_engine(cfg, &model_path(SMOLLM2), &Device::Cpu).expect("engine starts")
}

fn request(h: &EngineHandle, question: &str, adapter: Option<&str>) -> GenerateRequest {
    let text = h
        .chat_template()
        .unwrap()
        .render(&[ChatMessage::new("user", question)], true)
        .unwrap();
    GenerateRequest {
        draft_hint: Vec::new(),
        keep_prefix: None,
        prompt_tokens: h
            .tokenizer()
            .encode(text.as_str(), false)
            .unwrap()
            .get_ids()
            .to_vec(),
        params: SamplingParams {
            max_new_tokens: 12,
            ignore_eos: true,
            ..SamplingParams::greedy()
        },
        adapter: adapter.map(str::to_string),
        deadline: None,
        grammar: None,
    }
}

fn tokens(mut rx: tokio::sync::mpsc::UnboundedReceiver<EngineEvent>) -> Vec<u32> {
    let mut out = Vec::new();
    loop {
        match rx.blocking_recv().expect("stream ends with Finished") {
            EngineEvent::Token(t) => out.push(t.token_id),
            EngineEvent::Finished(f) => {
                assert!(f.error.is_none(), "{:?}", f.error);
                return out;
            }
        }
    }
}

#[test]
fn engine_applies_adapters_per_request_and_stays_batch_invariant() {
    let (zero, rand) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_adapter(zero.path(), 2, true);
    write_adapter(rand.path(), 3, false);
    let h = engine(&[("zero", zero.path()), ("rand", rand.path())]);
    assert_eq!(h.adapters(), vec!["rand".to_string(), "zero".to_string()]);

    let cases = [
        ("How many singers do we have?", None),
        ("How many singers do we have?", Some("zero")),
        ("How many singers do we have?", Some("rand")),
        ("List all stadium names.", Some("rand")),
        ("List all stadium names.", None),
    ];
    let alone: Vec<Vec<u32>> = cases
        .iter()
        .map(|(q, a)| tokens(h.submit(request(&h, q, *a)).unwrap()))
        .collect();
    // A zero B (PEFT's initialization) computes the base model exactly; a random one does not.
    assert_eq!(alone[1], alone[0]);
    assert_ne!(alone[2], alone[0], "the adapter does not change the output");
    assert_ne!(alone[3], alone[4], "the adapter does not change the output");

    // All five in one batch: every request keeps the tokens it had alone.
    let rxs: Vec<_> = cases
        .iter()
        .map(|(q, a)| h.submit(request(&h, q, *a)).unwrap())
        .collect();
    let batched: Vec<Vec<u32>> = rxs.into_iter().map(tokens).collect();
    assert_eq!(batched, alone, "adapters changed outputs across the batch");

    let err = h
        .submit(request(&h, "How many singers?", Some("missing")))
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::UnknownAdapter { adapter } if adapter == "missing"),
        "{err}"
    );
}

#[test]
fn adapters_load_and_unload_while_the_engine_serves() {
    let (zero, rand) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_adapter(zero.path(), 2, true);
    write_adapter(rand.path(), 3, false);
    let question = "How many singers do we have?";
    let at_start = engine(&[("rand", rand.path())]);
    let want = tokens(
        at_start
            .submit(request(&at_start, question, Some("rand")))
            .unwrap(),
    );
    at_start.shutdown();

    let h = engine(&[]);
    let base = tokens(h.submit(request(&h, question, None)).unwrap());
    h.load_adapter("rand", rand.path()).expect("loads");
    assert_eq!(h.adapters(), ["rand"]);
    let loaded = tokens(h.submit(request(&h, question, Some("rand"))).unwrap());
    assert_eq!(
        loaded, want,
        "loaded at run time, the adapter answers as at start-up"
    );
    assert!(matches!(
        h.load_adapter("rand", zero.path()),
        Err(EngineError::AdapterExists { .. })
    ));

    // A request in flight holds its adapter.
    let mut long = request(&h, question, Some("rand"));
    long.params.max_new_tokens = 400;
    let in_flight = h.submit(long).unwrap();
    assert!(matches!(
        h.unload_adapter("rand"),
        Err(EngineError::AdapterInUse { requests: 1, .. })
    ));
    assert_eq!(tokens(in_flight).len(), 400);
    h.unload_adapter("rand")
        .expect("unloads once the request ended");
    assert!(h.adapters().is_empty());
    assert!(matches!(
        h.submit(request(&h, question, Some("rand"))),
        Err(EngineError::UnknownAdapter { .. })
    ));
    assert!(matches!(
        h.unload_adapter("rand"),
        Err(EngineError::UnknownAdapter { .. })
    ));

    // The name again, with the zero adapter: base answers, so no KV cached under the first
    // `rand` (its prompt was computed three times above) is served.
    h.load_adapter("rand", zero.path()).expect("loads again");
    assert_eq!(
        tokens(h.submit(request(&h, question, Some("rand"))).unwrap()),
        base
    );
}
