//! `grpc.health.v1`: readiness per service and for the server as a whole (the empty name),
//! NOT_SERVING until every model is loaded and warmed and again while draining. Liveness is a
//! separate entry, `liveness`, SERVING for as long as the process answers: a busy or loading
//! server must not fail liveness, or orchestrators restart it in a loop. `quorum.v1.Text2Sql`
//! is also NOT_SERVING while the server has no database to answer over (its other services,
//! and the server as a whole, still serve). A server open to the network without a token on
//! purpose (`allow_unauthenticated`) says so in the entry `unauthenticated`, SERVING while it
//! is open (unknown otherwise), so that a health check can alert on it.

use quorum_proto::v1::{databases_server, inference_server, text2_sql_server};
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// The health entry that reports liveness only.
pub const LIVENESS: &str = "liveness";
/// The health entry present only while the server serves beyond loopback without a token.
pub const UNAUTHENTICATED: &str = "unauthenticated";

/// Entries that follow readiness alone: the whole server and the services that need no
/// database.
fn readiness_names() -> [&'static str; 3] {
    [
        "",
        inference_server::SERVICE_NAME,
        databases_server::SERVICE_NAME,
    ]
}

fn status(serving: bool) -> ServingStatus {
    if serving {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}

/// Publishes readiness (every entry follows `ready`, and Text2Sql also needs a database) and
/// liveness, which is SERVING whenever the process can say so.
pub async fn publish(reporter: &HealthReporter, ready: bool, has_databases: bool, open: bool) {
    reporter
        .set_service_status(LIVENESS, ServingStatus::Serving)
        .await;
    if open {
        reporter
            .set_service_status(UNAUTHENTICATED, ServingStatus::Serving)
            .await;
    }
    for name in readiness_names() {
        reporter.set_service_status(name, status(ready)).await;
    }
    reporter
        .set_service_status(
            text2_sql_server::SERVICE_NAME,
            status(ready && has_databases),
        )
        .await;
}
