//! One guarded execution on MySQL or MariaDB. Per statement:
//!
//! 1. the scan and parse of [`crate::guard`], which also keeps the query to its database;
//! 2. the session's limits set: the statement time limit (`max_statement_time` on MariaDB,
//!    `max_execution_time` on MySQL), lock waits no longer than it, `sql_select_limit` one row
//!    past the row cap, divisions to 30 decimals;
//! 3. `START TRANSACTION READ ONLY`;
//! 4. the statement prepared (the server refuses more than one statement there) and executed,
//!    its rows read as they arrive until the row or byte cap, the deadline checked between rows;
//! 5. `ROLLBACK`, whatever happened.

use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::{AccessMode, IsolationLevel, PooledConn, TxOpts};
use quorum_sql::backend::Session;
use quorum_sql::sandbox::{CappedRows, ExecError, Limits, QueryResult};
use quorum_sql::value::Value;

use crate::error::exec_error;
use crate::guard::check_query;
use crate::values::value;

/// Which server: their statement time limits differ in name and unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    MariaDb,
    MySql,
}

impl Flavor {
    /// The flavor a `VERSION()` string names.
    pub(crate) fn of(version: &str) -> Self {
        if version.to_ascii_lowercase().contains("mariadb") {
            Flavor::MariaDb
        } else {
            Flavor::MySql
        }
    }

    /// The statements that set this session's limits.
    pub(crate) fn limit_statements(self, timeout: Duration, max_rows: usize) -> String {
        let seconds = timeout.as_secs_f64().max(0.001);
        let lock_wait = timeout.as_secs().clamp(1, 31_536_000);
        let statement_limit = match self {
            Flavor::MariaDb => format!("max_statement_time = {seconds:.3}"),
            Flavor::MySql => format!(
                "max_execution_time = {}",
                timeout.as_millis().clamp(1, u128::from(u32::MAX))
            ),
        };
        // Divisions and averages to 30 decimals rather than 4, as near as SQLite's and
        // PostgreSQL's doubles.
        format!(
            "SET SESSION {statement_limit}, lock_wait_timeout = {lock_wait}, \
             innodb_lock_wait_timeout = {lock_wait}, sql_select_limit = {}, \
             div_precision_increment = 30",
            max_rows.saturating_add(1)
        )
    }
}

pub(crate) struct MySqlSession {
    conn: PooledConn,
    flavor: Flavor,
    /// The one database a candidate may read.
    database: String,
    limits: Limits,
}

impl MySqlSession {
    pub(crate) fn new(conn: PooledConn, flavor: Flavor, database: String, limits: Limits) -> Self {
        Self {
            conn,
            flavor,
            database,
            limits,
        }
    }
}

impl Session for MySqlSession {
    fn execute(&mut self, sql: &str) -> Result<QueryResult, ExecError> {
        let sql = sql.trim().trim_end_matches(';').trim();
        if sql.is_empty() {
            return Err(ExecError::Empty);
        }
        check_query(sql, &self.database)?;
        let limits = self.limits;
        let start = Instant::now();
        let err = |e: mysql::Error| exec_error(&e, limits.timeout);
        self.conn
            .query_drop(
                self.flavor
                    .limit_statements(limits.timeout, limits.max_rows),
            )
            .map_err(err)?;
        let options = TxOpts::default()
            .set_access_mode(Some(AccessMode::ReadOnly))
            .set_isolation_level(Some(IsolationLevel::RepeatableRead));
        let mut tx = self.conn.start_transaction(options).map_err(err)?;
        let outcome = run(&mut tx, sql, limits, start);
        // Dropping the transaction would roll back too, but silently.
        if let Err(e) = tx.rollback() {
            tracing::debug!(error = %e, "rollback failed");
        }
        outcome
    }
}

fn run(
    tx: &mut mysql::Transaction<'_>,
    sql: &str,
    limits: Limits,
    start: Instant,
) -> Result<QueryResult, ExecError> {
    let err = |e: mysql::Error| exec_error(&e, limits.timeout);
    let statement = tx.prep(sql).map_err(err)?;
    let mut result = tx.exec_iter(&statement, ()).map_err(err)?;
    let columns_meta = result.columns().as_ref().to_vec();
    let columns: Vec<String> = columns_meta
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let mut rows = CappedRows::new(limits);
    for row in result.by_ref() {
        if start.elapsed() >= limits.timeout {
            return Err(ExecError::Timeout {
                limit: limits.timeout,
            });
        }
        let cells: Vec<Value> = row
            .map_err(err)?
            .unwrap()
            .into_iter()
            .zip(&columns_meta)
            .map(|(cell, column)| value(column, cell))
            .collect();
        if !rows.push(cells)? {
            break;
        }
    }
    Ok(rows.into_result(columns, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flavor_is_given_its_own_time_limit() {
        assert_eq!(Flavor::of("10.11.14-MariaDB-0+deb12u2"), Flavor::MariaDb);
        assert_eq!(Flavor::of("8.4.3"), Flavor::MySql);
        let maria = Flavor::MariaDb.limit_statements(Duration::from_millis(2500), 100);
        assert!(maria.contains("max_statement_time = 2.500"), "{maria}");
        assert!(maria.contains("sql_select_limit = 101"), "{maria}");
        let mysql = Flavor::MySql.limit_statements(Duration::from_secs(30), 10);
        assert!(mysql.contains("max_execution_time = 30000"), "{mysql}");
        assert!(mysql.contains("lock_wait_timeout = 30"), "{mysql}");
    }
}
