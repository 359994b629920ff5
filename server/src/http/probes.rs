//! Prometheus scrapes and the probes: `GET /metrics` (text format), `GET /live` (the process
//! answers) and `GET /ready` (models loaded and admitting; the body also says when the server
//! has no database, which leaves text-to-SQL without anything to answer over).

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
    match http.state.no_databases_note() {
        Some(note) => (StatusCode::OK, format!("ready; {note}\n")),
        None => (StatusCode::OK, "ready\n".to_owned()),
    }
}
