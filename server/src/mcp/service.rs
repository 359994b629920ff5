//! The MCP server: its tools, and how it is served (a tower service at `/mcp`, or stdio).

use std::sync::Arc;

use quorum_proto::v1 as pb;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};
use tonic::Status;
use tonic::transport::Channel;

use super::calls::Calls;
use super::json;
use crate::auth::Caller;
use crate::state::AppState;

#[derive(Debug, Clone)]
enum Target {
    InProcess(Arc<AppState>),
    Remote {
        channel: Channel,
        token: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub struct QuorumMcp {
    target: Target,
    #[allow(dead_code, reason = "read by the tool_handler macro")]
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DatabaseArgs {
    /// The database's id (list_databases gives them).
    pub db_id: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AskArgs {
    /// The database's id.
    pub db_id: String,
    /// The question, in plain words.
    pub question: String,
    /// What the question's terms mean, when the database's notes do not say (optional).
    pub evidence: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct QueryArgs {
    /// The database's id.
    pub db_id: String,
    /// One read-only SQL statement in the database's dialect.
    pub sql: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ExplainArgs {
    /// The database's id.
    pub db_id: String,
    /// The SQL to explain.
    pub sql: String,
    /// A question to check the SQL against (optional).
    pub question: Option<String>,
}

/// A tool's reply: the JSON, or the server's refusal as a tool error the assistant can read.
fn reply(result: Result<Value, Status>) -> CallToolResult {
    match result {
        Ok(value) => CallToolResult::structured(value),
        Err(status) => CallToolResult::error(vec![ContentBlock::text(format!(
            "{}: {}",
            crate::metrics::code_label(status.code()),
            status.message()
        ))]),
    }
}

impl QuorumMcp {
    /// Tools over this server's own services, each call with its HTTP request's caller.
    pub fn in_process(state: Arc<AppState>) -> Self {
        Self {
            target: Target::InProcess(state),
            tool_router: Self::tool_router(),
        }
    }

    /// Tools over a running server's gRPC API.
    pub fn remote(channel: Channel, token: Option<String>) -> Self {
        Self {
            target: Target::Remote { channel, token },
            tool_router: Self::tool_router(),
        }
    }

    fn calls(&self, ctx: &RequestContext<RoleServer>) -> Result<Calls, ErrorData> {
        match &self.target {
            Target::InProcess(state) => {
                // The `/mcp` route runs behind the authenticator, which put the caller in
                // the HTTP request; a call without one is refused, never served openly.
                let caller = ctx
                    .extensions
                    .get::<axum::http::request::Parts>()
                    .and_then(|parts| parts.extensions.get::<Caller>())
                    .cloned()
                    .ok_or_else(|| ErrorData::invalid_request("unauthenticated", None))?;
                Ok(Calls::InProcess {
                    state: state.clone(),
                    caller,
                })
            }
            Target::Remote { channel, token } => Ok(Calls::Remote {
                channel: channel.clone(),
                token: token.clone(),
            }),
        }
    }
}

#[tool_router]
impl QuorumMcp {
    #[tool(
        description = "Lists the databases this token may ask about: id, SQL dialect, table count."
    )]
    async fn list_databases(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let calls = self.calls(&ctx)?;
        Ok(reply(
            calls
                .list()
                .await
                .map(|l| json!({ "databases": json::databases(&l) })),
        ))
    }

    #[tool(
        description = "A database's tables, columns (with types, keys and example values), foreign keys, and the notes its team registered (definitions, units, rules)."
    )]
    async fn describe_database(
        &self,
        Parameters(args): Parameters<DatabaseArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let calls = self.calls(&ctx)?;
        let described = async {
            let d = calls.describe(&args.db_id).await?;
            let n = calls.notes(&args.db_id).await?;
            Ok(json::description(&d, &n))
        }
        .await;
        Ok(reply(described))
    }

    #[tool(
        description = "Answers a question about a database with SQL: writes candidate queries, runs them read-only, votes, and returns the chosen SQL, its result rows, and why it was chosen."
    )]
    async fn ask(
        &self,
        Parameters(args): Parameters<AskArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let calls = self.calls(&ctx)?;
        let request = pb::Text2SqlRequest {
            db_id: args.db_id,
            question: args.question,
            evidence: args.evidence,
            options: None,
        };
        Ok(reply(calls.ask(request).await.map(|a| json::answer(&a))))
    }

    #[tool(
        description = "Runs one read-only SQL query on a database and returns its rows (the first rows, and how many there are). Anything that writes, attaches or runs too long is refused."
    )]
    async fn run_query(
        &self,
        Parameters(args): Parameters<QueryArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let calls = self.calls(&ctx)?;
        let ran = calls.query(&args.db_id, &args.sql).await;
        Ok(reply(ran.map(|r| json::result(r.result.as_ref()))))
    }

    #[tool(
        description = "Says in words what a SQL query asks of a database, and whether that matches a question when one is given."
    )]
    async fn explain_query(
        &self,
        Parameters(args): Parameters<ExplainArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let calls = self.calls(&ctx)?;
        let request = pb::ExplainRequest {
            sql: args.sql,
            db_id: args.db_id,
            question: args.question,
            ..Default::default()
        };
        let explained = calls.explain(request).await.map(|e| {
            json!({
                "explanation": e.explanation,
                "consistent_with_question": e.consistency.as_ref().map(|c| c.consistent),
            })
        });
        Ok(reply(explained))
    }
}

#[tool_handler]
impl ServerHandler for QuorumMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("quorum", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Quorum answers questions about databases with SQL. Call list_databases, then \
                 describe_database for the schema and notes, then ask with a question (or \
                 run_query with SQL of your own). Everything runs read-only.",
            )
    }
}
