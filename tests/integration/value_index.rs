//! Value retrieval reads the same values through either backend: concert_singer as a SQLite
//! file and as the PostgreSQL copy `quorum pg-load` makes hold the same text values, and a
//! question that names one in its own spelling finds it, with the column that stores it.

use quorum_postgres::{PgDatabase, PgSource};
use quorum_sql::database::DatabaseHandle;
use quorum_sql::dataset::database_path;
use quorum_sql::schema::IntrospectOptions;
use quorum_tests::spider_dir;

use crate::postgres_support::PgServer;

fn found(handle: &DatabaseHandle, question: &str) -> Vec<(String, String, String)> {
    let index = handle.value_index().expect("the index is read");
    index
        .matches(question, 6, 2)
        .into_iter()
        .map(|m| (m.table.to_lowercase(), m.column.to_lowercase(), m.value))
        .collect()
}

#[test]
fn sqlite_and_postgres_copies_give_the_same_value_matches() {
    let path = database_path(&spider_dir().join("database"), "concert_singer");
    let sqlite = DatabaseHandle::open(&path, "concert_singer", IntrospectOptions::default())
        .expect("SQLite opens");
    let server = PgServer::start();
    server.load_spider("concert_singer");
    let postgres = PgDatabase::connect(PgSource::new(server.url.clone(), "concert_singer"))
        .expect("connects")
        .into_handle("concert_singer", IntrospectOptions::default())
        .expect("introspects");

    let sqlite_index = sqlite.value_index().expect("SQLite values");
    let postgres_index = postgres.value_index().expect("PostgreSQL values");
    assert!(sqlite_index.len() > 20, "{}", sqlite_index.len());
    assert_eq!(sqlite_index.len(), postgres_index.len());
    assert_eq!(sqlite_index.skipped_columns, 0);
    assert_eq!(postgres_index.skipped_columns, 0);

    for question in [
        "What are the names of the singers from the netherlands?",
        "Show the stadiums at SOMERSET park",
    ] {
        let on_sqlite = found(&sqlite, question);
        assert!(!on_sqlite.is_empty(), "{question}");
        assert_eq!(on_sqlite, found(&postgres, question), "{question}");
    }
    assert_eq!(
        found(
            &sqlite,
            "What are the names of the singers from the netherlands?"
        )[0],
        (
            "singer".to_owned(),
            "country".to_owned(),
            "Netherlands".to_owned()
        )
    );
}
