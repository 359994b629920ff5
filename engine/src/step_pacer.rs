//! How many tokens the next engine step may take. Cancellations, deadlines and newly
//! arrived requests are seen only between steps, so a step must stay short on any hardware:
//! the server's 2,048 prompt tokens take about 20 s at the ~100 tokens/s prefill measured on a
//! two-core AVX2 CPU (docs/RESULTS.md).
//! The pacer measures the cost of a token on full steps and sizes the budget so that a step
//! lasts about `target`, between a floor that lets every running sequence decode and the
//! configured maximum. The budget changes only where chunks are cut, which does not change
//! any output (attention and matmuls are batch-invariant).

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct StepPacer {
    target: Duration,
    min: usize,
    max: usize,
    /// Smoothed seconds per token, measured on steps that used at least half the budget
    /// (small steps pay the weight read for few tokens and would shrink the budget for nothing).
    secs_per_token: Option<f64>,
    budget: usize,
}

/// The first budget before anything is measured: small enough for a slow CPU, and doubled
/// per step until the measurement says otherwise.
const FIRST_BUDGET: usize = 256;

impl StepPacer {
    /// `min` is raised to 1 and `max` to `min`.
    pub fn new(target: Duration, min: usize, max: usize) -> Self {
        let min = min.max(1);
        let max = max.max(min);
        Self {
            target,
            min,
            max,
            secs_per_token: None,
            budget: FIRST_BUDGET.clamp(min, max),
        }
    }

    /// Tokens the next step may take.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Records a step that computed `tokens` tokens in `elapsed`.
    pub fn observe(&mut self, tokens: usize, elapsed: Duration) {
        if tokens == 0 || 2 * tokens < self.budget {
            return;
        }
        let sample = elapsed.as_secs_f64() / tokens as f64;
        let smoothed = match self.secs_per_token {
            Some(previous) => 0.5 * previous + 0.5 * sample,
            None => sample,
        };
        self.secs_per_token = Some(smoothed);
        let fits = if smoothed > 0.0 {
            (self.target.as_secs_f64() / smoothed) as usize
        } else {
            self.max
        };
        // At most doubling per step: a cost measured on a small step overstates the per-token
        // cost of a larger one, so growth is checked against the next measurement.
        self.budget = fits.min(2 * self.budget).clamp(self.min, self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn sizes_steps_to_the_target_within_bounds() {
        // 10 ms per token, a 1 s target: 100 tokens.
        let mut pacer = StepPacer::new(ms(1000), 16, 2048);
        assert_eq!(pacer.budget(), 256);
        pacer.observe(256, ms(2560));
        assert_eq!(pacer.budget(), 100);
        for _ in 0..8 {
            pacer.observe(100, ms(1000));
        }
        assert_eq!(pacer.budget(), 100);

        // Fast hardware: doubles per step up to the maximum.
        let mut fast = StepPacer::new(ms(1000), 16, 2048);
        let mut budgets = Vec::new();
        for _ in 0..5 {
            let b = fast.budget();
            fast.observe(b, ms(b as u64 / 10));
            budgets.push(fast.budget());
        }
        assert_eq!(budgets, [512, 1024, 2048, 2048, 2048]);

        // Very slow hardware: never below the floor.
        let mut slow = StepPacer::new(ms(1000), 16, 2048);
        slow.observe(256, ms(256_000));
        assert_eq!(slow.budget(), 16);
    }

    #[test]
    fn small_steps_do_not_move_the_budget() {
        let mut pacer = StepPacer::new(ms(1000), 16, 2048);
        // A single decode taking 50 ms says little about a prefill token's cost.
        pacer.observe(1, ms(50));
        pacer.observe(0, ms(0));
        assert_eq!(pacer.budget(), 256);
    }
}
