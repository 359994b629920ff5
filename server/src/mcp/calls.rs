//! Where the MCP tools' calls go: into this server's own services with the HTTP request's
//! caller (so that its token's scope, rights, quotas and audit apply), or over gRPC to a
//! running server with a token (`quorum mcp` over stdio). Either way the same RPCs answer.

use std::sync::Arc;

use quorum_proto::v1 as pb;
use quorum_proto::v1::databases_client::DatabasesClient;
use quorum_proto::v1::databases_server::Databases;
use quorum_proto::v1::text2_sql_client::Text2SqlClient;
use quorum_proto::v1::text2_sql_server::Text2Sql;
use tonic::Status;
use tonic::transport::Channel;

use crate::auth::Caller;
use crate::services::databases::DatabasesService;
use crate::services::text2sql::Text2SqlService;
use crate::state::AppState;

/// One tool call's way to the services.
#[derive(Debug, Clone)]
pub enum Calls {
    InProcess {
        state: Arc<AppState>,
        caller: Caller,
    },
    Remote {
        channel: Channel,
        token: Option<String>,
    },
}

impl Calls {
    fn request<T>(&self, body: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(body);
        match self {
            Self::InProcess { caller, .. } => {
                request.extensions_mut().insert(caller.clone());
            }
            Self::Remote { token: Some(t), .. } => {
                if let Ok(value) = format!("Bearer {t}").parse() {
                    request.metadata_mut().insert("authorization", value);
                }
            }
            Self::Remote { token: None, .. } => {}
        }
        request
    }

    pub async fn list(&self) -> Result<pb::ListDatabasesResponse, Status> {
        let req = self.request(pb::ListDatabasesRequest {});
        match self {
            Self::InProcess { state, .. } => {
                DatabasesService {
                    state: state.clone(),
                }
                .list(req)
                .await
            }
            Self::Remote { channel, .. } => DatabasesClient::new(channel.clone()).list(req).await,
        }
        .map(tonic::Response::into_inner)
    }

    pub async fn describe(&self, db_id: &str) -> Result<pb::DescribeDatabaseResponse, Status> {
        let req = self.request(pb::DescribeDatabaseRequest {
            db_id: db_id.into(),
        });
        match self {
            Self::InProcess { state, .. } => {
                DatabasesService {
                    state: state.clone(),
                }
                .describe(req)
                .await
            }
            Self::Remote { channel, .. } => {
                DatabasesClient::new(channel.clone()).describe(req).await
            }
        }
        .map(tonic::Response::into_inner)
    }

    pub async fn notes(&self, db_id: &str) -> Result<pb::ListNotesResponse, Status> {
        let req = self.request(pb::ListNotesRequest {
            db_id: db_id.into(),
        });
        match self {
            Self::InProcess { state, .. } => {
                DatabasesService {
                    state: state.clone(),
                }
                .list_notes(req)
                .await
            }
            Self::Remote { channel, .. } => {
                DatabasesClient::new(channel.clone()).list_notes(req).await
            }
        }
        .map(tonic::Response::into_inner)
    }

    pub async fn query(&self, db_id: &str, sql: &str) -> Result<pb::QueryResponse, Status> {
        let req = self.request(pb::QueryRequest {
            db_id: db_id.into(),
            sql: sql.into(),
        });
        match self {
            Self::InProcess { state, .. } => {
                DatabasesService {
                    state: state.clone(),
                }
                .query(req)
                .await
            }
            Self::Remote { channel, .. } => DatabasesClient::new(channel.clone()).query(req).await,
        }
        .map(tonic::Response::into_inner)
    }

    pub async fn ask(&self, request: pb::Text2SqlRequest) -> Result<pb::Text2SqlResponse, Status> {
        let req = self.request(request);
        match self {
            Self::InProcess { state, .. } => {
                Text2SqlService {
                    state: state.clone(),
                }
                .generate(req)
                .await
            }
            Self::Remote { channel, .. } => {
                Text2SqlClient::new(channel.clone()).generate(req).await
            }
        }
        .map(tonic::Response::into_inner)
    }

    pub async fn explain(
        &self,
        request: pb::ExplainRequest,
    ) -> Result<pb::ExplainResponse, Status> {
        let req = self.request(request);
        match self {
            Self::InProcess { state, .. } => {
                Text2SqlService {
                    state: state.clone(),
                }
                .explain(req)
                .await
            }
            Self::Remote { channel, .. } => Text2SqlClient::new(channel.clone()).explain(req).await,
        }
        .map(tonic::Response::into_inner)
    }
}
