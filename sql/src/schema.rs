//! Introspection of a SQLite database into plain data: tables, columns with declared types,
//! primary and foreign keys, the first rows of each table (PET-SQL's cell values) and a few
//! distinct values per column (M-Schema's examples).
//!
//! The database is opened read-only: introspection must never be able to change a benchmark
//! database, and a read-only open also works on files without write permission.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};

use crate::dialect::Dialect;
use crate::value::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    /// The type as written in `CREATE TABLE` (may be empty: SQLite does not require one).
    pub declared_type: String,
    pub primary_key: bool,
    /// A description; SQLite has no column comments, so introspection leaves it empty and
    /// callers with external metadata (BIRD descriptions) may fill it in.
    pub comment: Option<String>,
    /// Up to `IntrospectOptions::distinct_examples` values of `SELECT DISTINCT col`, in the
    /// order SQLite returns them, NULL included (renderers decide what to drop).
    pub examples: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    /// Primary key column names in key order.
    pub primary_key: Vec<String>,
    /// The first rows in rowid order, one value per column.
    pub rows: Vec<Vec<Value>>,
}

impl Table {
    /// Case-insensitive column lookup (SQLite identifiers are case-insensitive).
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignKey {
    pub from_table: String,
    pub from_column: String,
    pub to_table: String,
    pub to_column: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    pub db_id: String,
    /// Tables in `sqlite_master` order.
    pub tables: Vec<Table>,
    /// Foreign keys by table order, then in `PRAGMA foreign_key_list` order (which is also the
    /// order of Spider's tables.json).
    pub foreign_keys: Vec<ForeignKey>,
    /// The dialect of the database the schema was read from; prompts name it.
    #[serde(default)]
    pub dialect: Dialect,
}

/// How much data introspection samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntrospectOptions {
    /// Rows per table for cell values; PET-SQL shows 3.
    pub sample_rows: usize,
    /// Distinct values per column; M-Schema fetches 5 and shows at most 3 of them.
    pub distinct_examples: usize,
}

impl Default for IntrospectOptions {
    fn default() -> Self {
        Self {
            sample_rows: 3,
            distinct_examples: 5,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("cannot open database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("cannot list the tables of database {db_id}: {source}")]
    ListTables {
        db_id: String,
        source: rusqlite::Error,
    },
    #[error("cannot read the {what} of table {table}: {source}")]
    ReadTable {
        table: String,
        what: &'static str,
        source: rusqlite::Error,
    },
}

impl SchemaError {
    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Open { .. } => "open",
            Self::ListTables { .. } => "list_tables",
            Self::ReadTable { .. } => "read_table",
        }
    }
}

/// Quotes an identifier for SQLite, doubling embedded quotes.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Schema {
    /// Opens `path` read-only and introspects it.
    pub fn from_sqlite(
        path: &Path,
        db_id: &str,
        options: IntrospectOptions,
    ) -> Result<Self, SchemaError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(path, flags).map_err(|source| SchemaError::Open {
                path: path.to_owned(),
                source,
            })?;
        Self::from_connection(&conn, db_id, options)
    }

    /// Introspects an open connection.
    pub fn from_connection(
        conn: &Connection,
        db_id: &str,
        options: IntrospectOptions,
    ) -> Result<Self, SchemaError> {
        let names = list_tables(conn).map_err(|source| SchemaError::ListTables {
            db_id: db_id.to_owned(),
            source,
        })?;
        let mut tables = Vec::with_capacity(names.len());
        for name in &names {
            tables.push(read_table(conn, name, options)?);
        }
        let mut foreign_keys = Vec::new();
        for table in &tables {
            let raw =
                read_foreign_keys(conn, &table.name).map_err(|source| SchemaError::ReadTable {
                    table: table.name.clone(),
                    what: "foreign keys",
                    source,
                })?;
            foreign_keys.extend(resolve_foreign_keys(&tables, table, raw));
        }
        Ok(Self {
            db_id: db_id.to_owned(),
            tables,
            foreign_keys,
            dialect: Dialect::Sqlite,
        })
    }

    /// Case-insensitive table lookup.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
    }

    pub fn table_names(&self) -> impl Iterator<Item = &str> {
        self.tables.iter().map(|t| t.name.as_str())
    }

    /// Keeps only the named tables (case-insensitive, in schema order) and only the foreign
    /// keys whose both ends survive: round 2 of PET-SQL shows just the linked tables.
    pub fn restrict_to<S: AsRef<str>>(&self, names: &[S]) -> Self {
        let keep = |table: &str| names.iter().any(|n| n.as_ref().eq_ignore_ascii_case(table));
        Self {
            db_id: self.db_id.clone(),
            tables: self
                .tables
                .iter()
                .filter(|t| keep(&t.name))
                .cloned()
                .collect(),
            foreign_keys: self
                .foreign_keys
                .iter()
                .filter(|fk| keep(&fk.from_table) && keep(&fk.to_table))
                .cloned()
                .collect(),
            dialect: self.dialect,
        }
    }
}

fn list_tables(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid",
    )?;
    let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
    rows.collect()
}

fn read_table(
    conn: &Connection,
    name: &str,
    options: IntrospectOptions,
) -> Result<Table, SchemaError> {
    let err = |what: &'static str| {
        move |source| SchemaError::ReadTable {
            table: name.to_owned(),
            what,
            source,
        }
    };
    let mut columns = read_columns(conn, name).map_err(err("columns"))?;
    let mut primary_key: Vec<(i64, String)> = Vec::new();
    for (column, pk_index) in &columns {
        if *pk_index > 0 {
            primary_key.push((*pk_index, column.name.clone()));
        }
    }
    primary_key.sort();
    for (column, _) in &mut columns {
        column.examples = read_examples(conn, name, &column.name, options.distinct_examples)
            .map_err(err("distinct values"))?;
    }
    let rows = read_rows(conn, name, options.sample_rows).map_err(err("rows"))?;
    Ok(Table {
        name: name.to_owned(),
        columns: columns.into_iter().map(|(c, _)| c).collect(),
        primary_key: primary_key.into_iter().map(|(_, n)| n).collect(),
        rows,
    })
}

/// Columns with their position in the primary key (0 when not part of it).
fn read_columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<(Column, i64)>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({})", quote_ident(table)))?;
    let rows = stmt.query_map([], |row| {
        let pk: i64 = row.get("pk")?;
        let declared_type: Option<String> = row.get("type")?;
        Ok((
            Column {
                name: row.get("name")?,
                declared_type: declared_type.unwrap_or_default(),
                primary_key: pk > 0,
                comment: None,
                examples: Vec::new(),
            },
            pk,
        ))
    })?;
    rows.collect()
}

fn read_examples(
    conn: &Connection,
    table: &str,
    column: &str,
    limit: usize,
) -> rusqlite::Result<Vec<Value>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT DISTINCT {} FROM {} LIMIT {limit}",
        quote_ident(column),
        quote_ident(table)
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map([], |row| Ok(Value::from_sqlite(row.get_ref(0)?)))?;
    rows.collect()
}

fn read_rows(conn: &Connection, table: &str, limit: usize) -> rusqlite::Result<Vec<Vec<Value>>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let quoted = quote_ident(table);
    // Rowid order makes the sample reproducible; WITHOUT ROWID tables have no rowid, and for
    // them the primary-key order of a plain scan is the natural equivalent.
    let mut stmt = match conn.prepare(&format!(
        "SELECT * FROM {quoted} ORDER BY rowid LIMIT {limit}"
    )) {
        Ok(stmt) => stmt,
        Err(_) => conn.prepare(&format!("SELECT * FROM {quoted} LIMIT {limit}"))?,
    };
    let width = stmt.column_count();
    let rows = stmt.query_map([], |row| {
        (0..width)
            .map(|i| Ok(Value::from_sqlite(row.get_ref(i)?)))
            .collect::<rusqlite::Result<Vec<_>>>()
    })?;
    rows.collect()
}

/// One row of `PRAGMA foreign_key_list`: (id, seq, target table, from column, target column).
type RawForeignKey = (i64, i64, String, String, Option<String>);

fn read_foreign_keys(conn: &Connection, table: &str) -> rusqlite::Result<Vec<RawForeignKey>> {
    let mut stmt = conn.prepare(&format!("PRAGMA foreign_key_list({})", quote_ident(table)))?;
    let rows = stmt.query_map([], |row| {
        Ok((
            row.get("id")?,
            row.get("seq")?,
            row.get("table")?,
            row.get("from")?,
            row.get("to")?,
        ))
    })?;
    rows.collect()
}

/// Maps raw foreign keys onto the schema's spelling of names. A key whose target column is
/// omitted (`REFERENCES t`) points at the target's primary key, column `seq` of it; keys that
/// point at tables or columns that do not exist are dropped, since a prompt must not advertise a
/// join that cannot run.
fn resolve_foreign_keys(
    tables: &[Table],
    from: &Table,
    raw: Vec<RawForeignKey>,
) -> Vec<ForeignKey> {
    let mut out = Vec::new();
    for (_id, seq, to_table, from_column, to_column) in raw {
        let Some(target) = tables
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(&to_table))
        else {
            continue;
        };
        let Some(source_column) = from.column(&from_column) else {
            continue;
        };
        let target_column = match to_column {
            Some(name) => target.column(&name).map(|c| c.name.clone()),
            None => usize::try_from(seq)
                .ok()
                .and_then(|i| target.primary_key.get(i).cloned()),
        };
        let Some(target_column) = target_column else {
            continue;
        };
        out.push(ForeignKey {
            from_table: from.name.clone(),
            from_column: source_column.name.clone(),
            to_table: target.name.clone(),
            to_column: target_column,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spider_fixture::spider_db;

    fn concert_singer() -> Schema {
        Schema::from_sqlite(
            &spider_db("concert_singer"),
            "concert_singer",
            IntrospectOptions::default(),
        )
        .expect("concert_singer introspects")
    }

    #[test]
    fn concert_singer_tables_columns_and_keys() {
        let schema = concert_singer();
        let names: Vec<&str> = schema.table_names().collect();
        assert_eq!(names, ["stadium", "singer", "concert", "singer_in_concert"]);
        let sic = schema
            .table("SINGER_IN_CONCERT")
            .expect("case-insensitive lookup");
        assert_eq!(sic.primary_key, ["concert_ID", "Singer_ID"]);
        let singer = schema.table("singer").expect("singer");
        assert_eq!(singer.columns[6].name, "Is_male");
        assert_eq!(singer.columns[6].declared_type, "bool");
        assert!(singer.columns[0].primary_key);
        assert!(!singer.columns[1].primary_key);
        let fks: Vec<String> = schema
            .foreign_keys
            .iter()
            .map(|fk| {
                format!(
                    "{}.{}={}.{}",
                    fk.from_table, fk.from_column, fk.to_table, fk.to_column
                )
            })
            .collect();
        assert_eq!(
            fks,
            [
                "concert.Stadium_ID=stadium.Stadium_ID",
                "singer_in_concert.Singer_ID=singer.Singer_ID",
                "singer_in_concert.concert_ID=concert.concert_ID",
            ]
        );
    }

    #[test]
    fn rows_and_examples_are_sampled() {
        let schema = concert_singer();
        let singer = schema.table("singer").expect("singer");
        assert_eq!(singer.rows.len(), 3);
        assert_eq!(singer.rows[0][1], Value::Text("Joe Sharp".into()));
        // Name has six distinct values, Country three: the limit of 5 applies to the first.
        assert_eq!(singer.columns[1].examples.len(), 5);
        assert_eq!(singer.columns[2].examples.len(), 3);
        let sic = schema.table("singer_in_concert").expect("sic");
        assert_eq!(sic.rows[0], [Value::Integer(1), Value::Text("2".into())]);
    }

    #[test]
    fn restrict_keeps_only_fks_with_both_ends() {
        let schema = concert_singer();
        let restricted = schema.restrict_to(&["Singer_In_Concert", "singer"]);
        let names: Vec<&str> = restricted.table_names().collect();
        assert_eq!(names, ["singer", "singer_in_concert"]);
        assert_eq!(restricted.foreign_keys.len(), 1);
        assert_eq!(restricted.foreign_keys[0].to_table, "singer");
        assert!(schema.restrict_to::<&str>(&[]).tables.is_empty());
    }

    #[test]
    fn missing_target_column_resolves_to_primary_key() {
        let conn = Connection::open_in_memory().expect("memory db");
        conn.execute_batch(
            "CREATE TABLE a (x INTEGER, y TEXT, PRIMARY KEY (y, x));
             CREATE TABLE b (p TEXT, q INTEGER, FOREIGN KEY (p, q) REFERENCES A);
             CREATE TABLE c (r INTEGER REFERENCES missing(id));
             INSERT INTO a VALUES (1, 'one'), (2, NULL);",
        )
        .expect("setup");
        let schema =
            Schema::from_connection(&conn, "mem", IntrospectOptions::default()).expect("schema");
        let fks: Vec<(&str, &str)> = schema
            .foreign_keys
            .iter()
            .map(|fk| (fk.from_column.as_str(), fk.to_column.as_str()))
            .collect();
        assert_eq!(fks, [("p", "y"), ("q", "x")]);
        assert_eq!(schema.foreign_keys[0].to_table, "a");
        let a = schema.table("a").expect("a");
        assert_eq!(a.primary_key, ["y", "x"]);
        // DISTINCT over the key's index returns NULL first: examples keep SQLite's order.
        assert_eq!(
            a.columns[1].examples,
            [Value::Null, Value::Text("one".into())]
        );
    }

    /// Every Spider database introspects, and its foreign keys point at existing columns.
    #[test]
    fn all_spider_databases_introspect() {
        let dir = crate::spider_fixture::spider().database_dir();
        let mut count = 0;
        for entry in std::fs::read_dir(&dir).expect("database dir") {
            let db_id = entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            let path = crate::dataset::database_path(&dir, &db_id);
            if !path.exists() {
                continue;
            }
            let schema = Schema::from_sqlite(&path, &db_id, IntrospectOptions::default())
                .unwrap_or_else(|e| panic!("{db_id}: {e}"));
            assert!(!schema.tables.is_empty(), "{db_id} has tables");
            for fk in &schema.foreign_keys {
                let target = schema.table(&fk.to_table).expect("target table");
                assert!(target.column(&fk.to_column).is_some(), "{db_id}: {fk:?}");
            }
            count += 1;
        }
        assert!(count >= 160, "found {count} databases");
    }

    #[test]
    fn missing_database_is_an_open_error() {
        let err = Schema::from_sqlite(
            Path::new("/nonexistent/quorum/x.sqlite"),
            "x",
            IntrospectOptions::default(),
        )
        .expect_err("no such file");
        assert_eq!(err.kind(), "open");
    }

    #[test]
    fn values_print_like_python() {
        let cases = [
            (Value::Null, "None"),
            (Value::Integer(-3), "-3"),
            (Value::Real(1.0), "1.0"),
            (Value::Real(2.5), "2.5"),
            (Value::Real(0.00001), "1e-05"),
            (Value::Real(1e16), "1e+16"),
            (Value::Real(123456.789), "123456.789"),
            (Value::Text("a b".into()), "a b"),
            (Value::Blob(vec![b'a', 0]), "b'a\\x00'"),
        ];
        for (value, expected) in cases {
            assert_eq!(value.to_string(), expected, "{value:?}");
        }
    }
}
