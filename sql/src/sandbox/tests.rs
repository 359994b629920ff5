//! Sandbox tests against private copies of a Spider database.

use super::*;

fn spider_dir() -> PathBuf {
    match std::env::var_os("QUORUM_SPIDER_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/spider"),
    }
}

/// A private copy of a Spider database, so that a sandbox failure could never damage the
/// shared data, and so that the test can check the file afterwards. Its directory is removed
/// when the copy is dropped.
struct PrivateCopy {
    dir: PathBuf,
    path: PathBuf,
}

impl std::ops::Deref for PrivateCopy {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for PrivateCopy {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        // A leftover directory in the temp dir is harmless; a panic while dropping is not.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn copy_db(db: &str, tag: &str) -> PrivateCopy {
    let src = spider_dir().join(format!("database/{db}/{db}.sqlite"));
    let dir = std::env::temp_dir().join(format!(
        "quorum-sandbox-{}-{tag}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    let path = dir.join(format!("{db}.sqlite"));
    std::fs::copy(&src, &path).unwrap_or_else(|e| panic!("copy {src:?}: {e}"));
    PrivateCopy { dir, path }
}

fn limits(timeout_ms: u64) -> Limits {
    Limits {
        timeout: Duration::from_millis(timeout_ms),
        ..Limits::default()
    }
}

#[test]
fn spider_query_returns_expected_rows() {
    let db = copy_db("concert_singer", "rows");
    let sandbox = Sandbox::open(&db, Limits::default()).expect("open concert_singer");
    let r = sandbox
        .execute("SELECT count(*) FROM singer")
        .expect("count runs");
    assert_eq!(r.columns, vec!["count(*)".to_string()]);
    assert_eq!(r.rows, vec![vec![Value::Integer(6)]]);
    assert!(!r.truncated);
    let r = sandbox
        .execute("SELECT name, age FROM singer WHERE age > 40 ORDER BY age;")
        .expect("select runs");
    assert_eq!(
        r.rows,
        vec![
            vec![Value::Text("Rose White".into()), Value::Integer(41)],
            vec![Value::Text("John Nizinik".into()), Value::Integer(43)],
            vec![Value::Text("Joe Sharp".into()), Value::Integer(52)],
        ]
    );
}

#[test]
fn writes_attach_pragmas_and_tricks_are_refused_and_file_unchanged() {
    let path = copy_db("concert_singer", "attacks");
    let before = std::fs::read(&path).expect("read db");
    let sandbox = Sandbox::open(&path, limits(2000)).expect("open");
    let attacks = [
        "INSERT INTO singer (Singer_ID, Name) VALUES (99, 'x')",
        "UPDATE singer SET Age = 0",
        "DELETE FROM singer",
        "DROP TABLE singer",
        "CREATE TABLE x (a int)",
        "CREATE TEMP TABLE x (a int)",
        "ALTER TABLE singer ADD COLUMN z int",
        "ATTACH DATABASE '/tmp/quorum-attack.sqlite' AS other",
        "DETACH DATABASE main",
        "PRAGMA writable_schema=1",
        "PRAGMA journal_mode=DELETE",
        "PRAGMA query_only=0",
        "SELECT 1; DROP TABLE singer",
        "SELECT 1; SELECT 2",
        "BEGIN IMMEDIATE",
        "SAVEPOINT s",
        "SELECT load_extension('/tmp/evil')",
        "VACUUM",
        "VACUUM INTO '/tmp/quorum-vacuum-copy.sqlite'",
        "REINDEX",
        "ANALYZE",
        "CREATE VIEW v AS SELECT 1",
    ];
    for sql in attacks {
        let err = sandbox
            .execute(sql)
            .expect_err(&format!("must refuse {sql:?}"));
        assert!(
            matches!(
                err,
                ExecError::Denied { .. } | ExecError::MultipleStatements
            ),
            "{sql:?} refused for the wrong reason: {err:?}"
        );
    }
    assert!(!Path::new("/tmp/quorum-vacuum-copy.sqlite").exists());
    // The sandbox still works after the attempts.
    let r = sandbox
        .execute("SELECT count(*) FROM singer")
        .expect("runs");
    assert_eq!(r.rows, vec![vec![Value::Integer(6)]]);
    drop(sandbox);
    assert!(
        std::fs::read(&path).expect("reread db") == before,
        "db file changed"
    );
}

#[test]
fn denial_names_the_action() {
    let db = copy_db("concert_singer", "deny");
    let sandbox = Sandbox::open(&db, limits(2000)).expect("open");
    let err = sandbox.execute("DELETE FROM singer").expect_err("denied");
    assert_eq!(err.kind(), "denied");
    assert!(err.to_string().contains("DELETE from singer"), "{err}");
    let err = sandbox
        .execute("PRAGMA writable_schema=1")
        .expect_err("denied");
    assert!(err.to_string().contains("writable_schema"), "{err}");
}

#[test]
fn read_only_pragma_and_recursive_cte_are_allowed() {
    let db = copy_db("concert_singer", "pragma");
    let sandbox = Sandbox::open(&db, limits(2000)).expect("open");
    let r = sandbox
        .execute("PRAGMA table_info(singer)")
        .expect("table_info");
    assert_eq!(r.rows.len(), 7);
    let r = sandbox
        .execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT sum(x) FROM c")
        .expect("finite recursion");
    assert_eq!(r.rows, vec![vec![Value::Integer(15)]]);
}

#[test]
fn runaway_query_is_interrupted_within_the_limit() {
    let limit = Duration::from_millis(300);
    let db = copy_db("concert_singer", "timeout");
    let sandbox = Sandbox::open(&db, limits(300)).expect("open");
    let start = Instant::now();
    let err = sandbox
        .execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
        .expect_err("never finishes");
    let elapsed = start.elapsed();
    assert_eq!(err, ExecError::Timeout { limit });
    assert!(elapsed >= limit, "stopped early: {elapsed:?}");
    assert!(
        elapsed < limit + Duration::from_millis(500),
        "not interrupted: {elapsed:?}"
    );
    // The connection is usable again: the deadline was cleared.
    sandbox
        .execute("SELECT count(*) FROM singer")
        .expect("runs after a timeout");
}

#[test]
fn row_and_byte_caps_truncate_or_fail() {
    let path = copy_db("concert_singer", "caps");
    let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x, 'abcdefghij' FROM c";
    let capped = Limits {
        max_rows: 50,
        ..limits(5000)
    };
    let sandbox = Sandbox::open(&path, capped).expect("open");
    let r = sandbox.execute(endless).expect("truncates");
    assert_eq!(r.rows.len(), 50);
    assert!(r.truncated);
    assert_eq!(
        r.rows[49],
        vec![Value::Integer(50), Value::Text("abcdefghij".into())]
    );

    // Each row is 8 + 10 bytes: 100 bytes hold 5 rows, the 6th overflows.
    let by_bytes = Limits {
        max_bytes: 100,
        ..capped
    };
    let r = sandbox.execute_with(endless, by_bytes).expect("truncates");
    assert_eq!(r.rows.len(), 5);
    assert!(r.truncated);

    let failing = Limits {
        on_overflow: Overflow::Fail,
        ..capped
    };
    let err = sandbox
        .execute_with(endless, failing)
        .expect_err("too large");
    assert_eq!(err.kind(), "too_large");
    let r = sandbox
        .execute_with("SELECT name FROM singer", failing)
        .expect("fits");
    assert_eq!(r.rows.len(), 6);
    assert!(!r.truncated);
}

#[test]
fn oversized_values_are_stopped_by_sqlite() {
    let db = copy_db("concert_singer", "toobig");
    let sandbox = Sandbox::open(&db, limits(5000)).expect("open");
    let small = Limits {
        max_bytes: 2 << 20,
        ..limits(5000)
    };
    let err = sandbox
        .execute_with("SELECT length(randomblob(50000000))", small)
        .expect_err("value over the length limit");
    assert_eq!(err.kind(), "too_large");
    let r = sandbox
        .execute_with("SELECT length(randomblob(1000000))", small)
        .expect("under the limit");
    assert_eq!(r.rows, vec![vec![Value::Integer(1_000_000)]]);
}

#[test]
fn errors_are_classified() {
    let db = copy_db("concert_singer", "errors");
    let sandbox = Sandbox::open(&db, limits(2000)).expect("open");
    assert_eq!(
        sandbox.execute("  ; ").expect_err("empty"),
        ExecError::Empty
    );
    assert_eq!(
        sandbox.execute("SELEC 1").expect_err("typo").kind(),
        "syntax"
    );
    assert_eq!(
        sandbox
            .execute("SELECT nope FROM singer")
            .expect_err("no column")
            .kind(),
        "syntax"
    );
    let missing = Sandbox::open(Path::new("/nonexistent/x.sqlite"), Limits::default());
    assert_eq!(missing.expect_err("missing").kind(), "open");
}

#[test]
fn values_keep_their_storage_class() {
    let db = copy_db("concert_singer", "values");
    let sandbox = Sandbox::open(&db, limits(2000)).expect("open");
    let r = sandbox
        .execute("SELECT NULL, 1, 1.5, 'é', x'00ff'")
        .expect("literals");
    assert_eq!(
        r.rows,
        vec![vec![
            Value::Null,
            Value::Integer(1),
            Value::Real(1.5),
            Value::Text("é".into()),
            Value::Blob(vec![0, 255]),
        ]]
    );
}
