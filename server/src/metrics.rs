//! RPC metrics and the Prometheus text format. RPC counters and latency histograms live here;
//! engine metrics are read from each engine's stats at scrape time (the engine already keeps
//! them), so nothing is double-counted and an idle server costs nothing.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

pub use quorum_engine::Histogram;

/// Latency buckets in seconds: from a Tokenize call (~1 ms) to a multi-model text-to-SQL run on
/// a CPU (tens of seconds).
const RPC_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// Counters and histograms of the RPC layer.
#[derive(Debug, Default)]
pub struct Metrics {
    outcomes: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    latency: Mutex<BTreeMap<&'static str, Histogram>>,
}

impl Metrics {
    /// Records one finished RPC: its method, status code name and duration.
    pub fn record_rpc(&self, method: &'static str, code: tonic::Code, elapsed: Duration) {
        let code = code_label(code);
        *lock(&self.outcomes).entry((method, code)).or_insert(0) += 1;
        lock(&self.latency)
            .entry(method)
            .or_insert_with(|| Histogram::new(RPC_BUCKETS))
            .observe(elapsed.as_secs_f64());
    }

    /// The RPC metrics in Prometheus text format.
    pub fn render_rpc(&self, out: &mut String) {
        out.push_str("# HELP quorum_rpc_requests_total Finished RPCs by method and status code.\n");
        out.push_str("# TYPE quorum_rpc_requests_total counter\n");
        for ((method, code), n) in lock(&self.outcomes).iter() {
            let _ = writeln!(
                out,
                "quorum_rpc_requests_total{{method=\"{method}\",code=\"{code}\"}} {n}"
            );
        }
        out.push_str("# HELP quorum_rpc_duration_seconds RPC latency until the last message.\n");
        out.push_str("# TYPE quorum_rpc_duration_seconds histogram\n");
        for (method, h) in lock(&self.latency).iter() {
            render_histogram(
                out,
                "quorum_rpc_duration_seconds",
                &format!("method=\"{method}\""),
                h,
            );
        }
    }
}

/// Poisoning only means another thread panicked mid-increment; the counts stay usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Writes a histogram's `_bucket`, `_sum` and `_count` series.
pub fn render_histogram(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0;
    for (i, count) in h.counts.iter().enumerate() {
        cumulative += count;
        let le = h
            .bounds
            .get(i)
            .map_or_else(|| "+Inf".to_owned(), |b| b.to_string());
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
        );
    }
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum);
    let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
}

/// Writes one gauge or counter sample with its HELP and TYPE lines.
pub fn render_family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: &[(String, f64)],
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// The canonical upper-case name of a status code, as gRPC dashboards label it.
pub fn code_label(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_renders_cumulative_buckets() {
        let mut h = Histogram::new(&[0.1, 1.0]);
        h.observe(0.05);
        h.observe(0.5);
        h.observe(5.0);
        let mut out = String::new();
        render_histogram(&mut out, "x", "m=\"a\"", &h);
        assert!(out.contains("x_bucket{m=\"a\",le=\"0.1\"} 1\n"));
        assert!(out.contains("x_bucket{m=\"a\",le=\"1\"} 2\n"));
        assert!(out.contains("x_bucket{m=\"a\",le=\"+Inf\"} 3\n"));
        assert!(out.contains("x_count{m=\"a\"} 3\n"));
    }

    #[test]
    fn rpc_outcomes_are_counted_by_code() {
        let m = Metrics::default();
        m.record_rpc("A", tonic::Code::Ok, Duration::from_millis(3));
        m.record_rpc("A", tonic::Code::NotFound, Duration::from_millis(3));
        m.record_rpc("A", tonic::Code::Ok, Duration::from_millis(3));
        let mut out = String::new();
        m.render_rpc(&mut out);
        assert!(out.contains("quorum_rpc_requests_total{method=\"A\",code=\"OK\"} 2\n"));
        assert!(out.contains("quorum_rpc_requests_total{method=\"A\",code=\"NOT_FOUND\"} 1\n"));
    }
}
