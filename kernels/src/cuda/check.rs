//! The kernels' checks: each kernel's result on the cases of [`super::cases`] against
//! [`super::reference`], within a tolerance per dtype, through any [`KernelRunner`] (the CPU
//! emulation in the tests, a GPU in `quorum kernel-check`).

use candle_core::DType;

use super::cases::{LoraCase, MatmulCase};
use super::cases::{
    activation_case, argmax_case, attention_case, lora_cases, matmul_cases, norm_cases,
    prefill_cases, rotary_cases, round_to, sample_distribution_case, sample_policies_case,
    skinny_cases, softmax_cases,
};
use super::reference;
use super::runner::KernelRunner;

/// The dtypes every check runs in.
pub const DTYPES: [DType; 2] = [DType::F32, DType::BF16];

/// `|got - want| <= tolerance * (1 + |want|)`: f32 allows for a different order of the sums
/// and the device's `expf`; bf16 for one rounding of the output to 8 significant bits.
pub fn tolerance(dtype: DType) -> f32 {
    match dtype {
        DType::F32 => 1e-4,
        _ => 1.0 / 64.0,
    }
}

/// One check's outcome.
#[derive(Debug, Clone)]
pub struct CheckReport {
    pub kernel: &'static str,
    pub case: String,
    pub dtype: DType,
    /// `None` when it passed; otherwise what differed.
    pub failure: Option<String>,
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = match &self.failure {
            None => "ok".to_string(),
            Some(why) => format!("FAILED: {why}"),
        };
        write!(
            f,
            "{} ({}, {:?}): {verdict}",
            self.kernel, self.case, self.dtype
        )
    }
}

/// Compares element by element; the first difference past the tolerance is the failure.
pub fn compare(got: &[f32], want: &[f32], dtype: DType) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} values, expected {}", got.len(), want.len()));
    }
    let tol = tolerance(dtype);
    got.iter()
        .zip(want)
        .enumerate()
        .find(|(_, (g, w))| {
            // NaN anywhere is a difference.
            let within = (*g - *w).abs() <= tol * (1.0 + w.abs());
            !within
        })
        .map(|(i, (g, w))| format!("element {i}: {g} against {w} (tolerance {tol} relative)"))
}

/// The first 3 rows, then the first row, launched alone through `product` against all of the
/// rows of `group` (weights sharing one `x`): the first difference in any bit is the failure.
fn batch_invariance(
    product: impl Fn(&[MatmulCase]) -> candle_core::Result<Vec<Vec<f32>>>,
    group: &[MatmulCase],
) -> Option<String> {
    let all = match product(group) {
        Ok(y) => y,
        Err(e) => return Some(format!("error: {e}")),
    };
    for rows in [3, 1] {
        let fewer: Vec<MatmulCase> = group.iter().map(|c| c.first_rows(rows)).collect();
        let alone = match product(&fewer) {
            Ok(y) => y,
            Err(e) => return Some(format!("error: {e}")),
        };
        for (g, (alone, all)) in alone.iter().zip(&all).enumerate() {
            let batched = &all[..alone.len()];
            if let Some(i) = (0..alone.len()).find(|&i| alone[i].to_bits() != batched[i].to_bits())
            {
                return Some(format!(
                    "{rows} rows alone: element {i} of weight {g} is {} against {} in the full launch",
                    alone[i], batched[i]
                ));
            }
        }
    }
    None
}

/// Each projection of `group` launched alone against its outputs in the group's launch: the
/// first difference in any bit is the failure.
fn lora_group_invariance(
    runner: &dyn KernelRunner,
    group: &[LoraCase],
    dtype: DType,
) -> Option<String> {
    let together = match runner.lora(group, dtype) {
        Ok(y) => y,
        Err(e) => return Some(format!("error: {e}")),
    };
    for (g, (case, y)) in group.iter().zip(&together).enumerate() {
        let alone = match runner.lora(std::slice::from_ref(case), dtype) {
            Ok(mut y) => y.remove(0),
            Err(e) => return Some(format!("error: {e}")),
        };
        if let Some(i) = (0..y.len()).find(|&i| alone[i].to_bits() != y[i].to_bits()) {
            return Some(format!(
                "projection {g} alone: element {i} is {} against {} in the group",
                alone[i], y[i]
            ));
        }
    }
    None
}

/// Every check, in every dtype of [`DTYPES`], through `runner`.
pub fn check_all(runner: &dyn KernelRunner) -> Vec<CheckReport> {
    let mut reports = Vec::new();
    for dtype in DTYPES {
        let mut report = |kernel: &'static str, case: &str, failure: Option<String>| {
            reports.push(CheckReport {
                kernel,
                case: case.to_string(),
                dtype,
                failure,
            })
        };
        let failed = |e: candle_core::Error| Some(format!("error: {e}"));
        for (name, case) in norm_cases() {
            let case = case.rounded(dtype);
            let (want_sum, want) = reference::add_rms_norm(&case, dtype);
            let failure = match runner.add_rms_norm(&case, dtype) {
                Ok((sum, out)) => match (sum, want_sum) {
                    (Some(s), Some(ws)) => compare(&s, &ws, dtype),
                    (None, None) => None,
                    _ => Some("the residual sum is missing or unexpected".into()),
                }
                .or_else(|| compare(&out, &want, dtype)),
                Err(e) => failed(e),
            };
            report("add_rms_norm", name, failure);
        }
        let (gate, up) = activation_case();
        let round = |v: &[f32]| -> Vec<f32> { v.iter().map(|&x| round_to(dtype, x)).collect() };
        let (gate, up) = (round(&gate), round(&up));
        let failure = match runner.silu_mul(&gate, &up, dtype) {
            Ok(got) => compare(&got, &reference::silu_mul(&gate, &up), dtype),
            Err(e) => failed(e),
        };
        report("silu_mul", "3007 elements", failure);
        for (name, case) in rotary_cases() {
            let case = case.rounded(dtype);
            let want = reference::rotary_kv_write(&case);
            let failure = match runner.rotary_kv_write(&case, dtype) {
                Ok(got) => compare(&got.q, &want.q, dtype)
                    .map(|f| format!("queries: {f}"))
                    .or_else(|| {
                        compare(&got.k_cache, &want.k_cache, dtype)
                            .map(|f| format!("key cache: {f}"))
                    })
                    .or_else(|| {
                        compare(&got.v_cache, &want.v_cache, dtype)
                            .map(|f| format!("value cache: {f}"))
                    }),
                Err(e) => failed(e),
            };
            report("rotary_kv_write", name, failure);
        }
        let case = attention_case().rounded(dtype);
        let failure = match runner.paged_attention(&case, dtype) {
            Ok(got) => compare(&got, &reference::paged_attention(&case), dtype),
            Err(e) => failed(e),
        };
        report(
            "paged_attention",
            "contexts 1, 37, 598-600; 4 heads on 2; dim 40",
            failure,
        );
        for (name, case) in prefill_cases() {
            let case = case.rounded(dtype);
            let failure = match runner.prefill_attention(&case, dtype) {
                Ok(got) => compare(&got, &reference::paged_attention(&case.attention), dtype),
                Err(e) => failed(e),
            };
            report("prefill_attention", name, failure);
        }
        for (name, case) in softmax_cases() {
            let case = case.rounded(dtype);
            let failure = match runner.causal_softmax(&case, dtype) {
                Ok(got) => compare(&got, &reference::causal_softmax(&case), dtype),
                Err(e) => failed(e),
            };
            report("causal_softmax", name, failure);
        }
        for (name, group) in lora_cases() {
            let group: Vec<LoraCase> = group.iter().map(|c| c.rounded(dtype)).collect();
            let failure = match runner.lora(&group, dtype) {
                Ok(got) if got.len() != group.len() => Some(format!(
                    "{} outputs for {} projections",
                    got.len(),
                    group.len()
                )),
                Ok(got) => got
                    .iter()
                    .zip(&group)
                    .find_map(|(y, c)| compare(y, &reference::lora(c), dtype)),
                Err(e) => failed(e),
            };
            report("lora_shrink + lora_expand", name, failure);
        }
        // A projection's deltas are the same bits alone as in its group's launch.
        let (_, group) = &lora_cases()[1];
        let group: Vec<LoraCase> = group.iter().map(|c| c.rounded(dtype)).collect();
        let failure = lora_group_invariance(runner, &group, dtype);
        report(
            "lora_shrink + lora_expand",
            "each of q, k and v alone gives its bits in the group's launch",
            failure,
        );
        for (name, case) in matmul_cases() {
            let case = case.rounded(dtype);
            let failure = match runner.fixed_order_matmul(&case, dtype) {
                Ok(got) => compare(&got, &reference::matmul(&case), dtype),
                Err(e) => failed(e),
            };
            report("fixed_order_matmul", name, failure);
        }
        // The point of the kernel: a row's outputs are the same bits whatever else is batched.
        let (_, case) = &matmul_cases()[0];
        let case = case.rounded(dtype);
        let one = |g: &[MatmulCase]| Ok(vec![runner.fixed_order_matmul(&g[0], dtype)?]);
        let failure = batch_invariance(one, std::slice::from_ref(&case));
        report(
            "fixed_order_matmul",
            "rows 0-2 alone and row 0 alone give the 70-row launch's bits",
            failure,
        );
        for (name, group) in skinny_cases() {
            let group: Vec<MatmulCase> = group.iter().map(|c| c.rounded(dtype)).collect();
            let failure = match runner.skinny_matmul(&group, dtype) {
                Ok(got) if got.len() != group.len() => {
                    Some(format!("{} outputs for {} weights", got.len(), group.len()))
                }
                Ok(got) => got
                    .iter()
                    .zip(&group)
                    .find_map(|(y, c)| compare(y, &reference::matmul(c), dtype)),
                Err(e) => failed(e),
            };
            report("skinny_matmul", name, failure);
        }
        // A decode step's rows get the same bits whatever the batch's size up to the limit.
        let (_, group) = &skinny_cases()[0];
        let group: Vec<MatmulCase> = group.iter().map(|c| c.rounded(dtype)).collect();
        let failure = batch_invariance(|g| runner.skinny_matmul(g, dtype), &group);
        report(
            "skinny_matmul",
            "rows 0-2 alone and row 0 alone give the 8-row launch's bits, three weights",
            failure,
        );
        let case = argmax_case().rounded(dtype);
        let failure = match runner.argmax(&case, dtype) {
            Ok(got) => {
                let want = reference::argmax(&case);
                (got != want).then(|| format!("ids {got:?}, expected {want:?}"))
            }
            Err(e) => failed(e),
        };
        report("argmax", "ties, infinities, NaN", failure);
        let case = reference::centered_draws(&reference::centered_top_p(
            &sample_policies_case().rounded(dtype),
        ));
        let failure = match runner.sample(&case, dtype) {
            Ok(got) => {
                let want = reference::sample(&case);
                (got != want).then(|| format!("ids {got:?}, expected {want:?}"))
            }
            Err(e) => failed(e),
        };
        report(
            "sample",
            "temperature, top-k in a tie, top-p, bitsets, greedy, nothing allowed",
            failure,
        );
        // Every policy that samples, drawn at the ends of its kept tokens' intervals: over
        // 1,001 tokens (runs of 4 ids a thread) temperature alone, the top-k boundary in a
        // tie, top-p under top-k, top-p under a bitset; over 37 (one id a thread) all at once.
        let policies = reference::centered_top_p(&sample_policies_case().rounded(dtype));
        let distribution = reference::centered_top_p(&sample_distribution_case().rounded(dtype));
        for (name, case, rows) in [
            (
                "1,001 tokens: temperature, top-k in a tie, top-k and top-p, bitset and top-p",
                &policies,
                &[0, 1, 2, 3][..],
            ),
            (
                "37 tokens: bitset, top-k and top-p",
                &distribution,
                &[0][..],
            ),
        ] {
            let (case, want) = reference::at_interval_ends(case, rows, 8);
            let failure = match runner.sample(&case, dtype) {
                Ok(got) => (got != want).then(|| format!("ids {got:?}, expected {want:?}")),
                Err(e) => failed(e),
            };
            report("sample at both ends of kept intervals", name, failure);
        }
    }
    reports
}
