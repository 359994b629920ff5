//! A database the pipeline answers over: where it is and its introspected schema. The server
//! introspects each database once and reuses the handle across requests; the sandbox is
//! opened per run because a SQLite connection is not shareable between threads.

use std::path::{Path, PathBuf};

use crate::schema::{IntrospectOptions, Schema, SchemaError};

#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseHandle {
    pub db_id: String,
    pub path: PathBuf,
    pub schema: Schema,
}

impl DatabaseHandle {
    /// Opens `path` read-only and introspects it.
    pub fn open(path: &Path, db_id: &str, options: IntrospectOptions) -> Result<Self, SchemaError> {
        Ok(Self {
            db_id: db_id.to_owned(),
            path: path.to_owned(),
            schema: Schema::from_sqlite(path, db_id, options)?,
        })
    }
}
