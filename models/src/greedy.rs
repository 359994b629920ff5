//! Greedy generation of one sequence with a dense cache: the simplest correct decoding loop, used
//! by the CLI and as the baseline the engine is tested against.

use candle_core::{D, Tensor};

use crate::batch::BatchLayout;
use crate::decoder::DecoderModel;
use crate::dense_cache::DenseKvCache;
use crate::error::ModelResult;

/// What one greedy run produced.
#[derive(Debug, Clone)]
pub struct GreedyOutput {
    pub tokens: Vec<u32>,
    /// Logits at the last prompt position (`[vocab]`), for parity checks.
    pub prompt_logits: Tensor,
    pub prefill_secs: f64,
    pub decode_secs: f64,
}

fn argmax(logits: &Tensor) -> ModelResult<u32> {
    Ok(logits.argmax(D::Minus1)?.flatten_all()?.to_vec1::<u32>()?[0])
}

/// Prefills `prompt` in one pass, then decodes up to `max_new` tokens, stopping after any token in
/// `stop`. `on_token` sees each new token as it is chosen.
pub fn greedy_generate(
    model: &DecoderModel,
    prompt: &[u32],
    max_new: usize,
    stop: &[u32],
    on_token: impl FnMut(u32),
) -> ModelResult<GreedyOutput> {
    greedy_generate_with_cache(
        model,
        DenseKvCache::new(),
        prompt,
        (max_new, stop),
        on_token,
    )
}

/// [`greedy_generate`] with a given (empty) cache, e.g. one using the row-wise attention kernel.
pub fn greedy_generate_with_cache(
    model: &DecoderModel,
    mut cache: DenseKvCache,
    prompt: &[u32],
    (max_new, stop): (usize, &[u32]),
    mut on_token: impl FnMut(u32),
) -> ModelResult<GreedyOutput> {
    let start = std::time::Instant::now();
    let logits = model.forward(
        prompt,
        &BatchLayout::from_chunks([(0, 0, prompt.len(), true)]),
        &mut cache,
    )?;
    let prompt_logits = logits.squeeze(0)?;
    let prefill_secs = start.elapsed().as_secs_f64();
    let start = std::time::Instant::now();
    let mut tokens = Vec::new();
    let mut next = argmax(&prompt_logits)?;
    let mut pos = prompt.len();
    while tokens.len() < max_new {
        tokens.push(next);
        on_token(next);
        if stop.contains(&next) || tokens.len() == max_new {
            break;
        }
        let logits = model.forward(
            &[next],
            &BatchLayout::from_chunks([(0, pos, 1, true)]),
            &mut cache,
        )?;
        next = argmax(&logits)?;
        pos += 1;
    }
    Ok(GreedyOutput {
        tokens,
        prompt_logits,
        prefill_secs,
        decode_secs: start.elapsed().as_secs_f64(),
    })
}
