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
    /// Text-to-SQL answers by how their vote went.
    answers: Mutex<BTreeMap<&'static str, u64>>,
    /// Selector calls on split votes by outcome.
    selector_calls: Mutex<BTreeMap<&'static str, u64>>,
    /// Candidates by stage and whether they executed.
    candidates: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    outcomes: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    latency: Mutex<BTreeMap<&'static str, Histogram>>,
    /// Streaming RPCs: from arrival to the first message (for `Inference.Generate`, the first
    /// token), waiting in every queue included.
    first_message: Mutex<BTreeMap<&'static str, Histogram>>,
    /// Text-to-SQL answers: each stage's wall time, and the wait for a run slot.
    stages: Mutex<BTreeMap<&'static str, Histogram>>,
    http_outcomes: Mutex<BTreeMap<(String, u16), u64>>,
    http_latency: Mutex<BTreeMap<String, Histogram>>,
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

    /// Records a streaming RPC's first message, `elapsed` after the request arrived.
    pub fn record_first_message(&self, method: &'static str, elapsed: Duration) {
        lock(&self.first_message)
            .entry(method)
            .or_insert_with(|| Histogram::new(RPC_BUCKETS))
            .observe(elapsed.as_secs_f64());
    }

    /// Records one text-to-SQL stage's wall time (`queue` is the wait for a run slot).
    pub fn record_stage(&self, stage: &'static str, elapsed: Duration) {
        lock(&self.stages)
            .entry(stage)
            .or_insert_with(|| Histogram::new(RPC_BUCKETS))
            .observe(elapsed.as_secs_f64());
    }

    /// Records what one text-to-SQL answer went through: its vote (`unanimous`, `majority`,
    /// `split`, `all_failed`, or `none` without voting), the selector's call on a split vote
    /// (`kept_vote`, `overruled_vote`, `failed`), and each candidate by stage and outcome.
    pub fn record_answer(&self, answer: &quorum_sql::pipeline::PipelineAnswer) {
        use quorum_sql::pipeline::CandidateRound;
        let vote = &answer.vote;
        let kind = if vote.all_failed {
            "all_failed"
        } else if vote.voters.is_empty() {
            "none"
        } else if vote.split {
            "split"
        } else if vote.clusters.len() <= 1 {
            "unanimous"
        } else {
            "majority"
        };
        *lock(&self.answers).entry(kind).or_insert(0) += 1;
        if let Some(selector) = &vote.selector {
            let outcome = match selector.chosen {
                None => "failed",
                Some(c) if Some(c) == vote.winner => "kept_vote",
                Some(_) => "overruled_vote",
            };
            *lock(&self.selector_calls).entry(outcome).or_insert(0) += 1;
        }
        let t = &answer.timings;
        for (stage, ms) in [
            ("retrieval", t.retrieval_ms),
            ("round1", t.round1_ms),
            ("linking", t.linking_ms),
            ("round2", t.round2_ms),
            ("revision", t.revision_ms),
            ("execution", t.execution_ms),
            ("vote", t.vote_ms),
            ("selection", t.selection_ms),
            ("total", t.total_ms),
        ] {
            // A stage the answer skipped (no revision, no selector) is not a zero-second stage:
            // counting it would pull its quantiles to zero.
            if ms > 0.0 || stage == "total" {
                self.record_stage(stage, Duration::from_secs_f64(ms.max(0.0) / 1e3));
            }
        }
        let mut candidates = lock(&self.candidates);
        for c in &answer.candidates {
            let round = match c.round {
                CandidateRound::PreSql => "pre_sql",
                CandidateRound::FinSql => "fin_sql",
                CandidateRound::Revision { .. } => "revision",
            };
            let outcome = if c.outcome.is_ok() { "ok" } else { "failed" };
            *candidates.entry((round, outcome)).or_insert(0) += 1;
        }
    }

    /// The text-to-SQL metrics in Prometheus text format.
    pub fn render_text2sql(&self, out: &mut String) {
        let samples = |map: &BTreeMap<&'static str, u64>, label: &str| -> Vec<(String, f64)> {
            map.iter()
                .map(|(k, n)| (format!("{label}=\"{k}\""), *n as f64))
                .collect()
        };
        render_family(
            out,
            "quorum_text2sql_answers_total",
            "counter",
            "Text-to-SQL answers by how the vote went (unanimous, majority, split, all_failed, none).",
            &samples(&lock(&self.answers), "vote"),
        );
        render_family(
            out,
            "quorum_text2sql_selector_calls_total",
            "counter",
            "Selector calls on split votes by outcome (kept_vote, overruled_vote, failed).",
            &samples(&lock(&self.selector_calls), "outcome"),
        );
        let candidates: Vec<(String, f64)> = lock(&self.candidates)
            .iter()
            .map(|((round, outcome), n)| {
                (
                    format!("round=\"{round}\",outcome=\"{outcome}\""),
                    *n as f64,
                )
            })
            .collect();
        render_family(
            out,
            "quorum_text2sql_candidates_total",
            "counter",
            "Candidate SQL by stage (pre_sql, fin_sql, revision) and outcome (ok, failed to execute).",
            &candidates,
        );
        out.push_str(
            "# HELP quorum_text2sql_stage_seconds Wall time of each text-to-SQL stage an answer ran (queue: the wait for a run slot; retrieval, round1, linking, round2, revision, execution, vote, selection; total: the run).\n",
        );
        out.push_str("# TYPE quorum_text2sql_stage_seconds histogram\n");
        for (stage, h) in lock(&self.stages).iter() {
            render_histogram(
                out,
                "quorum_text2sql_stage_seconds",
                &format!("stage=\"{stage}\""),
                h,
            );
        }
    }

    /// Records one HTTP request: its route pattern, status and time to the response head (a
    /// stream's body goes on after it; its RPC's own duration covers the whole stream).
    pub fn record_http(&self, route: &str, status: u16, elapsed: Duration) {
        *lock(&self.http_outcomes)
            .entry((route.to_owned(), status))
            .or_insert(0) += 1;
        lock(&self.http_latency)
            .entry(route.to_owned())
            .or_insert_with(|| Histogram::new(RPC_BUCKETS))
            .observe(elapsed.as_secs_f64());
    }

    /// The HTTP metrics in Prometheus text format.
    pub fn render_http(&self, out: &mut String) {
        out.push_str("# HELP quorum_http_requests_total HTTP requests by route and status.\n");
        out.push_str("# TYPE quorum_http_requests_total counter\n");
        for ((route, status), n) in lock(&self.http_outcomes).iter() {
            let _ = writeln!(
                out,
                "quorum_http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                label_value(route)
            );
        }
        out.push_str(
            "# HELP quorum_http_response_head_seconds Time from an HTTP request to its response head.\n",
        );
        out.push_str("# TYPE quorum_http_response_head_seconds histogram\n");
        for (route, h) in lock(&self.http_latency).iter() {
            render_histogram(
                out,
                "quorum_http_response_head_seconds",
                &format!("route=\"{}\"", label_value(route)),
                h,
            );
        }
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
        out.push_str(
            "# HELP quorum_rpc_time_to_first_message_seconds Streaming RPCs: time from arrival (queues included) to the first message; for Generate, the time to first token.\n",
        );
        out.push_str("# TYPE quorum_rpc_time_to_first_message_seconds histogram\n");
        for (method, h) in lock(&self.first_message).iter() {
            render_histogram(
                out,
                "quorum_rpc_time_to_first_message_seconds",
                &format!("method=\"{method}\""),
                h,
            );
        }
        out.push_str("# HELP quorum_rpc_duration_seconds RPC latency from arrival (queues included) until the last message.\n");
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

/// A label value escaped as the text format requires (backslash, double quote, line feed).
pub fn label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
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
    fn label_values_are_escaped() {
        assert_eq!(
            label_value(
                r#"a"b\c
d"#
            ),
            r#"a\"b\\c\nd"#
        );
        assert_eq!(label_value("rep-s0"), "rep-s0");
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
