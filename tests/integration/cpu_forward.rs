//! The decoder's CPU path (plain rows, `cpu_forward`) against its candle-op path
//! (`forward_portable`) on the real models: bit-identical logits for a packed batch of prefill
//! chunks, then a decode step, with and without a LoRA adapter.

use candle_core::{DType, Device};
use quorum_models::{BatchLayout, DecoderModel, DenseKvCache, MatmulPolicy};
use quorum_tests::{QWEN_05B, SMOLLM2, all_q8_0_copy, model_path};
use quorum_weights::{load_checkpoint, load_lora_adapter};

fn bits(t: &candle_core::Tensor) -> Vec<u32> {
    t.flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

/// Two sequences: a 23-token and a 9-token prefill in one batch, then one decode token each;
/// the second sequence uses `adapter`.
fn check(model: &DecoderModel, adapter: Option<usize>) {
    let prompt: Vec<u32> = (0..32).map(|i| 200 + i * 37).collect();
    let (a, b) = prompt.split_at(23);
    let prefill = BatchLayout::from_chunks([(0, 0, a.len(), true), (1, 0, b.len(), true)])
        .with_adapters([None, adapter]);
    let decode = BatchLayout::from_chunks([(0, a.len(), 1, true), (1, b.len(), 1, true)])
        .with_adapters([None, adapter]);
    let (mut fast_cache, mut portable_cache) = (DenseKvCache::new(), DenseKvCache::new());
    for (tokens, layout) in [(prompt.clone(), prefill), (vec![17, 4242], decode)] {
        let fast = model.forward(&tokens, &layout, &mut fast_cache).unwrap();
        let portable = model
            .forward_portable(&tokens, &layout, &mut portable_cache)
            .unwrap();
        assert_eq!(fast.dims(), portable.dims());
        assert!(
            bits(&fast) == bits(&portable),
            "CPU path and candle-op path differ (adapter {adapter:?}, {} tokens)",
            tokens.len()
        );
    }
}

fn policy() -> MatmulPolicy {
    MatmulPolicy::BatchInvariant {
        min_rows: 1,
        path: quorum_tests::cpu_path(),
    }
}

#[test]
fn cpu_path_equals_candle_ops_on_qwen_all_q8_0() {
    let path = all_q8_0_copy(QWEN_05B).unwrap();
    let ckpt = load_checkpoint(&path, &Device::Cpu, DType::F32).unwrap();
    check(
        &DecoderModel::load(&ckpt, &Device::Cpu, policy()).unwrap(),
        None,
    );
}

#[test]
fn cpu_path_equals_candle_ops_on_smollm2_with_an_adapter() {
    let ckpt = load_checkpoint(&model_path(SMOLLM2), &Device::Cpu, DType::F32).unwrap();
    let mut model = DecoderModel::load(&ckpt, &Device::Cpu, policy()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    crate::lora::write_adapter(tmp.path(), 3, false);
    let adapter = load_lora_adapter(tmp.path(), "sql", &Device::Cpu, DType::F32).unwrap();
    let index = model.add_adapter(&adapter).unwrap();
    check(&model, None);
    check(&model, Some(index));
}
