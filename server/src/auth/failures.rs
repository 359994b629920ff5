//! Failed authentication costs the caller, not the server: a client address that presents a
//! wrong token too often in a minute is refused outright until the minute is over, before any
//! token is looked at. Behind a proxy every client shares the proxy's address, so the limit is
//! generous; the proxy is where per-user limits belong then.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures allowed a client address in one window.
pub const MAX_FAILURES: u32 = 20;
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at most; beyond it, windows that are over are forgotten first.
const MAX_TRACKED: usize = 65_536;

#[derive(Debug, Default)]
pub struct FailedAttempts {
    by_client: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl FailedAttempts {
    /// Whether `client` is still allowed to try; when not, how long until it may.
    pub fn blocked_for(&self, client: IpAddr) -> Option<Duration> {
        let map = self
            .by_client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (since, count) = *map.get(&client)?;
        let left = WINDOW.checked_sub(since.elapsed())?;
        (count >= MAX_FAILURES).then_some(left)
    }

    pub fn record(&self, client: IpAddr) {
        let mut map = self
            .by_client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= MAX_TRACKED {
            map.retain(|_, (since, _)| since.elapsed() < WINDOW);
        }
        if map.len() >= MAX_TRACKED {
            // Still full of live windows: an address flood; forget the oldest half.
            let mut starts: Vec<Instant> = map.values().map(|(s, _)| *s).collect();
            starts.sort_unstable();
            let cut = starts[starts.len() / 2];
            map.retain(|_, (since, _)| *since > cut);
        }
        let entry = map.entry(client).or_insert((Instant::now(), 0));
        if entry.0.elapsed() >= WINDOW {
            *entry = (Instant::now(), 0);
        }
        entry.1 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_refused_after_its_failures_and_others_are_not() {
        let f = FailedAttempts::default();
        let (a, b): (IpAddr, IpAddr) = (
            "10.0.0.1".parse().expect("ip"),
            "10.0.0.2".parse().expect("ip"),
        );
        for _ in 0..MAX_FAILURES - 1 {
            f.record(a);
        }
        assert!(f.blocked_for(a).is_none());
        f.record(a);
        let left = f.blocked_for(a).expect("blocked");
        assert!(left <= WINDOW);
        assert!(f.blocked_for(b).is_none());
    }
}
