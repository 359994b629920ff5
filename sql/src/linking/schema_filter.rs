//! A large schema cut down to the tables a question is about, before the first prompt: a company's
//! database has dozens of tables, and a prompt that shows them all is slow to read and easy to get
//! lost in for a small model (the de-semanticization paper's range adaptation, XiYan's schema
//! filter).
//!
//! Each table is scored against the question from three kinds of evidence:
//! - meaning: the cosine similarity of the question's embedding with the table's (its name and
//!   its columns' names as words), so "vocalists" finds `singer`;
//! - words: question words that are words of the table's name, or of its columns' names;
//! - values: the value index found a stored value of the table in the question.
//!
//! What is shown is not the best tables one by one but the *subject areas* of the best
//! [`LEADING_TABLES`] ([`subject_areas`]: groups of at most [`AREA_TABLES`] tables that foreign
//! keys join), then of the next best tables while fewer than [`MIN_SHOWN`] are in, together
//! with the tables that join them ([`crate::linking::tables::with_join_paths`]), so keys and join paths
//! stay whole. Whole areas matter twice: a question's tables are usually each other's
//! neighbours, and questions about one part of a database then get the very same tables, so
//! their prompts are the same up to the question and the prefix cache serves all of it
//! (RE_p writes every table's line, then every table's values: a table set that differs in one
//! table shares little more than the instruction).
//!
//! Schemas of at most the configured number of tables are shown whole: there is nothing to gain
//! on them, and a filter can only lose a table there.

use crate::linking::tables::with_join_paths;
use crate::linking::value_index::ValueMatch;
use crate::model::{Embedder, ModelCallError, cosine, embed_checked};
use crate::schema::Schema;
use crate::words::{singular, split_name};

/// The best-scored tables whose subject areas are shown whole.
pub const LEADING_TABLES: usize = 3;
/// Most tables in one subject area ([`subject_areas`]).
pub const AREA_TABLES: usize = 8;
/// Fewest tables shown: areas of the next best tables are added until there are this many.
pub const MIN_SHOWN: usize = 8;

/// What one table's name words in the question are worth against the cosine similarity (which
/// ranges over about 0..0.7 for MiniLM on these texts): a named table ranks near the top.
const NAME_WORD_WEIGHT: f32 = 0.3;
/// One column-name word in the question; capped at [`MAX_COLUMN_WORDS`] words a table.
const COLUMN_WORD_WEIGHT: f32 = 0.1;
const MAX_COLUMN_WORDS: usize = 3;
/// A value of the table that the question names.
const VALUE_WEIGHT: f32 = 0.5;

/// Words too common in questions and names to say which table is meant.
const TOO_COMMON_FOR_TABLES: &[&str] = &[
    "the", "and", "for", "with", "what", "which", "who", "how", "many", "all", "are", "was",
    "were", "that", "this", "from", "each", "their", "its", "has", "have", "not", "id", "name",
    "number", "count", "list", "show", "find", "give", "return", "of", "in", "by", "to", "is",
];

/// The embeddings of a schema's tables, computed once per database and kept with it.
#[derive(Debug, Clone)]
pub struct TableVectors {
    vectors: Vec<Vec<f32>>,
}

impl TableVectors {
    /// Embeds each table's description ([`table_text`]) in schema order.
    pub fn build(schema: &Schema, embedder: &dyn Embedder) -> Result<Self, ModelCallError> {
        let texts: Vec<String> = schema.tables.iter().map(table_text).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        Ok(Self {
            vectors: embed_checked(embedder, &refs, None)?,
        })
    }

    /// The question's embedding, checked to have the tables' dimension.
    pub fn embed_question(
        &self,
        embedder: &dyn Embedder,
        question: &str,
    ) -> Result<Vec<f32>, ModelCallError> {
        let dim = self.vectors.first().map(Vec::len);
        // Checked to hold exactly one vector.
        Ok(embed_checked(embedder, &[question], dim)?.swap_remove(0))
    }
}

/// A table as words: `concert singer: singer id, name, country, song name`.
pub fn table_text(table: &crate::schema::Table) -> String {
    let columns: Vec<String> = table
        .columns
        .iter()
        .map(|c| split_name(&c.name).join(" "))
        .collect();
    format!(
        "{}: {}",
        split_name(&table.name).join(" "),
        columns.join(", ")
    )
}

/// The tables to show for `question`, in schema order; `None` when the schema has at most
/// `above` tables (or `above` is 0: the filter is off) and is shown whole.
pub fn filter_tables(
    schema: &Schema,
    above: usize,
    question: &str,
    meaning: Option<(&TableVectors, &[f32])>,
    values: &[ValueMatch],
) -> Option<Vec<String>> {
    if above == 0 || schema.tables.len() <= above {
        return None;
    }
    let asked: Vec<String> = split_name(question)
        .into_iter()
        .filter(|w| w.len() > 2 && !TOO_COMMON_FOR_TABLES.contains(&w.as_str()))
        .map(|w| singular(&w))
        .collect();
    let mut scored: Vec<(f32, usize)> = schema
        .tables
        .iter()
        .enumerate()
        .map(|(i, table)| {
            let cosine = meaning
                .and_then(|(tables, q)| tables.vectors.get(i).map(|t| cosine(t, q)))
                .unwrap_or(0.0);
            let named = split_name(&table.name)
                .iter()
                .filter(|w| asked.contains(&singular(w)))
                .count();
            let mut column_words: Vec<String> = table
                .columns
                .iter()
                .flat_map(|c| split_name(&c.name))
                .map(|w| singular(&w))
                .filter(|w| asked.contains(w))
                .collect();
            column_words.sort();
            column_words.dedup();
            let valued = values
                .iter()
                .any(|v| v.table.eq_ignore_ascii_case(&table.name));
            let score = cosine
                + NAME_WORD_WEIGHT * named as f32
                + COLUMN_WORD_WEIGHT * column_words.len().min(MAX_COLUMN_WORDS) as f32
                + if valued { VALUE_WEIGHT } else { 0.0 };
            (score, i)
        })
        .collect();
    // Best first; ties in schema order, so the same question always gets the same tables.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    // The areas of the best tables, then of the next ones while fewer than MIN_SHOWN tables
    // are in: a schema without foreign keys has one-table areas and still shows that many.
    let areas = subject_areas(schema, AREA_TABLES);
    let mut chosen: Vec<usize> = Vec::new();
    for (rank, &(_, i)) in scored.iter().enumerate() {
        let in_chosen = areas.iter().filter(|a| chosen.contains(a)).count();
        if rank >= LEADING_TABLES && in_chosen >= MIN_SHOWN {
            break;
        }
        if !chosen.contains(&areas[i]) {
            chosen.push(areas[i]);
        }
    }
    let kept: Vec<String> = schema
        .tables
        .iter()
        .zip(&areas)
        .filter(|(_, area)| chosen.contains(area))
        .map(|(table, _)| table.name.clone())
        .collect();
    let mut shown = with_join_paths(&kept, schema);
    let order = |name: &String| {
        schema
            .tables
            .iter()
            .position(|t| t.name.eq_ignore_ascii_case(name))
    };
    shown.sort_by_key(order);
    shown.dedup();
    Some(shown)
}

/// Each table's subject area: the schema cut into groups of at most `area_tables` tables
/// that foreign keys join. A connected piece of the foreign-key graph small enough is one
/// area; a larger one is cut into areas grown breadth-first from its best-connected table.
pub fn subject_areas(schema: &Schema, area_tables: usize) -> Vec<usize> {
    let n = schema.tables.len();
    let position = |name: &str| {
        schema
            .tables
            .iter()
            .position(|t| t.name.eq_ignore_ascii_case(name))
    };
    let mut adjacent: Vec<Vec<usize>> = vec![Vec::new(); n];
    for fk in &schema.foreign_keys {
        if let (Some(a), Some(b)) = (position(&fk.from_table), position(&fk.to_table))
            && a != b
        {
            adjacent[a].push(b);
            adjacent[b].push(a);
        }
    }
    for list in &mut adjacent {
        list.sort_unstable();
        list.dedup();
    }
    let mut area = vec![usize::MAX; n];
    let mut next = 0;
    for start in 0..n {
        if area[start] != usize::MAX {
            continue;
        }
        // The connected piece of `start`.
        let mut piece = vec![start];
        let mut in_piece = vec![false; n];
        in_piece[start] = true;
        let mut at = 0;
        while at < piece.len() {
            for &u in &adjacent[piece[at]] {
                if !in_piece[u] {
                    in_piece[u] = true;
                    piece.push(u);
                }
            }
            at += 1;
        }
        while piece.iter().any(|&t| area[t] == usize::MAX) {
            let free = |t: usize| in_piece[t] && area[t] == usize::MAX;
            let degree = |t: usize| adjacent[t].iter().filter(|&&u| free(u)).count();
            let seed = piece
                .iter()
                .copied()
                .filter(|&t| free(t))
                .max_by(|&a, &b| degree(a).cmp(&degree(b)).then(b.cmp(&a)))
                .expect("a free table remains");
            let mut grown = vec![seed];
            area[seed] = next;
            let mut at = 0;
            while at < grown.len() && grown.len() < area_tables {
                for &u in &adjacent[grown[at]] {
                    if grown.len() < area_tables && in_piece[u] && area[u] == usize::MAX {
                        area[u] = next;
                        grown.push(u);
                    }
                }
                at += 1;
            }
            next += 1;
        }
    }
    area
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Column, ForeignKey, Table};

    fn table(name: &str, columns: &[&str]) -> Table {
        Table {
            name: name.to_owned(),
            columns: columns
                .iter()
                .map(|c| Column {
                    name: (*c).to_owned(),
                    declared_type: "text".to_owned(),
                    primary_key: false,
                    comment: None,
                    examples: Vec::new(),
                })
                .collect(),
            primary_key: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Thirty unrelated tables around a concert database whose `singer_in_concert` joins
    /// `singer` and `concert`.
    fn large_schema() -> Schema {
        let mut tables = vec![
            table("singer", &["Singer_ID", "Name", "Country"]),
            table("concert", &["concert_ID", "concert_Name", "Year"]),
            table("singer_in_concert", &["concert_ID", "Singer_ID"]),
        ];
        for i in 0..30 {
            tables.push(table(&format!("ledger_{i}"), &["entry_id", "amount"]));
        }
        Schema {
            db_id: "big".to_owned(),
            tables,
            foreign_keys: vec![
                ForeignKey {
                    from_table: "singer_in_concert".to_owned(),
                    from_column: "Singer_ID".to_owned(),
                    to_table: "singer".to_owned(),
                    to_column: "Singer_ID".to_owned(),
                },
                ForeignKey {
                    from_table: "singer_in_concert".to_owned(),
                    from_column: "concert_ID".to_owned(),
                    to_table: "concert".to_owned(),
                    to_column: "concert_ID".to_owned(),
                },
            ],
            dialect: Default::default(),
        }
    }

    #[test]
    fn small_schemas_and_a_zero_threshold_are_shown_whole() {
        let schema = large_schema();
        assert_eq!(filter_tables(&schema, 0, "singers", None, &[]), None);
        assert_eq!(filter_tables(&schema, 40, "singers", None, &[]), None);
    }

    /// The named tables are kept, and the table that joins them comes along even when the
    /// question does not name it.
    #[test]
    fn named_tables_and_their_join_path_are_kept() {
        let schema = large_schema();
        let shown = filter_tables(
            &schema,
            20,
            "Show the names of singers and the concerts they sang in",
            None,
            &[],
        )
        .expect("33 tables are filtered");
        // Their area (three tables) and the best of the one-table areas up to MIN_SHOWN.
        assert_eq!(shown.len(), MIN_SHOWN, "{shown:?}");
        for needed in ["singer", "concert", "singer_in_concert"] {
            assert!(shown.iter().any(|t| t == needed), "{needed} in {shown:?}");
        }
        // Schema order, whatever the scores.
        assert_eq!(&shown[..3], ["singer", "concert", "singer_in_concert"]);
    }

    /// A stored value the question names brings its table in, though no word names it.
    #[test]
    fn a_matched_value_keeps_its_table() {
        let mut schema = large_schema();
        schema
            .tables
            .push(table("stadium", &["Location", "Capacity"]));
        let values = [ValueMatch {
            table: "stadium".to_owned(),
            column: "Location".to_owned(),
            value: "Raith Rovers".to_owned(),
            score: 1.0,
        }];
        let shown = filter_tables(&schema, 20, "What happened at Raith Rovers?", None, &values)
            .expect("filtered");
        assert!(shown.iter().any(|t| t == "stadium"), "{shown:?}");
    }

    fn key(from_table: &str, to_table: &str) -> ForeignKey {
        ForeignKey {
            from_table: from_table.to_owned(),
            from_column: "id".to_owned(),
            to_table: to_table.to_owned(),
            to_column: "id".to_owned(),
        }
    }

    /// `large_schema` with a school area of nine tables (a chain through `school`) after the
    /// ledgers.
    fn schema_with_a_school() -> Schema {
        let mut schema = large_schema();
        let school = [
            ("school", vec!["school_id", "name", "city"]),
            ("student", vec!["student_id", "school_id", "name", "age"]),
            (
                "teacher",
                vec!["teacher_id", "school_id", "name", "subject"],
            ),
            ("course", vec!["course_id", "teacher_id", "title"]),
            ("enrolment", vec!["student_id", "course_id", "grade"]),
            ("classroom", vec!["room_id", "school_id", "capacity"]),
            ("timetable", vec!["room_id", "course_id", "weekday"]),
            ("exam", vec!["exam_id", "course_id", "date"]),
            ("exam_result", vec!["exam_id", "student_id", "mark"]),
        ];
        for (name, columns) in &school {
            schema.tables.push(table(name, columns));
        }
        for (from, to) in [
            ("student", "school"),
            ("teacher", "school"),
            ("course", "teacher"),
            ("enrolment", "student"),
            ("enrolment", "course"),
            ("classroom", "school"),
            ("timetable", "classroom"),
            ("timetable", "course"),
            ("exam", "course"),
            ("exam_result", "exam"),
            ("exam_result", "student"),
        ] {
            schema.foreign_keys.push(key(from, to));
        }
        schema
    }

    #[test]
    fn subject_areas_follow_the_foreign_keys_and_stay_small() {
        let schema = schema_with_a_school();
        let areas = subject_areas(&schema, AREA_TABLES);
        let area_of = |name: &str| {
            areas[schema
                .tables
                .iter()
                .position(|t| t.name == name)
                .expect("a table of the schema")]
        };
        // The concert tables are one connected piece of three: one area.
        assert_eq!(area_of("singer"), area_of("concert"));
        assert_eq!(area_of("singer"), area_of("singer_in_concert"));
        // A table no key joins is an area of its own.
        assert_ne!(area_of("ledger_0"), area_of("ledger_1"));
        assert_ne!(area_of("ledger_0"), area_of("singer"));
        // Nine joined school tables are cut in two, each no larger than AREA_TABLES, grown
        // from `school`, the best-joined table.
        let school_areas: Vec<usize> = ["school", "student", "teacher", "course", "enrolment"]
            .iter()
            .chain(&["classroom", "timetable", "exam", "exam_result"])
            .map(|t| area_of(t))
            .collect();
        let mut distinct = school_areas.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 2, "{school_areas:?}");
        for area in distinct {
            let size = areas.iter().filter(|&&a| a == area).count();
            assert!(size <= AREA_TABLES, "area {area} has {size} tables");
        }
        assert_eq!(area_of("school"), area_of("student"));
        // The same schema gives the same areas.
        assert_eq!(areas, subject_areas(&schema, AREA_TABLES));
    }

    /// Two questions about the school, worded apart, see the same tables: their prompts share
    /// everything up to the question.
    #[test]
    fn questions_about_one_area_get_the_same_tables() {
        let schema = schema_with_a_school();
        let ask = |question: &str| {
            filter_tables(&schema, 20, question, None, &[]).expect("42 tables are filtered")
        };
        let grades = ask("What grade did each student get in each course?");
        let teachers = ask("Which teacher teaches the course with the most students?");
        assert_eq!(grades, teachers);
        for needed in ["student", "course", "enrolment", "teacher"] {
            assert!(grades.iter().any(|t| t == needed), "{needed} in {grades:?}");
        }
        assert!(
            !grades.iter().any(|t| t.starts_with("ledger")),
            "{grades:?}"
        );
    }
}
