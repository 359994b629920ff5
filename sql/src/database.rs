//! A database the pipeline and the sub-tasks answer over: where its rows are (a [`Backend`]), its
//! introspected schema and, read on first use, its text values ([`ValueIndex`]) and its tables'
//! embeddings ([`TableVectors`], for the schema filter). The server
//! introspects each database once and reuses the handle across requests; each run opens its own
//! session on the backend.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::backend::{Backend, SqliteFile};
use crate::dialect::Dialect;
use crate::inferred_keys::inferred_foreign_keys;
use crate::linking::schema_filter::TableVectors;
use crate::linking::value_index::{ValueIndex, ValueIndexLimits};
use crate::model::{Embedder, ModelCallError};
use crate::sandbox::{ExecError, Limits};
use crate::schema::{IntrospectOptions, Schema, SchemaError};

/// How long one column's `SELECT DISTINCT` may take while the value index is read.
const VALUE_QUERY_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct DatabaseHandle {
    pub db_id: String,
    pub backend: Arc<dyn Backend>,
    pub schema: Schema,
    values: Arc<OnceLock<ValueIndex>>,
    tables: Arc<OnceLock<TableVectors>>,
}

impl DatabaseHandle {
    /// Opens the SQLite file `path` read-only and introspects it.
    pub fn open(path: &Path, db_id: &str, options: IntrospectOptions) -> Result<Self, SchemaError> {
        let schema = Schema::from_sqlite(path, db_id, options)?;
        let backend = Arc::new(SqliteFile {
            path: path.to_owned(),
        });
        Ok(Self::new(db_id, backend, schema))
    }

    /// A handle over `backend` with its introspected `schema`; a database that declares no
    /// foreign keys gets the ones its names imply ([`inferred_foreign_keys`]).
    pub fn new(db_id: &str, backend: Arc<dyn Backend>, mut schema: Schema) -> Self {
        let inferred = inferred_foreign_keys(&schema);
        schema.foreign_keys.extend(inferred);
        Self {
            db_id: db_id.to_owned(),
            backend,
            schema,
            values: Arc::default(),
            tables: Arc::default(),
        }
    }

    /// The database's text values, read through a read-only session the first time they are
    /// asked for (the server asks when it opens a database) and kept. A session that cannot be
    /// opened is an error and nothing is kept, so the next call tries again.
    pub fn value_index(&self) -> Result<&ValueIndex, ExecError> {
        if let Some(index) = self.values.get() {
            return Ok(index);
        }
        let limits = ValueIndexLimits::default();
        let session_limits = Limits {
            timeout: VALUE_QUERY_TIMEOUT,
            max_rows: limits.per_column,
            ..Limits::default()
        };
        let mut session = self.backend.open_session(session_limits)?;
        let index = ValueIndex::build(&self.schema, session.as_mut(), limits);
        // Two first callers may both read it; the first one's index is kept.
        Ok(self.values.get_or_init(|| index))
    }

    /// The tables' embeddings by `embedder` (a server has one), computed the first time a
    /// question needs them and kept; a failed model call keeps nothing.
    pub fn table_vectors(&self, embedder: &dyn Embedder) -> Result<&TableVectors, ModelCallError> {
        if let Some(vectors) = self.tables.get() {
            return Ok(vectors);
        }
        let vectors = TableVectors::build(&self.schema, embedder)?;
        Ok(self.tables.get_or_init(|| vectors))
    }

    pub fn dialect(&self) -> Dialect {
        self.backend.dialect()
    }
}
