//! The SQL dialect a database speaks. Prompts name it to the model, the parser reads
//! candidates in it, and revision quotes its error messages.

use serde::{Deserialize, Serialize};
use sqlparser::dialect::{DuckDbDialect, MySqlDialect, PostgreSqlDialect, SQLiteDialect};

use crate::lexer::Quoting;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Dialect {
    #[default]
    Sqlite,
    Postgres,
    /// MySQL and MariaDB.
    MySql,
    /// DuckDB, over CSV, Parquet and DuckDB files.
    DuckDb,
}

impl Dialect {
    /// The name prompts use ("You are a SQLite expert", "SQLite SQL Query").
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Sqlite => "SQLite",
            Dialect::Postgres => "PostgreSQL",
            Dialect::MySql => "MySQL",
            Dialect::DuckDb => "DuckDB",
        }
    }

    /// A fixed prompt text written for SQLite (the published templates all are), speaking of
    /// this dialect instead. Only the template's own words change, never schema or question
    /// text, so callers apply it to constants.
    pub fn retarget(self, template: &str) -> String {
        match self {
            Dialect::Sqlite => template.to_owned(),
            Dialect::Postgres | Dialect::MySql | Dialect::DuckDb => template
                .replace("SQLite", self.name())
                .replace("Sqlite", self.name())
                .replace("sqlite", self.name()),
        }
    }

    /// The quoting rules [`crate::lexer`] scans this dialect's text with.
    pub fn quoting(self) -> Quoting {
        match self {
            Dialect::Sqlite => Quoting::Sqlite,
            // DuckDB quotes as PostgreSQL does (`E'…'` and dollar quotes included).
            Dialect::Postgres | Dialect::DuckDb => Quoting::Postgres,
            Dialect::MySql => Quoting::MySql,
        }
    }

    /// Whether `name` must be written in double quotes to mean itself: anything but a plain
    /// word, and on PostgreSQL, which folds bare names to lower case, a word with a capital
    /// (DuckDB matches names case-blind, quoted or not).
    pub fn needs_quotes(self, name: &str) -> bool {
        let plain = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        !plain || (self == Dialect::Postgres && name.chars().any(|c| c.is_ascii_uppercase()))
    }

    /// Whether `"…"` always quotes a name. SQLite reads a double-quoted word that names no
    /// column as a string (and models trained on Spider write strings so); MySQL reads every
    /// one as a string.
    pub fn double_quotes_name(self) -> bool {
        matches!(self, Dialect::Postgres | Dialect::DuckDb)
    }

    /// Whether `LIKE` tells upper from lower case. SQLite's ignores ASCII case, and so does
    /// MySQL's under its default collations; PostgreSQL's and DuckDB's do not (their `ILIKE`
    /// does not).
    pub fn like_minds_case(self) -> bool {
        matches!(self, Dialect::Postgres | Dialect::DuckDb)
    }

    /// The character that quotes a name: MySQL reads `"…"` as a string.
    pub fn name_quote(self) -> char {
        match self {
            Dialect::Sqlite | Dialect::Postgres | Dialect::DuckDb => '"',
            Dialect::MySql => '`',
        }
    }

    /// `name` quoted as this dialect quotes names, embedded quotes doubled.
    pub fn quote(self, name: &str) -> String {
        let q = self.name_quote();
        format!("{q}{}{q}", name.replace(q, &format!("{q}{q}")))
    }

    /// sqlparser's reading of this dialect.
    pub fn parser(self) -> Box<dyn sqlparser::dialect::Dialect> {
        match self {
            Dialect::Sqlite => Box::new(SQLiteDialect {}),
            Dialect::Postgres => Box::new(PostgreSqlDialect {}),
            Dialect::MySql => Box::new(MySqlDialect {}),
            Dialect::DuckDb => Box::new(DuckDbDialect {}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_the_dialect() {
        let t = "### Answer by sqlite SQL\n### Sqlite SQL tables\nYou are a SQLite expert.";
        assert_eq!(Dialect::Sqlite.retarget(t), t);
        assert_eq!(
            Dialect::Postgres.retarget(t),
            "### Answer by PostgreSQL SQL\n### PostgreSQL SQL tables\nYou are a PostgreSQL expert."
        );
    }

    #[test]
    fn names_are_quoted_as_each_dialect_reads_them() {
        assert_eq!(Dialect::Sqlite.quote("a\"b"), "\"a\"\"b\"");
        assert_eq!(Dialect::MySql.quote("my `col`"), "`my ``col```");
        assert_eq!(
            Dialect::MySql.retarget("You are a SQLite expert."),
            "You are a MySQL expert."
        );
        assert_eq!(
            Dialect::DuckDb.quote("Song \"Name\""),
            "\"Song \"\"Name\"\"\""
        );
        assert_eq!(
            Dialect::DuckDb.retarget("You are a SQLite expert."),
            "You are a DuckDB expert."
        );
    }

    #[test]
    fn double_quotes_name_only_where_they_never_read_as_strings() {
        assert!(Dialect::Postgres.double_quotes_name());
        assert!(Dialect::DuckDb.double_quotes_name());
        assert!(!Dialect::Sqlite.double_quotes_name());
        assert!(!Dialect::MySql.double_quotes_name());
        // DuckDB matches names case-blind: a capital needs no quotes, unlike on PostgreSQL.
        assert!(!Dialect::DuckDb.needs_quotes("Singer"));
        assert!(Dialect::Postgres.needs_quotes("Singer"));
    }
}
