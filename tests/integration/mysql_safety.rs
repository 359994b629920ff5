//! Candidates run on a MySQL or MariaDB server Quorum does not own: against a real MariaDB
//! (started by `scripts/mariadb-server.sh`), connected as an admin with every right so that
//! only Quorum's own guards stand in the way, every write, DDL (which would commit the
//! read-only transaction), file read and write, lock, variable, sequence, procedure, function
//! that writes, executable comment and over-long query fails, and checksums of every table,
//! the databases, routines and user locks show that nothing changed.

use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use quorum_mysql::{MySqlDatabase, MySqlSource};
use quorum_sql::backend::Backend;
use quorum_sql::sandbox::{ExecError, Limits, Overflow};
use quorum_sql::schema::IntrospectOptions;
use quorum_sql::value::Value;

use crate::mysql_support::MariaDbServer;

/// Everything a candidate could change: each table's rows, the databases and tables, routines,
/// sequences' next values and user-level locks.
fn fingerprint(admin: &mut mysql::Conn) -> String {
    let tables: Vec<String> = admin
        .query(
            "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', \
             'sys') ORDER BY 1",
        )
        .expect("tables");
    let mut parts = vec![tables.join(",")];
    for t in &tables {
        let (name, sum): (String, Option<i64>) = admin
            .query_first(format!("CHECKSUM TABLE {t} EXTENDED"))
            .expect("checksum")
            .expect("a row");
        parts.push(format!("{name}={sum:?}"));
    }
    for probe in [
        "SELECT COUNT(*) FROM information_schema.SCHEMATA",
        "SELECT COUNT(*) FROM information_schema.ROUTINES",
        "SELECT COALESCE(IS_USED_LOCK('quorum'), 0)",
        "SELECT COUNT(*) FROM pets_1.counter",
    ] {
        let n: Option<i64> = admin.query_first(probe).expect(probe);
        parts.push(format!("{probe}={n:?}"));
    }
    parts.join("\n")
}

#[test]
fn candidates_cannot_change_read_files_or_hold_a_mariadb_server() {
    let server = MariaDbServer::start();
    let report = server.load_spider("pets_1");
    assert_eq!(report.tables, 3);
    assert!(report.rows > 0);
    let mut admin = server.admin();
    admin
        .query_drop(
            "CREATE SEQUENCE pets_1.counter; \
             CREATE PROCEDURE pets_1.wipe() DELETE FROM pets_1.pets; \
             CREATE FUNCTION pets_1.adopt() RETURNS INT MODIFIES SQL DATA \
               BEGIN INSERT INTO pets_1.pets VALUES (9999, 'cat', 1, 1.0); RETURN 1; END",
        )
        .expect("fixtures");
    let before = fingerprint(&mut admin);

    let source = MySqlSource::new(server.url.clone(), Some("pets_1".into()));
    let db = MySqlDatabase::connect(source).expect("connects");
    let limits = Limits {
        timeout: Duration::from_millis(1500),
        ..Limits::default()
    };
    let mut session = db.open_session(limits).expect("session");
    let attacks = [
        "INSERT INTO pets VALUES (1, 'dog', 2, 3.0)",
        "REPLACE INTO pets VALUES (1, 'dog', 2, 3.0)",
        "UPDATE pets SET weight = 0",
        "DELETE FROM has_pet",
        "TRUNCATE pets",
        "DROP TABLE pets",
        "CREATE TABLE x (a int)",
        "CREATE TEMPORARY TABLE x AS SELECT * FROM pets",
        "ALTER TABLE pets ADD COLUMN x int",
        "RENAME TABLE pets TO p",
        "SELECT 1; DELETE FROM pets",
        "SELECT * FROM pets INTO OUTFILE '/tmp/quorum-pets.csv'",
        "SELECT 'x' INTO DUMPFILE '/tmp/quorum-pwned'",
        "SELECT LOAD_FILE('/etc/hostname')",
        "LOAD DATA INFILE '/etc/hostname' INTO TABLE pets",
        "SELECT pets_1.adopt()",
        "CALL pets_1.wipe()",
        "DO SLEEP(5)",
        "SELECT SLEEP(30)",
        "SELECT BENCHMARK(1000000000, MD5('x'))",
        "SELECT GET_LOCK('quorum', 0)",
        "SELECT NEXTVAL(pets_1.counter)",
        "SELECT NEXT VALUE FOR pets_1.counter",
        "SELECT @x := petid FROM pets",
        "SELECT petid INTO @x FROM pets LIMIT 1",
        "SET @@SESSION.max_statement_time = 0",
        "SELECT * FROM pets FOR UPDATE",
        "SELECT * FROM pets LOCK IN SHARE MODE",
        "LOCK TABLES pets WRITE",
        "HANDLER pets OPEN",
        "PREPARE s FROM 'DELETE FROM pets'",
        "SELECT 1 /*!, (SELECT adopt()) */",
        "GRANT ALL ON *.* TO 'x'@'%' IDENTIFIED BY 'x'",
        "FLUSH TABLES",
        "KILL CONNECTION_ID()",
        "INSTALL SONAME 'ha_archive'",
        "WITH gone AS (SELECT 1) DELETE FROM pets",
        "SHUTDOWN",
        "SELECT user, password FROM mysql.user",
        "SELECT COUNT(*) FROM information_schema.TABLES",
        "SELECT * FROM performance_schema.threads",
        "SELECT petid FROM pets WHERE petid IN (SELECT 1 FROM mysql.db)",
        "SELECT mysql.f()",
    ];
    for sql in attacks {
        let outcome = session.execute(sql);
        assert!(outcome.is_err(), "{sql} ran: {outcome:?}");
        // The session is still good for the next candidate.
        let count = session
            .execute("SELECT count(*) FROM pets")
            .unwrap_or_else(|e| panic!("after {sql}: {e}"));
        assert_eq!(count.rows, [[Value::Integer(3)]], "after {sql}");
    }

    // The database's own name may qualify its tables.
    let own = session
        .execute("SELECT count(*) FROM pets_1.pets")
        .expect("own database");
    assert_eq!(own.rows, [[Value::Integer(3)]]);

    // A query that would run for minutes (a billion rows of ten derived digits) is stopped by
    // the server at the limit.
    let digits = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
                  UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
                  UNION ALL SELECT 8 UNION ALL SELECT 9)";
    let from: Vec<String> = (0..9).map(|i| format!("{digits} AS t{i}")).collect();
    let start = Instant::now();
    let long = session.execute(&format!("SELECT count(*) FROM {}", from.join(", ")));
    assert!(matches!(long, Err(ExecError::Timeout { .. })), "{long:?}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(!std::path::Path::new("/tmp/quorum-pwned").exists());
    assert!(!std::path::Path::new("/tmp/quorum-pets.csv").exists());
    drop(session);
    assert_eq!(fingerprint(&mut admin), before, "nothing changed");
}

#[test]
fn mariadb_results_are_capped_typed_and_named_like_sqlite_errors() {
    let server = MariaDbServer::start();
    server.load_spider("pets_1");
    let mut admin = server.admin();
    admin
        .query_drop(
            "CREATE TABLE pets_1.kinds (d DATE, t DATETIME, m DECIMAL(8,2), \
               b VARBINARY(4), n INT COMMENT 'how many') COMMENT 'a table with every type'; \
             INSERT INTO pets_1.kinds VALUES ('2008-12-01', '2008-12-01 10:30:00', 2.50, \
               X'00ff', NULL)",
        )
        .expect("fixture");
    let source = MySqlSource::new(server.url.clone(), Some("pets_1".into()));
    let handle = MySqlDatabase::connect(source)
        .expect("connects")
        .into_handle("pets_1", IntrospectOptions::default())
        .expect("introspects");
    let schema = &handle.schema;
    let pets = schema.table("pets").expect("pets");
    assert_eq!(pets.primary_key, ["PetID"]);
    assert!(
        schema
            .foreign_keys
            .iter()
            .any(|fk| fk.from_table == "has_pet" && fk.to_table == "pets"),
        "{:?}",
        schema.foreign_keys
    );
    let kinds = schema.table("kinds").expect("kinds");
    assert_eq!(kinds.columns[4].comment.as_deref(), Some("how many"));

    let limits = Limits {
        max_rows: 2,
        on_overflow: Overflow::Truncate,
        ..Limits::default()
    };
    let mut session = handle.backend.open_session(limits).expect("session");
    let capped = session
        .execute("SELECT petid FROM pets ORDER BY petid")
        .expect("runs");
    assert_eq!(capped.rows.len(), 2);
    assert!(capped.truncated);
    let typed = session.execute("SELECT * FROM kinds").expect("runs");
    assert_eq!(
        typed.rows,
        [[
            Value::Text("2008-12-01".into()),
            Value::Text("2008-12-01 10:30:00".into()),
            Value::Real(2.5),
            Value::Blob(vec![0, 255]),
            Value::Null,
        ]]
    );
    let avg = session
        .execute("SELECT avg(pet_age), count(*) FROM pets")
        .expect("runs");
    assert!(matches!(avg.rows[0][0], Value::Real(_)), "{:?}", avg.rows);
    assert_eq!(avg.rows[0][1], Value::Integer(3));
    for (sql, phrase) in [
        ("SELECT nosuch FROM pets", "no such column: nosuch"),
        ("SELECT * FROM nosuch", "no such table: nosuch"),
        (
            "SELECT petid FROM pets JOIN has_pet ON pets.petid = has_pet.petid",
            "ambiguous column name: petid",
        ),
    ] {
        let err = session.execute(sql).expect_err(sql);
        assert!(err.to_string().contains(phrase), "{sql}: {err}");
    }
    let fails = Limits {
        max_rows: 2,
        on_overflow: Overflow::Fail,
        ..Limits::default()
    };
    let mut strict = handle.backend.open_session(fails).expect("session");
    assert!(matches!(
        strict.execute("SELECT * FROM pets"),
        Err(ExecError::TooLarge { .. })
    ));
}

#[test]
fn bad_connections_fail_clearly_without_the_password() {
    let server = MariaDbServer::start();
    server.load_spider("pets_1");
    let password = server
        .url
        .split(':')
        .nth(2)
        .and_then(|s| s.split('@').next())
        .expect("a password in the URL")
        .to_owned();
    let wrong = server.url.replace(&password, "wrong-password");
    for (url, database) in [
        (wrong, "pets_1"),
        (server.url.clone(), "no_such_db"),
        ("mysql://x@127.0.0.1:1".to_owned(), "pets_1"),
        ("not a url".to_owned(), "pets_1"),
    ] {
        let err = MySqlDatabase::connect(MySqlSource::new(url, Some(database.into())))
            .expect_err("refused");
        let text = err.to_string();
        assert!(!text.contains(&password), "{text}");
        assert!(!text.is_empty());
    }
}

#[test]
fn sqlite_habits_mariadb_refuses_are_repaired_from_its_own_errors() {
    let server = MariaDbServer::start();
    server.load_spider("pets_1");
    // MySQL 8's default, which MariaDB leaves off: a selected column must be grouped by.
    server
        .admin()
        .query_drop("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',ONLY_FULL_GROUP_BY')")
        .expect("sql_mode");
    let source = MySqlSource::new(server.url.clone(), Some("pets_1".into()));
    let handle = MySqlDatabase::connect(source)
        .expect("connects")
        .into_handle("pets_1", IntrospectOptions::default())
        .expect("introspects");
    let mut session = handle
        .backend
        .open_session(Limits::default())
        .expect("session");
    for sql in [
        "SELECT PetType, weight, max(pet_age) FROM pets GROUP BY PetType",
        "SELECT PetType, weight, count(*) FROM pets GROUP BY PetType",
        "SELECT count(*) FROM (SELECT PetType FROM pets GROUP BY PetType)",
    ] {
        let refused = session.execute(sql).expect_err(sql).to_string();
        let fixed = quorum_sql::rules::translate::repair_for_server(sql, &refused, &handle.schema)
            .unwrap_or_else(|| panic!("no repair for {sql}: {refused}"));
        session
            .execute(&fixed)
            .unwrap_or_else(|e| panic!("{fixed} (from {sql}): {e}"));
    }
}
