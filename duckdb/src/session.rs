//! One guarded execution on DuckDB. Per statement:
//!
//! 1. the scan and parse of [`crate::guard`];
//! 2. a watchdog that interrupts the connection when the time limit passes (DuckDB has no
//!    statement timeout of its own);
//! 3. the statement prepared (one statement only) and run on the read-only, locked database,
//!    its rows read until the row or byte cap.

use std::sync::mpsc;
use std::time::Instant;

use duckdb::Connection;
use quorum_sql::backend::Session;
use quorum_sql::sandbox::{CappedRows, ExecError, Limits, QueryResult};
use quorum_sql::value::Value;

use crate::error::exec_error;
use crate::guard::check_query;
use crate::values::value;

pub(crate) struct DuckDbSession {
    conn: Connection,
    limits: Limits,
}

impl DuckDbSession {
    pub(crate) fn new(conn: Connection, limits: Limits) -> Self {
        Self { conn, limits }
    }
}

impl Session for DuckDbSession {
    fn execute(&mut self, sql: &str) -> Result<QueryResult, ExecError> {
        let sql = sql.trim().trim_end_matches(';').trim();
        if sql.is_empty() {
            return Err(ExecError::Empty);
        }
        check_query(sql)?;
        let limits = self.limits;
        let start = Instant::now();
        let interrupt = self.conn.interrupt_handle();
        let (finished, finished_rx) = mpsc::channel::<()>();
        let watchdog = std::thread::Builder::new()
            .name("duckdb-watchdog".into())
            .spawn(move || {
                let expired = matches!(
                    finished_rx.recv_timeout(limits.timeout),
                    Err(mpsc::RecvTimeoutError::Timeout)
                );
                if expired {
                    interrupt.interrupt();
                }
                expired
            })
            .map_err(|e| ExecError::Unavailable {
                message: format!("cannot start the time limit's watchdog: {e}"),
            })?;
        let outcome = run(&self.conn, sql, limits, start);
        // Either wakes the watchdog or finds it already gone.
        let _ = finished.send(());
        let interrupted = watchdog.join().unwrap_or(false);
        outcome.map_err(|e| match e {
            Failure::DuckDb(e) => exec_error(&e, limits.timeout, interrupted),
            Failure::Limit(e) => e,
        })
    }
}

enum Failure {
    DuckDb(duckdb::Error),
    Limit(ExecError),
}

fn run(
    conn: &Connection,
    sql: &str,
    limits: Limits,
    start: Instant,
) -> Result<QueryResult, Failure> {
    let mut statement = conn.prepare(sql).map_err(Failure::DuckDb)?;
    let mut result = statement.query([]).map_err(Failure::DuckDb)?;
    let columns: Vec<String> = result
        .as_ref()
        .map(|s| s.column_names())
        .unwrap_or_default();
    let width = columns.len();
    let mut rows = CappedRows::new(limits);
    while let Some(row) = result.next().map_err(Failure::DuckDb)? {
        if start.elapsed() >= limits.timeout {
            return Err(Failure::Limit(ExecError::Timeout {
                limit: limits.timeout,
            }));
        }
        let cells: Vec<Value> = (0..width)
            .map(|i| row.get_ref(i).map(value))
            .collect::<Result<_, _>>()
            .map_err(Failure::DuckDb)?;
        if !rows.push(cells).map_err(Failure::Limit)? {
            break;
        }
    }
    Ok(rows.into_result(columns, start))
}
