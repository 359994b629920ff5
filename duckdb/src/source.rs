//! Files as a database: what was registered, the private read-only copy made of it, and the
//! sessions that read it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use duckdb::{AccessMode, Config, Connection};
use quorum_sql::backend::{Backend, Session};
use quorum_sql::dialect::Dialect;
use quorum_sql::sandbox::{ExecError, Limits};

use crate::error::DuckDbError;
use crate::session::DuckDbSession;

/// The kinds of file a database can be made of, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `.csv` or `.tsv`: DuckDB's reader detects the delimiter, header and column types.
    Csv,
    /// `.parquet`: typed columns as written.
    Parquet,
    /// `.duckdb`: a DuckDB database, its tables as they are.
    DuckDb,
}

impl FileKind {
    /// The kind `path`'s extension names, if any.
    pub fn of(path: &Path) -> Option<Self> {
        let extension = path.extension()?.to_str()?.to_ascii_lowercase();
        match extension.as_str() {
            "csv" | "tsv" => Some(Self::Csv),
            "parquet" => Some(Self::Parquet),
            "duckdb" => Some(Self::DuckDb),
            _ => None,
        }
    }
}

/// What was registered: a CSV, Parquet or DuckDB file, or a folder of CSV and Parquet files
/// (one table each, named by the file's name less its extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuckDbSource {
    pub path: PathBuf,
    /// DuckDB's memory limit for this database, in MiB: a query that needs more fails rather
    /// than take the host's memory.
    pub max_memory_mib: u64,
    /// Threads one query may use.
    pub threads: u32,
}

impl DuckDbSource {
    /// `path` with the default limits: 1024 MiB and 2 threads a query.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            max_memory_mib: 1024,
            threads: 2,
        }
    }

    /// The tables a CSV or Parquet source holds: (table name, file, kind), in name order.
    /// Empty for a DuckDB file.
    pub fn table_files(&self) -> Result<Vec<(String, PathBuf, FileKind)>, DuckDbError> {
        let open_error = |message: String| DuckDbError::Open {
            path: self.path.clone(),
            message,
        };
        let metadata = std::fs::metadata(&self.path).map_err(|e| open_error(e.to_string()))?;
        let files: Vec<PathBuf> = if metadata.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&self.path)
                .map_err(|e| open_error(e.to_string()))?
                .filter_map(|entry| Some(entry.ok()?.path()))
                .filter(|p| {
                    p.is_file()
                        && matches!(FileKind::of(p), Some(FileKind::Csv | FileKind::Parquet))
                })
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(open_error(
                    "the folder holds no .csv, .tsv or .parquet file".into(),
                ));
            }
            files
        } else {
            match FileKind::of(&self.path) {
                Some(FileKind::DuckDb) => return Ok(Vec::new()),
                Some(_) => vec![self.path.clone()],
                None => {
                    return Err(open_error(
                        "not a .csv, .tsv, .parquet or .duckdb file, nor a folder of them".into(),
                    ));
                }
            }
        };
        let mut tables: Vec<(String, PathBuf, FileKind)> = Vec::with_capacity(files.len());
        for file in files {
            let kind = FileKind::of(&file).expect("filtered by kind");
            let name = file
                .file_stem()
                .and_then(|s| s.to_str())
                .ok_or_else(|| open_error(format!("{} has no usable name", file.display())))?
                .to_owned();
            if let Some((_, other, _)) = tables
                .iter()
                .find(|(t, _, _)| t.eq_ignore_ascii_case(&name))
            {
                return Err(open_error(format!(
                    "{} and {} would both be table {name}",
                    other.display(),
                    file.display()
                )));
            }
            tables.push((name, file, kind));
        }
        Ok(tables)
    }

    /// The settings every connection to the served database opens with: read-only, no file,
    /// URL or extension reachable, the configuration locked.
    fn locked_config(&self) -> Result<Config, duckdb::Error> {
        Config::default()
            .access_mode(AccessMode::ReadOnly)?
            .enable_external_access(false)?
            .enable_autoload_extension(false)?
            .with("autoinstall_known_extensions", "false")?
            .max_memory(&format!("{}MiB", self.max_memory_mib.max(16)))?
            .threads(i64::from(self.threads.max(1)))?
            .with("lock_configuration", "true")
    }
}

/// Files opened as a database, ready for sessions.
pub struct DuckDbDatabase {
    source: DuckDbSource,
    /// The connection sessions are cloned from (a DuckDB connection is not shared between
    /// threads; its clones share the database).
    root: Mutex<Connection>,
    /// The private copy of CSV and Parquet files, removed when the database is dropped.
    _copy: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for DuckDbDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "duckdb:{}", self.source.path.display())
    }
}

impl DuckDbDatabase {
    /// Opens `source`: a DuckDB file as it is, CSV and Parquet files copied first into a
    /// private DuckDB file under `scratch` (the system's temporary directory when `None`).
    pub fn open(source: DuckDbSource, scratch: Option<&Path>) -> Result<Self, DuckDbError> {
        let open_error = |message: String| DuckDbError::Open {
            path: source.path.clone(),
            message,
        };
        let tables = source.table_files()?;
        let (served, copy) = if tables.is_empty() {
            (source.path.clone(), None)
        } else {
            let mut builder = tempfile::Builder::new();
            builder.prefix("quorum-duckdb-");
            let dir = match scratch {
                Some(dir) => builder.tempdir_in(dir),
                None => builder.tempdir(),
            }
            .map_err(|e| open_error(format!("cannot make a private copy: {e}")))?;
            let file = dir.path().join("copy.duckdb");
            copy_files(&file, &tables)?;
            (file, Some(dir))
        };
        let config = source
            .locked_config()
            .map_err(|e| open_error(e.to_string()))?;
        let root =
            Connection::open_with_flags(&served, config).map_err(|e| open_error(e.to_string()))?;
        Ok(Self {
            source,
            root: Mutex::new(root),
            _copy: copy,
        })
    }

    pub fn source(&self) -> &DuckDbSource {
        &self.source
    }

    /// A new connection to the database (every setting of the root's).
    pub(crate) fn connection(&self) -> Result<Connection, duckdb::Error> {
        self.root
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .try_clone()
    }
}

/// Copies each file into a table of a new DuckDB database at `target`, then closes it.
fn copy_files(target: &Path, tables: &[(String, PathBuf, FileKind)]) -> Result<(), DuckDbError> {
    let conn = Connection::open(target).map_err(|e| DuckDbError::Open {
        path: target.to_owned(),
        message: e.to_string(),
    })?;
    for (name, file, kind) in tables {
        let path = file.to_str().ok_or_else(|| DuckDbError::Load {
            what: file.display().to_string(),
            message: "the path is not UTF-8".into(),
        })?;
        let reader = match kind {
            FileKind::Csv => "read_csv",
            FileKind::Parquet => "read_parquet",
            FileKind::DuckDb => unreachable!("a DuckDB file is served as it is"),
        };
        conn.execute_batch(&format!(
            "CREATE TABLE {} AS SELECT * FROM {reader}({})",
            Dialect::DuckDb.quote(name),
            string_literal(path)
        ))
        .map_err(|e| DuckDbError::Load {
            what: file.display().to_string(),
            message: e.to_string(),
        })?;
    }
    conn.close().map_err(|(_, e)| DuckDbError::Load {
        what: target.display().to_string(),
        message: e.to_string(),
    })
}

/// `text` as a SQL string literal.
pub(crate) fn string_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

impl Backend for DuckDbDatabase {
    fn dialect(&self) -> Dialect {
        Dialect::DuckDb
    }

    fn open_session(&self, limits: Limits) -> Result<Box<dyn Session>, ExecError> {
        let conn = self.connection().map_err(|e| ExecError::Unavailable {
            message: e.to_string(),
        })?;
        Ok(Box::new(DuckDbSession::new(conn, limits)))
    }

    fn location(&self) -> String {
        format!("duckdb:{}", self.source.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The second line on its own: with the guard bypassed, DuckDB itself refuses to write,
    /// to read or write any file, or to unlock its settings.
    #[test]
    fn the_served_database_refuses_writes_files_and_settings_by_itself() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let folder = dir.path().join("shop");
        std::fs::create_dir(&folder).expect("folder");
        std::fs::write(folder.join("orders.csv"), "id,total\n1,9.5\n2,20\n").expect("csv");
        let other = dir.path().join("other.csv");
        std::fs::write(&other, "secret\nhunter2\n").expect("other");
        let db = DuckDbDatabase::open(DuckDbSource::new(&folder), Some(dir.path())).expect("opens");
        let conn = db.connection().expect("connection");
        let total: f64 = conn
            .query_row("SELECT sum(total) FROM orders", [], |r| r.get(0))
            .expect("reads");
        assert_eq!(total, 29.5);
        let out = dir.path().join("out.csv");
        for sql in [
            format!(
                "SELECT * FROM read_csv({})",
                string_literal(&other.display().to_string())
            ),
            format!(
                "SELECT * FROM {}",
                string_literal(&other.display().to_string())
            ),
            format!(
                "COPY orders TO {}",
                string_literal(&out.display().to_string())
            ),
            "SET enable_external_access = true".to_owned(),
            "SET lock_configuration = false".to_owned(),
            "INSERT INTO orders VALUES (3, 1.0)".to_owned(),
            "CREATE TABLE t (a INTEGER)".to_owned(),
            "INSTALL httpfs".to_owned(),
        ] {
            assert!(conn.execute_batch(&sql).is_err(), "{sql} ran");
        }
        assert!(!out.exists());
    }

    #[test]
    fn sources_name_their_tables_by_file() {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::write(dir.path().join("b.csv"), "x\n1\n").expect("csv");
        std::fs::write(dir.path().join("a.tsv"), "y\n2\n").expect("tsv");
        std::fs::write(dir.path().join("notes.txt"), "ignored").expect("txt");
        let tables = DuckDbSource::new(dir.path()).table_files().expect("tables");
        let names: Vec<&str> = tables.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        std::fs::write(dir.path().join("B.parquet"), "").expect("clash");
        let clash = DuckDbSource::new(dir.path())
            .table_files()
            .expect_err("two b's");
        assert!(clash.to_string().contains("would both be table"), "{clash}");
        let empty = tempfile::tempdir().expect("empty");
        assert!(DuckDbSource::new(empty.path()).table_files().is_err());
        assert!(
            DuckDbSource::new(dir.path().join("notes.txt"))
                .table_files()
                .is_err()
        );
    }
}
