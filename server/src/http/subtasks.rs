//! The text-to-SQL sub-tasks over HTTP, as JSON in the proto3 JSON mapping of their gRPC
//! messages (the same requests, answers and errors as the `Text2Sql` methods):
//! - `POST /v1/sql/link`: schema linking (`LinkSchemaRequest` → `LinkSchemaResponse`);
//! - `POST /v1/sql/debug`: repair a query (`DebugRequest` → `DebugResponse`; streamed, with
//!   `?stream=true` or `Accept: text/event-stream`, as `round` events and then `answer`);
//! - `POST /v1/sql/optimize`: rewrite a query to run faster (`OptimizeRequest` →
//!   `OptimizeResponse`; streamed as `rewrite` events and then `answer`);
//! - `POST /v1/sql/explain`: explain a query in words (`ExplainRequest` → `ExplainResponse`).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use quorum_proto::v1 as pb;
use quorum_proto::v1::text2_sql_server::Text2Sql;

use super::sql::{StreamQuery, wants_stream};
use super::sse::OneofRelay;
use super::{ApiError, Http, grpc_request};
use crate::auth::Caller;

pub async fn link(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Json<pb::LinkSchemaRequest>, JsonRejection>,
) -> Result<Json<pb::LinkSchemaResponse>, ApiError> {
    let Json(req) = body?;
    let linked = http
        .text2sql()
        .link_schema(grpc_request(&headers, &caller, req))
        .await?;
    Ok(Json(linked.into_inner()))
}

pub async fn debug(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
    body: Result<Json<pb::DebugRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    let service = http.text2sql();
    if wants_stream(&query, &headers) {
        let stream = service
            .debug_stream(grpc_request(&headers, &caller, req))
            .await?
            .into_inner();
        return Ok(super::sse::respond(stream, OneofRelay::default()).into_response());
    }
    let debugged = service.debug(grpc_request(&headers, &caller, req)).await?;
    Ok(Json(debugged.into_inner()).into_response())
}

pub async fn optimize(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
    body: Result<Json<pb::OptimizeRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    let service = http.text2sql();
    if wants_stream(&query, &headers) {
        let stream = service
            .optimize_stream(grpc_request(&headers, &caller, req))
            .await?
            .into_inner();
        return Ok(super::sse::respond(stream, OneofRelay::default()).into_response());
    }
    let optimized = service
        .optimize(grpc_request(&headers, &caller, req))
        .await?;
    Ok(Json(optimized.into_inner()).into_response())
}

pub async fn explain(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Json<pb::ExplainRequest>, JsonRejection>,
) -> Result<Json<pb::ExplainResponse>, ApiError> {
    let Json(req) = body?;
    let explained = http
        .text2sql()
        .explain(grpc_request(&headers, &caller, req))
        .await?;
    Ok(Json(explained.into_inner()))
}
