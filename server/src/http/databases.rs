//! The databases over HTTP, as JSON in the proto3 JSON mapping of the `Databases` messages
//! (result cells as plain JSON values):
//! - `GET /v1/databases` lists them (`ListDatabasesResponse`; where each lives only for an
//!   admin), `POST /v1/databases` registers one (`RegisterDatabaseRequest`; 201 with
//!   `RegisterDatabaseResponse`), `GET /v1/databases/{db_id}` describes one
//!   (`DescribeDatabaseResponse`).
//! - `POST /v1/databases/{db_id}/query` runs one read-only query (`{"sql": ...}`;
//!   `QueryResponse`).
//! - `GET`/`POST /v1/databases/{db_id}/notes` list and add a database's notes, `PUT`/`DELETE
//!   /v1/databases/{db_id}/notes/{id}` edit and remove one (`{"text": ...}` bodies; `Note` and
//!   `ListNotesResponse` answers).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode};
use quorum_proto::v1 as pb;
use quorum_proto::v1::databases_server::Databases;
use serde::Deserialize;

use super::{ApiError, Http, grpc_request};
use crate::auth::Caller;

pub async fn list_databases(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Result<Json<pb::ListDatabasesResponse>, ApiError> {
    let listed = http
        .databases()
        .list(grpc_request(&headers, &caller, pb::ListDatabasesRequest {}))
        .await?;
    Ok(Json(listed.into_inner()))
}

/// `POST /v1/databases`: registers a database (201 Created).
pub async fn register_database(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Json<pb::RegisterDatabaseRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<pb::RegisterDatabaseResponse>), ApiError> {
    let Json(req) = body?;
    let registered = http
        .databases()
        .register(grpc_request(&headers, &caller, req))
        .await?;
    Ok((StatusCode::CREATED, Json(registered.into_inner())))
}

pub async fn describe_database(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    Path(db_id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<pb::DescribeDatabaseResponse>, ApiError> {
    let described = http
        .databases()
        .describe(grpc_request(
            &headers,
            &caller,
            pb::DescribeDatabaseRequest { db_id },
        ))
        .await?;
    Ok(Json(described.into_inner()))
}

/// The body of a note written over HTTP.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoteBody {
    text: String,
}

/// `GET /v1/databases/{db_id}/notes`.
pub async fn list_notes(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    Path(db_id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<pb::ListNotesResponse>, ApiError> {
    let listed = http
        .databases()
        .list_notes(grpc_request(
            &headers,
            &caller,
            pb::ListNotesRequest { db_id },
        ))
        .await?;
    Ok(Json(listed.into_inner()))
}

/// `POST /v1/databases/{db_id}/notes` with `{"text": ...}`.
pub async fn add_note(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    Path(db_id): Path<String>,
    headers: HeaderMap,
    body: Result<Json<NoteBody>, JsonRejection>,
) -> Result<Json<pb::Note>, ApiError> {
    let Json(body) = body?;
    let added = http
        .databases()
        .add_note(grpc_request(
            &headers,
            &caller,
            pb::AddNoteRequest {
                db_id,
                text: body.text,
            },
        ))
        .await?;
    Ok(Json(added.into_inner()))
}

/// `PUT /v1/databases/{db_id}/notes/{id}` with `{"text": ...}`.
pub async fn edit_note(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    Path((db_id, id)): Path<(String, u32)>,
    headers: HeaderMap,
    body: Result<Json<NoteBody>, JsonRejection>,
) -> Result<Json<pb::Note>, ApiError> {
    let Json(body) = body?;
    let edited = http
        .databases()
        .edit_note(grpc_request(
            &headers,
            &caller,
            pb::EditNoteRequest {
                db_id,
                id,
                text: body.text,
            },
        ))
        .await?;
    Ok(Json(edited.into_inner()))
}

/// `DELETE /v1/databases/{db_id}/notes/{id}`: answers the notes left.
pub async fn remove_note(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    Path((db_id, id)): Path<(String, u32)>,
    headers: HeaderMap,
) -> Result<Json<pb::ListNotesResponse>, ApiError> {
    let left = http
        .databases()
        .remove_note(grpc_request(
            &headers,
            &caller,
            pb::RemoveNoteRequest { db_id, id },
        ))
        .await?;
    Ok(Json(left.into_inner()))
}

/// The body of `POST /v1/databases/{db_id}/query`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryBody {
    sql: String,
}

/// `POST /v1/databases/{db_id}/query` with `{"sql": ...}`: one read-only query.
pub async fn query(
    State(http): State<Http>,
    Extension(caller): Extension<Caller>,
    Path(db_id): Path<String>,
    headers: HeaderMap,
    body: Result<Json<QueryBody>, JsonRejection>,
) -> Result<Json<pb::QueryResponse>, ApiError> {
    let Json(body) = body?;
    let ran = http
        .databases()
        .query(grpc_request(
            &headers,
            &caller,
            pb::QueryRequest {
                db_id,
                sql: body.sql,
            },
        ))
        .await?;
    Ok(Json(ran.into_inner()))
}
