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

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};

/// One cell of a result, in SQLite's five storage classes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    /// Bytes this value counts against [`Limits::max_bytes`]: payload size, with numbers at
    /// their in-memory width. Row overhead is ignored; the cap guards memory, not accounting.
    pub fn size_bytes(&self) -> usize {
        match self {
            Value::Null => 0,
            Value::Integer(_) | Value::Real(_) => 8,
            Value::Text(s) => s.len(),
            Value::Blob(b) => b.len(),
        }
    }

    fn from_sqlite(v: ValueRef<'_>) -> Value {
        match v {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::Integer(i),
            ValueRef::Real(r) => Value::Real(r),
            // SQLite does not validate TEXT encoding; a lossy decode keeps a bad cell from
            // failing the whole query (the comparison then sees replacement characters on both
            // sides, which is the best available).
            ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        }
    }
}

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
        }
    }
}

/// How many SQLite VM instructions pass between deadline checks. At a few ns per instruction
/// this checks every few microseconds: far finer than any useful limit, and `Instant::now` at
/// that rate costs well under 1% of execution time.
const PROGRESS_PERIOD_OPS: i32 = 1000;

/// The smallest SQLite length limit the sandbox sets, whatever the result cap (1 MiB).
const MIN_VALUE_CAP: usize = 1 << 20;

/// Pragmas that only describe the schema. Anything else (`writable_schema`, `journal_mode`,
/// `query_only = 0`, …) could change state or weaken the sandbox, so it is denied.
const READ_ONLY_PRAGMAS: &[&str] = &[
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
];

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
            RunError::Exec(e) => e,
            RunError::Sqlite(e) => classify(e, denied, limits, start),
        })
    }

    fn run(&self, sql: &str, limits: Limits, start: Instant) -> Result<QueryResult, RunError> {
        let mut stmt = self.conn.prepare(sql)?;
        if !stmt.readonly() {
            return Err(RunError::Exec(ExecError::Denied {
                what: "a statement that writes".to_string(),
            }));
        }
        let columns: Vec<String> = stmt.column_names().map(str::to_string).collect();
        let n_cols = columns.len();
        let mut rows = Vec::new();
        let mut bytes = 0usize;
        let mut truncated = false;
        let mut cursor = stmt.query([])?;
        while let Some(row) = cursor.next()? {
            let mut out = Vec::with_capacity(n_cols);
            for i in 0..n_cols {
                let v = Value::from_sqlite(row.get_ref(i)?);
                bytes += v.size_bytes();
                out.push(v);
            }
            if rows.len() >= limits.max_rows || bytes > limits.max_bytes {
                if limits.on_overflow == Overflow::Fail {
                    return Err(RunError::Exec(ExecError::TooLarge {
                        max_rows: limits.max_rows,
                        max_bytes: limits.max_bytes,
                    }));
                }
                truncated = true;
                break;
            }
            rows.push(out);
        }
        Ok(QueryResult {
            columns,
            rows,
            truncated,
            elapsed: start.elapsed(),
        })
    }
}

/// Internal error of one run: either already classified, or a raw SQLite error that needs the
/// authorizer's and the clock's context to classify.
enum RunError {
    Exec(ExecError),
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for RunError {
    fn from(e: rusqlite::Error) -> Self {
        RunError::Sqlite(e)
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

/// The sandbox policy: allow reading, deny everything else. Returns a description of the
/// denied action. A pure function so that the policy can be tested without SQLite.
fn authorize(action: &AuthAction<'_>) -> Result<(), String> {
    match action {
        AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => Ok(()),
        AuthAction::Function { function_name } => {
            if function_name.eq_ignore_ascii_case("load_extension") {
                Err("function load_extension".to_string())
            } else {
                Ok(())
            }
        }
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let name = pragma_name.to_ascii_lowercase();
            if READ_ONLY_PRAGMAS.contains(&name.as_str()) {
                Ok(())
            } else {
                match pragma_value {
                    Some(v) => Err(format!("PRAGMA {name} = {v}")),
                    None => Err(format!("PRAGMA {name}")),
                }
            }
        }
        other => Err(describe(other)),
    }
}

/// A short description of a denied action for the error message.
fn describe(action: &AuthAction<'_>) -> String {
    match action {
        AuthAction::Insert { table_name } => format!("INSERT into {table_name}"),
        AuthAction::Update { table_name, .. } => format!("UPDATE of {table_name}"),
        AuthAction::Delete { table_name } => format!("DELETE from {table_name}"),
        AuthAction::CreateTable { table_name } | AuthAction::CreateTempTable { table_name } => {
            format!("CREATE TABLE {table_name}")
        }
        AuthAction::DropTable { table_name } | AuthAction::DropTempTable { table_name } => {
            format!("DROP TABLE {table_name}")
        }
        AuthAction::AlterTable { table_name, .. } => format!("ALTER TABLE {table_name}"),
        AuthAction::Attach { filename } => format!("ATTACH {filename:?}"),
        AuthAction::Detach { database_name } => format!("DETACH {database_name}"),
        AuthAction::Transaction { operation } => format!("transaction {operation:?}"),
        AuthAction::Savepoint { operation, .. } => format!("savepoint {operation:?}"),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spider_dir() -> PathBuf {
        match std::env::var_os("QUORUM_SPIDER_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/spider"),
        }
    }

    /// A private copy of a Spider database, so that a sandbox failure could never damage the
    /// shared data, and so that the test can check the file afterwards.
    fn copy_db(db: &str, tag: &str) -> PathBuf {
        let src = spider_dir().join(format!("database/{db}/{db}.sqlite"));
        let dir = std::env::temp_dir().join(format!(
            "quorum-sandbox-{}-{tag}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock after 1970")
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        let dst = dir.join(format!("{db}.sqlite"));
        std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("copy {src:?}: {e}"));
        dst
    }

    fn limits(timeout_ms: u64) -> Limits {
        Limits {
            timeout: Duration::from_millis(timeout_ms),
            ..Limits::default()
        }
    }

    #[test]
    fn spider_query_returns_expected_rows() {
        let sandbox = Sandbox::open(&copy_db("concert_singer", "rows"), Limits::default())
            .expect("open concert_singer");
        let r = sandbox
            .execute("SELECT count(*) FROM singer")
            .expect("count runs");
        assert_eq!(r.columns, vec!["count(*)".to_string()]);
        assert_eq!(r.rows, vec![vec![Value::Integer(6)]]);
        assert!(!r.truncated);
        let r = sandbox
            .execute("SELECT name, age FROM singer WHERE age > 40 ORDER BY age;")
            .expect("select runs");
        assert_eq!(
            r.rows,
            vec![
                vec![Value::Text("Rose White".into()), Value::Integer(41)],
                vec![Value::Text("John Nizinik".into()), Value::Integer(43)],
                vec![Value::Text("Joe Sharp".into()), Value::Integer(52)],
            ]
        );
    }

    #[test]
    fn writes_attach_pragmas_and_tricks_are_refused_and_file_unchanged() {
        let path = copy_db("concert_singer", "attacks");
        let before = std::fs::read(&path).expect("read db");
        let sandbox = Sandbox::open(&path, limits(2000)).expect("open");
        let attacks = [
            "INSERT INTO singer (Singer_ID, Name) VALUES (99, 'x')",
            "UPDATE singer SET Age = 0",
            "DELETE FROM singer",
            "DROP TABLE singer",
            "CREATE TABLE x (a int)",
            "CREATE TEMP TABLE x (a int)",
            "ALTER TABLE singer ADD COLUMN z int",
            "ATTACH DATABASE '/tmp/quorum-attack.sqlite' AS other",
            "DETACH DATABASE main",
            "PRAGMA writable_schema=1",
            "PRAGMA journal_mode=DELETE",
            "PRAGMA query_only=0",
            "SELECT 1; DROP TABLE singer",
            "SELECT 1; SELECT 2",
            "BEGIN IMMEDIATE",
            "SAVEPOINT s",
            "SELECT load_extension('/tmp/evil')",
            "VACUUM",
            "VACUUM INTO '/tmp/quorum-vacuum-copy.sqlite'",
            "REINDEX",
            "ANALYZE",
            "CREATE VIEW v AS SELECT 1",
        ];
        for sql in attacks {
            let err = sandbox
                .execute(sql)
                .expect_err(&format!("must refuse {sql:?}"));
            assert!(
                matches!(
                    err,
                    ExecError::Denied { .. } | ExecError::MultipleStatements
                ),
                "{sql:?} refused for the wrong reason: {err:?}"
            );
        }
        assert!(!Path::new("/tmp/quorum-vacuum-copy.sqlite").exists());
        // The sandbox still works after the attempts.
        let r = sandbox
            .execute("SELECT count(*) FROM singer")
            .expect("runs");
        assert_eq!(r.rows, vec![vec![Value::Integer(6)]]);
        drop(sandbox);
        assert!(
            std::fs::read(&path).expect("reread db") == before,
            "db file changed"
        );
    }

    #[test]
    fn denial_names_the_action() {
        let sandbox =
            Sandbox::open(&copy_db("concert_singer", "deny"), limits(2000)).expect("open");
        let err = sandbox.execute("DELETE FROM singer").expect_err("denied");
        assert_eq!(err.kind(), "denied");
        assert!(err.to_string().contains("DELETE from singer"), "{err}");
        let err = sandbox
            .execute("PRAGMA writable_schema=1")
            .expect_err("denied");
        assert!(err.to_string().contains("writable_schema"), "{err}");
    }

    #[test]
    fn read_only_pragma_and_recursive_cte_are_allowed() {
        let sandbox =
            Sandbox::open(&copy_db("concert_singer", "pragma"), limits(2000)).expect("open");
        let r = sandbox
            .execute("PRAGMA table_info(singer)")
            .expect("table_info");
        assert_eq!(r.rows.len(), 7);
        let r = sandbox
            .execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT sum(x) FROM c")
            .expect("finite recursion");
        assert_eq!(r.rows, vec![vec![Value::Integer(15)]]);
    }

    #[test]
    fn runaway_query_is_interrupted_within_the_limit() {
        let limit = Duration::from_millis(300);
        let sandbox =
            Sandbox::open(&copy_db("concert_singer", "timeout"), limits(300)).expect("open");
        let start = Instant::now();
        let err = sandbox
            .execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
            .expect_err("never finishes");
        let elapsed = start.elapsed();
        assert_eq!(err, ExecError::Timeout { limit });
        assert!(elapsed >= limit, "stopped early: {elapsed:?}");
        assert!(
            elapsed < limit + Duration::from_millis(500),
            "not interrupted: {elapsed:?}"
        );
        // The connection is usable again: the deadline was cleared.
        sandbox
            .execute("SELECT count(*) FROM singer")
            .expect("runs after a timeout");
    }

    #[test]
    fn row_and_byte_caps_truncate_or_fail() {
        let path = copy_db("concert_singer", "caps");
        let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x, 'abcdefghij' FROM c";
        let capped = Limits {
            max_rows: 50,
            ..limits(5000)
        };
        let sandbox = Sandbox::open(&path, capped).expect("open");
        let r = sandbox.execute(endless).expect("truncates");
        assert_eq!(r.rows.len(), 50);
        assert!(r.truncated);
        assert_eq!(
            r.rows[49],
            vec![Value::Integer(50), Value::Text("abcdefghij".into())]
        );

        // Each row is 8 + 10 bytes: 100 bytes hold 5 rows, the 6th overflows.
        let by_bytes = Limits {
            max_bytes: 100,
            ..capped
        };
        let r = sandbox.execute_with(endless, by_bytes).expect("truncates");
        assert_eq!(r.rows.len(), 5);
        assert!(r.truncated);

        let failing = Limits {
            on_overflow: Overflow::Fail,
            ..capped
        };
        let err = sandbox
            .execute_with(endless, failing)
            .expect_err("too large");
        assert_eq!(err.kind(), "too_large");
        let r = sandbox
            .execute_with("SELECT name FROM singer", failing)
            .expect("fits");
        assert_eq!(r.rows.len(), 6);
        assert!(!r.truncated);
    }

    #[test]
    fn oversized_values_are_stopped_by_sqlite() {
        let sandbox =
            Sandbox::open(&copy_db("concert_singer", "toobig"), limits(5000)).expect("open");
        let small = Limits {
            max_bytes: 2 << 20,
            ..limits(5000)
        };
        let err = sandbox
            .execute_with("SELECT length(randomblob(50000000))", small)
            .expect_err("value over the length limit");
        assert_eq!(err.kind(), "too_large");
        let r = sandbox
            .execute_with("SELECT length(randomblob(1000000))", small)
            .expect("under the limit");
        assert_eq!(r.rows, vec![vec![Value::Integer(1_000_000)]]);
    }

    #[test]
    fn errors_are_classified() {
        let sandbox =
            Sandbox::open(&copy_db("concert_singer", "errors"), limits(2000)).expect("open");
        assert_eq!(
            sandbox.execute("  ; ").expect_err("empty"),
            ExecError::Empty
        );
        assert_eq!(
            sandbox.execute("SELEC 1").expect_err("typo").kind(),
            "syntax"
        );
        assert_eq!(
            sandbox
                .execute("SELECT nope FROM singer")
                .expect_err("no column")
                .kind(),
            "syntax"
        );
        let missing = Sandbox::open(Path::new("/nonexistent/x.sqlite"), Limits::default());
        assert_eq!(missing.expect_err("missing").kind(), "open");
    }

    #[test]
    fn values_keep_their_storage_class() {
        let sandbox =
            Sandbox::open(&copy_db("concert_singer", "values"), limits(2000)).expect("open");
        let r = sandbox
            .execute("SELECT NULL, 1, 1.5, 'é', x'00ff'")
            .expect("literals");
        assert_eq!(
            r.rows,
            vec![vec![
                Value::Null,
                Value::Integer(1),
                Value::Real(1.5),
                Value::Text("é".into()),
                Value::Blob(vec![0, 255]),
            ]]
        );
    }
}
