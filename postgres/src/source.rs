//! A PostgreSQL database as configured or registered: connection settings (never shown), the
//! schema that holds its tables, and a bounded pool of connections.

use std::str::FromStr;
use std::time::Duration;

use quorum_sql::backend::{Backend, Session};
use quorum_sql::dialect::Dialect;
use quorum_sql::sandbox::{ExecError, Limits};
use r2d2_postgres::PostgresConnectionManager;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{PgError, unavailable};
use crate::session::PgSession;
use crate::tls::{TlsSettings, connector, tls_settings};

pub(crate) type Pool = r2d2::Pool<PostgresConnectionManager<MakeRustlsConnect>>;

/// Where a PostgreSQL database is and how to reach it.
#[derive(Clone)]
pub struct PgSource {
    /// A libpq-style URL or key/value string; may carry a password, so it is never printed.
    pub url: String,
    /// A password read from a secret file, overriding the URL's.
    pub password: Option<String>,
    /// The schema holding the tables (`search_path` is pinned to it); `public` by default.
    pub schema: String,
    /// Connections this database may hold at once.
    pub max_connections: u32,
}

impl std::fmt::Debug for PgSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgSource")
            .field("location", &self.location().unwrap_or_else(|_| "?".into()))
            .field("schema", &self.schema)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

/// How long establishing a connection or waiting for a pooled one may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl PgSource {
    pub fn new(url: impl Into<String>, schema: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            password: None,
            schema: schema.into(),
            max_connections: 4,
        }
    }

    /// The connection string's TLS settings (libpq's `sslmode`, `sslrootcert`).
    pub fn tls(&self) -> Result<TlsSettings, PgError> {
        tls_settings(&self.url)
    }

    /// The string as tokio-postgres reads it; the parser's message is not passed on because
    /// it can quote the string, password included.
    fn driver_config(&self) -> Result<postgres::Config, PgError> {
        postgres::Config::from_str(&self.tls()?.driver_url).map_err(|_| PgError::BadUrl)
    }

    /// The connection settings.
    pub(crate) fn config(&self) -> Result<postgres::Config, PgError> {
        let mut config = self.driver_config()?;
        if let Some(password) = &self.password {
            config.password(password);
        }
        config.connect_timeout(CONNECT_TIMEOUT);
        // A server that vanishes without closing the socket is noticed within a minute.
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(30));
        config.application_name("quorum");
        Ok(config)
    }

    /// The hosts the connection string names (names, addresses or socket directories).
    pub fn hosts(&self) -> Result<Vec<String>, PgError> {
        let config = self.driver_config()?;
        Ok(config
            .get_hosts()
            .iter()
            .map(|h| match h {
                postgres::config::Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .collect())
    }

    /// `user@host:port/dbname schema s sslmode m`: what logs and `Describe` may show.
    pub fn location(&self) -> Result<String, PgError> {
        let config = self.driver_config()?;
        let mode = self.tls()?.mode;
        let host = self
            .hosts()?
            .into_iter()
            .next()
            .unwrap_or_else(|| "localhost".into());
        let port = config.get_ports().first().copied().unwrap_or(5432);
        Ok(format!(
            "postgresql://{}@{host}:{port}/{} schema {} sslmode {}",
            config.get_user().unwrap_or(""),
            config.get_dbname().unwrap_or(""),
            self.schema,
            mode.name()
        ))
    }
}

/// Why a connection failed: the server's own message, or the driver's with its cause (a TLS
/// failure is only in the cause).
fn connect_error(e: &postgres::Error) -> PgError {
    let message = match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                text.push_str(": ");
                text.push_str(&c.to_string());
                cause = c.source();
            }
            text
        }
    };
    PgError::Connect { message }
}

/// A direct client for `url` (TLS as its `sslmode` says), for tools such as the loader.
pub fn connect_client(url: &str) -> Result<postgres::Client, PgError> {
    let source = PgSource::new(url, "public");
    let tls = connector(&source.tls()?)?;
    source.config()?.connect(tls).map_err(|e| connect_error(&e))
}

/// A PostgreSQL database ready for sessions: the pool is built without connecting; the first
/// session (or [`PgDatabase::connect`]) finds out whether the server answers.
pub struct PgDatabase {
    source: PgSource,
    location: String,
    /// Always `Some` until dropped (see the `Drop` impl).
    pool: Option<Pool>,
}

/// Closing a sync client blocks on its own runtime, which panics on an async worker, and the
/// last handle to a database may well be dropped on one (a server shutting down): the pool's
/// connections are closed on a thread of their own.
impl Drop for PgDatabase {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            let closing = std::thread::Builder::new()
                .name("quorum-pg-close".into())
                .spawn(move || drop(pool));
            if let Err(e) = closing {
                tracing::warn!(error = %e, "cannot close PostgreSQL connections");
            }
        }
    }
}

impl std::fmt::Debug for PgDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.location)
    }
}

impl PgDatabase {
    /// The pool for `source`, after one connection has shown that the server answers, the
    /// credentials hold and the schema exists.
    pub fn connect(source: PgSource) -> Result<Self, PgError> {
        crate::guard::check_schema_name(&source.schema)?;
        let location = source.location()?;
        let config = source.config()?;
        let tls = connector(&source.tls()?)?;
        // One direct connection first: the pool would only say that it timed out, this says
        // why (refused, authentication, unknown database, a certificate not trusted).
        let mut probe = config.connect(tls.clone()).map_err(|e| connect_error(&e))?;
        let found = probe
            .query_opt(
                "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1",
                &[&source.schema],
            )
            .map_err(PgError::from_query)?;
        if found.is_none() {
            return Err(PgError::NoSchema {
                schema: source.schema.clone(),
            });
        }
        drop(probe);
        let manager = PostgresConnectionManager::new(config, tls);
        let pool = r2d2::Pool::builder()
            .max_size(source.max_connections.max(1))
            .min_idle(Some(0))
            .connection_timeout(CONNECT_TIMEOUT)
            // A connection the server dropped is found out before a run gets it.
            .test_on_check_out(true)
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .build_unchecked(manager);
        Ok(Self {
            source,
            location,
            pool: Some(pool),
        })
    }

    pub fn schema_name(&self) -> &str {
        &self.source.schema
    }

    pub(crate) fn pool(&self) -> &Pool {
        self.pool.as_ref().expect("the pool lives until drop")
    }
}

impl Backend for PgDatabase {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn open_session(&self, limits: Limits) -> Result<Box<dyn Session>, ExecError> {
        let conn = self.pool().get().map_err(|e| unavailable(&e))?;
        Ok(Box::new(PgSession::new(
            conn,
            self.source.schema.clone(),
            limits,
        )))
    }

    fn location(&self) -> String {
        self.location.clone()
    }
}
