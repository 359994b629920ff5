//! A database the pipeline and the sub-tasks answer over: where its rows are (a [`Backend`]) and its
//! introspected schema. The server introspects each database once and reuses the handle across
//! requests; each run opens its own session on the backend.

use std::path::Path;
use std::sync::Arc;

use crate::backend::{Backend, SqliteFile};
use crate::dialect::Dialect;
use crate::schema::{IntrospectOptions, Schema, SchemaError};

#[derive(Debug, Clone)]
pub struct DatabaseHandle {
    pub db_id: String,
    pub backend: Arc<dyn Backend>,
    pub schema: Schema,
}

impl DatabaseHandle {
    /// Opens the SQLite file `path` read-only and introspects it.
    pub fn open(path: &Path, db_id: &str, options: IntrospectOptions) -> Result<Self, SchemaError> {
        Ok(Self {
            db_id: db_id.to_owned(),
            backend: Arc::new(SqliteFile {
                path: path.to_owned(),
            }),
            schema: Schema::from_sqlite(path, db_id, options)?,
        })
    }

    pub fn dialect(&self) -> Dialect {
        self.backend.dialect()
    }
}
