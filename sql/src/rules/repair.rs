//! Schema repair: fixing a misspelled or misplaced column without asking the model again.
//!
//! Small models know what they want to say and misspell the schema: `pet_type` for `PetType`,
//! `PetAge` for `pet_age`, `T2.LName` when `LName` belongs to the table aliased `T1`. SQLite
//! names the offending identifier; when the query's own tables have exactly one column that it
//! can mean (the same name in another of the query's tables, or the same word spelled another
//! way), the identifier is rewritten and the query tried again. When the column belongs to a
//! table the query does not read, and exactly one foreign key leads there from a table it does
//! read (many rows to one, so the join keeps every row), that join is added. Anything less
//! certain is left to model revision.

use crate::lexer::LexKind;
use crate::schema::Schema;

/// The query with the column SQLite rejected in `error` rewritten, when the query's tables
/// leave exactly one reading; `None` otherwise.
pub fn repair_column(sql: &str, error: &str, schema: &Schema) -> Option<String> {
    let wanted = named_after(error, "no such column: ")?;
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
    if exact.is_empty() && respelled.is_empty() {
        return join_owner(sql, &tokens, &tables, qualifier, column, schema);
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

/// The query with a join to the one table that owns `column` added after each reference to the
/// query table whose foreign key leads there, and `qualifier.column` pointed at the new table.
/// Only a foreign key *from* the query's table (many to one) qualifies: such a join neither
/// drops nor repeats the query's rows where the key holds.
fn join_owner(
    sql: &str,
    tokens: &[Token],
    tables: &[QueryTable],
    qualifier: Option<&str>,
    column: &str,
    schema: &Schema,
) -> Option<String> {
    let reads = |name: &str| tables.iter().any(|t| t.table.eq_ignore_ascii_case(name));
    // Tables the query could be reading the column from: the one the qualifier names, else
    // all. A qualifier naming a table the query does not read says which table to join.
    let named = |t: &QueryTable| qualifier.is_some_and(|q| t.reference.eq_ignore_ascii_case(q));
    let wanted_owner = qualifier.filter(|_| !tables.iter().any(named));
    let from: Vec<&QueryTable> = tables
        .iter()
        .filter(|t| qualifier.is_none() || wanted_owner.is_some() || named(t))
        .collect();
    let mut routes = Vec::new();
    for fk in &schema.foreign_keys {
        let leaves_query = from
            .iter()
            .any(|t| t.table.eq_ignore_ascii_case(&fk.from_table));
        let to_wanted = wanted_owner.is_none_or(|w| fk.to_table.eq_ignore_ascii_case(w));
        if reads(&fk.to_table) || !leaves_query || !to_wanted {
            continue;
        }
        let Some(owner) = schema.table(&fk.to_table) else {
            continue;
        };
        let real = owner
            .columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(column))
            .or_else(|| {
                owner
                    .columns
                    .iter()
                    .find(|c| normalize(&c.name) == normalize(column))
            });
        let same = |(other, _, _): &(&crate::schema::ForeignKey, String, String)| {
            let key = |f: &crate::schema::ForeignKey| {
                [&f.from_table, &f.from_column, &f.to_table, &f.to_column]
                    .map(|s| s.to_ascii_lowercase())
            };
            key(other) == key(fk)
        };
        if let Some(real) = real.filter(|_| !routes.iter().any(same)) {
            routes.push((fk, owner.name.clone(), real.name.clone()));
        }
    }
    let [(fk, owner, real)] = routes.as_slice() else {
        return None;
    };
    let mut edits: Vec<(usize, usize, String)> = from
        .iter()
        .filter(|t| t.table.eq_ignore_ascii_case(&fk.from_table))
        .map(|t| {
            let join = format!(
                " JOIN {owner} ON {}.{} = {owner}.{}",
                t.reference, fk.from_column, fk.to_column
            );
            (t.end, t.end, join)
        })
        .collect();
    // Every reference to the missing column becomes `owner.real` (qualified) or `real` (bare;
    // the name is unique to the owner or the database will say otherwise).
    let replacement = match qualifier {
        Some(_) => format!("{owner}.{real}"),
        None => real.clone(),
    };
    edits.extend(
        identifier_ranges(tokens, qualifier, column)
            .into_iter()
            .map(|(a, b)| (a, b, replacement.clone())),
    );
    edits.sort_by_key(|(start, _, _)| *start);
    let out = apply(sql, edits);
    (out != sql).then_some(out)
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

/// Words, quoted identifiers and dots; string literals, numbers, comments and every other
/// symbol are `Other`.
fn lex(sql: &str) -> Vec<Token> {
    crate::lexer::lex(sql)
        .into_iter()
        .map(|l| {
            let kind = match l.kind {
                LexKind::Word => Kind::Word,
                LexKind::Quoted('"' | '`' | '[') => Kind::Quoted,
                LexKind::Symbol if l.text(sql) == "." => Kind::Dot,
                _ => Kind::Other,
            };
            let text = match kind {
                Kind::Word | Kind::Quoted | Kind::Dot => l.unquoted(sql).to_owned(),
                Kind::Other => String::new(),
            };
            Token {
                kind,
                start: l.start,
                end: l.end,
                text,
            }
        })
        .collect()
}

/// A table the query reads and how the query refers to it (its alias, else its name).
struct QueryTable {
    table: String,
    reference: String,
    /// Byte offset just past the reference (the alias if there is one, else the name).
    end: usize,
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
            end: alias.map_or(name.end, |a| a.end),
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
    let edits = identifier_ranges(tokens, qualifier, column)
        .into_iter()
        .map(|(start, end)| (start, end, replacement.to_owned()))
        .collect();
    apply(sql, edits)
}

/// The SQL with each byte range (in order, not overlapping) replaced by its text.
fn apply(sql: &str, edits: Vec<(usize, usize, String)>) -> String {
    let mut out = String::with_capacity(sql.len() + 64);
    let mut last = 0;
    for (start, end, text) in edits {
        out.push_str(&sql[last..start]);
        out.push_str(&text);
        last = end;
    }
    out.push_str(&sql[last..]);
    out
}

/// Byte ranges of every `qualifier.column` (or bare `column`) reference.
fn identifier_ranges(
    tokens: &[Token],
    qualifier: Option<&str>,
    column: &str,
) -> Vec<(usize, usize)> {
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
    ranges
}

/// The name a database error gives after `marker` (`no such column: `, in SQLite's words, which
/// the PostgreSQL backend restates), without quotes or trailing punctuation.
pub(crate) fn named_after<'m>(message: &'m str, marker: &str) -> Option<&'m str> {
    let start = message.find(marker)? + marker.len();
    let name = message[start..].split_whitespace().next()?;
    Some(name.trim_matches(|c| matches!(c, '"' | '`' | '\'' | ';' | ',')))
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
    fn a_column_of_a_table_reached_by_one_foreign_key_gets_that_join() {
        let poker = schema("poker_player");
        assert_eq!(
            repair_column(
                "SELECT Money_Rank FROM poker_player ORDER BY Height DESC LIMIT 1",
                "no such column: Height",
                &poker,
            )
            .as_deref(),
            Some(
                "SELECT Money_Rank FROM poker_player JOIN people ON poker_player.People_ID = people.People_ID ORDER BY Height DESC LIMIT 1"
            )
        );
        // Every reference to the query's table in a subquery gets the join; a qualified
        // column is pointed at the joined table.
        let pets = schema("pets_1");
        assert_eq!(
            repair_column(
                "SELECT Fname FROM Student WHERE StuID IN (SELECT T1.StuID FROM Has_Pet AS T1 WHERE T1.PetType = 'cat')",
                "no such column: T1.PetType",
                &pets,
            )
            .as_deref(),
            Some(
                "SELECT Fname FROM Student WHERE StuID IN (SELECT T1.StuID FROM Has_Pet AS T1 JOIN Pets ON T1.PetID = Pets.PetID WHERE Pets.PetType = 'cat')"
            )
        );
        // A qualifier naming a table the query does not read says which table to join.
        assert_eq!(
            repair_column(
                "SELECT StuID FROM Has_Pet WHERE Pets.pet_type = 'dog'",
                "no such column: Pets.pet_type",
                &pets,
            )
            .as_deref(),
            Some(
                "SELECT StuID FROM Has_Pet JOIN Pets ON Has_Pet.PetID = Pets.PetID WHERE Pets.PetType = 'dog'"
            )
        );
    }

    #[test]
    fn joins_that_would_multiply_rows_or_guess_are_not_added() {
        let pets = schema("pets_1");
        // Student is referenced by Has_Pet (one student, many pets): joining it from Student
        // would repeat students, so it is left to revision.
        assert_eq!(
            repair_column(
                "SELECT Fname FROM Student WHERE PetID = 2001",
                "no such column: PetID",
                &pets,
            ),
            None
        );
    }

    #[test]
    fn uncertain_or_absent_columns_are_left_to_revision() {
        let poker = schema("poker_player");
        // Nationality is in people, which poker_player reaches, but the query reads people
        // and poker_player already: nothing to join, and no column of that name to rename to.
        assert_eq!(
            repair_column(
                "SELECT T1.Name FROM people AS T1 JOIN poker_player AS T2 ON T1.People_ID = T2.People_ID WHERE Citizenship = 'Russia'",
                "no such column: Citizenship",
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
