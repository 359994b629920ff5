//! What the TLS tests share: a CA of their own that signed nothing the servers present.

use std::path::{Path, PathBuf};

/// A self-signed CA written into `dir` (its key beside it): a root a client may be told to
/// trust, which must then refuse the test servers' certificates.
pub fn another_ca(dir: &Path) -> PathBuf {
    let ca = dir.join("other-ca.pem");
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=another CA", "-keyout"])
        .arg(dir.join("other-ca.key"))
        .arg("-out")
        .arg(&ca)
        .output()
        .expect("openssl runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    ca
}
