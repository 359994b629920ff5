//! The playground at `/`: a page to choose a database, browse its schema, ask a question and
//! see the answer with the evidence behind it (every candidate with its generator and result,
//! the vote's groups, the linked tables, the selector's choice, the stage timings). Plain
//! HTML, CSS and JavaScript compiled into the binary; it calls the same `/v1` endpoints as any
//! client (with the bearer token typed into it, when the server has one).

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::Http;

const INDEX: &str = include_str!("playground/index.html");
const SCRIPT: &str = include_str!("playground/playground.js");
const STYLE: &str = include_str!("playground/playground.css");

pub fn routes() -> Router<Http> {
    Router::new()
        .route(
            "/",
            get(|| async { page("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/playground.js",
            get(|| async { page("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/playground.css",
            get(|| async { page("text/css; charset=utf-8", STYLE) }),
        )
}

fn page(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}
