//! The sandbox's authorization policy: allow reading, deny everything else.
//!
//! A pure function of the action, so that the policy can be tested without SQLite; the sandbox
//! installs it as SQLite's authorizer, which consults it for every action while preparing.

use rusqlite::hooks::AuthAction;

/// Pragmas that only describe the schema. Anything else (`writable_schema`, `journal_mode`,
/// `query_only = 0`, …) could change state or weaken the sandbox, so it is denied.
const READ_ONLY_PRAGMAS: &[&str] = &[
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
];

/// The sandbox policy: allow reading, deny everything else. Returns a description of the
/// denied action. A pure function so that the policy can be tested without SQLite.
pub(super) fn authorize(action: &AuthAction<'_>) -> Result<(), String> {
    match action {
        AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => Ok(()),
        AuthAction::Function { function_name } => {
            if function_name.eq_ignore_ascii_case("load_extension") {
                Err("function load_extension".to_string())
            } else {
                Ok(())
            }
        }
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let name = pragma_name.to_ascii_lowercase();
            if READ_ONLY_PRAGMAS.contains(&name.as_str()) {
                Ok(())
            } else {
                match pragma_value {
                    Some(v) => Err(format!("PRAGMA {name} = {v}")),
                    None => Err(format!("PRAGMA {name}")),
                }
            }
        }
        other => Err(describe(other)),
    }
}

/// A short description of a denied action for the error message.
fn describe(action: &AuthAction<'_>) -> String {
    match action {
        AuthAction::Insert { table_name } => format!("INSERT into {table_name}"),
        AuthAction::Update { table_name, .. } => format!("UPDATE of {table_name}"),
        AuthAction::Delete { table_name } => format!("DELETE from {table_name}"),
        AuthAction::CreateTable { table_name } | AuthAction::CreateTempTable { table_name } => {
            format!("CREATE TABLE {table_name}")
        }
        AuthAction::DropTable { table_name } | AuthAction::DropTempTable { table_name } => {
            format!("DROP TABLE {table_name}")
        }
        AuthAction::AlterTable { table_name, .. } => format!("ALTER TABLE {table_name}"),
        AuthAction::Attach { filename } => format!("ATTACH {filename:?}"),
        AuthAction::Detach { database_name } => format!("DETACH {database_name}"),
        AuthAction::Transaction { operation } => format!("transaction {operation:?}"),
        AuthAction::Savepoint { operation, .. } => format!("savepoint {operation:?}"),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::hooks::TransactionOperation;

    use super::*;

    #[test]
    fn reading_is_allowed_and_everything_else_denied() {
        let allowed = [
            AuthAction::Select,
            AuthAction::Recursive,
            AuthAction::Read {
                table_name: "t",
                column_name: "c",
            },
            AuthAction::Function {
                function_name: "count",
            },
            AuthAction::Pragma {
                pragma_name: "TABLE_INFO",
                pragma_value: Some("t"),
            },
        ];
        for action in &allowed {
            assert_eq!(authorize(action), Ok(()), "{action:?}");
        }
        let denied = [
            AuthAction::Insert { table_name: "t" },
            AuthAction::Delete { table_name: "t" },
            AuthAction::Attach { filename: "x.db" },
            AuthAction::Function {
                function_name: "LOAD_EXTENSION",
            },
            AuthAction::Pragma {
                pragma_name: "writable_schema",
                pragma_value: Some("1"),
            },
            AuthAction::Pragma {
                pragma_name: "journal_mode",
                pragma_value: None,
            },
            AuthAction::Transaction {
                operation: TransactionOperation::Begin,
            },
            AuthAction::Unknown {
                code: 999,
                arg1: None,
                arg2: None,
            },
        ];
        for action in &denied {
            assert!(authorize(action).is_err(), "{action:?}");
        }
    }
}
