//! The HTTP face, on the metrics port: Prometheus metrics and probes, the OpenAI-compatible API
//! (`/v1/models`, `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`), the text-to-SQL
//! endpoint (`/v1/sql`, streamed as server-sent events on request) and its sub-tasks
//! (`/v1/sql/{link,debug,optimize,explain}`), the databases (listed, registered, described,
//! queried, with their notes), MCP at `/mcp`, and the playground page at `/`.
//!
//! Every `/v1` handler translates its request into the gRPC message and calls the gRPC service
//! in-process, so both faces share one implementation: the same validation, limits, queues,
//! deadlines, status codes (mapped onto HTTP in `error.rs`) and RPC metrics. Every `/v1` route
//! is authenticated as the gRPC services are, and the caller (its token's scope and rights)
//! travels into the in-process gRPC request, so each face enforces the same rules in one place.

mod databases;
mod embeddings;
mod error;
mod openai;
mod openai_pipeline;
mod openai_stream;
mod openapi;
mod playground;
mod probes;
mod sql;
mod sse;
mod subtasks;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use error::{ApiError, http_status};

use crate::auth::authenticator::unauthenticated_status;
use crate::auth::{Authenticator, Caller, Surface};
use crate::config::cors::CorsPolicy;
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
    pub auth: Authenticator,
    pub cors: CorsPolicy,
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

/// A gRPC request carrying what the HTTP request says about itself: its request id, and who
/// made it.
fn grpc_request<T>(headers: &HeaderMap, caller: &Caller, body: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(body);
    request.extensions_mut().insert(caller.clone());
    if let Some(id) = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
    {
        request.metadata_mut().insert("x-request-id", id);
    }
    request
}

/// The surface a `/v1` request came through: the OpenAI routes, the playground (whose page
/// says so in a header), or the plain API. Only the audit trail reads it.
fn surface_of(request: &Request) -> Surface {
    let from_playground = request
        .headers()
        .get("x-quorum-client")
        .is_some_and(|v| v.as_bytes() == b"playground");
    let path = request.uri().path();
    if from_playground {
        Surface::Playground
    } else if path.starts_with("/mcp") {
        Surface::Mcp
    } else if path.starts_with("/v1/sql") || path.starts_with("/v1/databases") {
        Surface::Http
    } else {
        Surface::OpenAi
    }
}

/// Authenticates a `/v1` request and hands its caller to the handler; a missing or wrong
/// token is refused (401, as gRPC's UNAUTHENTICATED).
async fn authorize(State(http): State<Http>, mut request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let peer = request
        .extensions()
        .get::<ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    match http
        .auth
        .authenticate(presented, peer, surface_of(&request))
    {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => ApiError::from(unauthenticated_status(e)).into_response(),
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

/// The MCP server over streamable HTTP. A server with tokens accepts any `Host` (the bearer
/// token is what protects it); an open one keeps the SDK's loopback-only `Host` check against
/// DNS rebinding from a browser.
fn mcp_service(
    http: &Http,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    crate::mcp::QuorumMcp,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let mut config = StreamableHttpServerConfig::default();
    if http.auth.closed() {
        config = config.disable_allowed_hosts();
    }
    let state = http.state.clone();
    StreamableHttpService::new(
        move || Ok(crate::mcp::QuorumMcp::in_process(state.clone())),
        Arc::default(),
        config,
    )
}

/// A session's end (`DELETE /mcp`) answered 204 rather than the SDK's 202: the official
/// clients take anything but 200 or 204 for a failed termination and warn of it at every
/// disconnect, though the session did end.
async fn session_end_as_no_content(request: Request, next: Next) -> Response {
    let ending = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    if ending && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

/// The CORS layer of a policy: preflights answered and responses marked for the allowed
/// origins, with the methods and headers the API takes; none for same-origin only.
fn cors_layer(policy: &CorsPolicy) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{HeaderName, HeaderValue, header};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let origins = match policy {
        CorsPolicy::SameOrigin => return None,
        CorsPolicy::AnyOrigin => AllowOrigin::any(),
        CorsPolicy::Origins(list) => AllowOrigin::list(
            list.iter()
                .filter_map(|o| HeaderValue::from_str(o).ok())
                .collect::<Vec<_>>(),
        ),
    };
    Some(
        CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::ACCEPT,
                HeaderName::from_static("x-request-id"),
                HeaderName::from_static("mcp-session-id"),
                HeaderName::from_static("mcp-protocol-version"),
            ])
            .expose_headers([
                header::RETRY_AFTER,
                HeaderName::from_static("mcp-session-id"),
            ])
            .max_age(std::time::Duration::from_secs(600)),
    )
}

/// Every route of the HTTP port.
pub fn router(http: Http) -> Router {
    let api = Router::new()
        .route("/v1/models", get(openai::list_models))
        .route("/v1/models/{id}", get(openai::retrieve_model))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/completions", post(openai::completions))
        .route("/v1/embeddings", post(embeddings::embeddings))
        .route("/v1/sql", post(sql::generate))
        .route("/v1/sql/link", post(subtasks::link))
        .route("/v1/sql/debug", post(subtasks::debug))
        .route("/v1/sql/optimize", post(subtasks::optimize))
        .route("/v1/sql/explain", post(subtasks::explain))
        .route(
            "/v1/databases",
            get(databases::list_databases).post(databases::register_database),
        )
        .route("/v1/databases/{db_id}", get(databases::describe_database))
        .route("/v1/databases/{db_id}/query", post(databases::query))
        .merge(
            Router::new()
                .route_service("/mcp", mcp_service(&http))
                .layer(middleware::from_fn(session_end_as_no_content)),
        )
        .route(
            "/v1/databases/{db_id}/notes",
            get(databases::list_notes).post(databases::add_note),
        )
        .route(
            "/v1/databases/{db_id}/notes/{id}",
            axum::routing::put(databases::edit_note).delete(databases::remove_note),
        )
        .route_layer(middleware::from_fn_with_state(http.clone(), authorize));
    let app = Router::new()
        .route("/metrics", get(probes::metrics))
        .route("/live", get(probes::live))
        .route("/ready", get(probes::ready))
        .route("/openapi.json", get(openapi::document))
        .merge(playground::routes())
        .merge(api)
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(middleware::from_fn_with_state(http.clone(), record))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES));
    // Outermost, so that a preflight (which carries no token) is answered before `/v1`'s
    // authentication.
    match cors_layer(&http.cors) {
        Some(cors) => app.layer(cors).with_state(http),
        None => app.with_state(http),
    }
}

/// The scrape port's routes: metrics and probes, no API. Prometheus and the kubelet reach it
/// where the API port stays closed to them.
pub fn scrape_router(http: Http) -> Router {
    Router::new()
        .route("/metrics", get(probes::metrics))
        .route("/live", get(probes::live))
        .route("/ready", get(probes::ready))
        .fallback(|| async {
            ApiError::not_found("this port serves /metrics, /live and /ready only")
        })
        .layer(middleware::from_fn_with_state(http.clone(), record))
        .with_state(http)
}

/// Binds the HTTP port.
pub async fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves until `stop` is cancelled; in-flight responses (streams included) finish first, and
/// the server's grace period bounds them by cancelling what is still running.
pub async fn serve(listener: TcpListener, http: Http, stop: CancellationToken) {
    serve_routes(listener, router(http), stop).await;
}

/// Serves the scrape port until `stop` is cancelled.
pub async fn serve_scrape(listener: TcpListener, http: Http, stop: CancellationToken) {
    serve_routes(listener, scrape_router(http), stop).await;
}

async fn serve_routes(listener: TcpListener, routes: Router, stop: CancellationToken) {
    // The peer's address feeds the limit on failed authentications.
    let app = routes.into_make_service_with_connect_info::<std::net::SocketAddr>();
    // As on the gRPC port: a small reply must not wait for the client's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY");
        }
    });
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
    {
        tracing::warn!(error = %e, "the HTTP server stopped");
    }
}
