//! Timing two queries against each other the way BIRD's VES does: alternate them so that drift
//! in machine load touches both alike, take the ratio of each pair, drop ratios outside
//! mean ± 3σ as noise and average the rest. The evaluation's VES and the optimization service's
//! speed-up are both this measurement.

use std::time::Duration;

use crate::backend::Session;

/// What timing a pair of queries found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairTiming {
    /// Mean `baseline / candidate` time after outlier removal: above 1 the candidate is faster.
    pub ratio: f64,
    /// Median execution time of each query over the pairs that ran, in milliseconds.
    pub baseline_ms: f64,
    pub candidate_ms: f64,
    /// Pairs that ran (a pair where either query failed, a timeout under load, is dropped).
    pub pairs: usize,
    /// Pairs in which the candidate ran faster than the baseline.
    pub candidate_faster: usize,
}

/// Times `iterations` alternating (candidate, baseline) pairs in `session`; `None` when no pair
/// ran.
pub fn time_pair(
    session: &mut dyn Session,
    baseline: &str,
    candidate: &str,
    iterations: usize,
) -> Option<PairTiming> {
    let mut ratios = Vec::with_capacity(iterations);
    let mut base_ms = Vec::with_capacity(iterations);
    let mut cand_ms = Vec::with_capacity(iterations);
    let mut candidate_faster = 0;
    for _ in 0..iterations {
        let (Ok(c), Ok(b)) = (session.execute(candidate), session.execute(baseline)) else {
            continue;
        };
        ratios.push(time_ratio(b.elapsed, c.elapsed));
        candidate_faster += usize::from(c.elapsed < b.elapsed);
        base_ms.push(b.elapsed.as_secs_f64() * 1e3);
        cand_ms.push(c.elapsed.as_secs_f64() * 1e3);
    }
    Some(PairTiming {
        ratio: clean_mean(&ratios)?,
        baseline_ms: median(&mut base_ms)?,
        candidate_ms: median(&mut cand_ms)?,
        pairs: ratios.len(),
        candidate_faster,
    })
}

/// `baseline / candidate`, with both floored at one microsecond: a query that finishes within
/// the clock's noise must not turn the ratio into infinity.
pub fn time_ratio(baseline: Duration, candidate: Duration) -> f64 {
    const FLOOR: f64 = 1e-6;
    baseline.as_secs_f64().max(FLOOR) / candidate.as_secs_f64().max(FLOOR)
}

/// Mean of the values within mean ± 3σ (population σ, as BIRD's numpy code computes it).
pub fn clean_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    let kept: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| (v - mean).abs() <= 3.0 * sd)
        .collect();
    // Within 3σ of the mean there is always at least one value, but guard anyway.
    if kept.is_empty() {
        return Some(mean);
    }
    Some(kept.iter().sum::<f64>() / kept.len() as f64)
}

/// The median (the lower middle value for an even count).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[(values.len() - 1) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_mean_drops_far_outliers() {
        // Nineteen ones and one huge value: the huge value lies beyond 3σ and is dropped.
        let mut values = vec![1.0; 19];
        values.push(1000.0);
        let mean = clean_mean(&values).unwrap();
        assert!((mean - 1.0).abs() < 1e-12, "{mean}");
        assert_eq!(clean_mean(&[]), None);
        // With few values nothing can lie beyond 3σ, so the plain mean stays.
        assert_eq!(clean_mean(&[2.0, 4.0]), Some(3.0));
    }

    #[test]
    fn ratio_floors_tiny_times() {
        let r = time_ratio(Duration::from_nanos(10), Duration::from_nanos(1));
        assert_eq!(r, 1.0);
        assert_eq!(time_ratio(Duration::ZERO, Duration::ZERO), 1.0);
        let r = time_ratio(Duration::from_millis(4), Duration::from_millis(2));
        assert!((r - 2.0).abs() < 1e-12);
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut []), None);
    }
}
