//! The HTTP face, on the metrics port: Prometheus metrics and probes, the OpenAI-compatible API
//! (`/v1/models`, `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`), the text-to-SQL
//! endpoint (`/v1/sql`, streamed as server-sent events on request), the databases, and the
//! playground page at `/`.
//!
//! Every `/v1` handler translates its request into the gRPC message and calls the gRPC service
//! in-process, so both faces share one implementation: the same validation, limits, queues,
//! deadlines, status codes (mapped onto HTTP in `error.rs`) and RPC metrics. The bearer token,
//! when the server has one, guards every `/v1` route as it guards the gRPC services.

mod embeddings;
mod error;
mod openai;
mod openai_stream;
mod playground;
mod probes;
mod sql;
mod sse;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::HeaderMap;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use error::{ApiError, http_status};

use crate::auth::BearerAuth;
use crate::services::databases::DatabasesService;
use crate::services::inference::InferenceService;
use crate::services::text2sql::Text2SqlService;
use crate::state::AppState;

/// The largest request body: a JSON schema constraint may be 256 KiB and a prompt a few
/// thousand tokens, so 2 MiB leaves room without letting a client make the server buffer much.
const MAX_BODY_BYTES: usize = 2 << 20;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct Http {
    pub state: Arc<AppState>,
    pub auth: BearerAuth,
}

impl Http {
    fn inference(&self) -> InferenceService {
        InferenceService {
            state: self.state.clone(),
        }
    }

    fn text2sql(&self) -> Text2SqlService {
        Text2SqlService {
            state: self.state.clone(),
        }
    }

    fn databases(&self) -> DatabasesService {
        DatabasesService {
            state: self.state.clone(),
        }
    }
}

/// A gRPC request carrying what the HTTP request says about itself: its request id.
fn grpc_request<T>(headers: &HeaderMap, body: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(body);
    if let Some(id) = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
    {
        request.metadata_mut().insert("x-request-id", id);
    }
    request
}

/// Refuses a `/v1` request without the server's bearer token (401, as gRPC's UNAUTHENTICATED).
async fn authorize(State(http): State<Http>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match http.auth.check(presented) {
        Ok(()) => next.run(request).await,
        Err(status) => ApiError::from(status).into_response(),
    }
}

/// Counts every HTTP request by route and status, and times it to its response head.
async fn record(State(http): State<Http>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let started = Instant::now();
    let response = next.run(request).await;
    http.state
        .metrics
        .record_http(&route, response.status().as_u16(), started.elapsed());
    response
}

/// Every route of the HTTP port.
pub fn router(http: Http) -> Router {
    let api = Router::new()
        .route("/v1/models", get(openai::list_models))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/completions", post(openai::completions))
        .route("/v1/embeddings", post(embeddings::embeddings))
        .route("/v1/sql", post(sql::generate))
        .route("/v1/databases", get(sql::list_databases))
        .route("/v1/databases/{db_id}", get(sql::describe_database))
        .route_layer(middleware::from_fn_with_state(http.clone(), authorize));
    Router::new()
        .route("/metrics", get(probes::metrics))
        .route("/live", get(probes::live))
        .route("/ready", get(probes::ready))
        .merge(playground::routes())
        .merge(api)
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(middleware::from_fn_with_state(http.clone(), record))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(http)
}

/// Binds the HTTP port.
pub async fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves until `stop` is cancelled; in-flight responses (streams included) finish first, and
/// the server's grace period bounds them by cancelling what is still running.
pub async fn serve(listener: TcpListener, http: Http, stop: CancellationToken) {
    let app = router(http);
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
    {
        tracing::warn!(error = %e, "the HTTP server stopped");
    }
}
