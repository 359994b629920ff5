//! A query reads only its own database's schema. `search_path` is pinned to it, but a
//! qualified name (`other.table`, `information_schema.columns`, `pg_catalog.pg_stats`, which
//! shows sampled values of other tables) reaches past it whenever the role may read there, and
//! a server whose registrations share one PostgreSQL database would then let a token scoped to
//! one schema read another's. Aliases, quoting and views make that undecidable from the text,
//! so PostgreSQL is asked: the verbose plan names the schema of every relation the query scans,
//! and one outside the database's schema refuses the query before it runs. The role's grants
//! stay the first line (docs/DEPLOY.md); this holds even for a role that may read everything.

use quorum_sql::sandbox::ExecError;
use serde_json::Value;

/// The statement that asks PostgreSQL which relations `sql` reads (planned, not run).
pub(crate) fn explain_statement(sql: &str) -> String {
    format!("EXPLAIN (VERBOSE, FORMAT JSON) {sql}")
}

/// Refuses the plan when a scan reads a relation outside `schema`. Function scans carry their
/// function's schema (`pg_catalog` for `generate_series`) and are not relations: only nodes
/// with a relation are looked at.
pub(crate) fn check_plan(plan_json: &str, schema: &str) -> Result<(), ExecError> {
    let plan: Value = serde_json::from_str(plan_json).map_err(|e| ExecError::Denied {
        what: format!("the query's plan could not be read ({e})"),
    })?;
    match outside(&plan, schema) {
        None => Ok(()),
        Some((other, relation)) => Err(ExecError::Denied {
            what: format!(
                "the query reads {other}.{relation}, outside this database's schema `{schema}`"
            ),
        }),
    }
}

fn outside(node: &Value, schema: &str) -> Option<(String, String)> {
    match node {
        Value::Object(map) => {
            if let (Some(Value::String(relation)), Some(Value::String(s))) =
                (map.get("Relation Name"), map.get("Schema"))
                && s != schema
            {
                return Some((s.clone(), relation.clone()));
            }
            map.values().find_map(|v| outside(v, schema))
        }
        Value::Array(items) => items.iter().find_map(|v| outside(v, schema)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_relations_outside_the_schema_are_refused() {
        let own = r#"[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "t", "Schema": "a",
            "Plans": [{"Node Type": "Function Scan", "Function Name": "generate_series",
            "Schema": "pg_catalog"}]}}]"#;
        assert!(check_plan(own, "a").is_ok());
        let other = r#"[{"Plan": {"Node Type": "Hash Join", "Plans": [
            {"Node Type": "Seq Scan", "Relation Name": "t", "Schema": "a"},
            {"Node Type": "Index Scan", "Relation Name": "secret", "Schema": "b"}]}}]"#;
        let e = check_plan(other, "a").expect_err("b.secret");
        assert!(e.to_string().contains("b.secret"), "{e}");
        let catalog = r#"[{"Plan": {"Relation Name": "pg_statistic", "Schema": "pg_catalog"}}]"#;
        assert!(check_plan(catalog, "a").is_err());
        assert!(check_plan("not json", "a").is_err());
    }
}
