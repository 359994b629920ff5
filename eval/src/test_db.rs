//! Test-only scratch space: unique temporary directories and a small hand-made database whose
//! contents make each scoring rule observable (duplicates, ties, two columns).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rusqlite::Connection;

/// A fresh directory under the system temp dir, unique per process and call.
pub(crate) fn scratch_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("quorum-eval-{tag}-{}-{n}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("clear old scratch dir");
    }
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// `pets(id, name, kind, age)` with a repeated kind and a repeated name, in `dir/db.sqlite`.
pub(crate) fn pets_db(dir: &Path) -> PathBuf {
    let path = dir.join("db.sqlite");
    let conn = Connection::open(&path).expect("create db");
    conn.execute_batch(
        "CREATE TABLE pets (id INTEGER PRIMARY KEY, name TEXT, kind TEXT, age INTEGER);
         INSERT INTO pets VALUES (1, 'Rex', 'dog', 3), (2, 'Tom', 'cat', 5),
                                 (3, 'Ace', 'dog', 7), (4, 'Rex', 'cat', 2);
         CREATE TABLE owners (id INTEGER PRIMARY KEY, pet_id INTEGER, name TEXT);
         INSERT INTO owners VALUES (1, 1, 'Ann'), (2, 3, 'Bob');",
    )
    .expect("fill db");
    path
}
