//! Candidates run on a PostgreSQL server Quorum does not own: against a real server (started
//! by `scripts/pg-server.sh`), with a superuser connection so that only Quorum's own guards
//! stand in the way, every write, DDL, `COPY`, side-effect function, `dblink` call, large-object
//! call and over-long sleep fails, and checksums of every table, the schemas, the large objects
//! and the locks held show that nothing changed.

use std::time::{Duration, Instant};

use quorum_postgres::{PgDatabase, PgSource};
use quorum_sql::backend::Backend;
use quorum_sql::sandbox::{ExecError, Limits, Overflow};
use quorum_sql::schema::IntrospectOptions;
use quorum_sql::value::Value;

use crate::postgres_support::PgServer;

/// Everything a candidate could change: each table's rows, the schemas and tables, large
/// objects, sequences and advisory locks.
fn fingerprint(client: &mut postgres::Client) -> String {
    let tables: Vec<String> = client
        .query(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables \
             WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1",
            &[],
        )
        .expect("tables")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut parts = vec![tables.join(",")];
    for t in &tables {
        let row = client
            .query_one(
                &format!(
                    "SELECT count(*)::text || ':' || coalesce(md5(string_agg(x::text, '|' \
                     ORDER BY x::text)), '') FROM {t} AS x"
                ),
                &[],
            )
            .expect("checksum");
        parts.push(format!("{t}={}", row.get::<_, String>(0)));
    }
    for probe in [
        "SELECT count(*) FROM pg_largeobject_metadata",
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'",
        "SELECT last_value FROM pets_1.counter",
        "SELECT count(*) FROM pg_namespace",
    ] {
        let n: i64 = client.query_one(probe, &[]).expect(probe).get(0);
        parts.push(format!("{probe}={n}"));
    }
    parts.join("\n")
}

#[test]
fn candidates_cannot_change_or_hold_a_postgres_server() {
    let server = PgServer::start();
    let report = server.load_spider("pets_1");
    assert_eq!(report.tables, 3);
    assert!(report.rows > 0);
    let mut admin = server.client();
    admin
        .batch_execute(
            "CREATE SEQUENCE pets_1.counter; \
             CREATE EXTENSION IF NOT EXISTS dblink; \
             CREATE FUNCTION pets_1.adopt() RETURNS int LANGUAGE sql VOLATILE \
               AS 'INSERT INTO pets_1.pets (petid, pettype, pet_age, weight) \
                   VALUES (9999, ''cat'', 1, 1.0) RETURNING 1'; \
             CREATE PROCEDURE pets_1.wipe() LANGUAGE sql AS 'DELETE FROM pets_1.pets'",
        )
        .expect("fixtures");
    let before = fingerprint(&mut admin);

    let db = PgDatabase::connect(PgSource::new(server.url.clone(), "pets_1")).expect("connects");
    let limits = Limits {
        timeout: Duration::from_millis(1500),
        ..Limits::default()
    };
    let mut session = db.open_session(limits).expect("session");
    let dblink_target = format!("'{}'", server.url);
    let attacks = [
        "INSERT INTO pets VALUES (1, 'dog', 2, 3.0)".to_owned(),
        "UPDATE pets SET weight = 0".into(),
        "DELETE FROM has_pet".into(),
        "TRUNCATE pets".into(),
        "DROP TABLE pets".into(),
        "CREATE TABLE x (a int)".into(),
        "ALTER TABLE pets ADD COLUMN x int".into(),
        "SELECT * INTO stolen FROM pets".into(),
        "WITH gone AS (DELETE FROM pets RETURNING *) SELECT count(*) FROM gone".into(),
        "SELECT 1; DELETE FROM pets".into(),
        "COPY pets TO '/tmp/quorum-pets.csv'".into(),
        "COPY (SELECT 1) TO PROGRAM 'touch /tmp/quorum-pwned'".into(),
        "COPY pets FROM PROGRAM 'echo 1'".into(),
        "SELECT pets_1.adopt()".into(),
        "CALL pets_1.wipe()".into(),
        "DO $$ BEGIN DELETE FROM pets_1.pets; END $$".into(),
        "SELECT nextval('pets_1.counter')".into(),
        "SELECT setval('pets_1.counter', 42)".into(),
        "SELECT lo_create(0)".into(),
        "SELECT lo_import('/etc/hostname')".into(),
        format!("SELECT dblink_exec({dblink_target}, 'DELETE FROM pets_1.pets')"),
        format!("SELECT * FROM dblink({dblink_target}, 'SELECT 1') AS t(a int)"),
        "SELECT pg_advisory_lock(7)".into(),
        "SELECT set_config('statement_timeout', '0', false)".into(),
        "SELECT query_to_xml('DELETE FROM pets_1.pets', true, true, '')".into(),
        "SELECT pg_notify('quorum', 'x')".into(),
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity".into(),
        "SELECT * FROM pets FOR UPDATE".into(),
        "LOCK TABLE pets".into(),
        "VACUUM pets".into(),
        "SET ROLE quorum_admin".into(),
        "NOTIFY quorum".into(),
        "PREPARE p AS DELETE FROM pets".into(),
    ];
    for sql in &attacks {
        let outcome = session.execute(sql);
        assert!(outcome.is_err(), "{sql} ran: {outcome:?}");
        // The session is still good for the next candidate.
        let count = session
            .execute("SELECT count(*) FROM pets")
            .unwrap_or_else(|e| panic!("after {sql}: {e}"));
        assert_eq!(count.rows, [[Value::Integer(3)]], "after {sql}");
    }

    // A sleep past the timeout is cut at the timeout.
    let start = Instant::now();
    let slept = session.execute("SELECT pg_sleep(30)");
    assert!(matches!(slept, Err(ExecError::Timeout { .. })), "{slept:?}");
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
fn postgres_results_are_capped_typed_and_named_like_sqlite_errors() {
    let server = PgServer::start();
    server.load_spider("concert_singer");
    let db =
        PgDatabase::connect(PgSource::new(server.url.clone(), "concert_singer")).expect("connects");
    let capped = Limits {
        max_rows: 100,
        ..Limits::default()
    };
    let mut session = db.open_session(capped).expect("session");
    let many = session
        .execute("SELECT g FROM generate_series(1, 1000000) AS g")
        .expect("runs");
    assert_eq!(many.rows.len(), 100);
    assert!(many.truncated);
    let strict = Limits {
        on_overflow: Overflow::Fail,
        ..capped
    };
    let mut strict_session = db.open_session(strict).expect("session");
    assert!(matches!(
        strict_session.execute("SELECT g FROM generate_series(1, 1000) AS g"),
        Err(ExecError::TooLarge { .. })
    ));

    // The same query on the SQLite original and the copy: the same cells.
    let sql =
        "SELECT name, age, avg(age) OVER (), song_release_year FROM singer ORDER BY singer_id";
    let pg = session.execute(sql).expect("runs on PostgreSQL");
    let sqlite = quorum_sql::sandbox::Sandbox::open(
        &quorum_tests::spider_dir().join("database/concert_singer/concert_singer.sqlite"),
        Limits::default(),
    )
    .expect("opens")
    .execute(sql)
    .expect("runs on SQLite");
    let first_three =
        |rows: &[Vec<Value>]| -> Vec<Vec<Value>> { rows.iter().map(|r| r[..3].to_vec()).collect() };
    assert!(quorum_sql::compare::spider_eq(
        &first_three(&sqlite.rows),
        &first_three(&pg.rows),
        true
    ));
    // Years kept as text in SQLite load as numbers (SQLite compares them as numbers).
    assert_eq!(sqlite.rows[0][3], Value::Text("1992".into()));
    assert_eq!(pg.rows[0][3], Value::Integer(1992));

    // Name errors read as SQLite's, so repair and hints work on both.
    match session.execute("SELECT nam FROM singer") {
        Err(ExecError::Syntax { message }) => {
            assert!(message.starts_with("no such column: nam ("), "{message}");
            assert!(message.contains("42703"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    match session.execute("SELECT * FROM singers") {
        Err(ExecError::Syntax { message }) => {
            assert!(message.starts_with("no such table: singers ("), "{message}")
        }
        other => panic!("{other:?}"),
    }

    // The schema reads like the SQLite one: same tables in the same order, keys, examples.
    let handle = db
        .into_handle("concert_singer", IntrospectOptions::default())
        .expect("introspects");
    let original = quorum_sql::schema::Schema::from_sqlite(
        &quorum_tests::spider_dir().join("database/concert_singer/concert_singer.sqlite"),
        "concert_singer",
        IntrospectOptions::default(),
    )
    .expect("SQLite introspects");
    let names = |s: &quorum_sql::schema::Schema| -> Vec<String> {
        s.tables.iter().map(|t| t.name.to_lowercase()).collect()
    };
    assert_eq!(names(&handle.schema), names(&original));
    assert_eq!(
        handle.schema.foreign_keys.len(),
        original.foreign_keys.len()
    );
    // PostgreSQL's own errors drive the repairs: a column of the other joined table, and a
    // string in SQLite's double quotes.
    let mut session = handle
        .backend
        .open_session(Limits::default())
        .expect("session");
    let misplaced = "SELECT T1.name FROM singer_in_concert AS T1 JOIN singer AS T2 \
                     ON T1.singer_id = T2.singer_id";
    let Err(ExecError::Syntax { message }) = session.execute(misplaced) else {
        panic!("t1.name does not exist");
    };
    let fixed = quorum_sql::rules::repair::repair_column(misplaced, &message, &handle.schema)
        .expect("repaired from PostgreSQL's message");
    assert!(fixed.starts_with("SELECT T2.name"), "{fixed}");
    assert_eq!(session.execute(&fixed).expect("runs").rows.len(), 10);
    let quoted = "SELECT name FROM singer WHERE country = \"France\"";
    assert!(session.execute(quoted).is_err());
    let fixed = quorum_sql::rules::translate::string_literals_for(quoted, &handle.schema)
        .expect("requoted");
    assert_eq!(session.execute(&fixed).expect("runs").rows.len(), 4);

    let singer = handle.schema.table("singer").expect("singer");
    assert_eq!(singer.primary_key, ["singer_id"]);
    assert_eq!(singer.rows.len(), 3);
    assert!(!singer.columns[1].examples.is_empty());
}

#[test]
fn bad_connections_fail_clearly_without_the_password() {
    let server = PgServer::start();
    server.load_spider("pets_1");
    let wrong = server
        .url
        .replacen("quorum_admin:", "quorum_admin:wrong", 1);
    let err = PgDatabase::connect(PgSource::new(wrong.clone(), "pets_1"))
        .expect_err("a wrong password is refused")
        .to_string();
    assert!(err.contains("password authentication failed"), "{err}");
    let secret = server
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('@')
        .next()
        .unwrap();
    assert!(!err.contains(secret), "{err}");
    let missing = PgDatabase::connect(PgSource::new(server.url.clone(), "no_such_schema"))
        .expect_err("a missing schema is refused")
        .to_string();
    assert!(missing.contains("no_such_schema"), "{missing}");
    let closed = PgDatabase::connect(PgSource::new(
        "postgresql://quorum_admin:x@127.0.0.1:1/postgres",
        "pets_1",
    ))
    .expect_err("nothing listens on port 1")
    .to_string();
    assert!(closed.starts_with("cannot connect"), "{closed}");
    let source = PgSource::new(server.url.clone(), "pets_1");
    assert!(!format!("{source:?}").contains(secret));
}

/// Two databases in one PostgreSQL database, as two schemas: with a role that may read both,
/// a query of one still cannot read the other's tables, nor the catalogs that describe or
/// sample them, however the name is written; its own tables, functions and set-returning
/// functions still run.
#[test]
fn a_query_reads_only_its_own_schema() {
    let server = PgServer::start();
    server.load_spider("pets_1");
    server.load_spider("concert_singer");
    let db = PgDatabase::connect(PgSource::new(server.url.clone(), "pets_1")).expect("connects");
    let mut session = db.open_session(Limits::default()).expect("session");
    for sql in [
        "SELECT count(*) FROM concert_singer.singer",
        "SELECT * FROM \"concert_singer\".\"singer\"",
        "SELECT * FROM CONCERT_SINGER.SINGER",
        "SELECT p.petid FROM pets p JOIN concert_singer.singer s ON s.singer_id = p.petid",
        "SELECT * FROM pets WHERE petid IN (SELECT singer_id FROM concert_singer.singer)",
        "WITH s AS (SELECT * FROM concert_singer.singer) SELECT count(*) FROM s",
        "SELECT table_name FROM information_schema.tables",
        "SELECT * FROM pg_catalog.pg_stats",
        "SELECT * FROM pg_stats",
        "SELECT relname FROM pg_class",
        "SELECT * FROM postgres.concert_singer.singer",
    ] {
        match session.execute(sql) {
            Err(ExecError::Denied { what }) => {
                assert!(
                    what.contains("outside this database's schema"),
                    "{sql}: {what}"
                )
            }
            Err(other) => {
                // A name PostgreSQL refuses on its own (a cross-database reference) is fine too.
                assert!(sql.contains("postgres."), "{sql}: {other}");
            }
            Ok(r) => panic!("{sql} ran: {:?}", r.rows.first()),
        }
    }
    for sql in [
        "SELECT count(*) FROM pets",
        "SELECT count(*) FROM pets_1.pets",
        "SELECT * FROM generate_series(1, 3)",
        "SELECT upper(pettype), now() - interval '1 day' FROM pets LIMIT 1",
        "SELECT 1",
    ] {
        session
            .execute(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// SQLite's loose typing, refused by PostgreSQL and mended from its own error messages: a
/// boolean column compared with `1`, and `LIKE` over a date.
#[test]
fn postgres_type_errors_drive_their_repairs() {
    let server = PgServer::start();
    let mut admin = server.client();
    admin
        .batch_execute(
            "CREATE SCHEMA shop; \
             CREATE TABLE shop.listing (id integer PRIMARY KEY, active boolean, listed date, \
               code text); \
             INSERT INTO shop.listing VALUES (1, true, '2022-03-01', 'a'), \
               (2, false, '2022-07-09', 'b'), (3, true, '2023-01-02', 'c')",
        )
        .expect("fixtures");
    let handle = PgDatabase::connect(PgSource::new(server.url.clone(), "shop"))
        .expect("connects")
        .into_handle("shop", IntrospectOptions::default())
        .expect("introspects");
    let mut session = handle
        .backend
        .open_session(Limits::default())
        .expect("session");
    let repaired = |session: &mut Box<dyn quorum_sql::backend::Session>, sql: &str| {
        let Err(ExecError::Syntax { message }) = session.execute(sql) else {
            panic!("PostgreSQL refuses {sql}");
        };
        let fixed = quorum_sql::rules::translate::repair_for_server(sql, &message, &handle.schema)
            .unwrap_or_else(|| panic!("a repair for {message}"));
        session.execute(&fixed).expect("the repair runs").rows
    };
    let active = repaired(
        &mut session,
        "SELECT id FROM listing WHERE active = 1 ORDER BY id",
    );
    assert_eq!(
        active,
        vec![vec![Value::Integer(1)], vec![Value::Integer(3)]]
    );
    let in_2022 = repaired(
        &mut session,
        "SELECT code FROM listing WHERE listed LIKE '2022%' ORDER BY id",
    );
    assert_eq!(
        in_2022,
        vec![vec![Value::Text("a".into())], vec![Value::Text("b".into())]]
    );
}

/// `calendar_days` on a real server: a window of whole days back from now keeps its first day,
/// and a weekend written in ISO's numbering finds Sunday.
#[test]
fn calendar_days_count_whole_days_and_find_sunday() {
    let server = PgServer::start();
    let mut admin = server.client();
    admin
        .batch_execute(
            "CREATE SCHEMA diary; \
             CREATE TABLE diary.visit (id integer PRIMARY KEY, day date); \
             INSERT INTO diary.visit VALUES (1, CURRENT_DATE - 30), (2, CURRENT_DATE - 2), \
               (3, CURRENT_DATE - 31), (4, '2022-12-31'), (5, '2023-01-01'), (6, '2023-01-02')",
        )
        .expect("fixtures");
    let handle = PgDatabase::connect(PgSource::new(server.url.clone(), "diary"))
        .expect("connects")
        .into_handle("diary", IntrospectOptions::default())
        .expect("introspects");
    let mut session = handle
        .backend
        .open_session(Limits::default())
        .expect("session");
    let mut count = |sql: &str| {
        let rewritten = quorum_sql::rules::calendar_days::calendar_days(sql, handle.schema.dialect)
            .unwrap_or_else(|| panic!("a rewrite of {sql}"));
        session.execute(&rewritten).expect("the rewrite runs").rows
    };
    // The visit of 30 days ago counts: the window starts at that day's midnight.
    assert_eq!(
        count("SELECT COUNT(*) FROM visit WHERE day >= NOW() - INTERVAL '30 days'"),
        vec![vec![Value::Integer(2)]]
    );
    // Saturday 2022-12-31 and Sunday 2023-01-01, not Monday 2023-01-02.
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM visit WHERE day < '2023-02-01' \
             AND EXTRACT(DOW FROM day) IN (6, 7)"
        ),
        vec![vec![Value::Integer(2)]]
    );
}
