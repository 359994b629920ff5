//! quorum-postgres: a PostgreSQL server as a database Quorum answers over.
//!
//! The server is someone else's: every candidate runs in a `READ ONLY` transaction that is
//! always rolled back, under `statement_timeout`, with `search_path` pinned to the database's
//! schema, through a cursor (which PostgreSQL only opens for a single query) and with row and
//! byte caps, after a scan that refuses the built-in functions whose effects a read-only
//! transaction does not stop. Operators should still connect with a role that can only read
//! (docs/DEPLOY.md). Introspection reads `pg_catalog` into the same [`Schema`] the prompt
//! renderers take from SQLite, so every prompt format renders from PostgreSQL.
//!
//! The client is the `postgres` crate (sync, on tokio-postgres) with an `r2d2` pool per
//! database: the pipeline is synchronous and runs on blocking threads, as SQLite's does.
//! Connections use TLS as the connection string's `sslmode` says (`tls.rs`, rustls).
//!
//! [`Schema`]: quorum_sql::schema::Schema

mod error;
mod guard;
mod introspect;
pub mod load;
mod schema_fence;
mod session;
mod source;
mod tls;
mod values;

pub use error::PgError;
pub use source::{PgDatabase, PgSource, connect_client};
pub use tls::{SslMode, TlsSettings};
