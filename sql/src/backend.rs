//! Where a database's rows live. The pipeline opens one session per run and executes every
//! candidate through it; the session's guards (read-only, time, row and byte caps) are the
//! backend's business. SQLite files are built in here; a PostgreSQL server is the
//! `quorum-postgres` crate's, behind the same two traits, so this crate stays free of a
//! network client and an async runtime.

use std::fmt::Debug;
use std::path::PathBuf;

use crate::dialect::Dialect;
use crate::sandbox::{ExecError, Limits, QueryResult, Sandbox};

/// A database that candidates can be executed on.
pub trait Backend: Send + Sync + Debug {
    fn dialect(&self) -> Dialect;
    /// A session with every guard in place, holding whatever connection it needs until dropped.
    fn open_session(&self, limits: Limits) -> Result<Box<dyn Session>, ExecError>;
    /// Where the data is, for logs and `Describe`: never a credential.
    fn location(&self) -> String;
}

/// One connection's worth of guarded execution.
pub trait Session: Send {
    /// Runs one read-only statement; nothing it does outlives the call.
    fn execute(&mut self, sql: &str) -> Result<QueryResult, ExecError>;
}

/// A SQLite file, opened read-only per session (a SQLite connection is not shareable between
/// threads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteFile {
    pub path: PathBuf,
}

impl Backend for SqliteFile {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn open_session(&self, limits: Limits) -> Result<Box<dyn Session>, ExecError> {
        Ok(Box::new(Sandbox::open(&self.path, limits)?))
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }
}

impl Session for Sandbox {
    fn execute(&mut self, sql: &str) -> Result<QueryResult, ExecError> {
        Sandbox::execute(self, sql)
    }
}
