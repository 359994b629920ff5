//! Per-RPC bookkeeping shared by every service: a request id (the caller's `x-request-id` or a
//! fresh one) carried in a tracing span, the deadline from `grpc-timeout` (capped by the
//! server's request timeout), and the latency and outcome metrics recorded when the call ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::metadata::MetadataMap;
use tracing::Span;

use crate::state::AppState;
use crate::status::ServiceError;

/// The context of one RPC.
#[derive(Debug, Clone)]
pub struct RpcContext {
    pub method: &'static str,
    pub request_id: String,
    pub span: Span,
    /// When the caller stops waiting; work past it is wasted.
    pub deadline: Instant,
    started: Instant,
    state: Arc<AppState>,
}

impl RpcContext {
    pub fn begin(state: &Arc<AppState>, method: &'static str, metadata: &MetadataMap) -> Self {
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
        let span = tracing::info_span!("rpc", method, request_id = %request_id);
        Self {
            method,
            request_id,
            span,
            deadline: started + timeout,
            started,
            state: state.clone(),
        }
    }

    /// Records the outcome; call exactly once per RPC.
    pub fn finish(&self, code: tonic::Code) {
        let elapsed = self.started.elapsed();
        self.state.metrics.record_rpc(self.method, code, elapsed);
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
