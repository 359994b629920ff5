//! PostgreSQL over TLS, against a real server that refuses plain TCP (`hostssl` only) and
//! presents a certificate for 127.0.0.1 signed by a private CA: each libpq `sslmode` does what
//! libpq does, the pool and the direct client alike.

use quorum_postgres::{PgDatabase, PgSource, connect_client};

use crate::postgres_support::PgServer;
use crate::tls_support::another_ca;

/// Whether the client's own connection is encrypted, by the server's account.
fn encrypted(url: &str) -> bool {
    let mut client = connect_client(url).expect("connects");
    client
        .query_one(
            "SELECT ssl FROM pg_catalog.pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .expect("pg_stat_ssl")
        .get(0)
}

fn refusal(url: &str) -> String {
    connect_client(url).err().expect("refused").to_string()
}

#[test]
fn postgres_connections_follow_libpq_sslmodes() {
    let server = PgServer::start_tls();
    let ca = server.tls_ca();
    let with = |params: &str| format!("{}?{params}", server.url);
    let by_name =
        |params: &str| format!("{}?{params}", server.url.replace("127.0.0.1", "localhost"));
    let verified = with(&format!("sslmode=verify-full&sslrootcert={}", ca.display()));

    assert!(encrypted(&verified));
    let db = PgDatabase::connect(PgSource::new(verified.clone(), "public")).expect("pool");
    let location = quorum_sql::backend::Backend::location(&db);
    assert!(location.ends_with("sslmode verify-full"), "{location}");
    assert!(!location.contains("sslrootcert"), "{location}");

    // Unverified encryption (libpq's require and prefer without a root).
    assert!(encrypted(&with("sslmode=require")));
    assert!(encrypted(&server.url));

    // The CA is not among Mozilla's roots.
    let unknown = refusal(&with("sslmode=verify-full"));
    assert!(unknown.contains("certificate"), "{unknown}");
    // The certificate names 127.0.0.1, not localhost: verify-full refuses, verify-ca does not.
    let wrong_name = refusal(&by_name(&format!(
        "sslmode=verify-full&sslrootcert={}",
        ca.display()
    )));
    assert!(wrong_name.contains("certificate"), "{wrong_name}");
    assert!(encrypted(&by_name(&format!(
        "sslmode=verify-ca&sslrootcert={}",
        ca.display()
    ))));
    // require with a root file checks the chain, as libpq does: another CA is not trusted.
    let other = tempfile::tempdir().expect("temp dir");
    let other_ca = another_ca(other.path());
    let untrusted = refusal(&with(&format!(
        "sslmode=require&sslrootcert={}",
        other_ca.display()
    )));
    assert!(untrusted.contains("certificate"), "{untrusted}");
    assert!(encrypted(&with(&format!(
        "sslmode=require&sslrootcert={}",
        ca.display()
    ))));

    // Plain TCP is refused by the server.
    let plain = refusal(&with("sslmode=disable"));
    assert!(
        plain.contains("no encryption") || plain.contains("pg_hba.conf"),
        "{plain}"
    );
}
