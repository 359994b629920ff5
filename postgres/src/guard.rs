//! The functions a `READ ONLY` transaction does not stop. PostgreSQL refuses writes in such a
//! transaction, but some built-in functions act outside it (advisory locks that outlive the
//! rollback, notifications, signals to other sessions, file and large-object access, `dblink`
//! to a writable connection, settings that would lift the timeout, SQL text run from inside a
//! query). A candidate that calls one is refused before it is sent. A read-only role is still
//! the operator's first line (docs/DEPLOY.md); this is the second.

use quorum_sql::lexer::{LexKind, Lexeme, Quoting, lex_with};
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
/// followed by `(`, outside string literals and comments, as PostgreSQL scans them
/// ([`Quoting::Postgres`]). A name written with Unicode escapes (`U&"…"`) is refused outright:
/// it could spell any function.
pub(crate) fn check_functions(sql: &str) -> Result<(), ExecError> {
    let lexemes: Vec<Lexeme> = lex_with(sql, Quoting::Postgres)
        .into_iter()
        .filter(|l| l.kind != LexKind::Comment)
        .collect();
    for (i, pair) in lexemes.windows(2).enumerate() {
        let (name, next) = (pair[0], pair[1]);
        let unicode_escaped = name.kind == LexKind::Quoted('"')
            && i >= 2
            && lexemes[i - 1].text(sql) == "&"
            && lexemes[i - 2].text(sql).eq_ignore_ascii_case("u")
            && lexemes[i - 2].end == lexemes[i - 1].start
            && lexemes[i - 1].end == name.start;
        if unicode_escaped {
            return Err(ExecError::Denied {
                what: "names written with Unicode escapes (U&\"…\") are not accepted".to_owned(),
            });
        }
        let callable = matches!(name.kind, LexKind::Word | LexKind::Quoted('"'));
        if callable && next.text(sql) == "(" && denied(name.unquoted(sql)) {
            return Err(ExecError::Denied {
                what: format!(
                    "the function {}() acts outside a read-only transaction",
                    name.unquoted(sql)
                ),
            });
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
            // Brackets are code in PostgreSQL, and E'' strings end where PostgreSQL ends them.
            "SELECT ARRAY[pg_notify('c', 'x')]",
            "SELECT E'\\'' , pg_notify('c', 'x') , '",
            "SELECT $a$ x $a$, pg_notify('c', 'x')",
            "SELECT U&\"\\0070g_notify\"('c', 'x')",
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
