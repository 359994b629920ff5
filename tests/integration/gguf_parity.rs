//! Greedy output and logits of Quorum's decoder on real GGUF checkpoints against
//! candle-transformers' `quantized_qwen2` / `quantized_llama` on the same (re-encoded) weights.

use candle_core::Device;
use quorum_models::{DecoderModel, MatmulPolicy, greedy_generate};
use quorum_tests::{QWEN_05B, ReferenceModel, SMOLLM2, max_abs_diff, model_path, reencoded_copy};
use quorum_weights::{ChatMessage, load_checkpoint};

const NEW_TOKENS: usize = 64;

fn prompts() -> Vec<(String, bool)> {
    vec![
        ("What is the capital of France?".into(), true),
        (
            "Write a SQL query that lists all singers older than 30.".into(),
            true,
        ),
        ("def fibonacci(n):".into(), false),
        (
            "Translate to French: the database has three tables.".into(),
            true,
        ),
        (quorum_tests::long_schema_prompt(), true),
    ]
}

fn check_parity(model_file: &str, min_long_prompt: usize) {
    let reencoded = reencoded_copy(model_file).expect("re-encoded copy");
    let ckpt = load_checkpoint(
        &model_path(model_file),
        &Device::Cpu,
        candle_core::DType::F32,
    )
    .expect("load checkpoint");
    let ours = DecoderModel::load(
        &ckpt,
        &Device::Cpu,
        MatmulPolicy::Int8Prefill {
            min_rows: 1,
            path: quorum_tests::cpu_path(),
        },
    )
    .expect("load model");
    let mut reference = ReferenceModel::load(&reencoded).expect("load reference");
    let template = ckpt.chat_template.as_ref().expect("chat template");
    let mut longest = 0;
    for (prompt, chat) in prompts() {
        let text = if chat {
            template
                .render(&[ChatMessage::new("user", &prompt)], true)
                .expect("render")
        } else {
            prompt.clone()
        };
        let ids = ckpt.tokenizer.encode(text.as_str(), false).expect("encode");
        let ids = ids.get_ids();
        longest = longest.max(ids.len());
        // No stop tokens: compare all 64 tokens even past an end-of-turn.
        let ours_out = greedy_generate(&ours, ids, NEW_TOKENS, &[], |_| {}).expect("ours");
        let (ref_tokens, ref_logits) = reference.greedy(ids, NEW_TOKENS, &[]).expect("reference");
        let (diff, scale) = max_abs_diff(&ours_out.prompt_logits, &ref_logits).expect("diff");
        assert!(
            diff <= 1e-3 * scale.max(1.0),
            "{model_file}: last-position logits differ by {diff} (scale {scale}) on {prompt:?}"
        );
        assert_eq!(
            ours_out.tokens, ref_tokens,
            "{model_file}: greedy tokens differ on {prompt:?}"
        );
        assert_eq!(ours_out.tokens.len(), NEW_TOKENS);
    }
    assert!(
        longest >= min_long_prompt,
        "the long prompt has only {longest} tokens"
    );
}

#[test]
fn qwen2_gguf_matches_candle_reference() {
    check_parity(QWEN_05B, 700);
}

#[test]
fn llama_gguf_matches_candle_reference() {
    check_parity(SMOLLM2, 700);
}
