//! Schema-aware explanations of SQLite errors for the revision prompt.
//!
//! Small models rarely fix `no such column: Height` from the message alone: they repeat the
//! query. What they lack is the fact the database knows, namely which table does have that
//! column, or which real name is closest to the one they invented. This looks those facts up
//! in the schema and states them in one or two sentences.

use crate::rules::repair::{named_after, normalize};
use crate::schema::Schema;

/// A hint for `message` (the sandbox's error text) over `schema`, when the error names a
/// column or table that the schema can say something about.
pub fn explain_error(message: &str, schema: &Schema) -> Option<String> {
    if let Some(name) = named_after(message, "no such column: ") {
        return Some(explain_column(name, schema));
    }
    if let Some(name) = named_after(message, "ambiguous column name: ") {
        let column = name.rsplit('.').next().unwrap_or(name);
        let owners = owners(column, schema);
        let qualified: Vec<String> = owners.iter().map(|t| format!("{t}.{column}")).collect();
        return Some(format!(
            "Several joined tables have a column `{column}`; write it with its table, e.g. {}.",
            qualified.join(" or ")
        ));
    }
    if let Some(name) = named_after(message, "no such table: ") {
        let wanted = normalize(name.rsplit('.').next().unwrap_or(name));
        let tables: Vec<&str> = schema.table_names().collect();
        let close: Vec<&str> = tables
            .iter()
            .copied()
            .filter(|t| similar(&normalize(t), &wanted))
            .collect();
        return Some(if close.is_empty() {
            format!(
                "There is no table `{name}`. The tables are: {}.",
                tables.join(", ")
            )
        } else {
            format!(
                "There is no table `{name}`; did you mean {}?",
                close.join(" or ")
            )
        });
    }
    None
}

fn explain_column(name: &str, schema: &Schema) -> String {
    let column = name.rsplit('.').next().unwrap_or(name);
    let exact = owners(column, schema);
    if !exact.is_empty() {
        let keys = join_hint(&exact, schema);
        return format!(
            "`{column}` is a column of {}, so that table must be in the FROM clause (joined if needed{keys}), and the column written with that table's alias.",
            exact.join(" and ")
        );
    }
    let wanted = normalize(column);
    let close: Vec<String> = schema
        .tables
        .iter()
        .flat_map(|t| {
            t.columns
                .iter()
                .filter(|c| similar(&normalize(&c.name), &wanted))
                .map(move |c| format!("{}.{}", t.name, c.name))
        })
        .take(4)
        .collect();
    if close.is_empty() {
        format!(
            "No table has a column named `{column}`; use only the columns listed in the schema."
        )
    } else {
        format!(
            "No table has a column named `{column}`; the closest columns are {}.",
            close.join(", ")
        )
    }
}

/// Tables with a column named `column` (case-insensitive), in schema order.
fn owners(column: &str, schema: &Schema) -> Vec<String> {
    schema
        .tables
        .iter()
        .filter(|t| t.column(column).is_some())
        .map(|t| t.name.clone())
        .collect()
}

/// ": join on A.x = B.y" for the foreign keys touching the owning tables, to show how to reach
/// them.
fn join_hint(owners: &[String], schema: &Schema) -> String {
    let keys: Vec<String> = schema
        .foreign_keys
        .iter()
        .filter(|fk| {
            owners.iter().any(|o| {
                o.eq_ignore_ascii_case(&fk.from_table) || o.eq_ignore_ascii_case(&fk.to_table)
            })
        })
        .take(3)
        .map(|fk| {
            format!(
                "{}.{} = {}.{}",
                fk.from_table, fk.from_column, fk.to_table, fk.to_column
            )
        })
        .collect();
    if keys.is_empty() {
        String::new()
    } else {
        format!(" on {}", keys.join(" or "))
    }
}

/// Equal after normalizing, or one contains the other (`name` in `first_name`), or differ only
/// by a plural `s`.
fn similar(a: &str, b: &str) -> bool {
    if a.is_empty() || b.is_empty() {
        return false;
    }
    a == b
        || (a.len() >= 3 && b.len() >= 3 && (a.contains(b) || b.contains(a)))
        || a.trim_end_matches('s') == b.trim_end_matches('s')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::fixture::schema;

    #[test]
    fn a_column_of_another_table_names_its_table_and_the_join() {
        let poker = schema("poker_player");
        let hint = explain_error("SQL error: no such column: Height", &poker).expect("hint");
        assert!(hint.starts_with("`Height` is a column of people"), "{hint}");
        assert!(
            hint.contains("poker_player.People_ID = people.People_ID"),
            "{hint}"
        );
    }

    #[test]
    fn an_invented_column_gets_the_closest_real_ones() {
        let pets = schema("pets_1");
        let hint = explain_error("SQL error: no such column: T2.pet_type", &pets).expect("hint");
        assert!(hint.contains("Pets.PetType"), "{hint}");
    }

    #[test]
    fn tables_and_ambiguity() {
        let concert = schema("concert_singer");
        let hint = explain_error("no such table: singers", &concert).expect("hint");
        assert!(hint.contains("did you mean singer"), "{hint}");
        let hint = explain_error("ambiguous column name: Name", &concert).expect("hint");
        assert!(hint.contains("stadium.Name or singer.Name"), "{hint}");
        assert_eq!(explain_error("near \"FROM\": syntax error", &concert), None);
    }
}
