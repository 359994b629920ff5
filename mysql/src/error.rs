//! MySQL's errors in Quorum's terms. Error numbers decide the class; the messages of name
//! errors are restated the way SQLite words them (`no such column: x`) in front of the
//! server's own text, so that schema repair and revision hints read one phrasing for all
//! backends.

use std::time::Duration;

use quorum_sql::sandbox::ExecError;

/// Why a MySQL database could not be opened, introspected or loaded. Never carries the
/// connection string.
#[derive(Debug, thiserror::Error)]
pub enum MySqlError {
    #[error("the connection string cannot be read: {0}")]
    BadUrl(String),
    #[error("the database name {0:?} is not a plain identifier")]
    BadDatabaseName(String),
    #[error("cannot connect: {message}")]
    Connect { message: String },
    #[error("database {database:?} does not exist")]
    NoDatabase { database: String },
    #[error("{message}")]
    Query { message: String },
    #[error("{what}: {message}")]
    Load { what: String, message: String },
}

impl MySqlError {
    pub(crate) fn from_query(e: mysql::Error) -> Self {
        match e {
            mysql::Error::MySqlError(e) => Self::Query {
                message: format!("{} ({})", e.message, e.code),
            },
            other => Self::Connect {
                message: other.to_string(),
            },
        }
    }

    /// A label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BadUrl(_) | Self::BadDatabaseName(_) => "config",
            Self::Connect { .. } => "connect",
            Self::NoDatabase { .. } => "no_database",
            Self::Query { .. } => "query",
            Self::Load { .. } => "load",
        }
    }
}

// Server error numbers (MySQL's and MariaDB's share these).
const ER_DBACCESS_DENIED: u16 = 1044;
const ER_ACCESS_DENIED: u16 = 1045;
const ER_NON_UNIQ: u16 = 1052;
const ER_BAD_FIELD: u16 = 1054;
const ER_PARSE: u16 = 1064;
const ER_TABLEACCESS_DENIED: u16 = 1142;
const ER_COLUMNACCESS_DENIED: u16 = 1143;
const ER_NO_SUCH_TABLE: u16 = 1146;
const ER_QUERY_INTERRUPTED: u16 = 1317;
const ER_SP_DOES_NOT_EXIST: u16 = 1305;
const ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION: u16 = 1792;
/// MariaDB's `max_statement_time` exceeded.
const ER_STATEMENT_TIMEOUT: u16 = 1969;
/// MySQL's `max_execution_time` exceeded.
const ER_QUERY_TIMEOUT: u16 = 3024;

/// A driver error of one execution, classified.
pub(crate) fn exec_error(e: &mysql::Error, timeout: Duration) -> ExecError {
    let mysql::Error::MySqlError(db) = e else {
        return match e {
            // The socket deadline: the server did not answer within the limit and the margin.
            mysql::Error::IoError(io)
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                ) =>
            {
                ExecError::Timeout { limit: timeout }
            }
            other => ExecError::Unavailable {
                message: other.to_string(),
            },
        };
    };
    let text = format!("{} (MySQL error {})", db.message, db.code);
    let named = |phrase: &str| ExecError::Syntax {
        // The name stands alone after SQLite's phrase, as the repair and hint parsers read it.
        message: format!(
            "{phrase}{} ({text})",
            quoted_name(&db.message).unwrap_or_default()
        ),
    };
    match db.code {
        ER_STATEMENT_TIMEOUT | ER_QUERY_TIMEOUT | ER_QUERY_INTERRUPTED => {
            ExecError::Timeout { limit: timeout }
        }
        ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
        | ER_DBACCESS_DENIED
        | ER_ACCESS_DENIED
        | ER_TABLEACCESS_DENIED
        | ER_COLUMNACCESS_DENIED => ExecError::Denied { what: text },
        ER_BAD_FIELD => named("no such column: "),
        ER_NO_SUCH_TABLE => named("no such table: "),
        ER_NON_UNIQ => named("ambiguous column name: "),
        ER_SP_DOES_NOT_EXIST => named("no such function: "),
        ER_PARSE => ExecError::Syntax { message: text },
        code => ExecError::MySql {
            code,
            message: db.message.clone(),
        },
    }
}

/// The name a MySQL name error is about: `Unknown column 't1.x' in 'field list'` gives
/// `t1.x`, `Table 'db.pets' doesn't exist` gives `pets` (the database prefix is the server's),
/// `FUNCTION db.f does not exist` gives `f`.
fn quoted_name(message: &str) -> Option<String> {
    let name = match message.find('\'') {
        Some(start) => {
            let rest = &message[start + 1..];
            rest[..rest.find('\'')?].to_owned()
        }
        None => message.split_whitespace().nth(1)?.to_owned(),
    };
    let table_or_function = message.starts_with("Table ") || message.starts_with("FUNCTION ");
    Some(match name.split_once('.') {
        Some((_, bare)) if table_or_function => bare.to_owned(),
        _ => name,
    })
}

#[cfg(test)]
mod tests {
    use super::quoted_name;

    #[test]
    fn names_are_read_from_mysql_messages() {
        assert_eq!(
            quoted_name("Unknown column 'pettype' in 'field list'").as_deref(),
            Some("pettype")
        );
        assert_eq!(
            quoted_name("Unknown column 't1.pettype' in 'where clause'").as_deref(),
            Some("t1.pettype")
        );
        assert_eq!(
            quoted_name("Table 'pets_1.has_pets' doesn't exist").as_deref(),
            Some("has_pets")
        );
        assert_eq!(
            quoted_name("Column 'petid' in field list is ambiguous").as_deref(),
            Some("petid")
        );
        assert_eq!(
            quoted_name("FUNCTION pets_1.strftime does not exist").as_deref(),
            Some("strftime")
        );
    }
}
