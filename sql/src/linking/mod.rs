//! Schema linking: which tables, columns and stored values a question is about, and which words
//! of it name the schema.
//!
//! Before the first prompt, [`link_question`] is that step whole: the question's words are
//! matched against the database's stored text values ([`value_index`]) and, by meaning,
//! against table and column names ([`term_hints`]), and a large schema is cut down to the
//! tables the question is about ([`schema_filter`]).
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

use crate::model::{Embedder, ModelCallError};
use crate::schema::Schema;
use schema_filter::{TableVectors, filter_tables};
use tables::{link_tables, tables_named_in, tables_of_unplaced_columns, with_join_paths};
use term_hints::{TermHint, term_hints};
use value_index::{ValueIndex, ValueMatch};

/// The most stored values value retrieval shows a prompt, and per column.
const MAX_VALUE_MATCHES: usize = 6;
const MAX_VALUE_MATCHES_PER_COLUMN: usize = 2;

/// What a question is linked with before any SQL is written; each part is off when `None`.
#[derive(Clone, Copy, Default)]
pub struct QuestionLinking<'a> {
    /// The database's stored text values (value retrieval).
    pub values: Option<&'a ValueIndex>,
    /// The embedder that finds the question's words for schema names (term hints).
    pub hints_by: Option<&'a dyn Embedder>,
    /// A schema of more tables than this is cut down to the question's (0: never).
    pub filter_above: usize,
    /// The tables' meaning for that cut, and the embedder that reads the question's; without
    /// it the cut goes by names and values alone.
    pub meaning: Option<(&'a TableVectors, &'a dyn Embedder)>,
}

/// A question's links before any SQL is written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuestionLinks {
    /// The stored values the question names.
    pub values: Vec<ValueMatch>,
    /// The question's words for table and column names it does not spell.
    pub hints: Vec<TermHint>,
    /// The tables to show, in schema order; `None` when the schema is shown whole.
    pub shown: Option<Vec<String>>,
}

/// A model call question linking needed, failed.
#[derive(Debug, thiserror::Error)]
#[error("{stage}: {source}")]
pub struct LinkingError {
    /// `term_hints` or `schema_filter`.
    pub stage: &'static str,
    pub source: ModelCallError,
}

/// Links `question` to the values, names and tables of `schema` as `how` says.
pub fn link_question(
    question: &str,
    schema: &Schema,
    how: QuestionLinking<'_>,
) -> Result<QuestionLinks, LinkingError> {
    let values = how.values.map_or_else(Vec::new, |index| {
        index.matches(question, MAX_VALUE_MATCHES, MAX_VALUE_MATCHES_PER_COLUMN)
    });
    let hints = match how.hints_by {
        Some(embedder) => {
            term_hints(question, schema, embedder).map_err(|source| LinkingError {
                stage: "term_hints",
                source,
            })?
        }
        None => Vec::new(),
    };
    let meaning = match how.meaning {
        Some((tables, embedder)) if how.filter_above > 0 => {
            let asked = tables
                .embed_question(embedder, question)
                .map_err(|source| LinkingError {
                    stage: "schema_filter",
                    source,
                })?;
            Some((tables, asked))
        }
        _ => None,
    };
    let shown = filter_tables(
        schema,
        how.filter_above,
        question,
        meaning.as_ref().map(|(t, q)| (*t, q.as_slice())),
        &values,
    );
    Ok(QuestionLinks {
        values,
        hints,
        shown,
    })
}

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
    fn a_question_is_linked_as_asked_and_a_large_schema_filtered() {
        let car = schema("car_1");
        let whole = link_question(
            "Which car makers are there?",
            &car,
            QuestionLinking::default(),
        )
        .expect("links");
        assert_eq!(whole, QuestionLinks::default());
        let cut = QuestionLinking {
            filter_above: 2,
            ..QuestionLinking::default()
        };
        let links = link_question("Which car makers are there?", &car, cut).expect("links");
        // The filter ran (it keeps a few areas at least, here all six tables).
        let shown = links
            .shown
            .expect("a schema of more than 2 tables goes through the filter");
        assert!(shown.iter().any(|t| t == "car_makers"), "{shown:?}");
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
