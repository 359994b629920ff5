//! A token's quotas: how many text-to-SQL runs it may have going at once and how many requests
//! it may send a minute. The state lives as long as the token's name does, so reloading the
//! tokens file does not hand a busy token a fresh allowance.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::status::ServiceError;

/// The limits of one token; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuotaLimits {
    pub max_concurrent_runs: Option<u32>,
    pub requests_per_minute: Option<u32>,
}

/// What a token has used.
#[derive(Debug)]
pub struct QuotaState {
    runs: AtomicU32,
    /// A token bucket refilled at `requests_per_minute` a minute, holding at most a minute's
    /// worth: a burst up to the limit, then the steady rate.
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
}

impl Default for QuotaState {
    fn default() -> Self {
        Self {
            runs: AtomicU32::new(0),
            bucket: Mutex::new(Bucket {
                tokens: f64::INFINITY,
                refilled: Instant::now(),
            }),
        }
    }
}

/// One text-to-SQL run counted against its token until dropped.
#[derive(Debug)]
pub struct RunSlot {
    state: Option<Arc<QuotaState>>,
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        if let Some(state) = &self.state {
            state.runs.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl QuotaState {
    /// Counts a request; refused once the minute's allowance is spent.
    pub fn admit_request(&self, name: &str, limits: QuotaLimits) -> Result<(), ServiceError> {
        let Some(per_minute) = limits.requests_per_minute else {
            return Ok(());
        };
        let capacity = f64::from(per_minute);
        let mut bucket = self
            .bucket
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * capacity / 60.0).min(capacity);
        bucket.refilled = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait = Duration::from_secs_f64((1.0 - bucket.tokens) * 60.0 / capacity);
        Err(ServiceError::ResourceExhausted {
            reason: format!(
                "token `{name}` has used its {per_minute} requests a minute (the next one is \
                 allowed in {:.1} s)",
                wait.as_secs_f64()
            ),
        })
    }

    /// Takes a run slot; refused while the token's runs are all going.
    pub fn start_run(
        self: &Arc<Self>,
        name: &str,
        limits: QuotaLimits,
    ) -> Result<RunSlot, ServiceError> {
        let Some(max) = limits.max_concurrent_runs else {
            return Ok(RunSlot { state: None });
        };
        let taken = self
            .runs
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(RunSlot {
                state: Some(self.clone()),
            }),
            Err(_) => Err(ServiceError::ResourceExhausted {
                reason: format!("token `{name}` already has {max} text-to-SQL runs going"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_counted_until_their_slots_drop() {
        let state = Arc::new(QuotaState::default());
        let limits = QuotaLimits {
            max_concurrent_runs: Some(2),
            requests_per_minute: None,
        };
        let a = state.start_run("t", limits).expect("first");
        let _b = state.start_run("t", limits).expect("second");
        let refused = state.start_run("t", limits).expect_err("third");
        assert!(
            refused.to_string().contains("2 text-to-SQL runs"),
            "{refused}"
        );
        drop(a);
        assert!(state.start_run("t", limits).is_ok());
        assert!(state.start_run("t", QuotaLimits::default()).is_ok());
    }

    #[test]
    fn a_minute_allows_its_requests_then_refuses() {
        let state = QuotaState::default();
        let limits = QuotaLimits {
            max_concurrent_runs: None,
            requests_per_minute: Some(3),
        };
        for _ in 0..3 {
            state.admit_request("t", limits).expect("within the minute");
        }
        let refused = state.admit_request("t", limits).expect_err("fourth");
        assert!(matches!(refused, ServiceError::ResourceExhausted { .. }));
        // No limit, no counting.
        for _ in 0..100 {
            state
                .admit_request("t", QuotaLimits::default())
                .expect("unlimited");
        }
    }
}
