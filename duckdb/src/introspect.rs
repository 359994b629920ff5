//! Files read into the prompt schema from DuckDB's catalog: the `main` schema's tables and
//! views in the order they were made (a folder's files, made in name order, then put after the
//! tables they reference: `quorum_sql::table_order`), columns in their order
//! with their types and comments, primary and foreign keys where a DuckDB file declares them,
//! the first rows of each table and a few distinct values per column, drawn from a bounded
//! prefix of the table so that a large one costs no more than a small one.
//!
//! CSV and Parquet files declare no keys, and without them the prompts show no joins and the
//! pipeline's join repairs and foreign keys inferred from names (`quorum_sql::inferred_keys`,
//! which reads single-column primary keys) have nothing to stand on. So in a database that
//! declares no primary key at all, a table's key is read off its data: the first column named
//! `id` or ending in `id` whose values are all present and distinct. Its foreign keys are then
//! those its names imply, and the columns named after another table
//! (`quorum_sql::inferred_keys::keys_named_after_tables`) whose values are, but for a few, that
//! table's key: in such a database the data can settle what a name alone does not.

use std::sync::Arc;

use duckdb::Connection;
use quorum_sql::database::DatabaseHandle;
use quorum_sql::dialect::Dialect;
use quorum_sql::inferred_keys::{inferred_foreign_keys, keys_named_after_tables};
use quorum_sql::schema::{Column, ForeignKey, IntrospectOptions, Schema, Table};
use quorum_sql::table_order::referenced_first;
use quorum_sql::value::Value;

use crate::error::DuckDbError;
use crate::source::{DuckDbDatabase, string_literal};
use crate::values::value;

/// Rows a column's distinct examples are drawn from.
const EXAMPLE_SCAN_ROWS: usize = 10_000;

/// The catalog's rows of the served database's own schema.
const OWN: &str = "database_name = current_database() AND schema_name = 'main'";

pub(crate) fn introspect(
    db: &DuckDbDatabase,
    db_id: &str,
    options: IntrospectOptions,
) -> Result<Schema, DuckDbError> {
    let conn = db.connection().map_err(DuckDbError::query)?;
    let names = strings(
        &conn,
        &format!(
            "SELECT name FROM (\
               SELECT table_name AS name, table_oid AS oid FROM duckdb_tables() \
               WHERE {OWN} AND NOT temporary \
               UNION ALL SELECT view_name, view_oid FROM duckdb_views() \
               WHERE {OWN} AND NOT internal AND NOT temporary) ORDER BY oid"
        ),
    )?;
    let declares_keys = !cells(
        &conn,
        &format!(
            "SELECT 1 FROM duckdb_constraints() WHERE {OWN} \
             AND constraint_type = 'PRIMARY KEY' LIMIT 1"
        ),
    )?
    .is_empty();
    let mut tables = Vec::with_capacity(names.len());
    let mut foreign_keys = Vec::new();
    for name in names {
        let table = string_literal(&name);
        let columns = cells(
            &conn,
            &format!(
                "SELECT column_name, data_type, comment FROM duckdb_columns() \
                 WHERE {OWN} AND table_name = {table} ORDER BY column_index"
            ),
        )?;
        let declared_key = strings(
            &conn,
            &format!(
                "SELECT unnest(constraint_column_names) FROM duckdb_constraints() \
                 WHERE {OWN} AND table_name = {table} AND constraint_type = 'PRIMARY KEY'"
            ),
        )?;
        let fks = cells(
            &conn,
            &format!(
                "SELECT unnest(constraint_column_names), referenced_table, \
                 unnest(referenced_column_names) FROM duckdb_constraints() \
                 WHERE {OWN} AND table_name = {table} AND constraint_type = 'FOREIGN KEY' \
                 ORDER BY constraint_index"
            ),
        )?;
        for row in fks {
            let Ok(
                [
                    Value::Text(from),
                    Value::Text(to_table),
                    Value::Text(to_column),
                ],
            ) = <[Value; 3]>::try_from(row)
            else {
                return Err(unexpected("a foreign key", &name));
            };
            foreign_keys.push(ForeignKey {
                from_table: name.clone(),
                from_column: from,
                to_table,
                to_column,
            });
        }
        let quoted = Dialect::DuckDb.quote(&name);
        let primary_key = if declared_key.is_empty() && !declares_keys {
            key_from_data(&conn, &quoted, &columns)?
        } else {
            declared_key
        };
        let mut table_columns = Vec::with_capacity(columns.len());
        for row in columns {
            let mut row = row.into_iter();
            let (Some(Value::Text(column)), Some(declared_type), comment) =
                (row.next(), row.next(), row.next())
            else {
                return Err(unexpected("a column", &name));
            };
            let examples = if options.distinct_examples == 0 {
                Vec::new()
            } else {
                let col = Dialect::DuckDb.quote(&column);
                cells(
                    &conn,
                    &format!(
                        "SELECT DISTINCT {col} FROM (SELECT {col} FROM {quoted} \
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
                declared_type: text(declared_type),
                comment: comment.map(text).filter(|c| !c.trim().is_empty()),
                examples,
            });
        }
        let rows = if options.sample_rows == 0 {
            Vec::new()
        } else {
            cells(
                &conn,
                &format!("SELECT * FROM {quoted} LIMIT {}", options.sample_rows),
            )?
        };
        tables.push(Table {
            name,
            columns: table_columns,
            primary_key,
            rows,
        });
    }
    let mut schema = Schema {
        db_id: db_id.to_owned(),
        tables,
        foreign_keys,
        dialect: Dialect::DuckDb,
    };
    if !declares_keys && schema.foreign_keys.is_empty() {
        let mut keys = inferred_foreign_keys(&schema);
        schema.foreign_keys.clone_from(&keys);
        for candidate in keys_named_after_tables(&schema) {
            if values_within_key(&conn, &candidate)? {
                keys.push(candidate);
            }
        }
        schema.foreign_keys = keys;
        // A folder's files come in name order, which is no author's.
        referenced_first(&mut schema);
    }
    Ok(schema)
}

/// Share of a named column's distinct values that must be the referenced key's for the link to
/// be kept: data exported from a live system keeps a few references whose row is gone (Spider's
/// `model_list` names a maker `car_makers` lacks), and a column that only shares a name with a
/// table holds other values altogether.
const KEY_VALUE_SHARE: f64 = 0.9;

/// Whether the referencing column holds values and at least [`KEY_VALUE_SHARE`] of its distinct
/// ones are the referenced key's (compared as text, so that an integer key read from one file
/// meets the same numbers read as text from another).
fn values_within_key(conn: &Connection, key: &ForeignKey) -> Result<bool, DuckDbError> {
    let q = |name: &str| Dialect::DuckDb.quote(name);
    let (from, column) = (q(&key.from_table), q(&key.from_column));
    let (to, to_column) = (q(&key.to_table), q(&key.to_column));
    let counts = cells(
        conn,
        &format!(
            "SELECT count(*), count(k.v) FROM \
             (SELECT DISTINCT CAST({column} AS VARCHAR) AS v FROM {from} \
              WHERE {column} IS NOT NULL) AS d \
             LEFT JOIN (SELECT DISTINCT CAST({to_column} AS VARCHAR) AS v FROM {to}) AS k \
             ON d.v = k.v"
        ),
    )?;
    let [Value::Integer(values), Value::Integer(in_key)] =
        counts.first().map(Vec::as_slice).unwrap_or_default()
    else {
        return Err(unexpected("a key's values", &key.from_table));
    };
    Ok(*values > 0 && *in_key as f64 >= KEY_VALUE_SHARE * *values as f64)
}

/// A catalog row not of the shape its query asks for (names are text, never NULL).
fn unexpected(what: &str, table: &str) -> DuckDbError {
    DuckDbError::Query {
        message: format!("DuckDB's catalog described {what} of {table} in an unexpected form"),
    }
}

/// The first column named `id` or ending in `id` (any case) whose values are all present and
/// distinct, as a one-column key; none when no column is.
fn key_from_data(
    conn: &Connection,
    table: &str,
    columns: &[Vec<Value>],
) -> Result<Vec<String>, DuckDbError> {
    for row in columns {
        let Some(Value::Text(column)) = row.first() else {
            continue;
        };
        if !column.to_ascii_lowercase().ends_with("id") {
            continue;
        }
        let col = Dialect::DuckDb.quote(column);
        let unique = cells(
            conn,
            &format!("SELECT count(*) > 0 AND count(DISTINCT {col}) = count(*) FROM {table}"),
        )?;
        if matches!(
            unique.first().and_then(|r| r.first()),
            Some(Value::Integer(1))
        ) {
            return Ok(vec![column.clone()]);
        }
    }
    Ok(Vec::new())
}

fn text(value: Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Text(t) => t,
        other => other.to_string(),
    }
}

/// The rows of a catalog-built query, typed as the execution path types them.
fn cells(conn: &Connection, sql: &str) -> Result<Vec<Vec<Value>>, DuckDbError> {
    let mut statement = conn.prepare(sql).map_err(DuckDbError::query)?;
    let mut result = statement.query([]).map_err(DuckDbError::query)?;
    let width = result.as_ref().map_or(0, |s| s.column_count());
    let mut rows = Vec::new();
    while let Some(row) = result.next().map_err(DuckDbError::query)? {
        rows.push(
            (0..width)
                .map(|i| row.get_ref(i).map(value))
                .collect::<Result<_, _>>()
                .map_err(DuckDbError::query)?,
        );
    }
    Ok(rows)
}

/// The first column of a catalog-built query's rows, as text.
fn strings(conn: &Connection, sql: &str) -> Result<Vec<String>, DuckDbError> {
    Ok(cells(conn, sql)?
        .into_iter()
        .filter_map(|row| row.into_iter().next().map(text))
        .collect())
}

impl DuckDbDatabase {
    /// Introspects the database into a pipeline handle.
    pub fn into_handle(
        self,
        db_id: &str,
        options: IntrospectOptions,
    ) -> Result<DatabaseHandle, DuckDbError> {
        let schema = introspect(&self, db_id, options)?;
        Ok(DatabaseHandle::new(db_id, Arc::new(self), schema))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::DuckDbSource;

    fn foreign_keys(schema: &Schema) -> Vec<String> {
        schema
            .foreign_keys
            .iter()
            .map(|fk| {
                format!(
                    "{}.{}->{}.{}",
                    fk.from_table, fk.from_column, fk.to_table, fk.to_column
                )
            })
            .collect()
    }

    #[test]
    fn files_without_keys_get_them_from_their_data_and_names() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let shop = dir.path().join("shop");
        std::fs::create_dir(&shop).expect("folder");
        std::fs::write(
            shop.join("orders.csv"),
            "id,total,warehouse,customer\n1,9.5,1,Ada\n2,20,2,Bob\n3,4,1,Ada\n",
        )
        .expect("csv");
        std::fs::write(shop.join("warehouses.csv"), "wh_id,city\n1,Oslo\n2,Rome\n").expect("csv");
        std::fs::write(
            shop.join("customers.csv"),
            "customer_id,name\n1,Ada\n2,Bob\n",
        )
        .expect("csv");
        std::fs::write(
            shop.join("items.csv"),
            "order_id,item_id,sku\n1,10,a\n1,11,b\n2,12,a\n",
        )
        .expect("csv");
        std::fs::write(shop.join("notes.csv"), "paid,note\n1,x\n1,y\n").expect("csv");
        let db = DuckDbDatabase::open(DuckDbSource::new(&shop), Some(dir.path())).expect("opens");
        let handle = db
            .into_handle("shop", IntrospectOptions::default())
            .expect("introspects");
        let key = |t: &str| handle.schema.table(t).expect(t).primary_key.clone();
        // The files in name order, each table after those it references (warehouses before
        // orders, orders before items).
        let names: Vec<&str> = handle
            .schema
            .tables
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["customers", "notes", "warehouses", "orders", "items"]
        );
        // `order_id` repeats; `item_id` is the first id-named column that does not.
        assert_eq!(key("items"), ["item_id"]);
        assert_eq!(key("orders"), ["id"]);
        // `paid` ends in "id" but repeats; nothing else is named like a key.
        assert!(key("notes").is_empty());
        // `warehouse` is named after a table and holds its keys; `customer` is named after one
        // but holds names, not `customer_id`s.
        let fks = foreign_keys(&handle.schema);
        assert_eq!(
            fks,
            [
                "orders.warehouse->warehouses.wh_id",
                "items.order_id->orders.id"
            ]
        );
    }

    /// A DuckDB file is served as it is (no copy), read-only, with the keys it declares.
    #[test]
    fn a_duckdb_file_is_served_with_its_declared_keys() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let file = dir.path().join("shop.duckdb");
        {
            let conn = Connection::open(&file).expect("creates");
            conn.execute_batch(
                "CREATE TABLE customers (code VARCHAR PRIMARY KEY, name VARCHAR); \
                 CREATE TABLE orders (num INTEGER PRIMARY KEY, customer VARCHAR \
                   REFERENCES customers (code), total DOUBLE); \
                 COMMENT ON COLUMN orders.total IS 'in euros, tax included'; \
                 INSERT INTO customers VALUES ('c1', 'Ada'); \
                 INSERT INTO orders VALUES (7, 'c1', 12.5);",
            )
            .expect("fills");
        }
        let before = std::fs::read(&file).expect("bytes");
        let db = DuckDbDatabase::open(DuckDbSource::new(&file), Some(dir.path())).expect("opens");
        let conn = db.connection().expect("connection");
        assert!(
            conn.execute_batch("DELETE FROM orders").is_err(),
            "read-only"
        );
        let handle = db
            .into_handle("shop", IntrospectOptions::default())
            .expect("introspects");
        let orders = handle.schema.table("orders").expect("orders");
        assert_eq!(orders.primary_key, ["num"]);
        let total = orders
            .columns
            .iter()
            .find(|c| c.name == "total")
            .expect("total");
        assert_eq!(total.comment.as_deref(), Some("in euros, tax included"));
        let fks = foreign_keys(&handle.schema);
        assert_eq!(fks, ["orders.customer->customers.code"]);
        drop(handle);
        // Only the database's own file is in the folder: no copy was made beside it.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["shop.duckdb"]);
        assert_eq!(std::fs::read(&file).expect("bytes"), before, "unchanged");
    }
}
