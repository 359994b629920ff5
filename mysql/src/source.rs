//! A MySQL or MariaDB database as configured: connection settings (never shown), the database
//! (schema) that holds its tables, and a bounded pool of connections.

use std::time::Duration;

use mysql::{Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts, prelude::Queryable};
use quorum_sql::backend::{Backend, Session};
use quorum_sql::dialect::Dialect;
use quorum_sql::sandbox::{ExecError, Limits};

use crate::error::MySqlError;
use crate::guard::plain_name;
use crate::session::{Flavor, MySqlSession};

/// Where a MySQL database is and how to reach it.
#[derive(Clone)]
pub struct MySqlSource {
    /// `mysql://user[:password]@host[:port][/database][?options]`, the `mysql` crate's URL
    /// (TLS with `?root_cert_path=CA.pem`); may carry a password, so it is never printed.
    pub url: String,
    /// A password read from a secret file, overriding the URL's.
    pub password: Option<String>,
    /// The database holding the tables; the URL's path when not given.
    pub database: Option<String>,
    /// Connections this database may hold at once.
    pub max_connections: u32,
}

impl std::fmt::Debug for MySqlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MySqlSource")
            .field("location", &self.location().unwrap_or_else(|_| "?".into()))
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

/// How long establishing a connection or waiting for a pooled one may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How much longer than a statement's limit the socket waits for the server's answer before
/// the connection is given up (the server's own limit should have ended it first).
pub(crate) const SOCKET_MARGIN: Duration = Duration::from_secs(5);
/// The socket deadline while introspecting and loading.
const ADMIN_READ_TIMEOUT: Duration = Duration::from_secs(120);

impl MySqlSource {
    pub fn new(url: impl Into<String>, database: Option<String>) -> Self {
        Self {
            url: url.into(),
            password: None,
            database,
            max_connections: 4,
        }
    }

    /// The URL as the driver reads it; the parser's message is kept only when it cannot quote
    /// the URL (a password included).
    fn driver_opts(&self) -> Result<Opts, MySqlError> {
        Opts::from_url(&self.url).map_err(|e| {
            let message = e.to_string();
            MySqlError::BadUrl(if message.contains(&self.url) || message.contains('@') {
                "not a mysql:// URL".into()
            } else {
                message
            })
        })
    }

    /// The database sessions use.
    pub fn database_name(&self) -> Result<String, MySqlError> {
        let name = match &self.database {
            Some(name) => name.clone(),
            None => self
                .driver_opts()?
                .get_db_name()
                .map(str::to_owned)
                .ok_or_else(|| MySqlError::BadUrl("no database named".into()))?,
        };
        if plain_name(&name) {
            Ok(name)
        } else {
            Err(MySqlError::BadDatabaseName(name))
        }
    }

    /// The connection settings, with `read_timeout` as the socket's deadline.
    pub(crate) fn opts(&self, read_timeout: Duration) -> Result<OptsBuilder, MySqlError> {
        let mut builder = OptsBuilder::from_opts(self.driver_opts()?)
            .tcp_connect_timeout(Some(CONNECT_TIMEOUT))
            .read_timeout(Some(read_timeout))
            .write_timeout(Some(read_timeout))
            .tcp_keepalive_time_ms(Some(30_000));
        if let Some(password) = &self.password {
            builder = builder.pass(Some(password.clone()));
        }
        Ok(builder)
    }

    /// The host the URL names, as written.
    pub fn host(&self) -> Result<String, MySqlError> {
        Ok(self.driver_opts()?.get_ip_or_hostname().into_owned())
    }

    /// Whether the URL makes the client open something on the machine it runs on: a CA, a
    /// certificate or key, a server public key or a Unix socket.
    pub fn names_server_files(&self) -> bool {
        const FILE_OPTIONS: [&str; 6] = [
            "root_cert_path",
            "cert_chain_path",
            "priv_key_path",
            "server_key_path",
            "socket",
            "prefer_socket",
        ];
        let query = self.url.split_once('?').map_or("", |(_, q)| q);
        query.split('&').any(|pair| {
            let key = pair.split('=').next().unwrap_or("");
            FILE_OPTIONS.contains(&key)
        })
    }

    /// `user@host:port/database tls on|off`: what logs and `Describe` may show.
    pub fn location(&self) -> Result<String, MySqlError> {
        let opts = self.driver_opts()?;
        Ok(format!(
            "mysql://{}@{}:{}/{} tls {}",
            opts.get_user().unwrap_or(""),
            opts.get_ip_or_hostname(),
            opts.get_tcp_port(),
            self.database_name()?,
            if opts.get_ssl_opts().is_some() {
                "on"
            } else {
                "off"
            },
        ))
    }
}

/// Why a connection failed, in the driver's words (which never hold the password).
fn connect_error(e: mysql::Error) -> MySqlError {
    MySqlError::Connect {
        message: e.to_string(),
    }
}

/// A direct connection for `url` (no database needed), for tools such as the loader.
pub fn connect_admin(url: &str) -> Result<mysql::Conn, MySqlError> {
    let source = MySqlSource::new(url, None);
    mysql::Conn::new(source.opts(ADMIN_READ_TIMEOUT)?).map_err(connect_error)
}

/// A MySQL database ready for sessions.
pub struct MySqlDatabase {
    source: MySqlSource,
    database: String,
    location: String,
    flavor: Flavor,
    pool: Pool,
    /// Each session's statement limit; the pool's sockets wait this plus [`SOCKET_MARGIN`].
    pool_timeout: Duration,
}

impl std::fmt::Debug for MySqlDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.location)
    }
}

/// The longest statement limit a session may ask for. The pool's sockets wait this plus
/// [`SOCKET_MARGIN`] for an answer: the server ends a statement at its own limit, and the
/// socket deadline only bounds how long a server that stopped answering can hold a caller.
const POOL_STATEMENT_CEILING: Duration = Duration::from_secs(120);

impl MySqlDatabase {
    /// The pool for `source`, after one connection has shown that the server answers, the
    /// credentials hold and the database exists.
    pub fn connect(source: MySqlSource) -> Result<Self, MySqlError> {
        let database = source.database_name()?;
        let location = source.location()?;
        let opts = source
            .opts(POOL_STATEMENT_CEILING + SOCKET_MARGIN)?
            .db_name(None::<String>);
        // One direct connection first: the pool would only say that it timed out, this says
        // why (refused, authentication, a certificate not trusted).
        let mut probe = mysql::Conn::new(opts.clone()).map_err(connect_error)?;
        let version: Option<String> = probe
            .query_first("SELECT VERSION()")
            .map_err(MySqlError::from_query)?;
        let flavor = Flavor::of(version.as_deref().unwrap_or(""));
        let found: Option<u8> = probe
            .exec_first(
                "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                (&database,),
            )
            .map_err(MySqlError::from_query)?;
        if found.is_none() {
            return Err(MySqlError::NoDatabase { database });
        }
        drop(probe);
        let max = source.max_connections.max(1) as usize;
        let constraints = PoolConstraints::new(0, max).expect("0 <= max");
        let pool = Pool::new(
            opts.db_name(Some(database.clone()))
                .pool_opts(PoolOpts::default().with_constraints(constraints)),
        )
        .map_err(connect_error)?;
        Ok(Self {
            source,
            database,
            location,
            flavor,
            pool,
            pool_timeout: POOL_STATEMENT_CEILING,
        })
    }

    pub fn database_name(&self) -> &str {
        &self.database
    }

    pub fn source(&self) -> &MySqlSource {
        &self.source
    }

    pub(crate) fn flavor(&self) -> Flavor {
        self.flavor
    }

    pub(crate) fn conn(&self) -> Result<mysql::PooledConn, mysql::Error> {
        self.pool.try_get_conn(CONNECT_TIMEOUT)
    }
}

impl Backend for MySqlDatabase {
    fn dialect(&self) -> Dialect {
        Dialect::MySql
    }

    fn open_session(&self, limits: Limits) -> Result<Box<dyn Session>, ExecError> {
        if limits.timeout > self.pool_timeout {
            return Err(ExecError::Denied {
                what: format!(
                    "a statement limit over {} s on MySQL",
                    self.pool_timeout.as_secs()
                ),
            });
        }
        let conn = self.conn().map_err(|e| ExecError::Unavailable {
            message: e.to_string(),
        })?;
        Ok(Box::new(MySqlSession::new(
            conn,
            self.flavor,
            self.database.clone(),
            limits,
        )))
    }

    fn location(&self) -> String {
        self.location.clone()
    }
}
