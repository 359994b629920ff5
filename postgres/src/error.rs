//! PostgreSQL's errors in Quorum's terms. SQLSTATE codes decide the class; the messages of
//! name errors are restated the way SQLite words them (`no such column: x`) in front of the
//! server's own text, so that schema repair and revision hints read one phrasing for both.

use std::time::Duration;

use postgres::error::SqlState;
use quorum_sql::sandbox::ExecError;

/// Why a PostgreSQL database could not be opened or introspected. Never carries the
/// connection string.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("the connection string cannot be read")]
    BadUrl,
    #[error("the schema name {0:?} is not a plain identifier")]
    BadSchemaName(String),
    #[error("cannot connect: {message}")]
    Connect { message: String },
    #[error("schema {schema:?} does not exist")]
    NoSchema { schema: String },
    #[error("{message}")]
    Query { message: String },
    #[error("{what}: {message}")]
    Load { what: String, message: String },
}

impl PgError {
    pub(crate) fn from_query(e: postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => Self::Query {
                message: format!("{} ({})", db.message(), db.code().code()),
            },
            None if e.is_closed() => Self::Connect {
                message: "the server closed the connection".into(),
            },
            None => Self::Connect {
                message: e.to_string(),
            },
        }
    }

    /// A label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BadUrl | Self::BadSchemaName(_) => "config",
            Self::Connect { .. } => "connect",
            Self::NoSchema { .. } => "no_schema",
            Self::Query { .. } => "query",
            Self::Load { .. } => "load",
        }
    }
}

/// The pool's message, which wraps the driver's (no connection string in either).
pub(crate) fn pool_message(e: &r2d2::Error) -> String {
    let text = e.to_string();
    if text.is_empty() {
        "timed out waiting for a connection".into()
    } else {
        text
    }
}

pub(crate) fn unavailable(e: &r2d2::Error) -> ExecError {
    ExecError::Unavailable {
        message: pool_message(e),
    }
}

/// A driver error of one execution, classified.
pub(crate) fn exec_error(e: &postgres::Error, timeout: Duration) -> ExecError {
    let Some(db) = e.as_db_error() else {
        return ExecError::Unavailable {
            message: if e.is_closed() {
                "the server closed the connection".into()
            } else {
                e.to_string()
            },
        };
    };
    let code = db.code();
    let text = format!("{} (SQLSTATE {})", db.message(), code.code());
    let named = |phrase: &str| {
        let name = quoted_name(db.message()).unwrap_or_default();
        ExecError::Syntax {
            // The name stands alone after SQLite's phrase, as the repair and hint parsers read it.
            message: format!("{phrase}{name} ({text})"),
        }
    };
    match code {
        c if *c == SqlState::QUERY_CANCELED => ExecError::Timeout { limit: timeout },
        c if *c == SqlState::READ_ONLY_SQL_TRANSACTION
            || *c == SqlState::INSUFFICIENT_PRIVILEGE =>
        {
            ExecError::Denied { what: text }
        }
        c if *c == SqlState::UNDEFINED_COLUMN => named("no such column: "),
        c if *c == SqlState::UNDEFINED_TABLE => named("no such table: "),
        c if *c == SqlState::AMBIGUOUS_COLUMN => named("ambiguous column name: "),
        c if c.code().starts_with("42") => ExecError::Syntax { message: text },
        c if c.code().starts_with("08") || c.code().starts_with("57P") => {
            ExecError::Unavailable { message: text }
        }
        c => ExecError::Postgres {
            code: c.code().to_owned(),
            message: db.message().to_owned(),
        },
    }
}

/// The identifier a PostgreSQL name error is about: `column "x" does not exist` gives `x`,
/// `column t1.x does not exist` gives `t1.x`, `relation "s.t" does not exist` gives `s.t`.
fn quoted_name(message: &str) -> Option<String> {
    if let Some(start) = message.find('"') {
        let rest = &message[start + 1..];
        return rest.find('"').map(|end| rest[..end].to_owned());
    }
    let rest = message
        .strip_prefix("column ")
        .or_else(|| message.strip_prefix("column reference "))?;
    rest.split_whitespace().next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::quoted_name;

    #[test]
    fn names_are_read_from_postgres_messages() {
        assert_eq!(
            quoted_name("column \"pettype\" does not exist").as_deref(),
            Some("pettype")
        );
        assert_eq!(
            quoted_name("column t1.pettype does not exist").as_deref(),
            Some("t1.pettype")
        );
        assert_eq!(
            quoted_name("relation \"has_pets\" does not exist").as_deref(),
            Some("has_pets")
        );
        assert_eq!(
            quoted_name("column reference \"petid\" is ambiguous").as_deref(),
            Some("petid")
        );
    }
}
