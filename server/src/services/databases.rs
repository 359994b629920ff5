//! `quorum.v1.Databases`: list, describe and register databases.

use std::sync::Arc;

use quorum_proto::v1 as pb;
use quorum_proto::v1::databases_server::Databases;
use tonic::{Request, Response, Status};

use crate::auth::Right;
use crate::convert;
use crate::databases::{MySqlRegistration, PostgresRegistration};
use crate::notes::{Note, NoteBook};
use crate::registration_log::Registration;
use crate::rpc::RpcContext;
use crate::state::AppState;
use crate::status::ServiceError;

#[derive(Debug, Clone)]
pub struct DatabasesService {
    pub state: Arc<AppState>,
}

/// A database's summary as the caller may see it: where it lives only for an admin (or on a
/// server without tokens), since paths and hosts say more about the server than a team needs.
fn summary(ctx: &RpcContext, db: &crate::databases::Database) -> pb::DatabaseSummary {
    let mut summary = convert::database_summary(db);
    if !ctx.caller.sees_locations() {
        summary.location.clear();
    }
    summary
}

/// A note as the API shows it.
fn note_message(note: &Note) -> pb::Note {
    pb::Note {
        id: note.id,
        text: note.text.clone(),
    }
}

fn notes_message(notes: &[Note]) -> pb::ListNotesResponse {
    pb::ListNotesResponse {
        notes: notes.iter().map(note_message).collect(),
    }
}

impl DatabasesService {
    /// Resolves the database whose notes a request reads (`ask` or `register`) or changes
    /// (`register`), within the caller's scope, with other replicas' lines read first.
    async fn notes_database(
        &self,
        ctx: &RpcContext,
        db_id: &str,
        change: bool,
    ) -> Result<(), ServiceError> {
        let right = if !change && ctx.caller.grant.rights.has(Right::Ask) {
            Right::Ask
        } else {
            Right::Register
        };
        ctx.database(right, db_id).await?;
        self.state.sync_databases().await;
        Ok(())
    }

    /// Builds and records a note line off the async workers (the file lock may wait).
    async fn change_note(
        &self,
        make: impl FnOnce(&NoteBook) -> Result<Registration, ServiceError> + Send + 'static,
    ) -> Result<Registration, ServiceError> {
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || state.databases.change_notes(make))
            .await
            .unwrap_or_else(|e| Err(ServiceError::internal(e)))
    }

    /// A registration needs the `register` right and an id in the caller's scope (the
    /// registry also refuses a second name for what a database outside the scope serves).
    fn may_register(
        &self,
        ctx: &RpcContext,
        body: &pb::RegisterDatabaseRequest,
    ) -> Result<(), ServiceError> {
        ctx.require(Right::Register)?;
        if !ctx.caller.grant.scope.allows(&body.db_id) {
            return Err(ServiceError::PermissionDenied {
                reason: format!(
                    "token `{}` may register databases named {} only",
                    ctx.caller.name,
                    ctx.caller.grant.scope.patterns().join(", ")
                ),
            });
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl Databases for DatabasesService {
    async fn list(
        &self,
        request: Request<pb::ListDatabasesRequest>,
    ) -> Result<Response<pb::ListDatabasesResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/List", &request);
        // Databases are introspected before the server listens, so listing works while the
        // models are still loading.
        if !ctx.caller.grant.rights.any() {
            return Err(ctx.fail(ServiceError::PermissionDenied {
                reason: format!("token `{}` holds no right", ctx.caller.name),
            }));
        }
        self.state.sync_databases().await;
        self.state.publish_health().await;
        // A token lists only the databases in its scope.
        let databases = self
            .state
            .databases
            .list()
            .iter()
            .filter(|db| ctx.caller.may_see(&db.handle.db_id))
            .map(|db| summary(&ctx, db))
            .collect();
        let note = self.state.no_databases_note().unwrap_or_default();
        ctx.complete(Ok(pb::ListDatabasesResponse { databases, note }))
    }

    async fn describe(
        &self,
        request: Request<pb::DescribeDatabaseRequest>,
    ) -> Result<Response<pb::DescribeDatabaseResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/Describe", &request);
        let db_id = &request.get_ref().db_id;
        let right = if ctx.caller.grant.rights.has(Right::Ask) {
            Right::Ask
        } else {
            Right::Register
        };
        let result = ctx
            .database(right, db_id)
            .await
            .map(|db| convert::describe_response(&db));
        ctx.complete(result)
    }

    async fn register(
        &self,
        request: Request<pb::RegisterDatabaseRequest>,
    ) -> Result<Response<pb::RegisterDatabaseResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/Register", &request);
        let body = request.into_inner();
        ctx.note_database(&body.db_id);
        if let Err(e) = self.may_register(&ctx, &body) {
            return Err(ctx.fail(e));
        }
        let state = self.state.clone();
        // Introspection reads the file or the server: keep it off the async workers.
        let caller = ctx.caller.clone();
        let result = tokio::task::spawn_blocking(move || {
            let may_see = |id: &str| caller.may_see(id);
            match (body.postgres, body.mysql) {
                (Some(_), Some(_)) => Err(crate::status::ServiceError::invalid(
                    "mysql",
                    "a registration names one server: postgres or mysql",
                )),
                (None, Some(my)) => state.databases.register_mysql(
                    &body.db_id,
                    MySqlRegistration {
                        url: my.url,
                        database: my.database,
                        password_name: my.password_name,
                    },
                    &may_see,
                ),
                (Some(pg), None) => state.databases.register_postgres(
                    &body.db_id,
                    PostgresRegistration {
                        url: pg.url,
                        schema: pg.schema,
                        password_name: pg.password_name,
                    },
                    &may_see,
                ),
                (None, None) => state.databases.register(&body.db_id, &body.path, &may_see),
            }
        })
        .await
        .unwrap_or_else(|e| Err(crate::status::ServiceError::internal(e)))
        .inspect(|db| {
            crate::prefix_warming::warm_in_background(&self.state, vec![db.handle.clone()]);
        })
        .map(|db| pb::RegisterDatabaseResponse {
            database: Some(summary(&ctx, &db)),
        });
        self.state.publish_health().await;
        ctx.complete(result)
    }

    async fn query(
        &self,
        request: Request<pb::QueryRequest>,
    ) -> Result<Response<pb::QueryResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/Query", &request);
        let body = request.into_inner();
        let result = async {
            if body.sql.trim().is_empty() {
                return Err(ServiceError::invalid("sql", "must not be empty"));
            }
            let db = ctx.database(Right::Ask, &body.db_id).await?;
            let base = &self.state.pipeline_runtime()?.base;
            let (limits, rows) = (base.limits, base.preview_rows);
            let sql = body.sql.clone();
            let executed = tokio::task::spawn_blocking(move || {
                db.handle
                    .backend
                    .open_session(limits)
                    .and_then(|mut session| session.execute(&sql))
            })
            .await
            .map_err(ServiceError::internal)?;
            match executed {
                Ok(result) => {
                    let preview = quorum_sql::pipeline::ResultPreview::of(&result, rows);
                    ctx.note_answer(&body.sql, Some(preview.total_rows as u64));
                    Ok(pb::QueryResponse {
                        result: Some(convert::preview(&preview)),
                    })
                }
                Err(e @ quorum_sql::sandbox::ExecError::Unavailable { .. }) => {
                    Err(ServiceError::Unavailable {
                        reason: format!("database {}: {e}", body.db_id),
                    })
                }
                Err(e) => {
                    ctx.note_answer(&body.sql, None);
                    Err(ServiceError::invalid("sql", e.to_string()))
                }
            }
        }
        .await;
        ctx.complete(result)
    }

    async fn list_notes(
        &self,
        request: Request<pb::ListNotesRequest>,
    ) -> Result<Response<pb::ListNotesResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/ListNotes", &request);
        let db_id = &request.get_ref().db_id;
        let result = self
            .notes_database(&ctx, db_id, false)
            .await
            .map(|()| notes_message(&self.state.databases.notes.list(db_id)));
        ctx.complete(result)
    }

    async fn add_note(
        &self,
        request: Request<pb::AddNoteRequest>,
    ) -> Result<Response<pb::Note>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/AddNote", &request);
        let body = request.into_inner();
        let result = async {
            self.notes_database(&ctx, &body.db_id, true).await?;
            let line = self
                .change_note(move |book| book.add_line(&body.db_id, &body.text))
                .await?;
            note_of(&line)
        }
        .await;
        ctx.complete(result)
    }

    async fn edit_note(
        &self,
        request: Request<pb::EditNoteRequest>,
    ) -> Result<Response<pb::Note>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/EditNote", &request);
        let body = request.into_inner();
        let result = async {
            self.notes_database(&ctx, &body.db_id, true).await?;
            let line = self
                .change_note(move |book| book.edit_line(&body.db_id, body.id, &body.text))
                .await?;
            note_of(&line)
        }
        .await;
        ctx.complete(result)
    }

    async fn remove_note(
        &self,
        request: Request<pb::RemoveNoteRequest>,
    ) -> Result<Response<pb::ListNotesResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/RemoveNote", &request);
        let body = request.into_inner();
        let result = async {
            self.notes_database(&ctx, &body.db_id, true).await?;
            let db_id = body.db_id.clone();
            self.change_note(move |book| book.remove_line(&body.db_id, body.id))
                .await?;
            Ok(notes_message(&self.state.databases.notes.list(&db_id)))
        }
        .await;
        ctx.complete(result)
    }
}

/// The note a recorded add or edit line holds.
fn note_of(line: &Registration) -> Result<pb::Note, ServiceError> {
    match line {
        Registration::Note { id, text, .. } => Ok(pb::Note {
            id: *id,
            text: text.clone(),
        }),
        other => Err(ServiceError::internal(format!(
            "a note change recorded {other:?}"
        ))),
    }
}
