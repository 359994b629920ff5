//! Databases' prompt beginnings computed before their first question ([`Pipeline::warm`]):
//! at start-up those configured or registered (not every file a scanned directory holds: a
//! folder of a hundred benchmark databases would keep two cores busy for half an hour), and
//! each one a client registers, on a blocking thread so that nobody waits for it. A question
//! that arrives meanwhile shares the prefill in the engine. `limits.pinned_prefix_share = 0`
//! turns it off.
//!
//! [`Pipeline::warm`]: quorum_sql::pipeline::Pipeline::warm

use std::sync::Arc;
use std::time::Instant;

use quorum_sql::database::DatabaseHandle;
use quorum_sql::pipeline::WarmReport;

use crate::databases::Origin;
use crate::pipeline_models::CallScope;
use crate::state::AppState;

/// The databases start-up warms: those a team named, in configuration or by registering.
pub fn named_databases(state: &AppState) -> Vec<Arc<DatabaseHandle>> {
    state
        .databases
        .list()
        .into_iter()
        .filter(|db| db.origin != Origin::Scan)
        .map(|db| db.handle)
        .collect()
}

/// Warms `databases` one after the other on this (blocking) thread, each under the request
/// timeout; nothing when warming is off, or when the models are not loaded yet (logged).
pub fn warm(
    state: &AppState,
    runtime: &tokio::runtime::Handle,
    databases: &[Arc<DatabaseHandle>],
) -> Vec<(String, Result<WarmReport, String>)> {
    if state.limits.pinned_prefix_share <= 0.0 {
        return Vec::new();
    }
    let (Ok(pipelines), Some(models)) = (state.pipeline_runtime(), state.loaded_models()) else {
        // A database registered while the models load is not warmed; say so rather than
        // leave its first question's wait unexplained.
        for db in databases {
            tracing::info!(
                db_id = %db.db_id,
                "schema prompts not warmed: the models are still loading; the first question computes them"
            );
        }
        return Vec::new();
    };
    let cancel = state.cancel_all.child_token();
    let mut reports = Vec::with_capacity(databases.len());
    for db in databases {
        if cancel.is_cancelled() {
            break;
        }
        let scope = CallScope {
            runtime: runtime.clone(),
            cancel: cancel.clone(),
            deadline: Instant::now() + state.limits.request_timeout,
        };
        let warmed = pipelines
            .pipeline(pipelines.base.clone(), models, scope)
            .map_err(|e| e.to_string())
            .and_then(|pipeline| pipeline.warm(db).map_err(|e| e.to_string()));
        reports.push((db.db_id.clone(), warmed));
    }
    reports
}

/// [`warm`] on a blocking thread, each result logged.
pub fn warm_in_background(state: &Arc<AppState>, databases: Vec<Arc<DatabaseHandle>>) {
    if state.limits.pinned_prefix_share <= 0.0 || databases.is_empty() {
        return;
    }
    let state = state.clone();
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        for (db_id, warmed) in warm(&state, &runtime, &databases) {
            match warmed {
                Ok(report) => tracing::info!(
                    %db_id,
                    prompts = report.prompts,
                    prompt_tokens = report.prompt_tokens,
                    cached_tokens = report.cached_tokens,
                    ms = report.elapsed_ms as u64,
                    skipped = report.skipped.unwrap_or(""),
                    "schema prompts warmed"
                ),
                Err(error) => tracing::warn!(
                    %db_id,
                    %error,
                    "schema prompts not warmed: the first question computes them"
                ),
            }
        }
    });
}
