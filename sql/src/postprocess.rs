//! Turning a model completion into one SQL statement.
//!
//! Models answer in several shapes: a bare continuation of `### SQL:` or of `SELECT`, a
//! ```sql fence (opened by the model, or by the prompt as in XiYan's), a statement followed by
//! more `###` turns the model invents, or a statement followed by an explanation. The steps,
//! in order: take the fence content, cut at the first line starting with `#`, cut after the
//! statement, collapse whitespace, put back a `SELECT` the prompt already said, strip `;`.

use crate::prompt::Prompt;

const FENCE: &str = "```";

/// Words that open a line of prose after the SQL; no SQL line starts with them.
const PROSE_OPENERS: [&str; 12] = [
    "explanation",
    "explanation:",
    "note:",
    "this",
    "the",
    "here",
    "i",
    "it",
    "output:",
    "answer:",
    "1.",
    "result:",
];

/// Post-processes a completion of `prompt`.
pub fn postprocess_for(prompt: &Prompt, completion: &str) -> String {
    postprocess(completion, prompt.completion_may_lack_select())
}

/// Post-processes a completion; `prepend_select` says the prompt ended where `SELECT` may be
/// left out (`### SQL:` or a trailing `SELECT`).
pub fn postprocess(completion: &str, prepend_select: bool) -> String {
    let body = fence_content(completion);
    let body = cut_at_hash_line(body);
    let body = cut_after_statement(body);
    let mut sql = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if prepend_select && !sql.is_empty() && !starts_statement(&sql) {
        sql = format!("SELECT {sql}");
    }
    while let Some(stripped) = sql.strip_suffix(';') {
        sql = stripped.trim_end().to_owned();
    }
    sql
}

/// The content of the first code fence, if there is one.
///
/// The first fence either opens a block or closes one that the prompt opened (XiYan's prompt
/// ends with ```sql). It closes when a statement precedes it, or when other text precedes it and
/// it carries no language tag and no later fence follows; otherwise it opens, and a block that
/// never closes runs to the end.
fn fence_content(text: &str) -> &str {
    let Some(first) = text.find(FENCE) else {
        return text;
    };
    let before = &text[..first];
    let after = &text[first + FENCE.len()..];
    let (tag, rest) = after.split_once('\n').unwrap_or((after, ""));
    let has_tag = !tag.trim().is_empty() && !tag.contains(FENCE);
    let closes = starts_statement(before)
        || (!before.trim().is_empty() && !has_tag && !after.contains(FENCE));
    if closes {
        return before;
    }
    // Skip the language tag (`sql`, `sqlite`, …) up to the end of the fence line, unless the
    // whole block sits on that line.
    let content = if tag.contains(FENCE) {
        strip_language_tag(after)
    } else {
        rest
    };
    match content.find(FENCE) {
        Some(end) => &content[..end],
        None => content,
    }
}

/// `sql SELECT 1` → `SELECT 1`, for a one-line block whose tag shares the line with the code.
fn strip_language_tag(block: &str) -> &str {
    for tag in ["sqlite", "sql"] {
        if let Some(head) = block.get(..tag.len())
            && head.eq_ignore_ascii_case(tag)
            && block[tag.len()..].starts_with(char::is_whitespace)
        {
            return &block[tag.len()..];
        }
    }
    block
}

fn starts_statement(text: &str) -> bool {
    let lower = text.trim_start().to_ascii_lowercase();
    lower.starts_with("select") || lower.starts_with("with")
}

/// Everything before the first line that starts with `#`: Markdown prompts invite the model to
/// continue with another `### Question:` turn.
fn cut_at_hash_line(text: &str) -> &str {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with('#') {
            return &text[..offset];
        }
        offset += line.len();
    }
    text
}

/// Everything up to the first `;` outside quotes, and before the first line of prose that
/// follows the statement.
fn cut_after_statement(text: &str) -> &str {
    let text = match first_unquoted_semicolon(text) {
        Some(end) => &text[..end],
        None => text,
    };
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let first_word = line.split_whitespace().next().unwrap_or_default();
        let is_blank = first_word.is_empty();
        let is_prose = first_word.starts_with("**")
            || PROSE_OPENERS
                .iter()
                .any(|w| first_word.eq_ignore_ascii_case(w));
        // A blank line after the statement ends it: models separate the answer from what
        // they say about it; a blank line before any SQL is just leading space.
        if i > 0 && (is_prose || (is_blank && !text[..offset].trim().is_empty())) {
            return &text[..offset];
        }
        offset += line.len();
    }
    text
}

fn first_unquoted_semicolon(text: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' || c == '`' => quote = Some(c),
            None if c == ';' => return Some(i),
            None => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_completions() {
        // (completion, prepend_select, expected)
        let cases: &[(&str, bool, &str)] = &[
            (
                "SELECT count(*) FROM singer",
                true,
                "SELECT count(*) FROM singer",
            ),
            (" count(*) FROM singer", true, "SELECT count(*) FROM singer"),
            (" count(*) FROM singer", false, "count(*) FROM singer"),
            ("select name from t;", true, "select name from t"),
            (
                "WITH a AS (SELECT 1) SELECT * FROM a",
                true,
                "WITH a AS (SELECT 1) SELECT * FROM a",
            ),
            (
                "SELECT name\n  FROM singer\n\tWHERE age > 30\n### Question: next one",
                true,
                "SELECT name FROM singer WHERE age > 30",
            ),
            (
                "```sql\nSELECT name FROM singer;\n```\nThis query lists names.",
                false,
                "SELECT name FROM singer",
            ),
            ("```SQL\nSELECT 1\n", false, "SELECT 1"),
            ("Here you go:\n```sqlite\nSELECT 2\n```", false, "SELECT 2"),
            ("count(*) FROM t\n```", true, "SELECT count(*) FROM t"),
            ("Sure:\n```\nSELECT 5\n```\nDone", false, "SELECT 5"),
            ("```sql SELECT 6```", false, "SELECT 6"),
            ("\n```\nSELECT 3\n```", false, "SELECT 3"),
            ("```SELECT 4```", false, "SELECT 4"),
            ("SELECT a FROM t\n```\nmore text", false, "SELECT a FROM t"),
            (
                "SELECT a FROM t WHERE b = 'x;y'; -- done",
                false,
                "SELECT a FROM t WHERE b = 'x;y'",
            ),
            (
                "SELECT a FROM t\nThis selects a from t.",
                false,
                "SELECT a FROM t",
            ),
            (
                "SELECT a\nFROM t\n\nThe query returns a.",
                false,
                "SELECT a FROM t",
            ),
            ("\n\nSELECT a\nFROM t", false, "SELECT a FROM t"),
            (
                "SELECT a FROM t\nExplanation: it selects a",
                false,
                "SELECT a FROM t",
            ),
            ("SELECT a FROM t ;  ", false, "SELECT a FROM t"),
            ("", true, ""),
            ("#", true, ""),
        ];
        for (completion, prepend, expected) in cases {
            assert_eq!(
                postprocess(completion, *prepend),
                *expected,
                "completion {completion:?}"
            );
        }
    }

    #[test]
    fn uses_the_prompt_ending() {
        let prompt = |marker, select| Prompt {
            text: String::new(),
            ends_with_sql_marker: marker,
            ends_with_select: select,
        };
        assert_eq!(postprocess_for(&prompt(true, false), "1"), "SELECT 1");
        assert_eq!(postprocess_for(&prompt(false, true), "1"), "SELECT 1");
        assert_eq!(postprocess_for(&prompt(false, false), "1"), "1");
    }
}
