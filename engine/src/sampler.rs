//! Turns one row of logits into the next token of one sequence.
//!
//! Tensor-free on purpose: the batch runner hands each sequence its row as `&mut [f32]`, so the
//! sampling policy is testable without a model. Processing order (each step sees the previous
//! step's output): constraint mask → repetition penalty → greedy argmax when the temperature is
//! 0, otherwise temperature → top-k → top-p → multinomial draw.
//!
//! The vocabulary is large (~152k for Qwen2), so nothing here sorts the whole row: top-k uses a
//! selection, and top-p buckets weights by magnitude and orders only the bucket where the
//! nucleus ends.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use thiserror::Error;

use crate::logits_constraint::LogitsConstraint;
use crate::sampling_params::SamplingParams;

/// How many candidates of top-p's boundary bucket are ordered first. The bucket is usually far
/// smaller than this; the chunk grows fourfold when it is not, keeping the worst case (all
/// logits equal) O(V log V) without paying for it in the common case.
const NUCLEUS_FIRST_CHUNK: usize = 64;

/// Largest top-k found with a bounded heap in one scan. Up to here the heap stays small and
/// cache-resident and most logits cost one comparison; beyond it, displacements grow common
/// and a selection over the full candidate list is as fast.
const HEAP_TOP_K_MAX: usize = 4096;

/// Odd 64-bit constant (the golden ratio) that spreads the choice index over the seed, so the
/// `n` choices of one seeded request draw different but reproducible streams.
const CHOICE_SEED_STRIDE: u64 = 0x9E37_79B9_7F4A_7C15;

/// Why no token could be sampled. The scheduler finishes the sequence with an error instead of
/// emitting a token the policy forbids.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SamplerError {
    #[error("the logits row is empty")]
    EmptyLogits,
    #[error("the logits row has {vocab_size} entries, more than u32 token ids can address")]
    VocabTooLarge { vocab_size: usize },
    #[error("no token can be sampled: all {vocab_size} logits are masked or not finite")]
    NoViableToken { vocab_size: usize },
}

impl SamplerError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            SamplerError::EmptyLogits => "empty_logits",
            SamplerError::VocabTooLarge { .. } => "vocab_too_large",
            SamplerError::NoViableToken { .. } => "no_viable_token",
        }
    }
}

/// The result of one sampling step.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleOutcome {
    /// The chosen token id.
    pub token: u32,
    /// Present when the request asked for logprobs. For sampling, the log-probability of
    /// `token` under the final distribution it was drawn from (after penalty, temperature,
    /// top-k and top-p); for greedy decoding, whose final distribution is a point mass, the
    /// log-softmax of the raw logits, which says how confident the model was.
    pub logprob: Option<f32>,
    /// Log-softmax of the raw logits (before mask, penalty and temperature) for each of the
    /// request's candidate ids, in request order; `-inf` for an id the row does not have.
    pub candidate_logprobs: Vec<(u32, f32)>,
}

/// One entry of the filtered distribution: `value` is the logit until the weights are computed,
/// then the unnormalised probability.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    id: u32,
    value: f32,
}

/// Heaviest first, ties to the lower id, so selections and sorts are deterministic.
fn heavier_first(a: &Candidate, b: &Candidate) -> Ordering {
    b.value.total_cmp(&a.value).then(a.id.cmp(&b.id))
}

/// One step's sampling policy for a choice made where the logits are: the device kernel keeps
/// the tokens [`Sampler::sample`] keeps (the constraint's allowed ones, then temperature, top-k
/// and top-p over the finite logits) and draws with the same uniform number, walking the kept
/// tokens in id order.
#[derive(Debug, Clone, PartialEq)]
pub struct DevicePolicy {
    /// `0.0`: the arg-max.
    pub temperature: f32,
    /// `0`: no top-k.
    pub top_k: u32,
    pub top_p: f32,
    /// In `[0, 1)`; unused when greedy.
    pub uniform: f64,
    /// The constraint's allowed tokens, one bit each; `None`: every finite logit.
    pub allowed: Option<Vec<u32>>,
}

impl DevicePolicy {
    pub const GREEDY: Self = Self {
        temperature: 0.0,
        top_k: 0,
        top_p: 1.0,
        uniform: 0.0,
        allowed: None,
    };

    /// The plain arg-max: greedy over every finite logit.
    pub fn is_plain_greedy(&self) -> bool {
        self.temperature == 0.0 && self.allowed.is_none()
    }
}

/// Per-sequence sampling state: the policy, a seeded RNG, an optional constraint and scratch
/// buffers reused across steps so that sampling allocates nothing in the steady state.
pub struct Sampler {
    temperature: f32,
    top_k: usize,
    top_p: f32,
    repetition_penalty: f32,
    logprobs: bool,
    candidate_token_ids: Vec<u32>,
    seed: u64,
    rng: StdRng,
    constraint: Option<Box<dyn LogitsConstraint>>,
    candidates: Vec<Candidate>,
    top_k_heap: BinaryHeap<LightestOnTop>,
    /// One bit per vocabulary entry: which tokens the penalty already touched this step.
    penalty_seen: Vec<u64>,
    /// (token, logit before the penalty) for each penalised token this step.
    penalised: Vec<(u32, f32)>,
}

impl Sampler {
    /// A sampler for the first (or only) choice of a request. `params` should be validated.
    pub fn new(params: &SamplingParams) -> Self {
        Self::for_choice(params, 0)
    }

    /// A sampler for choice `choice` of a request with `n > 1`. With a request seed, choice 0
    /// uses the seed unchanged (so `n = 1` and `n > 1` agree on the first choice) and every
    /// choice is reproducible; without one, each choice draws its own random seed.
    pub fn for_choice(params: &SamplingParams, choice: u32) -> Self {
        let seed = match params.seed {
            Some(seed) => seed.wrapping_add(u64::from(choice).wrapping_mul(CHOICE_SEED_STRIDE)),
            None => rand::random(),
        };
        let top_k = usize::try_from(params.top_k).unwrap_or(usize::MAX);
        Sampler {
            temperature: params.temperature,
            top_k,
            top_p: params.top_p,
            repetition_penalty: params.repetition_penalty,
            logprobs: params.logprobs,
            candidate_token_ids: params.candidate_token_ids.clone(),
            seed,
            rng: StdRng::seed_from_u64(seed),
            constraint: None,
            candidates: Vec::new(),
            top_k_heap: BinaryHeap::new(),
            penalty_seen: Vec::new(),
            penalised: Vec::new(),
        }
    }

    /// Attaches a constraint that masks the logits before every step.
    pub fn with_constraint(mut self, constraint: Box<dyn LogitsConstraint>) -> Self {
        self.constraint = Some(constraint);
        self
    }

    /// Whether a constraint masks this sequence's logits (its masks are worth computing in
    /// parallel with other sequences').
    pub fn is_constrained(&self) -> bool {
        self.constraint.is_some()
    }

    /// `Some(Some(reason))` when the constraint gave up part way, `Some(None)` when it held,
    /// `None` without a constraint.
    pub fn constraint_outcome(&self) -> Option<Option<&str>> {
        self.constraint.as_ref().map(|c| c.failure())
    }

    /// Whether the next token is the plain arg-max of the raw logits: greedy, no constraint, no
    /// repetition penalty, no log-probabilities asked for. Such a row's choice can be made
    /// where the logits are (a GPU) and only the id handed over ([`Self::chosen`]).
    pub fn is_plain_greedy(&self) -> bool {
        self.temperature == 0.0
            && self.constraint.is_none()
            && self.repetition_penalty == 1.0
            && !self.logprobs
            && self.candidate_token_ids.is_empty()
    }

    /// This step's policy for a choice made where the logits are (a GPU): temperature, top-k,
    /// top-p, the constraint's allowed tokens after `generated` as a bitset over `vocab` ids,
    /// and, when sampling, the uniform draw the host path would have taken from this
    /// sequence's generator (it is taken now, so the stream of draws is the same on both
    /// paths). `None` when the step needs the whole row here: a repetition penalty,
    /// log-probabilities or candidate ids. The choice comes back through [`Self::chosen`].
    pub fn device_policy(&mut self, generated: &[u32], vocab: usize) -> Option<DevicePolicy> {
        if self.repetition_penalty != 1.0 || self.logprobs || !self.candidate_token_ids.is_empty() {
            return None;
        }
        let allowed = self
            .constraint
            .as_mut()
            .map(|c| c.allowed_bits(generated, vocab));
        let (temperature, top_k, top_p, uniform) = if self.temperature == 0.0 {
            (0.0, 0, 1.0, 0.0)
        } else {
            let top_k = u32::try_from(self.top_k).unwrap_or(u32::MAX);
            (
                self.temperature,
                top_k,
                self.top_p,
                self.rng.random::<f64>(),
            )
        };
        Some(DevicePolicy {
            temperature,
            top_k,
            top_p,
            uniform,
            allowed,
        })
    }

    /// The outcome of a step whose token was chosen elsewhere by [`Self::device_policy`]'s
    /// policy (or, for a plain greedy sequence, by the arg-max): `token`, or `None` when nothing
    /// could be chosen. The constraint, if any, is committed with the token.
    pub fn chosen(
        &mut self,
        token: Option<u32>,
        vocab_size: usize,
    ) -> Result<SampleOutcome, SamplerError> {
        let token = token.ok_or(SamplerError::NoViableToken { vocab_size })?;
        if let Some(constraint) = self.constraint.as_mut() {
            constraint.commit(token);
        }
        Ok(SampleOutcome {
            token,
            logprob: None,
            candidate_logprobs: Vec::new(),
        })
    }

    /// The seed actually in use, worth logging: it reproduces an unseeded run.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Chooses the next token. `logits` is this sequence's row (one entry per vocabulary id)
    /// and is modified in place; `generated` and `prompt` feed the constraint and the
    /// repetition penalty. The constraint, if any, is committed with the chosen token.
    pub fn sample(
        &mut self,
        logits: &mut [f32],
        generated: &[u32],
        prompt: &[u32],
    ) -> Result<SampleOutcome, SamplerError> {
        let vocab_size = logits.len();
        if vocab_size == 0 {
            return Err(SamplerError::EmptyLogits);
        }
        if u32::try_from(vocab_size).is_err() {
            return Err(SamplerError::VocabTooLarge { vocab_size });
        }
        let greedy = self.temperature == 0.0;
        let raw_lse = if !self.candidate_token_ids.is_empty() || (greedy && self.logprobs) {
            log_sum_exp(logits)
        } else {
            None
        };
        let candidate_logprobs = self
            .candidate_token_ids
            .iter()
            .map(|&id| (id, raw_logprob(logits, id, raw_lse)))
            .collect();

        if let Some(constraint) = self.constraint.as_mut() {
            constraint.mask(generated, logits);
        }
        self.apply_repetition_penalty(logits, prompt, generated);

        let (token, logprob) = if greedy {
            let token = argmax(logits).ok_or(SamplerError::NoViableToken { vocab_size })?;
            let logprob = raw_lse
                .filter(|_| self.logprobs)
                .map(|lse| self.logit_before_penalty(logits, token) - lse);
            (token, logprob)
        } else {
            let (token, logprob) = self.draw(logits)?;
            (token, Some(logprob).filter(|_| self.logprobs))
        };
        if let Some(constraint) = self.constraint.as_mut() {
            constraint.commit(token);
        }
        Ok(SampleOutcome {
            token,
            logprob,
            candidate_logprobs,
        })
    }

    /// Hugging Face semantics: each distinct token of prompt and output has a positive logit
    /// divided by the penalty and a negative one multiplied, so a penalty above 1 always makes
    /// a seen token less likely. Each token is penalised once however often it occurs.
    fn apply_repetition_penalty(&mut self, logits: &mut [f32], prompt: &[u32], generated: &[u32]) {
        self.penalised.clear();
        let penalty = self.repetition_penalty;
        if penalty == 1.0 {
            return;
        }
        self.penalty_seen.resize(logits.len().div_ceil(64), 0);
        for &token in prompt.iter().chain(generated) {
            let i = token as usize;
            let Some(logit) = logits.get_mut(i) else {
                continue;
            };
            let (word, bit) = (i / 64, 1u64 << (i % 64));
            if self.penalty_seen[word] & bit != 0 {
                continue;
            }
            self.penalty_seen[word] |= bit;
            self.penalised.push((token, *logit));
            *logit = if *logit > 0.0 {
                *logit / penalty
            } else {
                *logit * penalty
            };
        }
        // Clear only the bits set above, so the next step starts clean in O(tokens).
        for &(token, _) in &self.penalised {
            let i = token as usize;
            self.penalty_seen[i / 64] &= !(1u64 << (i % 64));
        }
    }

    /// The chosen token's logit as the model produced it. A constraint leaves allowed logits
    /// unchanged, so only the penalty has to be undone, from the value saved before it.
    fn logit_before_penalty(&self, logits: &[f32], token: u32) -> f32 {
        self.penalised
            .iter()
            .find(|(t, _)| *t == token)
            .map_or(logits[token as usize], |&(_, logit)| logit)
    }

    /// Temperature, top-k, top-p, then a multinomial draw. Returns the token and its
    /// log-probability under the distribution it was drawn from.
    fn draw(&mut self, logits: &[f32]) -> Result<(u32, f32), SamplerError> {
        let vocab_size = logits.len();
        let candidates = &mut self.candidates;
        collect_candidates(logits, self.top_k, &mut self.top_k_heap, candidates);
        if candidates.is_empty() {
            return Err(SamplerError::NoViableToken { vocab_size });
        }
        let max = candidates
            .iter()
            .map(|c| c.value)
            .fold(f32::NEG_INFINITY, f32::max);
        // Scaling the difference from the maximum (never the raw logit) keeps a tiny
        // temperature from overflowing: every exponent is <= 0 and the maximum's weight is 1.
        let temperature = self.temperature;
        let mut total = 0.0f64;
        for c in candidates.iter_mut() {
            c.value = ((c.value - max) / temperature).exp();
            total += f64::from(c.value);
        }
        let kept_total = if self.top_p < 1.0 {
            keep_nucleus(candidates, total, self.top_p)
        } else {
            total
        };
        let token = pick(candidates, self.rng.random::<f64>() * kept_total)
            .ok_or(SamplerError::NoViableToken { vocab_size })?;
        let scaled = f64::from(logits[token as usize] - max) / f64::from(temperature);
        Ok((token, (scaled - kept_total.ln()) as f32))
    }
}

/// Fills `out` with the finite logits as candidates, only the `k` highest (ties to the lower
/// id) when `k > 0`. A small `k` is found in one scan with a bounded heap, which never builds
/// a vocabulary-sized candidate list; a large one by selection over the full list.
fn collect_candidates(
    logits: &[f32],
    k: usize,
    heap: &mut BinaryHeap<LightestOnTop>,
    out: &mut Vec<Candidate>,
) {
    out.clear();
    if k > 0 && k <= HEAP_TOP_K_MAX {
        collect_top_k(logits, k, heap, out);
        return;
    }
    out.extend(
        logits
            .iter()
            .enumerate()
            .filter(|(_, l)| l.is_finite())
            .map(|(i, &l)| Candidate {
                id: i as u32,
                value: l,
            }),
    );
    if k > 0 && k < out.len() {
        out.select_nth_unstable_by(k - 1, heavier_first);
        out.truncate(k);
    }
}

/// One pass keeping the `k` heaviest finite logits in a heap whose top is the lightest kept.
fn collect_top_k(
    logits: &[f32],
    k: usize,
    heap: &mut BinaryHeap<LightestOnTop>,
    out: &mut Vec<Candidate>,
) {
    heap.clear();
    // Ids arrive in increasing order and ties go to the lower id, so only a logit strictly
    // above the lightest kept one can displace it; most logits fail this one comparison.
    let mut floor = f32::NEG_INFINITY;
    for (i, &l) in logits.iter().enumerate() {
        if !l.is_finite() || (heap.len() == k && l <= floor) {
            continue;
        }
        let candidate = LightestOnTop(Candidate {
            id: i as u32,
            value: l,
        });
        if heap.len() < k {
            heap.push(candidate);
        } else if let Some(mut lightest) = heap.peek_mut() {
            *lightest = candidate;
        }
        if heap.len() == k {
            floor = heap.peek().map_or(f32::NEG_INFINITY, |c| c.0.value);
        }
    }
    out.extend(heap.drain().map(|c| c.0));
}

/// Orders candidates so that a max-heap keeps the lightest on top.
#[derive(Debug, Clone, Copy)]
struct LightestOnTop(Candidate);

impl Ord for LightestOnTop {
    fn cmp(&self, other: &Self) -> Ordering {
        heavier_first(&self.0, &other.0)
    }
}

impl PartialOrd for LightestOnTop {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for LightestOnTop {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for LightestOnTop {}

/// Keeps the smallest set of heaviest candidates whose weight reaches `top_p` of `total`, and
/// returns that set's weight.
///
/// A flat distribution can put most of the vocabulary in the nucleus, so instead of sorting,
/// one pass buckets the weights by magnitude, a scan of the buckets finds the one where the
/// running mass crosses the target, and only that boundary bucket is ordered. Everything in a
/// heavier bucket is in the nucleus whatever the order inside it.
fn keep_nucleus(candidates: &mut Vec<Candidate>, total: f64, top_p: f32) -> f64 {
    let target = f64::from(top_p) * total;
    let mut mass = [0.0f64; WEIGHT_BUCKETS];
    for c in candidates.iter() {
        mass[weight_bucket(c.value)] += f64::from(c.value);
    }
    let mut above = 0.0f64;
    let mut boundary = 0;
    for b in (0..WEIGHT_BUCKETS).rev() {
        if above + mass[b] >= target {
            boundary = b;
            break;
        }
        above += mass[b];
    }
    let n_above = partition_front(candidates, 0, |c| weight_bucket(c.value) > boundary);
    let n_kept = partition_front(candidates, n_above, |c| weight_bucket(c.value) == boundary);
    candidates.truncate(n_kept);
    // Recount the heavier buckets' mass in candidate order so the remainder below is measured
    // against the same sums the draw will use.
    let above: f64 = candidates[..n_above]
        .iter()
        .map(|c| f64::from(c.value))
        .sum();
    keep_sorted_prefix(candidates, n_above, above, target)
}

/// Weight buckets: a positive `f32`'s bit pattern grows with its value, so its top 12 bits
/// (exponent and 3 mantissa bits) bucket weights by magnitude with 8 buckets per doubling.
/// Weights lie in [0, 1], and 1.0 is `0x3F80_0000`, whose top bits are 1016.
const WEIGHT_BUCKETS: usize = 1017;

fn weight_bucket(weight: f32) -> usize {
    ((weight.to_bits() >> 20) as usize).min(WEIGHT_BUCKETS - 1)
}

/// Moves the candidates from `start` on that satisfy `keep` to directly after `start`, and
/// returns the end of that run.
fn partition_front(
    candidates: &mut [Candidate],
    start: usize,
    keep: impl Fn(&Candidate) -> bool,
) -> usize {
    let mut end = start;
    for i in start..candidates.len() {
        if keep(&candidates[i]) {
            candidates.swap(i, end);
            end += 1;
        }
    }
    end
}

/// Orders `candidates[from..]` heaviest first, only as far as needed, and truncates it to the
/// shortest prefix that brings `cumulative` up to `target`; returns the kept weight. Sorts a
/// growing chunk of the heaviest: a boundary bucket is usually small, so one selection and one
/// small sort settle it, and the chunk grows fourfold when it is not.
fn keep_sorted_prefix(
    candidates: &mut Vec<Candidate>,
    from: usize,
    mut cumulative: f64,
    target: f64,
) -> f64 {
    let mut sorted = from;
    let mut chunk = NUCLEUS_FIRST_CHUNK;
    while sorted < candidates.len() {
        let rest = &mut candidates[sorted..];
        let take = chunk.min(rest.len());
        if take < rest.len() {
            rest.select_nth_unstable_by(take - 1, heavier_first);
        }
        rest[..take].sort_unstable_by(heavier_first);
        for i in sorted..sorted + take {
            cumulative += f64::from(candidates[i].value);
            if cumulative >= target {
                candidates.truncate(i + 1);
                return cumulative;
            }
        }
        sorted += take;
        chunk = chunk.saturating_mul(4);
    }
    // Rounding kept the running sum just below the target: every candidate stays.
    cumulative
}

/// The candidate where the running weight first exceeds `threshold`. The comparison is strict
/// so a zero-weight candidate is never chosen; if rounding leaves the threshold unreached, the
/// last candidate with weight is the answer.
fn pick(candidates: &[Candidate], threshold: f64) -> Option<u32> {
    let mut running = 0.0f64;
    for c in candidates {
        running += f64::from(c.value);
        if running > threshold {
            return Some(c.id);
        }
    }
    candidates
        .iter()
        .rev()
        .find(|c| c.value > 0.0)
        .map(|c| c.id)
}

/// Index of the largest finite logit, ties to the lowest id; `None` when no logit is finite.
pub(crate) fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if !l.is_finite() {
            continue;
        }
        match best {
            Some((_, b)) if l <= b => {}
            _ => best = Some((i, l)),
        }
    }
    best.map(|(i, _)| i as u32)
}

/// `ln Σ exp(l)` over the finite logits, computed from the maximum so that no exponent is
/// positive; `None` when no logit is finite.
pub(crate) fn log_sum_exp(logits: &[f32]) -> Option<f32> {
    let max = logits
        .iter()
        .copied()
        .filter(|l| l.is_finite())
        .fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return None;
    }
    let sum: f64 = logits
        .iter()
        .filter(|l| l.is_finite())
        .map(|&l| f64::from((l - max).exp()))
        .sum();
    Some(max + sum.ln() as f32)
}

/// Log-softmax of one raw logit; `-inf` for an id outside the row or a non-finite logit.
fn raw_logprob(logits: &[f32], id: u32, lse: Option<f32>) -> f32 {
    match (logits.get(id as usize), lse) {
        (Some(&l), Some(lse)) if l.is_finite() => l - lse,
        _ => f32::NEG_INFINITY,
    }
}

#[cfg(test)]
mod tests;
