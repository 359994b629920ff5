//! Databases and values.

use quorum_proto::v1 as pb;
use quorum_sql::schema::Schema;
use quorum_sql::value::Value;

use crate::databases::{Database, Origin};

/// A result cell, sample row cell or column example on the wire.
pub fn value(v: &Value) -> pb::Value {
    use pb::value::Kind;
    let kind = match v {
        Value::Null => Kind::Null(true),
        Value::Integer(i) => Kind::Integer(*i),
        Value::Real(x) => Kind::Real(*x),
        Value::Text(s) => Kind::Text(s.clone()),
        Value::Blob(b) => Kind::Blob(b.clone()),
    };
    pb::Value { kind: Some(kind) }
}

fn origin(o: Origin) -> pb::DatabaseOrigin {
    match o {
        Origin::Config => pb::DatabaseOrigin::Config,
        Origin::Scan => pb::DatabaseOrigin::Scan,
        Origin::Registered => pb::DatabaseOrigin::Registered,
    }
}

pub fn database_summary(db: &Database) -> pb::DatabaseSummary {
    pb::DatabaseSummary {
        db_id: db.handle.db_id.clone(),
        table_count: db.handle.schema.tables.len() as u32,
        origin: origin(db.origin).into(),
        dialect: db.handle.dialect().name().to_owned(),
        location: db.handle.backend.location(),
    }
}

pub fn describe_response(db: &Database) -> pb::DescribeDatabaseResponse {
    let schema: &Schema = &db.handle.schema;
    let tables = schema
        .tables
        .iter()
        .map(|t| pb::Table {
            name: t.name.clone(),
            columns: t
                .columns
                .iter()
                .map(|c| pb::Column {
                    name: c.name.clone(),
                    declared_type: c.declared_type.clone(),
                    primary_key: c.primary_key,
                    examples: c.examples.iter().map(value).collect(),
                })
                .collect(),
            primary_key: t.primary_key.clone(),
            sample_rows: t
                .rows
                .iter()
                .map(|r| pb::Row {
                    values: r.iter().map(value).collect(),
                })
                .collect(),
        })
        .collect();
    let foreign_keys = schema
        .foreign_keys
        .iter()
        .map(|f| pb::ForeignKey {
            from_table: f.from_table.clone(),
            from_column: f.from_column.clone(),
            to_table: f.to_table.clone(),
            to_column: f.to_column.clone(),
        })
        .collect();
    pb::DescribeDatabaseResponse {
        db_id: schema.db_id.clone(),
        tables,
        foreign_keys,
        origin: origin(db.origin).into(),
    }
}
