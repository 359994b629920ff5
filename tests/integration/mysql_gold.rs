//! The MariaDB copies answer as the SQLite originals do: every dev300 gold query, run on its
//! SQLite file and, as `quorum eval` reads it there (`sqlite_gold_to_mysql`), on the copy
//! `quorum mysql-load` makes, gives the same result under Spider's comparison, except where
//! rows tie on the sort key (checked to hold the same rows once order and limit are dropped).
//! (dev100's 831 alone fails there, reading a table named `show`, a reserved word in MySQL.)

use quorum_mysql::{MySqlDatabase, MySqlSource};
use quorum_sql::backend::{Backend, Session};
use quorum_sql::rules::translate::sqlite_gold_to_mysql;
use quorum_sql::sandbox::Limits;

use crate::gold_comparison::{GoldComparison, compare_gold, slice_databases};
use crate::mysql_support::MariaDbServer;

fn compare_on_mariadb(slice: &str) -> GoldComparison {
    let server = MariaDbServer::start();
    for db_id in &slice_databases(slice) {
        server.load_spider(db_id);
    }
    let open = |db_id: &str| -> Box<dyn Session> {
        MySqlDatabase::connect(MySqlSource::new(server.url.clone(), Some(db_id.to_owned())))
            .expect("connects")
            .open_session(Limits::default())
            .expect("MySQL session")
    };
    compare_gold(slice, &sqlite_gold_to_mysql, &open)
}

#[test]
fn dev300_gold_answers_the_same_on_mariadb_as_on_sqlite() {
    let found = compare_on_mariadb("dev300");
    assert!(found.failing_ids().is_empty(), "{:?}", found.failing);
    assert_eq!(found.compared, 300);
    // 817 selects a bare column beside `max(...)` per group: SQLite takes it from the row that
    // holds the maximum, MySQL from any row of the group (no rewrite asks for that row without
    // PostgreSQL's `DISTINCT ON`).
    found.assert_differing(&[817]);
    // Each an `ORDER BY ... LIMIT` over rows that tie on the sort key; MariaDB does not always
    // break a tie the same way, so these may or may not show.
    assert!(
        found
            .tied
            .iter()
            .all(|i| [96, 311, 395, 500, 740, 845].contains(i)),
        "gold queries whose ties break differently: {:?}",
        found.tied
    );
}
