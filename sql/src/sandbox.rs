//! Execution sandbox for model-generated SQL on SQLite.
//!
//! Generated SQL is untrusted input: it must never write, reach other files, load code, or run
//! without bound. Several independent layers enforce that, because any single one has gaps:
//! the connection is opened read-only; an authorizer denies every action but reading; the
//! prepared statement must report itself read-only (this catches `VACUUM INTO`, which writes a new
//! file even from a read-only connection); only one statement is accepted; attaching is limited
//! to zero databases; a progress handler interrupts SQLite at a deadline so that a runaway query
//! really stops instead of merely being abandoned; and the result is capped in rows and bytes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};

use authorizer::authorize;

mod authorizer;

use crate::value::Value;

/// The rows of one successful execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    /// True when a row or byte cap cut the result short (only with [`Overflow::Truncate`]).
    /// A truncated result is a prefix of the real one, so comparing it is only indicative.
    pub truncated: bool,
    pub elapsed: Duration,
}

/// A result's rows gathered under the row and byte caps of [`Limits`], as a backend reads them.
#[derive(Debug)]
pub struct CappedRows {
    limits: Limits,
    rows: Vec<Vec<Value>>,
    bytes: usize,
    truncated: bool,
}

impl CappedRows {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            rows: Vec::new(),
            bytes: 0,
            truncated: false,
        }
    }

    /// Keeps `row` unless it passes a cap; then, under [`Overflow::Fail`], the error, and under
    /// [`Overflow::Truncate`], `Ok(false)`: read no further, the result is cut short.
    pub fn push(&mut self, row: Vec<Value>) -> Result<bool, ExecError> {
        self.bytes += row.iter().map(Value::size_bytes).sum::<usize>();
        if self.rows.len() >= self.limits.max_rows || self.bytes > self.limits.max_bytes {
            if self.limits.on_overflow == Overflow::Fail {
                return Err(ExecError::TooLarge {
                    max_rows: self.limits.max_rows,
                    max_bytes: self.limits.max_bytes,
                });
            }
            self.truncated = true;
            return Ok(false);
        }
        self.rows.push(row);
        Ok(true)
    }

    /// The result, timed from `start`.
    pub fn into_result(self, columns: Vec<String>, start: Instant) -> QueryResult {
        QueryResult {
            columns,
            rows: self.rows,
            truncated: self.truncated,
            elapsed: start.elapsed(),
        }
    }
}

/// What to do when a result exceeds a cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Overflow {
    /// Keep the rows read so far and set [`QueryResult::truncated`].
    Truncate,
    /// Fail with [`ExecError::TooLarge`]: for comparisons, where a prefix would be misleading.
    Fail,
}

/// Resource caps for one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub timeout: Duration,
    pub max_rows: usize,
    pub max_bytes: usize,
    pub on_overflow: Overflow,
}

impl Default for Limits {
    /// 30 s is BIRD's evaluation timeout. 100k rows and 64 MiB hold every Spider and BIRD gold
    /// result with room to spare while keeping one bad candidate from exhausting memory.
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            max_rows: 100_000,
            max_bytes: 64 << 20,
            on_overflow: Overflow::Truncate,
        }
    }
}

/// Why an execution produced no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExecError {
    #[error("cannot open database {path:?}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("empty SQL")]
    Empty,
    #[error("more than one statement")]
    MultipleStatements,
    #[error("SQL error: {message}")]
    Syntax { message: String },
    #[error("denied: {what}")]
    Denied { what: String },
    #[error("interrupted after the {limit:?} time limit")]
    Timeout { limit: Duration },
    #[error("result exceeds {max_rows} rows or {max_bytes} bytes")]
    TooLarge { max_rows: usize, max_bytes: usize },
    #[error("SQLite error: {message}")]
    Sqlite { message: String },
    /// An error a database server reported at run time, with its SQLSTATE code.
    #[error("PostgreSQL error {code}: {message}")]
    Postgres { code: String, message: String },
    /// An error a MySQL or MariaDB server reported at run time, with its error number.
    #[error("MySQL error {code}: {message}")]
    MySql { code: u16, message: String },
    /// An error DuckDB reported at run time (its messages carry their class: `Binder Error`).
    #[error("DuckDB error: {message}")]
    DuckDb { message: String },
    /// The database cannot be reached (connection refused, dropped, pool exhausted): no
    /// statement of the run can be judged, so the run fails rather than vote on errors.
    #[error("database unavailable: {message}")]
    Unavailable { message: String },
}

impl ExecError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ExecError::Open { .. } => "open",
            ExecError::Empty => "empty",
            ExecError::MultipleStatements => "multiple_statements",
            ExecError::Syntax { .. } => "syntax",
            ExecError::Denied { .. } => "denied",
            ExecError::Timeout { .. } => "timeout",
            ExecError::TooLarge { .. } => "too_large",
            ExecError::Sqlite { .. } => "sqlite",
            ExecError::Postgres { .. } => "postgres",
            ExecError::MySql { .. } => "mysql",
            ExecError::DuckDb { .. } => "duckdb",
            ExecError::Unavailable { .. } => "unavailable",
        }
    }
}

/// How many SQLite VM instructions pass between deadline checks. At a few ns per instruction
/// this checks every few microseconds: far finer than any useful limit, and `Instant::now` at
/// that rate costs well under 1% of execution time.
const PROGRESS_PERIOD_OPS: i32 = 1000;

/// The smallest SQLite length limit the sandbox sets, whatever the result cap (1 MiB).
const MIN_VALUE_CAP: usize = 1 << 20;

/// State shared between the sandbox and the callbacks it installs in SQLite. Callbacks must be
/// `'static`, so they hold these through an `Arc` rather than borrowing the sandbox.
#[derive(Debug, Default)]
struct Shared {
    /// The instant after which the progress handler interrupts; `None` between executions.
    deadline: Option<Instant>,
    /// The first action the authorizer denied during the current preparation, for the error.
    denied: Option<String>,
}

/// A read-only connection to one SQLite database with the guards installed.
pub struct Sandbox {
    conn: Connection,
    shared: Arc<Mutex<Shared>>,
    limits: Limits,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("path", &self.conn.path())
            .field("limits", &self.limits)
            .finish()
    }
}

/// Locks the shared state. A poisoned lock only means a callback panicked mid-update; the state
/// is two plain options that are always valid, so carrying on is sound.
fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Sandbox {
    /// Opens `path` read-only (it must exist) and installs every guard.
    pub fn open(path: &Path, limits: Limits) -> Result<Sandbox, ExecError> {
        let open_err = |e: rusqlite::Error| ExecError::Open {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
        let shared = Arc::new(Mutex::new(Shared::default()));
        Self::install_guards(&mut conn, &shared).map_err(open_err)?;
        Ok(Sandbox {
            conn,
            shared,
            limits,
        })
    }

    fn install_guards(conn: &mut Connection, shared: &Arc<Mutex<Shared>>) -> rusqlite::Result<()> {
        // Defensive mode blocks the remaining ways to corrupt a database through SQL (e.g.
        // writable_schema tricks) should anything slip past the authorizer.
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
        conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
        // Extension loading is off unless enabled through the C API, which rusqlite only does
        // with its `load_extension` feature (not enabled); the authorizer also denies the SQL
        // function, so neither path can load code.
        let auth_shared = Arc::clone(shared);
        conn.authorizer(Some(move |ctx: AuthContext<'_>| {
            match authorize(&ctx.action) {
                Ok(()) => Authorization::Allow,
                Err(what) => {
                    lock(&auth_shared).denied.get_or_insert(what);
                    Authorization::Deny
                }
            }
        }))?;
        let progress_shared = Arc::clone(shared);
        conn.progress_handler(
            PROGRESS_PERIOD_OPS,
            Some(move || {
                lock(&progress_shared)
                    .deadline
                    .is_some_and(|d| Instant::now() >= d)
            }),
        )?;
        Ok(())
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Runs one read-only statement under the sandbox's limits.
    pub fn execute(&self, sql: &str) -> Result<QueryResult, ExecError> {
        self.execute_with(sql, self.limits)
    }

    /// Runs one read-only statement under the given limits.
    pub fn execute_with(&self, sql: &str, limits: Limits) -> Result<QueryResult, ExecError> {
        if sql.trim().trim_end_matches(';').trim().is_empty() {
            return Err(ExecError::Empty);
        }
        // SQLite's own cap on one string, blob or row keeps a single expression such as
        // `randomblob(1e9)` from allocating far beyond the result cap before any row is seen.
        // The floor keeps tiny result caps from rejecting ordinary values outright.
        let value_cap = limits.max_bytes.clamp(MIN_VALUE_CAP, i32::MAX as usize);
        self.conn
            .set_limit(Limit::SQLITE_LIMIT_LENGTH, value_cap as i32)
            .map_err(|e| ExecError::Sqlite {
                message: e.to_string(),
            })?;
        let start = Instant::now();
        {
            let mut shared = lock(&self.shared);
            shared.deadline = Some(start + limits.timeout);
            shared.denied = None;
        }
        let outcome = self.run(sql, limits, start);
        let denied = {
            let mut shared = lock(&self.shared);
            shared.deadline = None;
            shared.denied.take()
        };
        outcome.map_err(|e| match e {
            StatementError::Exec(e) => e,
            StatementError::Sqlite(e) => classify(e, denied, limits, start),
        })
    }

    fn run(
        &self,
        sql: &str,
        limits: Limits,
        start: Instant,
    ) -> Result<QueryResult, StatementError> {
        let mut stmt = self.conn.prepare(sql)?;
        if !stmt.readonly() {
            return Err(StatementError::Exec(ExecError::Denied {
                what: "a statement that writes".to_string(),
            }));
        }
        let columns: Vec<String> = stmt.column_names().map(str::to_string).collect();
        let n_cols = columns.len();
        let mut rows = CappedRows::new(limits);
        let mut cursor = stmt.query([])?;
        while let Some(row) = cursor.next()? {
            let mut out = Vec::with_capacity(n_cols);
            for i in 0..n_cols {
                out.push(Value::from_sqlite(row.get_ref(i)?));
            }
            if !rows.push(out).map_err(StatementError::Exec)? {
                break;
            }
        }
        Ok(rows.into_result(columns, start))
    }
}

/// Internal error of one statement: either already classified, or a raw SQLite error that needs the
/// authorizer's and the clock's context to classify.
enum StatementError {
    Exec(ExecError),
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for StatementError {
    fn from(e: rusqlite::Error) -> Self {
        StatementError::Sqlite(e)
    }
}

fn classify(
    e: rusqlite::Error,
    denied: Option<String>,
    limits: Limits,
    start: Instant,
) -> ExecError {
    let limit = limits.timeout;
    // A denial surfaces as a generic "not authorized" error (or, for a denied second
    // statement, as whatever the tail check reports): the authorizer's record is the truth.
    if let Some(what) = denied {
        return ExecError::Denied { what };
    }
    match e {
        rusqlite::Error::MultipleStatement => ExecError::MultipleStatements,
        rusqlite::Error::SqlInputError { msg, .. } => ExecError::Syntax { message: msg },
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::OperationInterrupted && start.elapsed() >= limit =>
        {
            ExecError::Timeout { limit }
        }
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::TooBig => {
            ExecError::TooLarge {
                max_rows: limits.max_rows,
                max_bytes: limits.max_bytes,
            }
        }
        rusqlite::Error::SqliteFailure(f, Some(msg)) if f.code == rusqlite::ErrorCode::Unknown => {
            // SQLITE_ERROR at prepare time is how SQLite reports syntax and name errors.
            ExecError::Syntax { message: msg }
        }
        other => ExecError::Sqlite {
            message: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests;
