//! `quorum.v1.Databases`: list, describe and register databases.

use std::sync::Arc;

use quorum_proto::v1 as pb;
use quorum_proto::v1::databases_server::Databases;
use tonic::{Request, Response, Status};

use crate::auth::Right;
use crate::convert;
use crate::databases::PostgresRegistration;
use crate::rpc::RpcContext;
use crate::state::AppState;
use crate::status::ServiceError;

#[derive(Debug, Clone)]
pub struct DatabasesService {
    pub state: Arc<AppState>,
}

impl DatabasesService {
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
            .map(convert::database_summary)
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
            match body.postgres {
                Some(pg) => state.databases.register_postgres(
                    &body.db_id,
                    PostgresRegistration {
                        url: pg.url,
                        schema: pg.schema,
                        password_name: pg.password_name,
                    },
                    &may_see,
                ),
                None => state.databases.register(&body.db_id, &body.path, &may_see),
            }
        })
        .await
        .unwrap_or_else(|e| Err(crate::status::ServiceError::internal(e)))
        .map(|db| pb::RegisterDatabaseResponse {
            database: Some(convert::database_summary(&db)),
        });
        self.state.publish_health().await;
        ctx.complete(result)
    }
}
