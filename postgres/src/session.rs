//! One guarded execution on PostgreSQL. Per statement:
//!
//! 1. the function scan of [`crate::guard`];
//! 2. `BEGIN READ ONLY` at REPEATABLE READ, with `statement_timeout`, `lock_timeout` and
//!    `idle_in_transaction_session_timeout` set for this transaction only, `search_path` pinned
//!    to the database's schema, ISO dates;
//! 3. the statement prepared (the extended protocol refuses more than one statement) for its
//!    column names and types, and its verbose plan checked to read only the database's schema
//!    ([`crate::schema_fence`]);
//! 4. a `NO SCROLL` cursor declared over it (PostgreSQL only declares cursors for queries, so
//!    `COPY`, DDL and `SELECT INTO` fail here), read in batches until the row or byte cap, with
//!    the deadline checked between batches;
//! 5. `ROLLBACK`, whatever happened.

use std::time::Instant;

use postgres::SimpleQueryMessage;
use postgres::types::Type;
use quorum_sql::backend::Session;
use quorum_sql::sandbox::{CappedRows, ExecError, Limits, QueryResult};
use quorum_sql::value::Value;
use r2d2::PooledConnection;
use r2d2_postgres::PostgresConnectionManager;

use crate::error::exec_error;
use crate::guard::check_functions;
use crate::schema_fence::{check_plan, explain_statement};
use crate::values::value;

type Connection =
    PooledConnection<PostgresConnectionManager<tokio_postgres_rustls::MakeRustlsConnect>>;

/// Rows per `FETCH`: small enough that a cap stops the transfer soon after it is reached.
const FETCH_ROWS: usize = 256;

pub(crate) struct PgSession {
    conn: Connection,
    schema: String,
    limits: Limits,
}

impl PgSession {
    pub(crate) fn new(conn: Connection, schema: String, limits: Limits) -> Self {
        Self {
            conn,
            schema,
            limits,
        }
    }
}

impl Session for PgSession {
    fn execute(&mut self, sql: &str) -> Result<QueryResult, ExecError> {
        let sql = sql.trim().trim_end_matches(';').trim();
        if sql.is_empty() {
            return Err(ExecError::Empty);
        }
        check_functions(sql)?;
        let limits = self.limits;
        let start = Instant::now();
        let mut tx = self
            .conn
            .build_transaction()
            .read_only(true)
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .start()
            .map_err(|e| exec_error(&e, limits.timeout))?;
        let outcome = run(&mut tx, &self.schema, sql, limits, start);
        // Dropping the transaction would roll back too, but silently; a failed rollback means
        // the connection is gone, which the pool's check-out test finds.
        if let Err(e) = tx.rollback() {
            tracing::debug!(error = %e, "rollback failed");
        }
        outcome
    }
}

fn run(
    tx: &mut postgres::Transaction<'_>,
    schema: &str,
    sql: &str,
    limits: Limits,
    start: Instant,
) -> Result<QueryResult, ExecError> {
    let err = |e: postgres::Error| exec_error(&e, limits.timeout);
    let timeout_ms = limits.timeout.as_millis().clamp(1, i32::MAX as u128);
    tx.batch_execute(&format!(
        "SET LOCAL statement_timeout = {timeout_ms}; \
         SET LOCAL lock_timeout = {timeout_ms}; \
         SET LOCAL idle_in_transaction_session_timeout = {idle}; \
         SET LOCAL DateStyle = 'ISO, YMD'; \
         SET LOCAL IntervalStyle = 'postgres'; \
         SET LOCAL extra_float_digits = 1",
        idle = timeout_ms.saturating_mul(2).min(i32::MAX as u128),
    ))
    .map_err(err)?;
    // `pg_catalog` stays first implicitly; nothing else but the database's schema is searched.
    tx.execute(
        "SELECT pg_catalog.set_config('search_path', pg_catalog.quote_ident($1), true)",
        &[&schema],
    )
    .map_err(err)?;
    let statement = tx.prepare(sql).map_err(err)?;
    // The simple protocol answers in text, which is all the plan's JSON needs.
    let plan: String = tx
        .simple_query(&explain_statement(sql))
        .map_err(err)?
        .into_iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .unwrap_or_default();
    check_plan(&plan, schema)?;
    let columns: Vec<String> = statement
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    let types: Vec<Type> = statement
        .columns()
        .iter()
        .map(|c| c.type_().clone())
        .collect();
    tx.execute(
        &format!("DECLARE quorum_rows NO SCROLL CURSOR FOR {sql}"),
        &[],
    )
    .map_err(err)?;
    let mut rows = CappedRows::new(limits);
    'fetch: loop {
        if start.elapsed() >= limits.timeout {
            return Err(ExecError::Timeout {
                limit: limits.timeout,
            });
        }
        let batch = tx
            .simple_query(&format!("FETCH FORWARD {FETCH_ROWS} FROM quorum_rows"))
            .map_err(err)?;
        let mut fetched = 0;
        for message in batch {
            let SimpleQueryMessage::Row(row) = message else {
                continue;
            };
            fetched += 1;
            let cells: Vec<Value> = types
                .iter()
                .enumerate()
                .map(|(i, ty)| value(ty, row.get(i)))
                .collect();
            if !rows.push(cells)? {
                break 'fetch;
            }
        }
        if fetched < FETCH_ROWS {
            break;
        }
    }
    Ok(rows.into_result(columns, start))
}
