//! Tables in the order a schema's author would write them, for a catalog that keeps none.
//!
//! SQLite lists tables as they were created, PostgreSQL by their oids, so a prompt shows them
//! as the database's author wrote its DDL: a table after the tables it references (its
//! foreign keys could not be declared otherwise). MySQL's `information_schema` and a folder of
//! files list them by name, which puts `Cartoon` before the `TV_Channel` it references and
//! `Friend` before `Highschooler`. The generators learned from prompts in the authors' order,
//! so for such catalogs the tables are put back into one: every table after those it
//! references, ties (and cycles) broken by the catalog's order.

use crate::schema::Schema;

/// Reorders `schema.tables` so that a table comes after every table its foreign keys
/// reference, keeping the catalog's order wherever the keys leave a choice: at each step the
/// first table in the current order whose referenced tables are all placed. A cycle of
/// references places the first of its tables first. The foreign keys follow their tables' new
/// order (as [`Schema::foreign_keys`] are kept), in their own order within a table.
pub fn referenced_first(schema: &mut Schema) {
    let count = schema.tables.len();
    let index_of = |name: &str| {
        schema
            .tables
            .iter()
            .position(|t| t.name.eq_ignore_ascii_case(name))
    };
    // references[i]: the tables table i references, itself excluded.
    let mut references: Vec<Vec<usize>> = vec![Vec::new(); count];
    for key in &schema.foreign_keys {
        if let (Some(from), Some(to)) = (index_of(&key.from_table), index_of(&key.to_table))
            && from != to
            && !references[from].contains(&to)
        {
            references[from].push(to);
        }
    }
    let mut placed = vec![false; count];
    let mut order = Vec::with_capacity(count);
    while order.len() < count {
        let next = (0..count)
            .find(|&i| !placed[i] && references[i].iter().all(|&r| placed[r]))
            .or_else(|| (0..count).find(|&i| !placed[i]))
            .expect("an unplaced table remains");
        placed[next] = true;
        order.push(next);
    }
    let mut tables: Vec<Option<_>> = std::mem::take(&mut schema.tables)
        .into_iter()
        .map(Some)
        .collect();
    schema.tables = order.into_iter().filter_map(|i| tables[i].take()).collect();
    let position = |name: &str| {
        schema
            .tables
            .iter()
            .position(|t| t.name.eq_ignore_ascii_case(name))
            .unwrap_or(count)
    };
    let mut keys = std::mem::take(&mut schema.foreign_keys);
    keys.sort_by_key(|k| position(&k.from_table));
    schema.foreign_keys = keys;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;
    use crate::schema::{ForeignKey, Table};

    fn schema(names: &[&str], keys: &[(&str, &str)]) -> Schema {
        Schema {
            db_id: "db".into(),
            tables: names
                .iter()
                .map(|n| Table {
                    name: (*n).into(),
                    columns: Vec::new(),
                    primary_key: Vec::new(),
                    rows: Vec::new(),
                })
                .collect(),
            foreign_keys: keys
                .iter()
                .map(|(from, to)| ForeignKey {
                    from_table: (*from).into(),
                    from_column: "x".into(),
                    to_table: (*to).into(),
                    to_column: "y".into(),
                })
                .collect(),
            dialect: Dialect::MySql,
        }
    }

    fn names(s: &Schema) -> Vec<&str> {
        s.tables.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn referenced_tables_come_first_and_the_catalog_breaks_ties() {
        // tvshow as MySQL lists it (by name).
        let mut s = schema(
            &["cartoon", "tv_channel", "tv_series"],
            &[("tv_series", "tv_channel"), ("cartoon", "tv_channel")],
        );
        referenced_first(&mut s);
        assert_eq!(names(&s), ["tv_channel", "cartoon", "tv_series"]);
        let from: Vec<&str> = s
            .foreign_keys
            .iter()
            .map(|k| k.from_table.as_str())
            .collect();
        assert_eq!(from, ["cartoon", "tv_series"]);

        // network_1: names in any case, a table referenced twice.
        let mut s = schema(
            &["Friend", "Highschooler", "Likes"],
            &[
                ("friend", "highschooler"),
                ("friend", "highschooler"),
                ("likes", "highschooler"),
            ],
        );
        referenced_first(&mut s);
        assert_eq!(names(&s), ["Highschooler", "Friend", "Likes"]);
    }

    #[test]
    fn unrelated_tables_keep_their_order_and_cycles_end() {
        let mut s = schema(&["b", "a", "c"], &[]);
        referenced_first(&mut s);
        assert_eq!(names(&s), ["b", "a", "c"]);
        // a → b → a, and c → c: c references nothing else, so it is free first; then the
        // cycle's first table breaks it.
        let mut s = schema(&["a", "b", "c"], &[("a", "b"), ("b", "a"), ("c", "c")]);
        referenced_first(&mut s);
        assert_eq!(names(&s), ["c", "a", "b"]);
        // A table referencing one unknown to the schema is not held back.
        let mut s = schema(&["z", "y"], &[("z", "gone")]);
        referenced_first(&mut s);
        assert_eq!(names(&s), ["z", "y"]);
    }
}
