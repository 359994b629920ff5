//! Text-to-SQL over HTTP, as JSON in the proto3 JSON mapping of the gRPC messages (the same
//! request and answer as `Text2Sql.Generate`, field names in lowerCamelCase, snake_case
//! accepted; result cells as plain JSON values): `POST /v1/sql` takes a `Text2SqlRequest` and
//! answers a `Text2SqlResponse`. With `?stream=true` or `Accept: text/event-stream` it streams
//! the pipeline's stages as server-sent events named after `Text2SqlEvent`'s fields (`pre_sql`,
//! `linked_tables`, `candidate`, `vote`, then `answer`), each carrying that message; a failure
//! is an `error` event with the error body a plain request would have got.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use quorum_proto::v1 as pb;
use quorum_proto::v1::text2_sql_server::Text2Sql;
use serde::Deserialize;

use super::sse::OneofRelay;
use super::{ApiError, Http, grpc_request};
use crate::auth::Caller;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    stream: Option<bool>,
}

/// Whether the caller asked for the stages as events.
pub fn wants_stream(query: &StreamQuery, headers: &HeaderMap) -> bool {
    query.stream.unwrap_or_else(|| {
        headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"))
    })
}

pub async fn generate(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
    body: Result<Json<pb::Text2SqlRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    let service = http.text2sql();
    if wants_stream(&query, &headers) {
        let stream = service
            .generate_stream(grpc_request(&headers, &caller, req))
            .await?
            .into_inner();
        return Ok(super::sse::respond(stream, OneofRelay::default()).into_response());
    }
    let answer = service
        .generate(grpc_request(&headers, &caller, req))
        .await?
        .into_inner();
    Ok(Json(answer).into_response())
}
