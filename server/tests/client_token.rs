//! The command-line clients against a server that requires a bearer token, end to end through
//! the binary: `quorum ask` without the token is refused as unauthenticated, with `--token` (or
//! `QUORUM_AUTH_TOKEN`) it gets its answer; a secret made by `quorum token new`, its entry in a
//! tokens file, is accepted the same way. SmolLM2-135M writes the SQL, so the run is short.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const TOKEN: &str = "cli-s3cret";

fn spider_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("QUORUM_SPIDER_DIR") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/spider")
}

/// A loopback address no one listens on right now.
fn free_addr() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// Stops the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(dir: &Path, addr: &str) -> Server {
    start_server_with(dir, addr, &format!("auth_token = \"{TOKEN}\""))
}

/// A server whose `[server]` table holds `auth` (a token or a tokens file).
fn start_server_with(dir: &Path, addr: &str, auth: &str) -> Server {
    let db_dir = dir.join("databases/concert_singer");
    std::fs::create_dir_all(&db_dir).unwrap();
    std::fs::copy(
        spider_dir().join("database/concert_singer/concert_singer.sqlite"),
        db_dir.join("concert_singer.sqlite"),
    )
    .unwrap();
    let config = format!(
        r#"
[server]
listen = "{addr}"
metrics_listen = ""
{auth}

[[models]]
source = "smollm2-135m"
roles = ["generator"]
format = "simple_ddl"

[pipeline]
max_new_tokens = 48
round2 = false
revision = false

[databases]
dir = "{}"
"#,
        dir.join("databases").display()
    );
    let path = dir.join("quorum.toml");
    std::fs::write(&path, config).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_quorum"))
        .args(["serve", "--config"])
        .arg(&path)
        .env_remove("QUORUM_AUTH_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Server(child)
}

fn ask(addr: &str, token: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quorum"));
    cmd.args([
        "ask",
        "--server",
        &format!("http://{addr}"),
        "--wait-secs",
        "300",
    ]);
    cmd.env_remove("QUORUM_AUTH_TOKEN");
    if let Some(token) = token {
        cmd.env("QUORUM_AUTH_TOKEN", token);
    }
    cmd.arg("How many singers do we have?");
    cmd.output().unwrap()
}

#[test]
fn quorum_ask_sends_the_token_a_server_requires() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let _server = start_server(dir.path(), &addr);

    // Health is open, so the client waits for readiness, then is refused.
    let refused = ask(&addr, None);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "answered without a token");
    assert!(stderr.contains("bearer token"), "{stderr}");

    let wrong = ask(&addr, Some("not-it"));
    assert!(!wrong.status.success(), "answered with a wrong token");

    let answered = ask(&addr, Some(TOKEN));
    let stdout = String::from_utf8_lossy(&answered.stdout);
    assert!(
        answered.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&answered.stderr)
    );
    assert!(stdout.contains("sql:"), "{stdout}");

    // The flag does what the variable does.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quorum"));
    let flagged = cmd
        .args([
            "ask",
            "--server",
            &format!("http://{addr}"),
            "--token",
            TOKEN,
        ])
        .arg("How many concerts are there?")
        .env_remove("QUORUM_AUTH_TOKEN")
        .output()
        .unwrap();
    assert!(
        flagged.status.success(),
        "{}",
        String::from_utf8_lossy(&flagged.stderr)
    );
}

#[test]
fn a_secret_from_quorum_token_new_opens_its_scope() {
    let dir = tempfile::tempdir().unwrap();
    let made = Command::new(env!("CARGO_BIN_EXE_quorum"))
        .args([
            "token",
            "new",
            "--name",
            "cli",
            "--databases",
            "concert_*",
            "--rights",
            "ask",
        ])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let entry = String::from_utf8(made.stdout).unwrap();
    let stderr = String::from_utf8(made.stderr).unwrap();
    let secret = stderr.lines().last().unwrap().trim().to_owned();
    assert!(
        !entry.contains(&secret),
        "the secret stays out of the entry"
    );
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, &entry).unwrap();
    let addr = free_addr();
    let _server = start_server_with(
        dir.path(),
        &addr,
        &format!("tokens_file = {:?}", tokens.display().to_string()),
    );
    let answered = ask(&addr, Some(&secret));
    assert!(
        answered.status.success(),
        "{}",
        String::from_utf8_lossy(&answered.stderr)
    );
    let digest = entry
        .lines()
        .find_map(|l| l.strip_prefix("sha256 = "))
        .unwrap()
        .trim_matches('"')
        .to_owned();
    assert!(
        !ask(&addr, Some(&digest)).status.success(),
        "the stored digest is no secret"
    );
}
