//! Candidates run over files through DuckDB: every write, DDL, file read or write, extension,
//! setting and state change a query could attempt (directly or through a table function) is
//! refused, a query that would run for minutes is interrupted at the limit, the session stays
//! usable, and neither the registered files nor anything else on disk changes. A file beside
//! the registered folder cannot be read, by any name.

use std::path::Path;
use std::time::{Duration, Instant};

use quorum_duckdb::load::{TableFormat, write_sqlite_as_files};
use quorum_duckdb::{DuckDbDatabase, DuckDbSource};
use quorum_sql::backend::Backend;
use quorum_sql::sandbox::{ExecError, Limits};
use quorum_sql::value::Value;
use quorum_tests::spider_dir;

/// Every file under `dir` with its bytes.
fn fingerprint(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("folder")
        .map(|e| {
            let path = e.expect("entry").path();
            (
                path.display().to_string(),
                std::fs::read(&path).expect("file"),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn candidates_cannot_change_read_other_files_or_hold_duckdb() {
    let root = tempfile::tempdir().expect("temporary directory");
    let registered = root.path().join("pets_1");
    let sqlite = spider_dir().join("database/pets_1/pets_1.sqlite");
    write_sqlite_as_files(&sqlite, &registered, TableFormat::Parquet).expect("written");
    let secret = root.path().join("secret.csv");
    std::fs::write(&secret, "token\nhunter2\n").expect("secret written");
    let before = fingerprint(&registered);

    let db =
        DuckDbDatabase::open(DuckDbSource::new(&registered), Some(root.path())).expect("opens");
    let limits = Limits {
        timeout: Duration::from_millis(1500),
        ..Limits::default()
    };
    let mut session = db.open_session(limits).expect("session");
    let secret_path = secret.display().to_string();
    let pwned = root.path().join("pwned");
    let pwned_path = pwned.display().to_string();
    let attacks = [
        "INSERT INTO pets VALUES (1, 'dog', 2, 3.0)".to_owned(),
        "UPDATE pets SET weight = 0".into(),
        "DELETE FROM has_pet".into(),
        "TRUNCATE pets".into(),
        "DROP TABLE pets".into(),
        "CREATE TABLE x (a int)".into(),
        "CREATE TEMP TABLE x AS SELECT * FROM pets".into(),
        "CREATE MACRO m(a) AS a + 1".into(),
        "CREATE SEQUENCE s".into(),
        "ALTER TABLE pets ADD COLUMN x int".into(),
        "SELECT 1; DELETE FROM pets".into(),
        format!("SELECT * FROM read_csv('{secret_path}')"),
        format!("SELECT * FROM read_csv_auto('{secret_path}')"),
        format!("SELECT * FROM '{secret_path}'"),
        format!("SELECT * FROM \"{secret_path}\""),
        format!("SELECT content FROM read_text('{secret_path}')"),
        "SELECT * FROM read_text('/etc/hostname')".into(),
        "SELECT * FROM read_parquet('/tmp/*.parquet')".into(),
        "SELECT * FROM glob('/etc/*')".into(),
        format!("SELECT * FROM query('SELECT * FROM read_csv(''{secret_path}'')')"),
        format!("COPY pets TO '{pwned_path}'"),
        format!("COPY (SELECT * FROM pets) TO '{pwned_path}' (FORMAT PARQUET)"),
        format!("EXPORT DATABASE '{pwned_path}'"),
        format!("ATTACH '{pwned_path}.duckdb' AS other"),
        "DETACH pets_1".into(),
        "USE memory".into(),
        "INSTALL httpfs".into(),
        "LOAD httpfs".into(),
        "SET enable_external_access = true".into(),
        "SET lock_configuration = false".into(),
        "RESET enable_external_access".into(),
        "PRAGMA enable_profiling".into(),
        "CALL pragma_version()".into(),
        "CHECKPOINT".into(),
        "VACUUM".into(),
        "SELECT getenv('HOME')".into(),
        "SELECT setseed(0.5)".into(),
        "SELECT * FROM duckdb_settings()".into(),
        "SELECT * FROM information_schema.tables".into(),
        "SUMMARIZE pets".into(),
        "DESCRIBE pets".into(),
        "BEGIN TRANSACTION".into(),
        "SELECT * FROM pets FOR UPDATE".into(),
        "WITH x AS (SELECT * FROM read_text('/etc/hostname')) SELECT * FROM x".into(),
    ];
    for sql in &attacks {
        let outcome = session.execute(sql);
        assert!(outcome.is_err(), "{sql} ran: {outcome:?}");
        let count = session
            .execute("SELECT count(*) FROM pets")
            .unwrap_or_else(|e| panic!("after {sql}: {e}"));
        assert_eq!(count.rows, [[Value::Integer(3)]], "after {sql}");
    }
    assert!(attacks.len() >= 25);

    // The schema's own name may qualify a table.
    let own = session
        .execute("SELECT count(*) FROM main.pets")
        .expect("own schema");
    assert_eq!(own.rows, [[Value::Integer(3)]]);

    // A query that would run for minutes (10^12 rows of twelve derived digits) is interrupted
    // at the limit, and the session answers the next query.
    let digits =
        "(SELECT * FROM (VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9)) AS v(d))";
    let from: Vec<String> = (0..12).map(|i| format!("{digits} AS t{i}")).collect();
    let sum: Vec<String> = (0..12).map(|i| format!("t{i}.d")).collect();
    let start = Instant::now();
    let long = session.execute(&format!(
        "SELECT sum({}) FROM {}",
        sum.join(" * "),
        from.join(", ")
    ));
    assert!(matches!(long, Err(ExecError::Timeout { .. })), "{long:?}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let after = session
        .execute("SELECT count(*) FROM pets")
        .expect("usable after a timeout");
    assert_eq!(after.rows, [[Value::Integer(3)]]);

    assert!(!pwned.exists());
    assert!(!root.path().join("pwned.duckdb").exists());
    drop(session);
    drop(db);
    assert_eq!(
        fingerprint(&registered),
        before,
        "the registered files are unchanged"
    );
    // The private copy is gone with the database: only what the test wrote is left.
    let left: Vec<String> = std::fs::read_dir(root.path())
        .expect("root")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let mut left = left;
    left.sort();
    assert_eq!(left, ["pets_1", "secret.csv"]);
}
