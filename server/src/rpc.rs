//! Per-RPC bookkeeping shared by every service: a request id (the caller's `x-request-id` or a
//! fresh one) carried in a tracing span, the deadline from `grpc-timeout` (capped by the
//! server's request timeout), the caller and what it may reach, and, when the call ends, the
//! latency and outcome metrics and the audit line.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tonic::metadata::MetadataMap;
use tracing::Span;

use crate::audit::{AuditRecord, bounded, now_rfc3339};
use crate::auth::{Caller, Right};
use crate::databases::Database;
use crate::state::AppState;
use crate::status::ServiceError;

/// What the audit line says about the request beyond who made it.
#[derive(Debug, Default)]
struct AuditFacts {
    database: Option<String>,
    question: Option<String>,
    sql: Option<String>,
    rows: Option<u64>,
}

/// The context of one RPC.
#[derive(Debug, Clone)]
pub struct RpcContext {
    pub method: &'static str,
    pub request_id: String,
    pub span: Span,
    /// When the caller stops waiting; work past it is wasted.
    pub deadline: Instant,
    /// Who asked; handlers check its rights and scope before they act.
    pub caller: Caller,
    facts: Arc<Mutex<AuditFacts>>,
    started: Instant,
    /// Set by the first message a stream sends (shared by the context's clones).
    first_message_sent: Arc<std::sync::atomic::AtomicBool>,
    state: Arc<AppState>,
}

impl RpcContext {
    /// The context of a request that passed the authenticator (which put its caller in the
    /// extensions); one without a caller may do nothing.
    pub fn begin<T>(
        state: &Arc<AppState>,
        method: &'static str,
        request: &tonic::Request<T>,
    ) -> Self {
        let caller = request
            .extensions()
            .get::<Caller>()
            .cloned()
            .unwrap_or_else(Caller::nobody);
        Self::begin_with(state, method, request.metadata(), caller)
    }

    pub fn begin_with(
        state: &Arc<AppState>,
        method: &'static str,
        metadata: &MetadataMap,
        caller: Caller,
    ) -> Self {
        let started = Instant::now();
        let request_id = metadata
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 128)
            .map_or_else(|| state.new_request_id(), str::to_owned);
        let timeout = grpc_timeout(metadata)
            .map(finish_before_transport)
            .map_or(state.limits.request_timeout, |t| {
                t.min(state.limits.request_timeout)
            });
        let span =
            tracing::info_span!("rpc", method, request_id = %request_id, token = %caller.name);
        Self {
            method,
            request_id,
            span,
            deadline: started + timeout,
            caller,
            facts: Arc::default(),
            started,
            first_message_sent: Arc::default(),
            state: state.clone(),
        }
    }

    pub fn require(&self, right: Right) -> Result<(), ServiceError> {
        self.caller.require(right)
    }

    /// The database `db_id` names, when the caller holds `right` and the database is in its
    /// scope; one outside the scope is as unknown as one that does not exist.
    pub async fn database(&self, right: Right, db_id: &str) -> Result<Database, ServiceError> {
        self.require(right)?;
        self.note_database(db_id);
        self.caller.check_database(db_id)?;
        self.state.database(db_id).await
    }

    pub fn note_database(&self, db_id: &str) {
        self.facts().database = Some(bounded(db_id));
    }

    pub fn note_question(&self, question: &str) {
        self.facts().question = Some(bounded(question));
    }

    /// The SQL the server executed for its answer and the rows it returned.
    pub fn note_answer(&self, sql: &str, rows: Option<u64>) {
        let mut facts = self.facts();
        facts.sql = Some(bounded(sql));
        facts.rows = rows;
    }

    fn facts(&self) -> std::sync::MutexGuard<'_, AuditFacts> {
        self.facts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a streaming call's first message (its time from arrival) the first time only.
    pub fn note_first_message(&self) {
        use std::sync::atomic::Ordering;
        if !self.first_message_sent.swap(true, Ordering::AcqRel) {
            self.state
                .metrics
                .record_first_message(self.method, self.started.elapsed());
        }
    }

    /// Records the outcome; call exactly once per RPC.
    pub fn finish(&self, code: tonic::Code) {
        let elapsed = self.started.elapsed();
        self.state.metrics.record_rpc(self.method, code, elapsed);
        if let Some(audit) = &self.state.audit {
            let facts = std::mem::take(&mut *self.facts());
            audit.write(&AuditRecord {
                time: now_rfc3339(),
                request_id: Some(self.request_id.clone()),
                token: Some(self.caller.name.to_string()),
                surface: self.caller.surface.name(),
                peer: self.caller.peer.map(|p| p.to_string()),
                method: self.method,
                database: facts.database,
                question: facts.question,
                sql: facts.sql,
                outcome: code_name(code).to_owned(),
                rows: facts.rows,
                latency_ms: elapsed.as_secs_f64() * 1e3,
            });
        }
        let _entered = self.span.enter();
        tracing::info!(code = ?code, elapsed_ms = elapsed.as_secs_f64() * 1e3, "rpc finished");
    }

    /// Records a failure and turns it into the status to send.
    pub fn fail(&self, err: ServiceError) -> tonic::Status {
        self.finish(err.code());
        let _entered = self.span.enter();
        tonic::Status::from(err)
    }

    /// Records the result of a unary call and attaches the request id to its response.
    pub fn complete<T>(
        &self,
        result: Result<T, ServiceError>,
    ) -> Result<tonic::Response<T>, tonic::Status> {
        match result {
            Ok(body) => {
                self.finish(tonic::Code::Ok);
                Ok(self.respond(body))
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Wraps a response body, echoing the request id so that callers can quote it.
    pub fn respond<T>(&self, body: T) -> tonic::Response<T> {
        let mut response = tonic::Response::new(body);
        if let Ok(value) = self.request_id.parse() {
            response.metadata_mut().insert("x-request-id", value);
        }
        response
    }
}

/// The status code as gRPC names it on the wire (`NOT_FOUND`), which log shippers match on.
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Ok => "OK",
        C::Cancelled => "CANCELLED",
        C::Unknown => "UNKNOWN",
        C::InvalidArgument => "INVALID_ARGUMENT",
        C::DeadlineExceeded => "DEADLINE_EXCEEDED",
        C::NotFound => "NOT_FOUND",
        C::AlreadyExists => "ALREADY_EXISTS",
        C::PermissionDenied => "PERMISSION_DENIED",
        C::ResourceExhausted => "RESOURCE_EXHAUSTED",
        C::FailedPrecondition => "FAILED_PRECONDITION",
        C::Aborted => "ABORTED",
        C::OutOfRange => "OUT_OF_RANGE",
        C::Unimplemented => "UNIMPLEMENTED",
        C::Internal => "INTERNAL",
        C::Unavailable => "UNAVAILABLE",
        C::DataLoss => "DATA_LOSS",
        C::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// tonic enforces `grpc-timeout` itself but answers CANCELLED when it fires; ending our own
/// work slightly earlier lets the caller see DEADLINE_EXCEEDED, which is what the deadline
/// means. The margin covers the time between tonic starting its timer and this handler
/// starting ours.
fn finish_before_transport(timeout: Duration) -> Duration {
    let margin = (timeout / 10).min(Duration::from_millis(50));
    timeout.saturating_sub(margin)
}

/// Parses the gRPC `grpc-timeout` header: up to 8 digits and a unit (H, M, S, m, u, n).
pub fn grpc_timeout(metadata: &MetadataMap) -> Option<Duration> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(v: &str) -> MetadataMap {
        let mut m = MetadataMap::new();
        m.insert("grpc-timeout", v.parse().expect("ascii"));
        m
    }

    #[test]
    fn parses_grpc_timeout_units() {
        assert_eq!(
            grpc_timeout(&meta("250m")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(grpc_timeout(&meta("2S")), Some(Duration::from_secs(2)));
        assert_eq!(grpc_timeout(&meta("1H")), Some(Duration::from_secs(3600)));
        assert_eq!(grpc_timeout(&meta("5x")), None);
        assert_eq!(grpc_timeout(&meta("123456789S")), None);
        assert_eq!(grpc_timeout(&MetadataMap::new()), None);
    }

    #[test]
    fn own_deadline_comes_before_the_transport_timer() {
        assert_eq!(
            finish_before_transport(Duration::from_millis(200)),
            Duration::from_millis(180)
        );
        assert_eq!(
            finish_before_transport(Duration::from_secs(10)),
            Duration::from_millis(9950)
        );
    }
}
