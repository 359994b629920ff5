//! A PostgreSQL schema read into the prompt schema: tables in creation order, columns with
//! their types and comments, primary and foreign keys, the first rows of each table and a few
//! distinct values per column (from a bounded prefix of the table, so a large table costs no
//! more than a small one). Everything is read in one read-only transaction under a timeout.

use std::sync::Arc;

use postgres::SimpleQueryMessage;
use postgres::types::Type;
use quorum_sql::database::DatabaseHandle;
use quorum_sql::dialect::Dialect;
use quorum_sql::schema::{Column, ForeignKey, IntrospectOptions, Schema, Table};
use quorum_sql::value::Value;

use crate::error::PgError;
use crate::source::PgDatabase;
use crate::values::value;

/// Rows a column's distinct examples are drawn from.
const EXAMPLE_SCAN_ROWS: usize = 10_000;
/// The whole introspection's time limit, per statement.
const INTROSPECT_TIMEOUT_MS: u32 = 30_000;

pub(crate) fn introspect(
    db: &PgDatabase,
    db_id: &str,
    options: IntrospectOptions,
) -> Result<Schema, PgError> {
    let mut conn = db.pool().get().map_err(|e| PgError::Connect {
        message: crate::error::pool_message(&e),
    })?;
    let mut tx = conn
        .build_transaction()
        .read_only(true)
        .start()
        .map_err(PgError::from_query)?;
    tx.batch_execute(&format!(
        "SET LOCAL statement_timeout = {INTROSPECT_TIMEOUT_MS}; SET LOCAL DateStyle = 'ISO, YMD'"
    ))
    .map_err(PgError::from_query)?;
    let schema_name = db.schema_name();
    let relations = tx
        .query(
            "SELECT c.oid, c.relname FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') \
             AND NOT c.relispartition ORDER BY c.oid",
            &[&schema_name],
        )
        .map_err(PgError::from_query)?;
    let mut tables = Vec::with_capacity(relations.len());
    let mut foreign_keys = Vec::new();
    for relation in &relations {
        let oid: u32 = relation.get(0);
        let name: String = relation.get(1);
        let columns = tx
            .query(
                "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), \
                 pg_catalog.col_description(a.attrelid, a.attnum) \
                 FROM pg_catalog.pg_attribute a \
                 WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped \
                 ORDER BY a.attnum",
                &[&oid],
            )
            .map_err(PgError::from_query)?;
        let primary_key: Vec<String> = tx
            .query(
                "SELECT a.attname FROM pg_catalog.pg_index i \
                 JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid \
                 AND a.attnum = ANY (i.indkey) \
                 WHERE i.indrelid = $1 AND i.indisprimary \
                 ORDER BY array_position(i.indkey::int2[], a.attnum)",
                &[&oid],
            )
            .map_err(PgError::from_query)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let fks = tx
            .query(
                "SELECT a.attname, f.relname, fa.attname FROM pg_catalog.pg_constraint co \
                 CROSS JOIN LATERAL unnest(co.conkey, co.confkey) WITH ORDINALITY \
                   AS k(att, fatt, ord) \
                 JOIN pg_catalog.pg_attribute a ON a.attrelid = co.conrelid \
                   AND a.attnum = k.att \
                 JOIN pg_catalog.pg_class f ON f.oid = co.confrelid \
                 JOIN pg_catalog.pg_attribute fa ON fa.attrelid = co.confrelid \
                   AND fa.attnum = k.fatt \
                 WHERE co.contype = 'f' AND co.conrelid = $1 ORDER BY co.oid, k.ord",
                &[&oid],
            )
            .map_err(PgError::from_query)?;
        foreign_keys.extend(fks.iter().map(|r| ForeignKey {
            from_table: name.clone(),
            from_column: r.get(0),
            to_table: r.get(1),
            to_column: r.get(2),
        }));
        let qualified = format!("{}.{}", quote(schema_name), quote(&name));
        let mut table_columns = Vec::with_capacity(columns.len());
        for c in &columns {
            let column: String = c.get(0);
            let examples = if options.distinct_examples == 0 {
                Vec::new()
            } else {
                let col = quote(&column);
                cells(
                    &mut tx,
                    &format!(
                        "SELECT DISTINCT {col} FROM (SELECT {col} FROM {qualified} \
                         LIMIT {EXAMPLE_SCAN_ROWS}) AS s LIMIT {}",
                        options.distinct_examples
                    ),
                )?
                .into_iter()
                .filter_map(|mut row| row.pop())
                .collect()
            };
            table_columns.push(Column {
                primary_key: primary_key.contains(&column),
                name: column,
                declared_type: c.get(1),
                comment: c.get(2),
                examples,
            });
        }
        let rows = if options.sample_rows == 0 {
            Vec::new()
        } else {
            cells(
                &mut tx,
                &format!("SELECT * FROM {qualified} LIMIT {}", options.sample_rows),
            )?
        };
        tables.push(Table {
            name,
            columns: table_columns,
            primary_key,
            rows,
        });
    }
    tx.rollback().map_err(PgError::from_query)?;
    Ok(Schema {
        db_id: db_id.to_owned(),
        tables,
        foreign_keys,
        dialect: Dialect::Postgres,
    })
}

/// An identifier quoted for PostgreSQL, embedded quotes doubled.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The rows of a catalog-built query as prompt cells, typed as the execution path types them.
fn cells(tx: &mut postgres::Transaction<'_>, sql: &str) -> Result<Vec<Vec<Value>>, PgError> {
    let types: Vec<Type> = tx
        .prepare(sql)
        .map_err(PgError::from_query)?
        .columns()
        .iter()
        .map(|c| c.type_().clone())
        .collect();
    let messages = tx.simple_query(sql).map_err(PgError::from_query)?;
    Ok(messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(
                types
                    .iter()
                    .enumerate()
                    .map(|(i, ty)| value(ty, row.get(i)))
                    .collect(),
            ),
            _ => None,
        })
        .collect())
}

impl PgDatabase {
    /// Introspects the database into a pipeline handle.
    pub fn into_handle(
        self,
        db_id: &str,
        options: IntrospectOptions,
    ) -> Result<DatabaseHandle, PgError> {
        let schema = introspect(&self, db_id, options)?;
        Ok(DatabaseHandle::new(db_id, Arc::new(self), schema))
    }
}
