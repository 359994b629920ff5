//! Text-to-SQL and the databases over HTTP, as JSON in the proto3 JSON mapping of the gRPC
//! messages (the same request and answer as `Text2Sql.Generate`, field names in lowerCamelCase,
//! snake_case accepted):
//! - `POST /v1/sql` takes a `Text2SqlRequest` and answers a `Text2SqlResponse`. With `?stream=true`
//!   or `Accept: text/event-stream` it streams the pipeline's stages as server-sent events
//!   named after `Text2SqlEvent`'s fields (`pre_sql`, `linked_tables`, `candidate`, `vote`,
//!   then `answer`), each carrying that message; a failure is an `error` event with the error
//!   body a plain request would have got.
//! - `GET /v1/databases` lists the databases (`ListDatabasesResponse`), `GET
//!   /v1/databases/{db_id}` describes one (`DescribeDatabaseResponse`).
//! - `POST /v1/databases/{db_id}/query` runs one read-only query (`{"sql": ...}`;
//!   `QueryResponse`).
//! - `GET`/`POST /v1/databases/{db_id}/notes` list and add a database's notes, `PUT`/`DELETE
//!   /v1/databases/{db_id}/notes/{id}` edit and remove one (`{"text": ...}` bodies; `Note` and
//!   `ListNotesResponse` answers).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use quorum_proto::v1 as pb;
use quorum_proto::v1::databases_server::Databases;
use quorum_proto::v1::text2_sql_server::Text2Sql;
use serde::Deserialize;

use super::sse::Relay;
use super::{ApiError, Http, grpc_request};
use crate::auth::Caller;

#[derive(Debug, Default, Deserialize)]
pub struct SqlQuery {
    stream: Option<bool>,
}

/// Whether the caller asked for the stages as events.
fn wants_stream(query: &SqlQuery, headers: &HeaderMap) -> bool {
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
    Query(query): Query<SqlQuery>,
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
        return Ok(super::sse::respond(stream, StageRelay).into_response());
    }
    let answer = service
        .generate(grpc_request(&headers, &caller, req))
        .await?
        .into_inner();
    Ok(Json(answer).into_response())
}

/// Names each stage event after its field of `Text2SqlEvent`.
struct StageRelay;

fn event(name: &str, body: &impl serde::Serialize) -> Event {
    let data = serde_json::to_string(body).unwrap_or_else(|e| {
        tracing::error!(error = %e, "a stage event did not serialize");
        "{}".to_owned()
    });
    Event::default().event(name).data(data)
}

impl Relay for StageRelay {
    type Message = pb::Text2SqlEvent;

    fn message(&mut self, message: pb::Text2SqlEvent) -> Vec<Event> {
        use pb::text2_sql_event::Event as E;
        let Some(stage) = message.event else {
            return Vec::new();
        };
        vec![match &stage {
            E::PreSql(c) => event("pre_sql", c),
            E::LinkedTables(l) => event("linked_tables", l),
            E::Candidate(c) => event("candidate", c),
            E::Vote(v) => event("vote", v),
            E::Answer(a) => event("answer", a),
        }]
    }

    fn error(&mut self, status: tonic::Status) -> Vec<Event> {
        vec![event("error", &ApiError::from(status).body())]
    }

    fn end(self) -> Vec<Event> {
        Vec::new()
    }
}

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
