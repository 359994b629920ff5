//! quorum-mysql: a MySQL or MariaDB server as a database Quorum answers over.
//!
//! The server is someone else's, and a MySQL `READ ONLY` transaction stops less than
//! PostgreSQL's: DDL commits it implicitly, `SELECT ... INTO OUTFILE` writes a file,
//! `LOAD_FILE` reads one, user-level locks and user variables outlive it. So a candidate must
//! first read as exactly one query with none of those ([`guard`]), and only then runs, as a
//! prepared statement (the server refuses more than one statement there), in a `READ ONLY`
//! transaction that is always rolled back, under the server's own statement time limit
//! (`max_statement_time` on MariaDB, `max_execution_time` on MySQL) and a socket deadline, with
//! `sql_select_limit` one past the row cap and a byte cap while rows stream in. Operators should
//! still connect as a user with `SELECT` rights only (docs/DEPLOY.md). Introspection reads
//! `information_schema` into the same [`Schema`] the prompt renderers take from SQLite.
//!
//! The client is the `mysql` crate (sync, with its own pool; rustls for TLS): the pipeline is
//! synchronous and runs on blocking threads, as it does for SQLite and PostgreSQL.
//!
//! [`Schema`]: quorum_sql::schema::Schema

mod error;
pub mod guard;
mod introspect;
pub mod load;
mod session;
mod source;
mod values;

pub use error::MySqlError;
pub use source::{MySqlDatabase, MySqlSource, connect_admin};
