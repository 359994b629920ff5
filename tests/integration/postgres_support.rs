//! A private PostgreSQL server per test, started by `scripts/pg-server.sh` in a temporary
//! directory and stopped when dropped, with Spider databases copied into it.

use std::path::Path;
use std::process::Command;

use quorum_postgres::load::{LoadReport, load_sqlite};
use quorum_tests::spider_dir;

pub struct PgServer {
    dir: tempfile::TempDir,
    /// The admin (superuser) URL, password included.
    pub url: String,
}

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg-server.sh")
}

impl PgServer {
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// A server whose TCP clients must use TLS; its CA is [`PgServer::tls_ca`].
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
            .env("PG_TLS", if tls { "1" } else { "0" })
            .output()
            .expect("pg-server.sh runs");
        assert!(
            out.status.success(),
            "PostgreSQL starts: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_owned();
        Self { dir, url }
    }

    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("admin connects")
    }

    /// Copies Spider's `db_id` into schema `db_id`.
    pub fn load_spider(&self, db_id: &str) -> LoadReport {
        let path = spider_dir().join(format!("database/{db_id}/{db_id}.sqlite"));
        load_sqlite(&mut self.client(), &path, db_id).expect("Spider database loads")
    }

    /// A function that stops the server now (a server going away under a running request),
    /// runnable on another thread.
    pub fn stop_handle(&self) -> impl FnOnce() + Send + 'static {
        let dir = self.dir.path().to_path_buf();
        move || {
            let status = Command::new("bash")
                .arg(script())
                .arg("stop")
                .arg(&dir)
                .status()
                .expect("pg-server.sh runs");
            assert!(status.success(), "PostgreSQL stops");
        }
    }

    /// Starts it again after [`PgServer::stop`], on the same port.
    pub fn restart(&mut self) -> String {
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(self.dir.path())
            .output()
            .expect("pg-server.sh runs");
        assert!(out.status.success(), "PostgreSQL restarts");
        self.url = String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_owned();
        self.url.clone()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}
