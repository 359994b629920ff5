//! A MySQL database read into the prompt schema: tables after the tables they reference, by
//! name where keys leave a choice (`quorum_sql::table_order`), columns in their order with
//! their types and comments, primary and foreign keys, the first rows of each table and a few
//! distinct values per column (from a bounded prefix of the table, so a large table costs no
//! more than a small one). Everything is read in one read-only transaction under a time limit.

use std::sync::Arc;

use mysql::prelude::Queryable;
use mysql::{AccessMode, TxOpts};
use quorum_sql::database::DatabaseHandle;
use quorum_sql::dialect::Dialect;
use quorum_sql::schema::{Column, ForeignKey, IntrospectOptions, Schema, Table};
use quorum_sql::table_order::referenced_first;
use quorum_sql::value::Value;

use crate::error::MySqlError;
use crate::source::MySqlDatabase;
use crate::values::value;

/// Rows a column's distinct examples are drawn from.
const EXAMPLE_SCAN_ROWS: usize = 10_000;
/// Each introspection statement's time limit.
const INTROSPECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub(crate) fn introspect(
    db: &MySqlDatabase,
    db_id: &str,
    options: IntrospectOptions,
) -> Result<Schema, MySqlError> {
    let mut conn = db.conn().map_err(|e| MySqlError::Connect {
        message: e.to_string(),
    })?;
    conn.query_drop(
        db.flavor()
            .limit_statements(INTROSPECT_TIMEOUT, usize::MAX - 1),
    )
    .map_err(MySqlError::from_query)?;
    let mut tx = conn
        .start_transaction(TxOpts::default().set_access_mode(Some(AccessMode::ReadOnly)))
        .map_err(MySqlError::from_query)?;
    let database = db.database_name().to_owned();
    let names: Vec<String> = tx
        .exec(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? \
             ORDER BY TABLE_NAME",
            (&database,),
        )
        .map_err(MySqlError::from_query)?;
    let mut tables = Vec::with_capacity(names.len());
    let mut foreign_keys = Vec::new();
    for name in names {
        let columns: Vec<(String, String, String)> = tx
            .exec(
                "SELECT COLUMN_NAME, COLUMN_TYPE, COLUMN_COMMENT FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                (&database, &name),
            )
            .map_err(MySqlError::from_query)?;
        let primary_key: Vec<String> = tx
            .exec(
                "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY' \
                 ORDER BY ORDINAL_POSITION",
                (&database, &name),
            )
            .map_err(MySqlError::from_query)?;
        let fks: Vec<(String, String, String)> = tx
            .exec(
                "SELECT COLUMN_NAME, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME \
                 FROM information_schema.KEY_COLUMN_USAGE \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? \
                 AND REFERENCED_TABLE_NAME IS NOT NULL \
                 AND REFERENCED_TABLE_SCHEMA = TABLE_SCHEMA \
                 ORDER BY CONSTRAINT_NAME, ORDINAL_POSITION",
                (&database, &name),
            )
            .map_err(MySqlError::from_query)?;
        foreign_keys.extend(
            fks.into_iter()
                .map(|(from, to_table, to_column)| ForeignKey {
                    from_table: name.clone(),
                    from_column: from,
                    to_table,
                    to_column,
                }),
        );
        let qualified = format!("{}.{}", quote(&database), quote(&name));
        let mut table_columns = Vec::with_capacity(columns.len());
        for (column, declared_type, comment) in columns {
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
                declared_type,
                comment: Some(comment).filter(|c| !c.trim().is_empty()),
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
    tx.rollback().map_err(MySqlError::from_query)?;
    let mut schema = Schema {
        db_id: db_id.to_owned(),
        tables,
        foreign_keys,
        dialect: Dialect::MySql,
    };
    // `information_schema` keeps no creation order.
    referenced_first(&mut schema);
    Ok(schema)
}

/// An identifier quoted for MySQL, embedded backticks doubled.
pub(crate) fn quote(name: &str) -> String {
    Dialect::MySql.quote(name)
}

/// The rows of a catalog-built query as prompt cells, typed as the execution path types them.
fn cells(tx: &mut mysql::Transaction<'_>, sql: &str) -> Result<Vec<Vec<Value>>, MySqlError> {
    let statement = tx.prep(sql).map_err(MySqlError::from_query)?;
    let mut result = tx
        .exec_iter(&statement, ())
        .map_err(MySqlError::from_query)?;
    let columns = result.columns().as_ref().to_vec();
    let mut rows = Vec::new();
    for row in result.by_ref() {
        let row = row.map_err(MySqlError::from_query)?;
        rows.push(
            row.unwrap()
                .into_iter()
                .zip(&columns)
                .map(|(cell, column)| value(column, cell))
                .collect(),
        );
    }
    Ok(rows)
}

impl MySqlDatabase {
    /// Introspects the database into a pipeline handle.
    pub fn into_handle(
        self,
        db_id: &str,
        options: IntrospectOptions,
    ) -> Result<DatabaseHandle, MySqlError> {
        let schema = introspect(&self, db_id, options)?;
        Ok(DatabaseHandle::new(db_id, Arc::new(self), schema))
    }
}
