use proptest::prelude::*;

use super::*;
use crate::logits_constraint::AllowedTokens;

const NINF: f32 = f32::NEG_INFINITY;

fn params(temperature: f32, seed: u64) -> SamplingParams {
    SamplingParams {
        temperature,
        seed: Some(seed),
        ..SamplingParams::default()
    }
}

fn draws(p: &SamplingParams, logits: &[f32], n: usize) -> Vec<u32> {
    let mut s = Sampler::new(p);
    (0..n)
        .map(|_| {
            s.sample(&mut logits.to_vec(), &[], &[])
                .expect("sampled")
                .token
        })
        .collect()
}

/// Logits whose softmax is exactly `probs`.
fn logits_for(probs: &[f32]) -> Vec<f32> {
    probs.iter().map(|p| p.ln()).collect()
}

#[test]
fn greedy_picks_argmax_with_ties_to_lowest_id() {
    let mut s = Sampler::new(&SamplingParams::greedy());
    let out = s
        .sample(&mut [0.1, 3.0, -1.0, 2.9], &[], &[])
        .expect("sampled");
    assert_eq!(out.token, 1);
    assert_eq!(out.logprob, None);
    assert!(out.candidate_logprobs.is_empty());
    let out = s
        .sample(&mut [1.0, 5.0, 2.0, 5.0, 5.0], &[], &[])
        .expect("sampled");
    assert_eq!(out.token, 1);
}

#[test]
fn greedy_logprob_is_the_raw_log_softmax() {
    let p = SamplingParams {
        logprobs: true,
        repetition_penalty: 3.0,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(&p);
    let probs = [0.6f32, 0.3, 0.1];
    let mut logits = logits_for(&probs);
    // Token 0 is penalised (its logit is negative, so multiplied by 3) and loses to token 1,
    // but the reported logprob is still the model's own.
    let out = s.sample(&mut logits, &[], &[0]).expect("sampled");
    assert_eq!(out.token, 1);
    let lp = out.logprob.expect("logprobs requested");
    assert!((lp - 0.3f32.ln()).abs() < 1e-5, "{lp}");
}

#[test]
fn seeded_sampling_is_reproducible_and_seeds_differ() {
    let logits: Vec<f32> = (0..1000).map(|i| ((i * 37) % 101) as f32 / 50.0).collect();
    let a = draws(&params(1.0, 7), &logits, 64);
    let b = draws(&params(1.0, 7), &logits, 64);
    let c = draws(&params(1.0, 8), &logits, 64);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn choices_of_one_request_differ_but_choice_zero_matches_new() {
    let logits: Vec<f32> = (0..500).map(|i| (i % 13) as f32 / 7.0).collect();
    let p = params(1.0, 42);
    let mut first = Sampler::new(&p);
    let mut zero = Sampler::for_choice(&p, 0);
    let mut one = Sampler::for_choice(&p, 1);
    assert_eq!(first.seed(), 42);
    assert_ne!(one.seed(), zero.seed());
    let mut same = true;
    let mut differ = false;
    for _ in 0..32 {
        let a = first.sample(&mut logits.clone(), &[], &[]).expect("ok");
        let b = zero.sample(&mut logits.clone(), &[], &[]).expect("ok");
        let c = one.sample(&mut logits.clone(), &[], &[]).expect("ok");
        same &= a.token == b.token;
        differ |= a.token != c.token;
    }
    assert!(same && differ);
}

#[test]
fn unseeded_samplers_draw_their_own_seeds() {
    let p = SamplingParams::default();
    assert_ne!(Sampler::new(&p).seed(), Sampler::new(&p).seed());
}

#[test]
fn top_k_one_equals_greedy() {
    for seed in 0..50u64 {
        let logits: Vec<f32> = (0..300)
            .map(|i| (((i as u64 * 2654435761 + seed * 97) % 1000) as f32) / 100.0)
            .collect();
        let p = SamplingParams {
            top_k: 1,
            ..params(1.5, seed)
        };
        let sampled = draws(&p, &logits, 1)[0];
        let greedy = draws(&SamplingParams::greedy(), &logits, 1)[0];
        assert_eq!(sampled, greedy, "seed {seed}");
    }
}

/// The ids `collect_candidates` keeps, sorted, against a full sort of the finite logits.
fn top_k_ids(logits: &[f32], k: usize) -> (Vec<u32>, Vec<u32>) {
    let mut out = Vec::new();
    collect_candidates(logits, k, &mut BinaryHeap::new(), &mut out);
    let mut got: Vec<u32> = out.iter().map(|c| c.id).collect();
    got.sort_unstable();
    let mut all: Vec<Candidate> = logits
        .iter()
        .enumerate()
        .filter(|(_, l)| l.is_finite())
        .map(|(i, &l)| Candidate {
            id: i as u32,
            value: l,
        })
        .collect();
    all.sort_by(heavier_first);
    if k > 0 {
        all.truncate(k);
    }
    let mut expected: Vec<u32> = all.iter().map(|c| c.id).collect();
    expected.sort_unstable();
    (got, expected)
}

#[test]
fn heap_and_selection_top_k_agree_on_ties() {
    let logits: Vec<f32> = (0..10_000).map(|i| ((i * 7) % 5) as f32).collect();
    for k in [
        1,
        3,
        2000,
        2001,
        HEAP_TOP_K_MAX,
        HEAP_TOP_K_MAX + 1,
        9_999,
        10_000,
        20_000,
    ] {
        let (got, expected) = top_k_ids(&logits, k);
        assert_eq!(got, expected, "k {k}");
    }
}

proptest! {
    #[test]
    fn top_k_keeps_the_heaviest_with_ties_to_lower_ids(
        logits in prop::collection::vec(
            prop_oneof![Just(0.0f32), Just(1.0f32), Just(NINF), -2.0f32..2.0],
            0..200,
        ),
        k in 0usize..60,
    ) {
        let (got, expected) = top_k_ids(&logits, k);
        prop_assert_eq!(got, expected);
    }
}

#[test]
fn top_k_keeps_only_the_k_best() {
    let logits = logits_for(&[0.05, 0.4, 0.05, 0.3, 0.2]);
    let p = SamplingParams {
        top_k: 2,
        ..params(1.0, 3)
    };
    let seen = draws(&p, &logits, 2000);
    assert!(seen.iter().all(|t| *t == 1 || *t == 3));
    assert!(seen.contains(&1) && seen.contains(&3));
}

#[test]
fn top_p_keeps_the_smallest_nucleus() {
    let logits = logits_for(&[0.15, 0.5, 0.05, 0.3]);
    let p = SamplingParams {
        top_p: 0.75,
        logprobs: true,
        ..params(1.0, 11)
    };
    let mut s = Sampler::new(&p);
    let mut seen = [0usize; 4];
    for _ in 0..4000 {
        let out = s.sample(&mut logits.clone(), &[], &[]).expect("ok");
        seen[out.token as usize] += 1;
        // Renormalised over the nucleus {1, 3}: 0.5/0.8 and 0.3/0.8.
        let expected = [0.0, 0.625f32, 0.0, 0.375][out.token as usize].ln();
        let lp = out.logprob.expect("requested");
        assert!((lp - expected).abs() < 1e-5, "{lp} vs {expected}");
    }
    assert_eq!(seen[0] + seen[2], 0);
    let share = seen[1] as f32 / 4000.0;
    assert!((share - 0.625).abs() < 0.04, "share {share}");
}

/// Checks `keep_nucleus` against a full sort: the kept set is a heaviest-first prefix (ties to
/// the lower id) whose mass reaches the target, and dropping its lightest member would not.
fn check_nucleus(weights: &[f32], top_p: f32) -> Result<(), TestCaseError> {
    let mut candidates: Vec<Candidate> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| Candidate {
            id: i as u32,
            value: w,
        })
        .collect();
    let mut reference = candidates.clone();
    reference.sort_by(heavier_first);
    let total: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    let target = f64::from(top_p) * total;
    let kept_mass = keep_nucleus(&mut candidates, total, top_p);
    let mut kept: Vec<u32> = candidates.iter().map(|c| c.id).collect();
    kept.sort_unstable();
    let mut prefix: Vec<u32> = reference[..kept.len()].iter().map(|c| c.id).collect();
    prefix.sort_unstable();
    prop_assert_eq!(&kept, &prefix, "not a heaviest-first prefix");
    let mass: f64 = reference[..kept.len()]
        .iter()
        .map(|c| f64::from(c.value))
        .sum();
    let tolerance = 1e-9 * total;
    prop_assert!((mass - kept_mass).abs() <= tolerance);
    prop_assert!(mass >= target - tolerance, "nucleus too small");
    let lightest = f64::from(reference[kept.len() - 1].value);
    prop_assert!(mass - lightest < target + tolerance, "nucleus not minimal");
    Ok(())
}

#[test]
fn nucleus_matches_a_full_sort() {
    let flat: Vec<f32> = (0..5000)
        .map(|i| 1.0 - ((i * 7919) % 1000) as f32 / 2000.0)
        .collect();
    let equal = vec![1.0f32; 3000];
    let peaked: Vec<f32> = (0..2000).map(|i| (-(i as f32) / 3.0).exp()).collect();
    let with_zeros: Vec<f32> = (0..100)
        .map(|i| if i % 3 == 0 { 0.0 } else { 0.5 })
        .collect();
    for weights in [&flat, &equal, &peaked, &with_zeros] {
        for top_p in [0.01, 0.3, 0.9, 0.999, 1.0] {
            check_nucleus(weights, top_p).expect("matches the reference");
        }
    }
}

proptest! {
    #[test]
    fn nucleus_is_the_smallest_heaviest_prefix(
        scaled in prop::collection::vec(prop_oneof![9 => -30.0f32..0.0, 1 => Just(-1e9f32)], 1..400),
        top_p in 0.001f32..1.0,
    ) {
        // Weights as the sampler makes them: exp of logits minus their maximum.
        let max = scaled.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let weights: Vec<f32> = scaled.iter().map(|s| (s - max).exp()).collect();
        check_nucleus(&weights, top_p)?;
    }
}

#[test]
fn small_temperature_approaches_greedy() {
    let logits = vec![1.0, 1.3, 1.25, -2.0, 0.9];
    let seen = draws(&params(1e-3, 5), &logits, 500);
    assert!(seen.iter().all(|t| *t == 1));
    // Even an extreme temperature cannot overflow, because only differences are scaled.
    let seen = draws(&params(1e-30, 5), &[1e30, 3e30, 2e30], 20);
    assert!(seen.iter().all(|t| *t == 1));
}

#[test]
fn repetition_penalty_follows_hugging_face() {
    let p = SamplingParams {
        repetition_penalty: 2.0,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(&p);
    let mut logits = vec![2.0, -2.0, 0.0, 1.5, 3.0];
    // Token 0 in the prompt, token 1 generated twice (penalised once), token 9 outside the row.
    let out = s.sample(&mut logits, &[1, 1, 9], &[0, 4]).expect("ok");
    assert_eq!(logits, vec![1.0, -4.0, 0.0, 1.5, 1.5]);
    assert_eq!(out.token, 3);
    // The next step starts from a clean slate.
    let mut logits = vec![2.0, -2.0, 0.0, 1.5, 3.0];
    s.sample(&mut logits, &[], &[0]).expect("ok");
    assert_eq!(logits, vec![1.0, -2.0, 0.0, 1.5, 3.0]);
}

#[test]
fn candidate_logprobs_are_raw_and_sum_to_one() {
    let vocab = 2000u32;
    let p = SamplingParams {
        candidate_token_ids: (0..vocab).collect(),
        temperature: 0.5,
        repetition_penalty: 1.7,
        ..params(0.5, 1)
    };
    let logits: Vec<f32> = (0..vocab).map(|i| ((i * 31) % 97) as f32 / 9.0).collect();
    let mut s = Sampler::new(&p).with_constraint(Box::new(AllowedTokens::new([3])));
    let out = s.sample(&mut logits.clone(), &[5], &[6]).expect("ok");
    assert_eq!(out.token, 3);
    let sum: f64 = out
        .candidate_logprobs
        .iter()
        .map(|(_, lp)| f64::from(*lp).exp())
        .sum();
    assert!((sum - 1.0).abs() < 1e-4, "sum {sum}");
    let lse = log_sum_exp(&logits).expect("finite");
    for (id, lp) in &out.candidate_logprobs {
        assert!((lp - (logits[*id as usize] - lse)).abs() < 1e-5);
    }
}

#[test]
fn unknown_candidate_ids_get_minus_infinity() {
    let p = SamplingParams {
        candidate_token_ids: vec![1, 50],
        ..SamplingParams::greedy()
    };
    let out = Sampler::new(&p)
        .sample(&mut [0.0, 0.0], &[], &[])
        .expect("ok");
    let (id, lp) = out.candidate_logprobs[0];
    assert_eq!(id, 1);
    assert!((lp - 0.5f32.ln()).abs() < 1e-6);
    assert_eq!(out.candidate_logprobs[1], (50, NINF));
}

/// Forbids repeating the last token; records what is committed.
struct Recorder(std::sync::Arc<std::sync::Mutex<Vec<u32>>>);

impl LogitsConstraint for Recorder {
    fn mask(&mut self, generated: &[u32], logits: &mut [f32]) {
        if let Some(&last) = generated.last() {
            logits[last as usize] = NINF;
        }
    }
    fn commit(&mut self, token: u32) {
        self.0.lock().expect("lock").push(token);
    }
}

#[test]
fn constraint_is_masked_and_committed() {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut s =
        Sampler::new(&SamplingParams::greedy()).with_constraint(Box::new(Recorder(log.clone())));
    let mut generated = Vec::new();
    for _ in 0..4 {
        let out = s.sample(&mut [0.0, 2.0, 1.0], &generated, &[]).expect("ok");
        generated.push(out.token);
    }
    assert_eq!(generated, vec![1, 2, 1, 2]);
    assert_eq!(*log.lock().expect("lock"), generated);
}

#[test]
fn impossible_rows_are_errors() {
    let mut s = Sampler::new(&params(1.0, 0));
    assert_eq!(s.sample(&mut [], &[], &[]), Err(SamplerError::EmptyLogits));
    let err = s
        .sample(&mut [NINF, f32::NAN, f32::INFINITY], &[], &[])
        .expect_err("nothing finite");
    assert_eq!(err, SamplerError::NoViableToken { vocab_size: 3 });
    assert_eq!(err.kind(), "no_viable_token");
    let mut g =
        Sampler::new(&SamplingParams::greedy()).with_constraint(Box::new(AllowedTokens::new([7])));
    assert_eq!(
        g.sample(&mut [1.0, 2.0], &[], &[]),
        Err(SamplerError::NoViableToken { vocab_size: 2 })
    );
}

#[test]
fn nan_logits_are_never_chosen() {
    let logits = vec![f32::NAN, 0.0, f32::NAN, 0.0];
    let seen = draws(&params(1.0, 9), &logits, 200);
    assert!(seen.iter().all(|t| *t == 1 || *t == 3));
    assert_eq!(draws(&SamplingParams::greedy(), &logits, 1), vec![1]);
}

#[test]
fn draw_frequencies_follow_the_distribution() {
    let probs = [0.1f32, 0.2, 0.3, 0.4];
    let seen = draws(&params(1.0, 2024), &logits_for(&probs), 20_000);
    for (id, p) in probs.iter().enumerate() {
        let share = seen.iter().filter(|t| **t as usize == id).count() as f32 / 20_000.0;
        assert!((share - p).abs() < 0.015, "token {id}: {share} vs {p}");
    }
}

/// A sampling policy and a row to apply it to, for the property test.
#[derive(Debug, Clone)]
struct Case {
    logits: Vec<f32>,
    allowed: Option<Vec<u32>>,
    top_k: u32,
    top_p: f32,
    temperature: f32,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..300).prop_flat_map(|vocab| {
        let logit = prop_oneof![9 => -20.0f32..20.0, 1 => Just(NINF)];
        (
            prop::collection::vec(logit, vocab),
            prop::option::of(prop::collection::vec(0..vocab as u32 + 5, 1..8)),
            0u32..20,
            prop_oneof![1 => Just(1.0f32), 3 => 0.01f32..1.0],
            prop_oneof![1 => Just(0.0f32), 4 => 0.05f32..3.0],
            any::<u64>(),
        )
            .prop_map(|(logits, allowed, top_k, top_p, temperature, seed)| Case {
                logits,
                allowed,
                top_k,
                top_p,
                temperature,
                seed,
            })
    })
}

/// Checks that `token` is allowed, within the top k, inside the nucleus and of positive
/// probability, computing the reference distribution independently with a full sort.
fn check_token(case: &Case, masked: &[f32], token: u32) -> Result<(), TestCaseError> {
    let chosen = masked[token as usize];
    prop_assert!(chosen.is_finite(), "chose masked token {token}");
    if let Some(allowed) = &case.allowed {
        prop_assert!(allowed.contains(&token));
    }
    if case.temperature == 0.0 {
        let best = masked.iter().copied().fold(NINF, f32::max);
        prop_assert_eq!(chosen, best);
        return Ok(());
    }
    let mut viable: Vec<f32> = masked.iter().copied().filter(|l| l.is_finite()).collect();
    viable.sort_by(|a, b| b.total_cmp(a));
    let heavier = viable.iter().filter(|&&l| l > chosen).count();
    if case.top_k > 0 {
        prop_assert!(heavier < case.top_k as usize, "rank {heavier} >= k");
        viable.truncate(case.top_k as usize);
    }
    let max = viable[0];
    let weight = |l: f32| ((f64::from(l) - f64::from(max)) / f64::from(case.temperature)).exp();
    let total: f64 = viable.iter().map(|&l| weight(l)).sum();
    let mass_before: f64 = viable
        .iter()
        .filter(|&&l| l > chosen)
        .map(|&l| weight(l))
        .sum();
    prop_assert!(weight(chosen) > 0.0);
    prop_assert!(
        mass_before / total < f64::from(case.top_p) + 1e-5,
        "token outside the nucleus: mass before {} of {}",
        mass_before,
        total
    );
    Ok(())
}

proptest! {
    #[test]
    fn sampled_tokens_are_allowed_and_inside_the_filters(case in case()) {
        let p = SamplingParams {
            top_k: case.top_k,
            top_p: case.top_p,
            ..params(case.temperature, case.seed)
        };
        let mut sampler = Sampler::new(&p);
        let mut masked = case.logits.clone();
        if let Some(allowed) = &case.allowed {
            sampler = sampler.with_constraint(Box::new(AllowedTokens::new(allowed.clone())));
            AllowedTokens::new(allowed.clone()).mask(&[], &mut masked);
        }
        let mut logits = case.logits.clone();
        match sampler.sample(&mut logits, &[], &[]) {
            Ok(out) => check_token(&case, &masked, out.token)?,
            Err(e) => {
                prop_assert!(masked.iter().all(|l| !l.is_finite()), "spurious error {e}");
            }
        }
    }
}

#[test]
fn a_device_draw_takes_the_uniform_the_host_draw_would_have() {
    let p = SamplingParams {
        top_k: 7,
        top_p: 0.9,
        ..params(0.8, 42)
    };
    let logits: Vec<f32> = (0..50).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
    // One step drawn elsewhere, one on the host: the generator is where a host step leaves it.
    let mut device = Sampler::new(&p);
    let policy = device
        .device_policy(&[], 50)
        .expect("an unpenalised sampler draws anywhere");
    assert_eq!(
        (policy.temperature, policy.top_k, policy.top_p),
        (0.8, 7, 0.9)
    );
    assert!((0.0..1.0).contains(&policy.uniform));
    assert_eq!(device.chosen(Some(3), 50).expect("chosen").token, 3);
    let mut host = Sampler::new(&p);
    host.sample(&mut logits.clone(), &[], &[]).expect("sampled");
    assert_eq!(
        device
            .sample(&mut logits.clone(), &[], &[])
            .expect("sampled"),
        host.sample(&mut logits.clone(), &[], &[]).expect("sampled"),
    );
    // The same seed gives the same draw.
    assert_eq!(Sampler::new(&p).device_policy(&[], 50), Some(policy));
    assert_eq!(
        Sampler::new(&SamplingParams::greedy()).device_policy(&[], 50),
        Some(DevicePolicy::GREEDY)
    );
}

#[test]
fn steps_that_need_the_whole_row_have_no_device_policy() {
    let penalised = SamplingParams {
        repetition_penalty: 1.2,
        ..params(0.8, 1)
    };
    let logprobs = SamplingParams {
        logprobs: true,
        ..params(0.8, 1)
    };
    let candidates = SamplingParams {
        candidate_token_ids: vec![1],
        ..SamplingParams::greedy()
    };
    for p in [penalised, logprobs, candidates] {
        assert_eq!(Sampler::new(&p).device_policy(&[], 50), None, "{p:?}");
    }
}

#[test]
fn a_constrained_device_step_carries_the_mask_and_commits_the_choice() {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut s = Sampler::new(&params(0.8, 1)).with_constraint(Box::new(Recorder(log.clone())));
    let policy = s
        .device_policy(&[7, 8], 40)
        .expect("a constrained sampler draws anywhere");
    assert!(!policy.is_plain_greedy());
    // Token 8 is forbidden; ids 32-39 fill the second word's low byte.
    assert_eq!(policy.allowed, Some(vec![!(1 << 8), 0xff]));
    assert_eq!(s.chosen(Some(5), 40).expect("chosen").token, 5);
    assert_eq!(*log.lock().expect("lock"), vec![5]);
}
