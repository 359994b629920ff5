//! The functions a `READ ONLY` transaction does not stop. PostgreSQL refuses writes in such a
//! transaction, but some built-in functions act outside it (advisory locks that outlive the
//! rollback, notifications, signals to other sessions, file and large-object access, `dblink`
//! to a writable connection, settings that would lift the timeout, SQL text run from inside a
//! query). A candidate that calls one is refused before it is sent. A read-only role is still
//! the operator's first line (docs/DEPLOY.md); this is the second.

use quorum_sql::sandbox::ExecError;

use crate::error::PgError;

/// Functions refused by exact name.
const DENIED: &[&str] = &[
    "set_config",
    "query_to_xml",
    "query_to_xmlschema",
    "query_to_xml_and_xmlschema",
    "cursor_to_xml",
    "cursor_to_xmlschema",
    "pg_notify",
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_promote",
    "pg_switch_wal",
    "pg_create_restore_point",
    "pg_backup_start",
    "pg_backup_stop",
    "pg_log_backend_memory_contexts",
    "pg_logical_emit_message",
    "pg_import_system_collations",
    "pg_stat_clear_snapshot",
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_dir",
    "pg_stat_file",
    "nextval",
    "setval",
    "loread",
    "lowrite",
];

/// Families refused by prefix.
const DENIED_PREFIXES: &[&str] = &[
    "dblink",
    "lo_",
    "pg_advisory",
    "pg_try_advisory",
    "pg_stat_reset",
    "pg_ls_",
    "pg_file_",
    "pg_replication_",
    "pg_create_",
    "pg_drop_replication",
];

fn denied(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    DENIED.contains(&name.as_str()) || DENIED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Refuses `sql` when it calls a denied function: a name (bare, quoted or schema-qualified)
/// followed by `(`, outside string literals and comments.
pub(crate) fn check_functions(sql: &str) -> Result<(), ExecError> {
    let mut last_name: Option<String> = None;
    let bytes = sql.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\'' => {
                // '' inside a literal is an escaped quote; E'..' also allows \' .
                let escapes = i > 0 && matches!(bytes[i - 1], b'e' | b'E');
                i += 1;
                while i < bytes.len() {
                    if escapes && bytes[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if bytes[i] == b'\'' {
                        if bytes.get(i + 1) == Some(&b'\'') {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
                last_name = None;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'$' => {
                // A dollar-quoted literal: $tag$ ... $tag$ (a bare $1 is a parameter).
                let tag_end = sql[i + 1..].find('$').map(|e| i + 1 + e);
                let tag_ok = tag_end.is_some_and(|e| {
                    sql[i + 1..e]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                        && !sql[i + 1..e].starts_with(|ch: char| ch.is_ascii_digit())
                });
                if let (Some(e), true) = (tag_end, tag_ok) {
                    let tag = &sql[i..=e];
                    match sql[e + 1..].find(tag) {
                        Some(close) => i = e + 1 + close + tag.len(),
                        None => i = bytes.len(),
                    }
                    last_name = None;
                } else {
                    i += 1;
                }
            }
            b'"' => {
                let end = sql[i + 1..].find('"').map_or(bytes.len(), |e| i + 1 + e);
                last_name = Some(sql[i + 1..end.min(bytes.len())].to_owned());
                i = end + 1;
            }
            b'(' => {
                if let Some(name) = last_name.take()
                    && denied(&name)
                {
                    return Err(ExecError::Denied {
                        what: format!("the function {name}() acts outside a read-only transaction"),
                    });
                }
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'$'))
                {
                    i += 1;
                }
                last_name = Some(sql[start..i].to_owned());
            }
            c if c.is_ascii_whitespace() || c == b'.' => {
                // A qualifier's dot keeps the name that follows it as the candidate.
                i += 1;
            }
            _ => {
                last_name = None;
                i += 1;
            }
        }
    }
    Ok(())
}

/// A schema name must be a plain identifier: it is put into `search_path` and never quoted
/// by the caller.
pub(crate) fn check_schema_name(name: &str) -> Result<(), PgError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(PgError::BadSchemaName(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_effect_functions_are_refused_wherever_they_hide() {
        for sql in [
            "SELECT pg_advisory_lock(1)",
            "SELECT set_config('statement_timeout', '0', false)",
            "SELECT pg_catalog.set_config('search_path', 'x', true)",
            "SELECT \"dblink_exec\"('dbname=x', 'DROP TABLE t')",
            "SELECT * FROM t WHERE id IN (SELECT lo_import('/etc/passwd'))",
            "SELECT query_to_xml ('select 1', true, true, '')",
            "SELECT /* c */ pg_notify /* c */ ('ch', 'x')",
            "SELECT nextval('s')",
        ] {
            assert!(
                matches!(check_functions(sql), Err(ExecError::Denied { .. })),
                "{sql}"
            );
        }
    }

    #[test]
    fn literals_comments_and_ordinary_queries_pass() {
        for sql in [
            "SELECT count(*) FROM singer WHERE name = 'set_config('",
            "SELECT $$pg_notify('x')$$, E'lo_import(\\'x\\')'",
            "SELECT name FROM t -- set_config(\n WHERE lo_x = 1",
            "SELECT lo_limit FROM t",
            "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.id",
            "SELECT avg(age), max(age) FROM singer WHERE country = 'France'",
        ] {
            assert_eq!(check_functions(sql), Ok(()), "{sql}");
        }
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(check_schema_name("concert_singer").is_ok());
        assert!(check_schema_name("public").is_ok());
        for bad in ["", "a b", "x;drop", "\"q\"", "1abc"] {
            assert!(check_schema_name(bad).is_err(), "{bad}");
        }
    }
}
