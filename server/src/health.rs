//! `grpc.health.v1`: readiness per service and for the server as a whole (the empty name),
//! NOT_SERVING until every model is loaded and warmed and again while draining. Liveness is a
//! separate entry, `liveness`, SERVING for as long as the process answers: a busy or loading
//! server must not fail liveness, or orchestrators restart it in a loop.

use quorum_proto::v1::databases_server::DatabasesServer;
use quorum_proto::v1::inference_server::InferenceServer;
use quorum_proto::v1::text2_sql_server::Text2SqlServer;
use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::services::databases::DatabasesService;
use crate::services::inference::InferenceService;
use crate::services::text2sql::Text2SqlService;

/// The health entry that reports liveness only.
pub const LIVENESS: &str = "liveness";

/// Entries that follow readiness: the whole server and each Quorum service.
fn readiness_names() -> [&'static str; 4] {
    [
        "",
        <InferenceServer<InferenceService> as NamedService>::NAME,
        <Text2SqlServer<Text2SqlService> as NamedService>::NAME,
        <DatabasesServer<DatabasesService> as NamedService>::NAME,
    ]
}

pub async fn set_ready(reporter: &HealthReporter, ready: bool) {
    let status = if ready {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    };
    for name in readiness_names() {
        reporter.set_service_status(name, status).await;
    }
}

pub async fn set_live(reporter: &HealthReporter) {
    reporter
        .set_service_status(LIVENESS, ServingStatus::Serving)
        .await;
}
