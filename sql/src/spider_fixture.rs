//! Test-only access to the Spider data that sits beside the repository. The location can be
//! overridden with `QUORUM_SPIDER_DIR`; tests may read the environment, libraries may not.

use std::path::PathBuf;

use crate::dataset::SpiderDataset;

/// The Spider directory: `$QUORUM_SPIDER_DIR`, else `<repo>/../shared/data/spider`.
pub(crate) fn spider_dir() -> PathBuf {
    match std::env::var_os("QUORUM_SPIDER_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/spider"),
    }
}

pub(crate) fn spider() -> SpiderDataset {
    SpiderDataset::new(spider_dir())
}

/// Path of one Spider database file.
pub(crate) fn spider_db(db_id: &str) -> PathBuf {
    spider().database_path(db_id)
}

/// concert_singer, opened and introspected: the database most unit tests run SQL on.
pub(crate) fn concert() -> crate::database::DatabaseHandle {
    crate::database::DatabaseHandle::open(
        &spider_db("concert_singer"),
        "concert_singer",
        crate::schema::IntrospectOptions::default(),
    )
    .expect("concert_singer introspects")
}
