//! `quorum.v1.Databases`: list, describe and register databases.

use std::sync::Arc;

use quorum_proto::v1 as pb;
use quorum_proto::v1::databases_server::Databases;
use tonic::{Request, Response, Status};

use crate::convert;
use crate::databases::PostgresRegistration;
use crate::rpc::RpcContext;
use crate::state::AppState;

#[derive(Debug, Clone)]
pub struct DatabasesService {
    pub state: Arc<AppState>,
}

#[tonic::async_trait]
impl Databases for DatabasesService {
    async fn list(
        &self,
        request: Request<pb::ListDatabasesRequest>,
    ) -> Result<Response<pb::ListDatabasesResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/List", request.metadata());
        // Databases are introspected before the server listens, so listing works while the
        // models are still loading.
        self.state.sync_databases().await;
        self.state.publish_health().await;
        let databases = self
            .state
            .databases
            .list()
            .iter()
            .map(convert::database_summary)
            .collect();
        let note = self.state.no_databases_note().unwrap_or_default();
        ctx.complete(Ok(pb::ListDatabasesResponse { databases, note }))
    }

    async fn describe(
        &self,
        request: Request<pb::DescribeDatabaseRequest>,
    ) -> Result<Response<pb::DescribeDatabaseResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/Describe", request.metadata());
        let result = self
            .state
            .database(&request.get_ref().db_id)
            .await
            .map(|db| convert::describe_response(&db));
        ctx.complete(result)
    }

    async fn register(
        &self,
        request: Request<pb::RegisterDatabaseRequest>,
    ) -> Result<Response<pb::RegisterDatabaseResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Databases/Register", request.metadata());
        let state = self.state.clone();
        let body = request.into_inner();
        // Introspection reads the file or the server: keep it off the async workers.
        let result = tokio::task::spawn_blocking(move || match body.postgres {
            Some(pg) => state.databases.register_postgres(
                &body.db_id,
                PostgresRegistration {
                    url: pg.url,
                    schema: pg.schema,
                    password_name: pg.password_name,
                },
            ),
            None => state.databases.register(&body.db_id, &body.path),
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
