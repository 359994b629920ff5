//! A private MariaDB server per test, started by `scripts/mariadb-server.sh` in a temporary
//! directory and stopped when dropped, with Spider databases copied into it.

use std::path::Path;
use std::process::Command;

use quorum_mysql::load::{LoadReport, load_sqlite};
use quorum_tests::spider_dir;

pub struct MariaDbServer {
    dir: tempfile::TempDir,
    /// The admin URL, password included (no database).
    pub url: String,
}

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/mariadb-server.sh")
}

impl MariaDbServer {
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// A server that refuses TCP clients without TLS (`require_secure_transport`).
    pub fn start_tls() -> Self {
        Self::start_with(true)
    }

    /// The CA that signed a TLS server's certificate (which names 127.0.0.1 only).
    pub fn tls_ca(&self) -> std::path::PathBuf {
        self.dir.path().join("tls/ca.pem")
    }

    fn start_with(tls: bool) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(dir.path())
            .env("MARIADB_TLS", if tls { "1" } else { "0" })
            .output()
            .expect("mariadb-server.sh runs");
        assert!(
            out.status.success(),
            "MariaDB starts: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_owned();
        Self { dir, url }
    }

    pub fn admin(&self) -> mysql::Conn {
        quorum_mysql::connect_admin(&self.url).expect("admin connects")
    }

    /// Copies Spider's `db_id` into database `db_id`.
    pub fn load_spider(&self, db_id: &str) -> LoadReport {
        let path = spider_dir().join(format!("database/{db_id}/{db_id}.sqlite"));
        load_sqlite(&mut self.admin(), &path, db_id).expect("Spider database loads")
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}
