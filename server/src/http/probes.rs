//! Prometheus scrapes and the probes: `GET /metrics` (text format), `GET /live` (the process
//! answers) and `GET /ready` (models loaded and admitting; the body also says when the server
//! has no database, which leaves text-to-SQL without anything to answer over, and when it is
//! open to the network without a token).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use super::Http;

pub async fn metrics(State(http): State<Http>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        http.state.render_metrics(),
    )
}

pub async fn live() -> &'static str {
    "live\n"
}

pub async fn ready(State(http): State<Http>) -> impl IntoResponse {
    if !http.state.is_ready() {
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready\n".to_owned());
    }
    let notes: Vec<String> = [
        http.state.no_databases_note(),
        http.state.open_access_note(),
    ]
    .into_iter()
    .flatten()
    .collect();
    match notes.is_empty() {
        true => (StatusCode::OK, "ready\n".to_owned()),
        false => (StatusCode::OK, format!("ready; {}\n", notes.join("; "))),
    }
}
