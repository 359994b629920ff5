//! The tokenizer built from GGUF metadata: known ids and exact round trips.

use candle_core::Device;
use quorum_tests::{QWEN_05B, SMOLLM2, model_path};
use quorum_weights::{GgufLoadOptions, load_gguf};

const SAMPLES: &[&str] = &[
    "SELECT count(*) FROM singer WHERE age > 30;",
    "  leading spaces\n\ttabs and\r\nwindows newlines  ",
    "Ünïcödé: 東京タワー, emoji 🧪, math ∑x² ≤ 10",
    "def f(x):\n    return x ** 2  # 12345 67.89",
    "<|im_start|>user\nHow many singers do we have?<|im_end|>\n",
];

fn tokenizer(name: &str) -> tokenizers::Tokenizer {
    let opts = GgufLoadOptions {
        reencode: quorum_weights::Reencode::None,
    };
    load_gguf(&model_path(name), &Device::Cpu, &opts)
        .expect("load gguf")
        .tokenizer
}

#[test]
fn qwen_tokenizer_has_known_ids() {
    let tok = tokenizer(QWEN_05B);
    assert_eq!(tok.token_to_id("<|im_start|>"), Some(151644));
    assert_eq!(tok.token_to_id("<|im_end|>"), Some(151645));
    assert_eq!(tok.token_to_id("<|endoftext|>"), Some(151643));
    let ids = tok.encode("<|im_start|>user\n", false).expect("encode");
    assert_eq!(ids.get_ids(), &[151644, 872, 198]);
}

#[test]
fn gguf_tokenizers_round_trip_exactly() {
    for name in [QWEN_05B, SMOLLM2] {
        let tok = tokenizer(name);
        for s in SAMPLES {
            let ids = tok.encode(*s, false).expect("encode");
            let back = tok.decode(ids.get_ids(), false).expect("decode");
            assert_eq!(&back, s, "{name} round trip");
        }
    }
}

#[test]
fn smollm_splits_digits_one_by_one() {
    let tok = tokenizer(SMOLLM2);
    let ids = tok.encode("12345", false).expect("encode");
    assert_eq!(ids.get_ids().len(), 5);
}
