//! What the Markdown formats (RE_p, SimpleDDL-MD, DDL-MD) tell the model beyond table and column
//! names when the database has more to say: the column descriptions its catalogue holds
//! (PostgreSQL's `COMMENT ON COLUMN`, or descriptions a registration supplies).
//!
//! The block is empty for a database without descriptions (Spider's), so those prompts keep
//! their published bytes, and the adapters trained on them see what they were trained on;
//! M-Schema shows descriptions in its own column tuples and is not changed here.
//!
//! No line of dialect habits (PostgreSQL's relative dates, decimal division, `ILIKE`) is added:
//! with an example of each, Qwen2.5-Coder-1.5B copied the examples into queries that did not
//! need them (`INTERVAL '30 days'` into a question about April 2023, `/ NULLIF(...)` into an
//! average), as many answers lost as gained (docs/RESULTS.md, "Business databases on
//! PostgreSQL").

use crate::schema::Schema;

/// Characters of one description shown; a catalogue comment can be a paragraph.
const DESCRIPTION_CHARS: usize = 200;
/// Characters of all descriptions of one prompt: the descriptions of a wide schema must not
/// crowd out the question (the schema filter cuts the tables first).
const DESCRIPTIONS_BUDGET: usize = 2_000;

const DESCRIPTIONS_HEADER: &str = "### Column descriptions:\n";

/// `### Column descriptions:` and one `# table.column: description` line a described column,
/// in schema order, ending with `#`; empty when no column shown has a description.
pub(crate) fn column_descriptions(schema: &Schema) -> String {
    let mut lines = String::new();
    for table in &schema.tables {
        for column in &table.columns {
            let Some(text) = column.comment.as_deref().map(one_line) else {
                continue;
            };
            if text.is_empty() {
                continue;
            }
            let line = format!("# {}.{}: {}\n", table.name, column.name, text);
            if lines.len() + line.len() > DESCRIPTIONS_BUDGET {
                // The rest of this table's descriptions are left out; a later table's still
                // get the room that is left (the behaviour business-pg was measured with).
                break;
            }
            lines.push_str(&line);
        }
    }
    match lines.is_empty() {
        true => String::new(),
        false => format!("{DESCRIPTIONS_HEADER}{lines}#\n"),
    }
}

/// A description on one line, cut to [`DESCRIPTION_CHARS`] at a character boundary.
fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(DESCRIPTION_CHARS) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::fixture::schema;

    #[test]
    fn spider_databases_get_nothing() {
        let spider = schema("concert_singer");
        assert_eq!(column_descriptions(&spider), "");
    }

    #[test]
    fn described_columns_are_listed_on_one_line_each() {
        let mut s = schema("concert_singer");
        s.tables[1].columns[2].comment = Some("country of birth,\n  as its English name".into());
        s.tables[0].columns[1].comment = Some("   ".into());
        assert_eq!(
            column_descriptions(&s),
            "### Column descriptions:\n# singer.Country: country of birth, as its English name\n#\n"
        );
    }

    #[test]
    fn long_descriptions_are_cut_and_the_block_bounded() {
        let mut s = schema("concert_singer");
        for table in &mut s.tables {
            for column in &mut table.columns {
                column.comment = Some("é".repeat(500));
            }
        }
        let block = column_descriptions(&s);
        assert!(block.len() <= DESCRIPTIONS_BUDGET + 64, "{}", block.len());
        let first = block.lines().nth(1).expect("a description line");
        assert!(first.ends_with('…'));
        assert_eq!(
            first.chars().filter(|&c| c == 'é').count(),
            DESCRIPTION_CHARS
        );
    }
}
