//! The learning rate over a run: linear warmup, then cosine decay to a floor.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LrSchedule {
    pub peak: f64,
    pub warmup_steps: u64,
    pub total_steps: u64,
    /// The rate at the end, as a fraction of the peak.
    pub final_fraction: f64,
}

impl LrSchedule {
    /// The rate of optimizer step `step` (0-based).
    pub fn at(&self, step: u64) -> f64 {
        if step < self.warmup_steps {
            return self.peak * (step + 1) as f64 / self.warmup_steps as f64;
        }
        let decay_steps = self.total_steps.saturating_sub(self.warmup_steps).max(1);
        let progress = ((step - self.warmup_steps) as f64 / decay_steps as f64).min(1.0);
        let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        self.peak * (self.final_fraction + (1.0 - self.final_fraction) * cosine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_up_then_decays_to_the_floor() {
        let s = LrSchedule {
            peak: 1e-3,
            warmup_steps: 4,
            total_steps: 14,
            final_fraction: 0.1,
        };
        assert!((s.at(0) - 2.5e-4).abs() < 1e-12);
        assert!((s.at(3) - 1e-3).abs() < 1e-12);
        assert!((s.at(4) - 1e-3).abs() < 1e-12);
        // Halfway through the decay: the middle of peak and floor.
        assert!((s.at(9) - 0.55e-3).abs() < 1e-12);
        assert!((s.at(14) - 1e-4).abs() < 1e-12);
        assert!((s.at(100) - 1e-4).abs() < 1e-12);
        assert!((1..14).all(|i| s.at(i + 4) <= s.at(i + 3) + 1e-15));
    }
}
