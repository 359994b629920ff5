//! Synthetic checkpoints (`quorum synth-checkpoint`): the real shapes of a released model load on
//! the CPU, give finite logits, and read the same as candle-transformers reads those files.

use quorum_weights::{SyntheticDtype, synthetic_arch, write_synthetic_checkpoint};

use crate::dense_parity::check_dir;

#[test]
fn synthetic_smollm2_loads_and_matches_candle_reference() {
    let dir = tempfile::tempdir().unwrap();
    let arch = synthetic_arch("smollm2-135m").unwrap();
    write_synthetic_checkpoint(&arch, dir.path(), SyntheticDtype::Bf16, 3).unwrap();
    let tokenizer = tokenizers::Tokenizer::from_file(dir.path().join("tokenizer.json")).unwrap();
    let prompt = tokenizer
        .encode(
            "<|im_start|>user\nHow many singers do we have?<|im_end|>\n",
            false,
        )
        .unwrap();
    assert_eq!(
        prompt.get_ids().len(),
        36,
        "one token per byte plus two chat tokens"
    );
    check_dir(dir.path(), "llama", prompt.get_ids());
}
