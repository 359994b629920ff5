//! quorum-duckdb: files analysts keep (CSV, Parquet, a DuckDB database) as a database Quorum
//! answers over, through DuckDB.
//!
//! A registered CSV or Parquet file (or a folder of them, one table a file) is copied once into
//! a private DuckDB file, which is then opened read-only with every way out of it switched off:
//! no external access (no file, URL or extension is read once open), no extension loading, the
//! configuration locked so no query can switch them back on. A DuckDB file is opened read-only
//! the same way. So after registration no query can read any file but the copy, whatever it
//! names, and nothing can be written. Before that, a candidate must read as exactly one query
//! over the database's own tables, with no table function and none of the functions that touch
//! state ([`guard`]); it then runs under a time limit (an interrupt from a watchdog: DuckDB has
//! no statement timeout of its own), its rows capped in number and bytes.
//!
//! Introspection reads DuckDB's catalog (`duckdb_columns()`, `duckdb_constraints()`) into the
//! same [`Schema`] the prompt renderers take from SQLite; files declare no keys, so the
//! pipeline's keys inferred from names apply.
//!
//! The client is the `duckdb` crate with DuckDB bundled (compiled from source: the reason it
//! sits behind the server's `duckdb` feature).
//!
//! [`Schema`]: quorum_sql::schema::Schema

mod error;
pub mod guard;
mod introspect;
pub mod load;
mod session;
mod source;
mod values;

pub use error::DuckDbError;
pub use source::{DuckDbDatabase, DuckDbSource, FileKind};
