//! Schema linking: which tables, columns and stored values a question is about, and which words
//! of it name the schema.
//!
//! Before the first prompt, a large schema is cut down to the tables the question is about
//! ([`schema_filter`]); the question's words are matched against the database's stored text
//! values ([`value_index`]) and, by meaning, against table and column names ([`term_hints`]).
//! After the preliminary SQL, the tables it reads become the linked schema of the second round:
//! [`link_presql`] is that step whole, over the helpers of [`tables`]. For retrieving demonstrations, the words that name the schema are found
//! ([`relevance`], in the Poincaré ball of [`poincare`]) and masked ([`mask`]), and a query's
//! shape is reduced to its skeleton ([`skeleton`]).
//!
//! Nothing here imports the pipeline: the pipeline calls into this wing.

pub mod mask;
pub mod poincare;
pub mod relevance;
pub mod schema_filter;
pub mod skeleton;
pub mod tables;
pub mod term_hints;
pub mod value_index;

use crate::schema::Schema;
use tables::{link_tables, tables_named_in, tables_of_unplaced_columns, with_join_paths};

/// How a preliminary SQL is linked to tables beyond the tables it names.
#[derive(Debug, Clone, Copy, Default)]
pub struct PresqlLinking {
    /// A column the SQL reads from no table it names brings the table that has it.
    pub link_columns: bool,
    /// A table the question names brings itself, beside tables the SQL linked.
    pub link_named_tables: bool,
    /// No table linked: the whole shown schema rather than none.
    pub all_tables_when_unlinked: bool,
}

/// The tables of the second round, linked from the preliminary SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresqlLinks {
    /// Linked tables and the tables joining them, in the schema's order; empty when nothing
    /// was linked and the fallback is off.
    pub tables: Vec<String>,
    /// False when the SQL did not parse and its words gave the tables.
    pub parsed: bool,
    /// Nothing was linked and every shown table was taken.
    pub fell_back_to_all: bool,
}

/// Links `presql`, written for `question` over the `shown` schema (the whole database's, or
/// the schema filter's cut of it), to the tables of `whole`, with the tables that join them.
pub fn link_presql(
    presql: &str,
    question: &str,
    shown: &Schema,
    whole: &Schema,
    how: PresqlLinking,
) -> PresqlLinks {
    let mut linked = link_tables(presql, whole);
    if how.link_columns {
        // Owners are looked for among the tables round 1 showed: on a filtered schema a
        // column name the PreSQL wrote came from those, and a namesake elsewhere in a large
        // database is more likely a coincidence than a table the filter missed.
        let owners = tables_of_unplaced_columns(presql, &linked.tables, shown);
        linked.tables.extend(owners);
    }
    // Only beside tables the PreSQL linked: with none, round 2 falls back to the whole
    // schema or is skipped, and the question's names alone are too few to restrict it.
    if how.link_named_tables && !linked.tables.is_empty() {
        let named = tables_named_in(question, &linked.tables, shown);
        linked.tables.extend(named);
    }
    let fell_back_to_all = linked.tables.is_empty() && how.all_tables_when_unlinked;
    let tables = if fell_back_to_all {
        shown.table_names().map(str::to_owned).collect()
    } else {
        with_join_paths(&linked.tables, whole)
    };
    PresqlLinks {
        tables,
        parsed: linked.parsed,
        fell_back_to_all,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::fixture::schema;

    const ALL: PresqlLinking = PresqlLinking {
        link_columns: true,
        link_named_tables: true,
        all_tables_when_unlinked: true,
    };

    #[test]
    fn a_presql_links_its_tables_the_owners_of_its_columns_and_the_joins_between() {
        let car = schema("car_1");
        // Horsepower is cars_data's alone; car_names joins it to model_list.
        let links = link_presql(
            "SELECT max(horsepower) FROM model_list",
            "What is the largest horsepower of any model?",
            &car,
            &car,
            ALL,
        );
        assert!(links.parsed && !links.fell_back_to_all);
        for table in ["model_list", "cars_data", "car_names"] {
            assert!(
                links.tables.iter().any(|t| t == table),
                "{table}: {links:?}"
            );
        }
        let bare = link_presql(
            "SELECT max(horsepower) FROM model_list",
            "What is the largest horsepower of any model?",
            &car,
            &car,
            PresqlLinking::default(),
        );
        assert_eq!(bare.tables, ["model_list"]);
    }

    #[test]
    fn nothing_linked_takes_every_shown_table_or_none() {
        let car = schema("car_1");
        let links = link_presql("SELECT 1", "How many?", &car, &car, ALL);
        assert!(links.fell_back_to_all);
        assert_eq!(links.tables.len(), car.tables.len());
        let none = link_presql(
            "SELECT 1",
            "How many?",
            &car,
            &car,
            PresqlLinking::default(),
        );
        assert!(none.tables.is_empty() && !none.fell_back_to_all);
    }
}
