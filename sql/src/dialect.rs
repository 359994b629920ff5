//! The SQL dialect a database speaks. Prompts name it to the model, the parser reads
//! candidates in it, and revision quotes its error messages.

use serde::{Deserialize, Serialize};
use sqlparser::dialect::{PostgreSqlDialect, SQLiteDialect};

use crate::lexer::Quoting;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Dialect {
    #[default]
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The name prompts use ("You are a SQLite expert", "SQLite SQL Query").
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Sqlite => "SQLite",
            Dialect::Postgres => "PostgreSQL",
        }
    }

    /// A fixed prompt text written for SQLite (the published templates all are), speaking of
    /// this dialect instead. Only the template's own words change, never schema or question
    /// text, so callers apply it to constants.
    pub fn retarget(self, template: &str) -> String {
        match self {
            Dialect::Sqlite => template.to_owned(),
            Dialect::Postgres => template
                .replace("SQLite", self.name())
                .replace("Sqlite", self.name())
                .replace("sqlite", self.name()),
        }
    }

    /// The quoting rules [`crate::lexer`] scans this dialect's text with.
    pub fn quoting(self) -> Quoting {
        match self {
            Dialect::Sqlite => Quoting::Sqlite,
            Dialect::Postgres => Quoting::Postgres,
        }
    }

    /// Whether `name` must be written in double quotes to mean itself: anything but a plain
    /// word, and on PostgreSQL, which folds bare names to lower case, a word with a capital.
    pub fn needs_quotes(self, name: &str) -> bool {
        let plain = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        !plain || (self == Dialect::Postgres && name.chars().any(|c| c.is_ascii_uppercase()))
    }

    /// sqlparser's reading of this dialect.
    pub fn parser(self) -> Box<dyn sqlparser::dialect::Dialect> {
        match self {
            Dialect::Sqlite => Box::new(SQLiteDialect {}),
            Dialect::Postgres => Box::new(PostgreSqlDialect {}),
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
}
