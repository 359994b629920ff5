//! Schema repair: fixing a misspelled or misplaced column without asking the model again.
//!
//! Small models know what they want to say and misspell the schema: `pet_type` for `PetType`,
//! `PetAge` for `pet_age`, `T2.LName` when `LName` belongs to the table aliased `T1`. SQLite
//! names the offending identifier; when the query's own tables have exactly one column that it
//! can mean (the same name in another of the query's tables, or the same word spelled another
//! way), the identifier is rewritten and the query tried again. Anything less certain is left
//! to model revision.

use crate::schema::Schema;

/// The query with the column SQLite rejected in `error` rewritten, when the query's tables
/// leave exactly one reading; `None` otherwise.
pub fn repair_column(sql: &str, error: &str, schema: &Schema) -> Option<String> {
    let marker = "no such column: ";
    let start = error.find(marker)? + marker.len();
    let wanted = error[start..].split_whitespace().next()?;
    let (qualifier, column) = match wanted.rsplit_once('.') {
        Some((q, c)) => (Some(q), c),
        None => (None, wanted),
    };
    let tokens = lex(sql);
    let tables = query_tables(&tokens, schema);
    if tables.is_empty() {
        return None;
    }
    // (table's name or alias as written in the query, the real column)
    let mut exact: Vec<(String, String)> = Vec::new();
    let mut respelled: Vec<(String, String)> = Vec::new();
    for t in &tables {
        let Some(table) = schema.table(&t.table) else {
            continue;
        };
        for c in &table.columns {
            if c.name.eq_ignore_ascii_case(column) {
                exact.push((t.reference.clone(), c.name.clone()));
            } else if normalize(&c.name) == normalize(column) {
                respelled.push((t.reference.clone(), c.name.clone()));
            }
        }
    }
    let replacement = match qualifier {
        Some(q) => {
            // The same word in the qualified table first, then a unique owner elsewhere.
            let own = |list: &[(String, String)]| {
                list.iter()
                    .find(|(r, _)| r.eq_ignore_ascii_case(q))
                    .cloned()
            };
            let unique = |list: &[(String, String)]| (list.len() == 1).then(|| list[0].clone());
            let (reference, real) = own(&respelled)
                .or_else(|| unique(&exact))
                .or_else(|| unique(&respelled))?;
            format!("{reference}.{real}")
        }
        None => {
            let mut names: Vec<&String> = respelled.iter().map(|(_, c)| c).collect();
            names.dedup();
            if !exact.is_empty() || names.len() != 1 {
                return None;
            }
            names[0].clone()
        }
    };
    let rewritten = replace_identifier(sql, &tokens, qualifier, column, &replacement);
    (rewritten != sql).then_some(rewritten)
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Word,
    Quoted,
    Dot,
    Other,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    /// Byte range in the SQL.
    start: usize,
    end: usize,
    /// The identifier without quotes (words and quoted names).
    text: String,
}

/// Words, quoted identifiers and dots; string literals and everything else are `Other`.
fn lex(sql: &str) -> Vec<Token> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        let start = i;
        if c.is_ascii_alphabetic() || c == '_' {
            while i < bytes.len()
                && ((bytes[i] as char).is_ascii_alphanumeric() || bytes[i] == b'_')
            {
                i += 1;
            }
            out.push(Token {
                kind: Kind::Word,
                start,
                end: i,
                text: sql[start..i].to_owned(),
            });
        } else if c == '"' || c == '`' || c == '\'' {
            i += 1;
            while i < bytes.len() && bytes[i] as char != c {
                i += 1;
            }
            i = (i + 1).min(bytes.len());
            let kind = if c == '\'' { Kind::Other } else { Kind::Quoted };
            let inner = sql[start + 1..i.saturating_sub(1).max(start + 1)].to_owned();
            out.push(Token {
                kind,
                start,
                end: i,
                text: inner,
            });
        } else if c == '.' {
            i += 1;
            out.push(Token {
                kind: Kind::Dot,
                start,
                end: i,
                text: ".".into(),
            });
        } else {
            // Multi-byte characters are skipped whole.
            i += sql[i..].chars().next().map_or(1, char::len_utf8);
            if !c.is_whitespace() {
                out.push(Token {
                    kind: Kind::Other,
                    start,
                    end: i,
                    text: String::new(),
                });
            }
        }
    }
    out
}

/// A table the query reads and how the query refers to it (its alias, else its name).
struct QueryTable {
    table: String,
    reference: String,
}

const NOT_ALIASES: [&str; 16] = [
    "where",
    "join",
    "on",
    "group",
    "order",
    "limit",
    "inner",
    "left",
    "right",
    "outer",
    "cross",
    "natural",
    "union",
    "intersect",
    "except",
    "having",
];

fn query_tables(tokens: &[Token], schema: &Schema) -> Vec<QueryTable> {
    let is_name = |t: &Token| matches!(t.kind, Kind::Word | Kind::Quoted);
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let opens = t.kind == Kind::Word
            && (t.text.eq_ignore_ascii_case("from") || t.text.eq_ignore_ascii_case("join"));
        let Some(name) = tokens.get(i + 1).filter(|n| opens && is_name(n)) else {
            continue;
        };
        let Some(table) = schema.table(&name.text) else {
            continue;
        };
        let mut alias = tokens.get(i + 2);
        if alias.is_some_and(|a| a.kind == Kind::Word && a.text.eq_ignore_ascii_case("as")) {
            alias = tokens.get(i + 3);
        }
        let alias = alias
            .filter(|a| is_name(a) && !NOT_ALIASES.iter().any(|k| a.text.eq_ignore_ascii_case(k)));
        out.push(QueryTable {
            table: table.name.clone(),
            reference: alias.map_or_else(|| name.text.clone(), |a| a.text.clone()),
        });
    }
    out
}

/// Rewrites every `qualifier.column` (or bare `column`) reference to `replacement`.
fn replace_identifier(
    sql: &str,
    tokens: &[Token],
    qualifier: Option<&str>,
    column: &str,
    replacement: &str,
) -> String {
    let is_name = |t: &Token| matches!(t.kind, Kind::Word | Kind::Quoted);
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if !is_name(t) || !t.text.eq_ignore_ascii_case(column) {
            continue;
        }
        let after_dot = i >= 2 && tokens[i - 1].kind == Kind::Dot;
        match qualifier {
            Some(q) if after_dot && tokens[i - 2].text.eq_ignore_ascii_case(q) => {
                ranges.push((tokens[i - 2].start, t.end));
            }
            None if !after_dot => ranges.push((t.start, t.end)),
            _ => {}
        }
    }
    let mut out = String::with_capacity(sql.len() + 16);
    let mut last = 0;
    for (start, end) in ranges {
        out.push_str(&sql[last..start]);
        out.push_str(replacement);
        last = end;
    }
    out.push_str(&sql[last..]);
    out
}

/// Lower case without separators: `pet_type`, `PetType` and `Pet Type` are the same word.
pub(crate) fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::fixture::schema;

    #[test]
    fn respelled_columns_get_their_real_name() {
        let pets = schema("pets_1");
        let fixed = repair_column(
            "SELECT T1.fname FROM student AS T1 JOIN pets AS T2 ON T1.stuid = T2.petid WHERE T2.pet_type = 'cat'",
            "no such column: T2.pet_type",
            &pets,
        );
        assert_eq!(
            fixed.as_deref(),
            Some(
                "SELECT T1.fname FROM student AS T1 JOIN pets AS T2 ON T1.stuid = T2.petid WHERE T2.PetType = 'cat'"
            )
        );
        let bare = repair_column(
            "SELECT PetID, weight FROM Pets WHERE PetAge > 1",
            "SQL error: no such column: PetAge",
            &pets,
        );
        assert_eq!(
            bare.as_deref(),
            Some("SELECT PetID, weight FROM Pets WHERE pet_age > 1")
        );
    }

    #[test]
    fn a_column_of_another_joined_table_gets_that_tables_alias() {
        let pets = schema("pets_1");
        let fixed = repair_column(
            "SELECT T2.LName FROM Student AS T1 JOIN Has_Pet AS T2 ON T1.StuID = T2.StuID",
            "no such column: T2.LName",
            &pets,
        );
        assert_eq!(
            fixed.as_deref(),
            Some("SELECT T1.LName FROM Student AS T1 JOIN Has_Pet AS T2 ON T1.StuID = T2.StuID")
        );
    }

    #[test]
    fn uncertain_or_absent_columns_are_left_to_revision() {
        let poker = schema("poker_player");
        // Height is in people, which the query does not read: a join is needed, not a rename.
        assert_eq!(
            repair_column(
                "SELECT Money_Rank FROM poker_player ORDER BY Height DESC LIMIT 1",
                "no such column: Height",
                &poker,
            ),
            None
        );
        // A string literal that happens to look like the column is not touched.
        let pets = schema("pets_1");
        assert_eq!(
            repair_column(
                "SELECT 'PetAge' FROM Pets WHERE PetAge > 1",
                "no such column: PetAge",
                &pets,
            )
            .as_deref(),
            Some("SELECT 'PetAge' FROM Pets WHERE pet_age > 1")
        );
        assert_eq!(repair_column("SELECT 1", "syntax error", &pets), None);
    }
}
