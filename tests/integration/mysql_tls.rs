//! MySQL over TLS, against a real MariaDB that refuses plain TCP (`require_secure_transport`)
//! and presents a certificate for 127.0.0.1 signed by a private CA: a URL with
//! `root_cert_path` connects encrypted, checking the server's chain and name, the pool that
//! serves a database and the direct client alike; a URL without it, another CA, or a name the
//! certificate does not carry is refused with the reason.

use mysql::prelude::Queryable;
use quorum_mysql::{MySqlDatabase, MySqlSource, connect_admin};
use quorum_sql::backend::Backend;
use quorum_sql::sandbox::Limits;
use quorum_sql::value::Value;

use crate::mysql_support::MariaDbServer;
use crate::tls_support::another_ca;

/// The cipher of the client's own connection, by the server's account; empty when plain.
fn cipher(url: &str) -> String {
    let mut conn = connect_admin(url).expect("connects");
    let row: Option<(String, String)> = conn
        .query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .expect("session status");
    row.map(|(_, cipher)| cipher).unwrap_or_default()
}

fn refusal(url: &str) -> String {
    connect_admin(url).expect_err("refused").to_string()
}

#[test]
fn mysql_connections_use_tls_as_their_url_says() {
    let server = MariaDbServer::start_tls();
    let ca = server.tls_ca();
    let with = |params: &str| format!("{}?{params}", server.url);
    let verified = with(&format!("root_cert_path={}", ca.display()));

    assert!(!cipher(&verified).is_empty(), "encrypted");
    connect_admin(&verified)
        .expect("connects")
        .query_drop(
            "CREATE DATABASE shop; CREATE TABLE shop.orders (id INT PRIMARY KEY); \
             INSERT INTO shop.orders VALUES (1), (2)",
        )
        .expect("a database to serve");

    // The pool that serves a database: its location says TLS and never the CA's path.
    let db = MySqlDatabase::connect(MySqlSource::new(verified.clone(), Some("shop".into())))
        .expect("pool");
    let location = db.location();
    assert!(location.ends_with("/shop tls on"), "{location}");
    assert!(!location.contains("root_cert_path"), "{location}");
    let mut session = db.open_session(Limits::default()).expect("session");
    let counted = session
        .execute("SELECT count(*) FROM orders")
        .expect("runs");
    assert_eq!(counted.rows, [[Value::Integer(2)]]);

    // Plain TCP is refused by the server; MariaDB says so as a denied login (the same user and
    // password were let in over TLS above).
    let plain = refusal(&server.url);
    assert!(plain.contains("Access denied"), "{plain}");
    // The certificate names 127.0.0.1, not localhost.
    let by_name = verified.replace("127.0.0.1", "localhost");
    let wrong_name = refusal(&by_name);
    assert!(
        wrong_name.to_lowercase().contains("certificate"),
        "{wrong_name}"
    );
    // Another CA is not trusted.
    let other = tempfile::tempdir().expect("temp dir");
    let untrusted = refusal(&with(&format!(
        "root_cert_path={}",
        another_ca(other.path()).display()
    )));
    assert!(
        untrusted.to_lowercase().contains("certificate"),
        "{untrusted}"
    );
}
