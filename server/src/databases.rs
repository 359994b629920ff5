//! The databases the server answers over: each introspected once into a shared handle, plus
//! run-time registration of SQLite files under one allowed directory and of PostgreSQL
//! databases on allowed hosts.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, RwLock};

use anyhow::Context;

use quorum_mysql::{MySqlDatabase, MySqlError, MySqlSource};
use quorum_postgres::{PgDatabase, PgError, PgSource};
use quorum_sql::database::DatabaseHandle;
use quorum_sql::schema::IntrospectOptions;

use crate::config::resolved::{DatabaseLocation, DatabaseSpec, DuckDbFiles, ServerPolicy};
use crate::db_id::validate_db_id;
use crate::notes::NoteBook;
use crate::registration_log::{Registration, RegistrationLog};
use crate::status::ServiceError;

/// How the server came to know a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Config,
    Scan,
    Registered,
}

#[derive(Debug, Clone)]
pub struct Database {
    pub handle: Arc<DatabaseHandle>,
    pub origin: Origin,
}

/// Registrations a server accepts: each holds an introspected schema in memory for the
/// server's lifetime, and there is no way to remove one.
pub const MAX_REGISTERED: usize = 1024;

#[derive(Debug)]
pub struct DatabaseRegistry {
    databases: RwLock<BTreeMap<String, Database>>,
    /// The allowed directory as configured and canonicalized: absolute paths may use either.
    allowed_dir: Option<(PathBuf, PathBuf)>,
    policies: RegistrationPolicies,
    /// The registrations file shared with other replicas, when configured.
    log: Option<RegistrationLog>,
    /// Every database's notes.
    pub notes: NoteBook,
}

/// What `Databases.Register` may reach on each kind of database server.
#[derive(Debug, Clone, Default)]
pub struct RegistrationPolicies {
    pub postgres: ServerPolicy,
    pub mysql: ServerPolicy,
}

/// A MySQL database a client asks to register.
#[derive(Clone)]
pub struct MySqlRegistration {
    pub url: String,
    pub database: String,
    pub password_name: String,
}

/// A PostgreSQL database a client asks to register.
#[derive(Clone)]
pub struct PostgresRegistration {
    pub url: String,
    pub schema: String,
    pub password_name: String,
}

/// Opens and introspects a database wherever it is.
fn open_handle(db_id: &str, location: &DatabaseLocation) -> anyhow::Result<DatabaseHandle> {
    Ok(match location {
        DatabaseLocation::Sqlite(path) => {
            DatabaseHandle::open(path, db_id, IntrospectOptions::default())?
        }
        DatabaseLocation::Postgres(source) => {
            PgDatabase::connect(source.clone())?.into_handle(db_id, IntrospectOptions::default())?
        }
        DatabaseLocation::MySql(source) => MySqlDatabase::connect(source.clone())?
            .into_handle(db_id, IntrospectOptions::default())?,
        DatabaseLocation::DuckDb(files) => open_files(db_id, files)?,
    })
}

/// Opens files through DuckDB (a private read-only copy of CSV and Parquet files).
#[cfg(feature = "duckdb")]
pub fn open_files(db_id: &str, files: &DuckDbFiles) -> anyhow::Result<DatabaseHandle> {
    let mut source = quorum_duckdb::DuckDbSource::new(&files.path);
    if let Some(mib) = files.max_memory_mib {
        source.max_memory_mib = mib;
    }
    if let Some(threads) = files.threads {
        source.threads = threads;
    }
    Ok(quorum_duckdb::DuckDbDatabase::open(source, None)?
        .into_handle(db_id, IntrospectOptions::default())?)
}

/// Without DuckDB in the build, files cannot be opened (the configuration refuses them first).
#[cfg(not(feature = "duckdb"))]
pub fn open_files(db_id: &str, files: &DuckDbFiles) -> anyhow::Result<DatabaseHandle> {
    anyhow::bail!(
        "{db_id}: {} needs DuckDB, which this build of quorum lacks (`--features duckdb`)",
        files.path.display()
    )
}

impl DatabaseRegistry {
    /// Introspects every configured database. One that cannot be read is logged and left out,
    /// so that a single damaged file does not keep the server from starting.
    /// With `registrations_file`, the registrations recorded there are opened too (and later
    /// ones on [`Self::sync`]); the file is created when missing.
    pub fn open(
        specs: &[DatabaseSpec],
        allowed_dir: Option<PathBuf>,
        policies: RegistrationPolicies,
        registrations_file: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let mut databases = BTreeMap::new();
        for spec in specs {
            match open_handle(&spec.db_id, &spec.location) {
                Ok(handle) => {
                    let origin = if spec.from_scan {
                        Origin::Scan
                    } else {
                        Origin::Config
                    };
                    let db = Database {
                        handle: Arc::new(handle),
                        origin,
                    };
                    databases.insert(spec.db_id.clone(), db);
                }
                Err(e) => {
                    tracing::warn!(db_id = %spec.db_id, error = %format!("{e:#}"), "database skipped")
                }
            }
        }
        let log = registrations_file
            .map(|path| {
                RegistrationLog::open(path).with_context(|| {
                    format!("databases.registrations_file: opening {}", path.display())
                })
            })
            .transpose()?;
        let registry = Self {
            databases: RwLock::new(databases),
            allowed_dir: allowed_dir.and_then(|d| {
                let canonical = d.canonicalize().ok()?;
                Some((d, canonical))
            }),
            policies,
            log,
            notes: NoteBook::default(),
        };
        registry.sync();
        tracing::info!(count = registry.read().len(), "databases ready");
        Ok(registry)
    }

    /// Reads every database's text values for value retrieval on a background thread, so that
    /// the first questions do not wait for them, and logs what each index holds (or why it
    /// could not be read: the first question that asks for value retrieval reads it again, and
    /// fails as its run would if the database is still unreachable). A database
    /// registered later is read on its first question that asks for value retrieval.
    pub fn warm_value_indexes(&self) {
        let handles: Vec<Arc<DatabaseHandle>> =
            self.list().into_iter().map(|db| db.handle).collect();
        std::thread::spawn(move || {
            for handle in handles {
                let started = std::time::Instant::now();
                match handle.value_index() {
                    Ok(index) => tracing::info!(
                        db_id = %handle.db_id,
                        values = index.len(),
                        skipped_columns = index.skipped_columns,
                        ms = started.elapsed().as_millis() as u64,
                        "value index read"
                    ),
                    Err(error) => tracing::warn!(
                        db_id = %handle.db_id,
                        %error,
                        "value index not read: tried again on the first question that asks"
                    ),
                }
            }
        });
    }

    /// Whether other replicas may register databases this one should answer over.
    pub fn is_shared(&self) -> bool {
        self.log.is_some()
    }

    /// Opens the registrations other replicas recorded since the last sync (blocking: it
    /// introspects them). One that no longer opens, or that this replica's policy refuses, is
    /// logged and left out.
    pub fn sync(&self) {
        let Some(log) = &self.log else { return };
        match log.read_new() {
            Ok(new) => self.apply(new),
            Err(e) => tracing::warn!(
                file = %log.path().display(),
                error = %e,
                "registrations file: cannot read"
            ),
        }
    }

    fn apply(&self, registrations: Vec<Registration>) {
        for registration in registrations {
            if registration.is_note() {
                self.notes.apply(&registration);
                continue;
            }
            if self.read().contains_key(registration.db_id()) {
                continue;
            }
            let opened = self
                .prepare(&registration)
                .and_then(|handle| self.insert(registration.db_id(), handle));
            match opened {
                Ok(_) => tracing::info!(db_id = registration.db_id(), "registration read"),
                Err(e) => tracing::warn!(
                    db_id = registration.db_id(),
                    error = %e,
                    "registrations file: a registration was left out"
                ),
            }
        }
    }

    pub fn get(&self, db_id: &str) -> Result<Database, ServiceError> {
        self.read()
            .get(db_id)
            .cloned()
            .ok_or_else(|| ServiceError::NotFound {
                what: "database",
                id: db_id.to_owned(),
            })
    }

    pub fn list(&self) -> Vec<Database> {
        self.read().values().cloned().collect()
    }

    /// Changes a database's notes by the line `make` builds from them as they stand, and
    /// records it: with a shared file, under its lock after the lines other replicas wrote
    /// (so two replicas cannot give one id twice). Blocking.
    pub fn change_notes(
        &self,
        make: impl FnOnce(&NoteBook) -> Result<Registration, ServiceError>,
    ) -> Result<Registration, ServiceError> {
        match &self.log {
            None => {
                let line = make(&self.notes)?;
                self.notes.apply(&line);
                Ok(line)
            }
            Some(log) => log.append_with(|others: Vec<Registration>| {
                self.apply(others);
                let line = make(&self.notes)?;
                self.notes.apply(&line);
                Ok((line.clone(), line))
            }),
        }
    }

    /// Registers `path` (relative to the allowed directory, or absolute inside it) as `db_id`.
    /// `may_see` says which databases the registering caller reaches (see [`Self::record`]).
    pub fn register(
        &self,
        db_id: &str,
        path: &str,
        may_see: &dyn Fn(&str) -> bool,
    ) -> Result<Database, ServiceError> {
        self.record(
            Registration::Sqlite {
                db_id: db_id.to_owned(),
                path: path.to_owned(),
            },
            may_see,
        )
    }

    /// Registers a PostgreSQL database as `db_id`: its host must be allowed, its credentials
    /// hold and its schema have tables.
    pub fn register_postgres(
        &self,
        db_id: &str,
        registration: PostgresRegistration,
        may_see: &dyn Fn(&str) -> bool,
    ) -> Result<Database, ServiceError> {
        self.record(
            Registration::Postgres {
                db_id: db_id.to_owned(),
                url: registration.url,
                schema: registration.schema,
                password_name: registration.password_name,
            },
            may_see,
        )
    }

    /// Registers a MySQL database as `db_id`: its host must be allowed, its credentials hold
    /// and its database have tables.
    pub fn register_mysql(
        &self,
        db_id: &str,
        registration: MySqlRegistration,
        may_see: &dyn Fn(&str) -> bool,
    ) -> Result<Database, ServiceError> {
        self.record(
            Registration::MySql {
                db_id: db_id.to_owned(),
                url: registration.url,
                database: registration.database,
                password_name: registration.password_name,
            },
            may_see,
        )
    }

    /// Opens and adds a client's registration; with a shared file, first the registrations
    /// other replicas made, and then this one is written there, all under the file's lock so
    /// that two replicas cannot take the same id. A registration may not serve again what a
    /// database outside the caller's reach (`may_see`) already serves: a second name for
    /// another team's file or schema would read it under the caller's own scope.
    fn record(
        &self,
        registration: Registration,
        may_see: &dyn Fn(&str) -> bool,
    ) -> Result<Database, ServiceError> {
        validate_db_id(registration.db_id())
            .map_err(|reason| ServiceError::invalid("db_id", reason))?;
        let register = || {
            let handle = self.prepare(&registration)?;
            let source = source_key(&handle.backend.location());
            let served_elsewhere = self.read().iter().any(|(id, db)| {
                !may_see(id) && source_key(&db.handle.backend.location()) == source
            });
            if served_elsewhere {
                return Err(ServiceError::PermissionDenied {
                    reason: "that file or schema is already served as a database this token \
                             does not reach"
                        .into(),
                });
            }
            let db = self.insert(registration.db_id(), handle)?;
            tracing::info!(
                db_id = registration.db_id(),
                location = %db.handle.backend.location(),
                "database registered"
            );
            Ok(db)
        };
        match &self.log {
            None => register(),
            Some(log) => log.append_with(|others: Vec<Registration>| {
                self.apply(others);
                register().map(|db| (registration.clone(), db))
            }),
        }
    }

    /// Checks a registration against this server's policy and opens it.
    fn prepare(&self, registration: &Registration) -> Result<DatabaseHandle, ServiceError> {
        match registration {
            Registration::Sqlite { db_id, path } => self.prepare_file(db_id, path),
            Registration::Postgres {
                db_id,
                url,
                schema,
                password_name,
            } => self.prepare_postgres(db_id, url, schema, password_name),
            Registration::MySql {
                db_id,
                url,
                database,
                password_name,
            } => self.prepare_mysql(db_id, url, database, password_name),
            Registration::Note { .. } | Registration::NoteRemoved { .. } => Err(
                ServiceError::internal("a note line is not a database to open"),
            ),
        }
    }

    /// A path under the allowed directory: a SQLite file, or (in a build with DuckDB) a CSV,
    /// Parquet or DuckDB file or a folder of CSV and Parquet files.
    fn prepare_file(&self, db_id: &str, path: &str) -> Result<DatabaseHandle, ServiceError> {
        if path.is_empty() {
            return Err(ServiceError::invalid("path", "must not be empty"));
        }
        let Some(allowed) = &self.allowed_dir else {
            return Err(ServiceError::PermissionDenied {
                reason: "registration is disabled: the server has no allowed directory".into(),
            });
        };
        let file = resolve_inside(&allowed.0, &allowed.1, Path::new(path))?;
        #[cfg(feature = "duckdb")]
        if file.is_dir() || quorum_duckdb::FileKind::of(&file).is_some() {
            return prepare_duckdb_files(db_id, &file, &allowed.1);
        }
        if !file.is_file() {
            return Err(ServiceError::invalid("path", "is not a file"));
        }
        check_header(&file)?;
        let handle =
            DatabaseHandle::open(&file, db_id, IntrospectOptions::default()).map_err(|e| {
                tracing::info!(db_id, error = %e, "registration: cannot introspect");
                ServiceError::invalid("path", "is not a readable SQLite database")
            })?;
        if handle.schema.tables.is_empty() {
            return Err(ServiceError::invalid("path", "has no tables"));
        }
        Ok(handle)
    }

    fn prepare_postgres(
        &self,
        db_id: &str,
        url: &str,
        schema: &str,
        password_name: &str,
    ) -> Result<DatabaseHandle, ServiceError> {
        if self.policies.postgres.hosts.is_empty() {
            return Err(ServiceError::PermissionDenied {
                reason: "PostgreSQL registration is disabled: the server allows no hosts \
                         (databases.postgres_hosts)"
                    .into(),
            });
        }
        let schema = if schema.is_empty() { "public" } else { schema };
        let mut source = PgSource::new(url.to_owned(), schema.to_owned());
        let hosts = source
            .hosts()
            .map_err(|_| ServiceError::invalid("postgres.url", "is not a connection string"))?;
        if hosts.is_empty()
            || !hosts
                .iter()
                .all(|h| self.policies.postgres.hosts.contains(h))
        {
            return Err(ServiceError::PermissionDenied {
                reason: "the PostgreSQL host is not among the server's allowed hosts".into(),
            });
        }
        // A client must not make the server open a file of its choosing; trusted roots for a
        // registration are Mozilla's, or the operator's in a configured database.
        let tls = source
            .tls()
            .map_err(|_| ServiceError::invalid("postgres.url", "is not a connection string"))?;
        if tls.root_cert.is_some() {
            return Err(ServiceError::PermissionDenied {
                reason: "sslrootcert names a file on the server: only the server's configuration \
                         may (databases.postgres.<id>.url)"
                    .into(),
            });
        }
        if !password_name.is_empty() {
            let password = self
                .policies
                .postgres
                .passwords
                .get(password_name)
                .ok_or_else(|| {
                    ServiceError::invalid("postgres.password_name", "names no configured password")
                })?;
            source.password = Some(password.clone());
        }
        let handle = PgDatabase::connect(source)
            .and_then(|db| db.into_handle(db_id, IntrospectOptions::default()))
            .map_err(|e| {
                tracing::info!(db_id, error = %e, "registration: PostgreSQL refused");
                registration_error(e)
            })?;
        if handle.schema.tables.is_empty() {
            return Err(ServiceError::invalid("postgres.schema", "has no tables"));
        }
        Ok(handle)
    }

    fn prepare_mysql(
        &self,
        db_id: &str,
        url: &str,
        database: &str,
        password_name: &str,
    ) -> Result<DatabaseHandle, ServiceError> {
        let policy = &self.policies.mysql;
        if policy.hosts.is_empty() {
            return Err(ServiceError::PermissionDenied {
                reason: "MySQL registration is disabled: the server allows no hosts \
                         (databases.mysql_hosts)"
                    .into(),
            });
        }
        let database = (!database.is_empty()).then(|| database.to_owned());
        let mut source = MySqlSource::new(url.to_owned(), database);
        let host = source
            .host()
            .map_err(|_| ServiceError::invalid("mysql.url", "is not a mysql:// URL"))?;
        if !policy.hosts.contains(&host) {
            return Err(ServiceError::PermissionDenied {
                reason: "the MySQL host is not among the server's allowed hosts".into(),
            });
        }
        // A client must not make the server open a file of its choosing (a CA, a key, a
        // socket): those belong in the server's configuration.
        if source.names_server_files() {
            return Err(ServiceError::PermissionDenied {
                reason: "the URL names a file or socket on the server: only the server's \
                         configuration may (databases.mysql.<id>.url)"
                    .into(),
            });
        }
        if !password_name.is_empty() {
            let password = policy.passwords.get(password_name).ok_or_else(|| {
                ServiceError::invalid("mysql.password_name", "names no configured password")
            })?;
            source.password = Some(password.clone());
        }
        let handle = MySqlDatabase::connect(source)
            .and_then(|db| db.into_handle(db_id, IntrospectOptions::default()))
            .map_err(|e| {
                tracing::info!(db_id, error = %e, "registration: MySQL refused");
                mysql_registration_error(e)
            })?;
        if handle.schema.tables.is_empty() {
            return Err(ServiceError::invalid("mysql.database", "has no tables"));
        }
        Ok(handle)
    }

    /// Adds a registered database, within the quota and under a free id.
    fn insert(&self, db_id: &str, handle: DatabaseHandle) -> Result<Database, ServiceError> {
        let db = Database {
            handle: Arc::new(handle),
            origin: Origin::Registered,
        };
        let mut map = self
            .databases
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if map
            .values()
            .filter(|d| d.origin == Origin::Registered)
            .count()
            >= MAX_REGISTERED
        {
            return Err(ServiceError::QuotaExceeded {
                reason: format!("{MAX_REGISTERED} databases are registered, the server's limit"),
            });
        }
        if map.contains_key(db_id) {
            return Err(ServiceError::AlreadyExists {
                what: "database",
                id: db_id.to_owned(),
            });
        }
        map.insert(db_id.to_owned(), db.clone());
        Ok(db)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Database>> {
        // The map is never left half-updated (one insert under the lock), so a poisoned lock
        // still holds consistent data.
        self.databases
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The status of a PostgreSQL registration that failed: refused credentials or a missing
/// schema are the caller's to fix; an unreachable server may come back.
fn registration_error(e: PgError) -> ServiceError {
    match e {
        PgError::Connect { message }
            if message.contains("authentication") || message.contains("role") =>
        {
            ServiceError::invalid(
                "postgres",
                format!("the server refused the credentials: {message}"),
            )
        }
        PgError::Connect { message } => ServiceError::Unavailable {
            reason: format!("cannot reach the PostgreSQL server: {message}"),
        },
        PgError::NoSchema { schema } => {
            ServiceError::invalid("postgres.schema", format!("{schema:?} does not exist"))
        }
        PgError::BadSchemaName(_) => {
            ServiceError::invalid("postgres.schema", "must be a plain identifier")
        }
        PgError::BadUrl => ServiceError::invalid("postgres.url", "is not a connection string"),
        e @ (PgError::Query { .. } | PgError::Load { .. }) => ServiceError::internal(e),
    }
}

fn mysql_registration_error(e: MySqlError) -> ServiceError {
    match e {
        MySqlError::Connect { message } if message.contains("Access denied") => {
            ServiceError::invalid(
                "mysql",
                format!("the server refused the credentials: {message}"),
            )
        }
        MySqlError::Connect { message } => ServiceError::Unavailable {
            reason: format!("cannot reach the MySQL server: {message}"),
        },
        MySqlError::NoDatabase { database } => {
            ServiceError::invalid("mysql.database", format!("{database:?} does not exist"))
        }
        MySqlError::BadDatabaseName(_) => {
            ServiceError::invalid("mysql.database", "must be a plain identifier")
        }
        MySqlError::BadUrl(reason) => ServiceError::invalid("mysql.url", reason),
        e @ (MySqlError::Query { .. } | MySqlError::Load { .. }) => ServiceError::internal(e),
    }
}

/// What identifies the data behind a location, whatever name or credentials reach it: a
/// SQLite file by its canonical path; a PostgreSQL schema by host, port, database and schema,
/// without the user or the TLS mode, with loopback spelled one way.
fn source_key(location: &str) -> String {
    if let Some(rest) = location.strip_prefix("postgresql://") {
        let (server, schema) = rest.split_once(" schema ").unwrap_or((rest, ""));
        let server = server.rsplit_once('@').map_or(server, |(_, s)| s);
        let (host, port_db) = match server.strip_prefix('[') {
            Some(v6) => v6.split_once(']').unwrap_or((v6, "")),
            None => server.split_once(':').unwrap_or((server, "")),
        };
        let host = host.to_ascii_lowercase();
        let host = match host.as_str() {
            "localhost" | "::1" | "127.0.0.1" => "loopback",
            other => other,
        };
        let port_db = port_db.trim_start_matches(':');
        let schema = schema.split(" sslmode ").next().unwrap_or(schema);
        return format!("postgresql://{host}:{port_db} schema {schema}");
    }
    if let Some(rest) = location.strip_prefix("mysql://") {
        let server = rest.split(" tls ").next().unwrap_or(rest);
        let server = server.rsplit_once('@').map_or(server, |(_, s)| s);
        let (host, port_db) = server.split_once(':').unwrap_or((server, ""));
        let host = host.to_ascii_lowercase();
        let host = match host.as_str() {
            "localhost" | "::1" | "127.0.0.1" => "loopback",
            other => other,
        };
        return format!("mysql://{host}:{port_db}");
    }
    std::fs::canonicalize(location)
        .map_or_else(|_| location.to_owned(), |p| p.display().to_string())
}

/// Resolves `path` inside `allowed`. A path that names a place outside it (absolute elsewhere,
/// or with `..`) is refused before the file system is asked, so the answer does not tell a file
/// that exists outside from one that does not; a symlink inside that leads outside is refused
/// after resolving it.
/// Opens files under `allowed` through DuckDB, once every table file of a folder is shown to be
/// inside it too (a link in the folder must not lead the server to a file elsewhere).
#[cfg(feature = "duckdb")]
fn prepare_duckdb_files(
    db_id: &str,
    target: &Path,
    allowed: &Path,
) -> Result<DatabaseHandle, ServiceError> {
    let source = quorum_duckdb::DuckDbSource::new(target);
    let tables = source
        .table_files()
        .map_err(|e| ServiceError::invalid("path", e.to_string()))?;
    for (_, file, _) in &tables {
        let inside = file
            .canonicalize()
            .is_ok_and(|canonical| canonical.starts_with(allowed));
        if !inside {
            return Err(ServiceError::PermissionDenied {
                reason: format!(
                    "{} leads outside the allowed directory",
                    file.file_name().unwrap_or_default().to_string_lossy()
                ),
            });
        }
    }
    let handle = quorum_duckdb::DuckDbDatabase::open(source, None)
        .and_then(|db| db.into_handle(db_id, IntrospectOptions::default()))
        .map_err(|e| {
            tracing::info!(db_id, error = %e, "registration: DuckDB cannot read the files");
            ServiceError::invalid("path", format!("cannot be read as a database: {e}"))
        })?;
    if handle.schema.tables.is_empty() {
        return Err(ServiceError::invalid("path", "has no tables"));
    }
    Ok(handle)
}

/// `path` resolved inside the allowed directory (a file or a folder), or why not.
fn resolve_inside(configured: &Path, allowed: &Path, path: &Path) -> Result<PathBuf, ServiceError> {
    let outside = || ServiceError::PermissionDenied {
        reason: "path is outside the allowed directory".into(),
    };
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(outside());
    }
    let joined = if path.is_absolute() {
        if !path.starts_with(allowed) && !path.starts_with(configured) {
            return Err(outside());
        }
        path.to_path_buf()
    } else {
        allowed.join(path)
    };
    let canonical = joined
        .canonicalize()
        .map_err(|_| ServiceError::invalid("path", "no such file under the allowed directory"))?;
    if !canonical.starts_with(allowed) {
        return Err(outside());
    }
    Ok(canonical)
}

/// The SQLite header's first bytes.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Refuses what is not a SQLite database in rollback-journal mode before SQLite opens it:
/// SQLite treats an empty file as an empty database, and a WAL-mode database makes even a
/// read-only connection create `-wal`/`-shm` files beside it, which the server must never do
/// in a directory it only reads.
fn check_header(file: &Path) -> Result<(), ServiceError> {
    use std::io::Read;
    let mut header = [0u8; 20];
    let read = std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok();
    if !read || &header[..16] != SQLITE_MAGIC {
        return Err(ServiceError::invalid("path", "is not a SQLite database"));
    }
    // Bytes 18 and 19: the file format's write and read versions, 2 in WAL mode.
    if header[18] == 2 || header[19] == 2 {
        return Err(ServiceError::invalid(
            "path",
            "is a WAL-mode database: convert it with `PRAGMA journal_mode=DELETE` first",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_the_same_whoever_reaches_it_and_however_loopback_is_written() {
        let a = source_key("postgresql://alice@localhost:5432/shop schema sales sslmode disable");
        let b = source_key("postgresql://bob@127.0.0.1:5432/shop schema sales sslmode require");
        let c = source_key("postgresql://bob@[::1]:5432/shop schema sales sslmode prefer");
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_ne!(
            a,
            source_key("postgresql://alice@localhost:5432/shop schema hr sslmode disable")
        );
        assert_ne!(
            a,
            source_key("postgresql://alice@localhost:5433/shop schema sales sslmode disable")
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a.sqlite");
        std::fs::write(&file, b"x").expect("write");
        let dotted = dir.path().join(".").join("a.sqlite");
        assert_eq!(
            source_key(&file.display().to_string()),
            source_key(&dotted.display().to_string())
        );
    }

    #[test]
    fn absolute_paths_may_use_the_configured_or_the_canonical_directory() {
        let root = std::env::temp_dir().join(format!("quorum-resolve-{}", std::process::id()));
        let real = root.join("real");
        std::fs::create_dir_all(&real).expect("mkdir");
        std::fs::write(real.join("a.sqlite"), b"x").expect("write");
        let link = root.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let canonical = link.canonicalize().expect("canonical");
        let expected = canonical.join("a.sqlite");
        for path in [link.join("a.sqlite"), canonical.join("a.sqlite")] {
            let resolved = resolve_inside(&link, &canonical, &path).expect("inside");
            assert_eq!(resolved, expected);
        }
        let resolved = resolve_inside(&link, &canonical, Path::new("a.sqlite")).expect("relative");
        assert_eq!(resolved, expected);
        for outside in ["/etc/passwd", "/nonexistent/a.sqlite", "../real/a.sqlite"] {
            let e = resolve_inside(&link, &canonical, Path::new(outside)).expect_err(outside);
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{outside}");
        }
        std::fs::remove_dir_all(&root).expect("cleanup");
    }
}
