//! `quorum serve` fails closed, through the binary over real sockets: listening beyond loopback
//! (gRPC or the HTTP port, which serves `/v1/sql` and the OpenAI routes) without a token is a
//! start-up error that says how to set one; `--allow-unauthenticated` opens it on purpose and
//! the server then says so in `/metrics`; a token opens it quietly.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port free on every interface right now.
fn free_port() -> u16 {
    TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Stops the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A configuration with SmolLM2 and no database: enough to start, nothing to load for long.
fn config(dir: &Path, token: Option<&str>) -> std::path::PathBuf {
    let token = token.map_or(String::new(), |t| format!("auth_token = \"{t}\"\n"));
    let text = format!(
        "[server]\n{token}\n[[models]]\nsource = \"smollm2-135m\"\nroles = [\"generator\"]\n\n\
         [databases]\ndir = \"{}\"\n",
        dir.join("no-databases").display()
    );
    let path = dir.join("quorum.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn serve(config: &Path, listen: &str, metrics: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quorum"));
    cmd.args(["serve", "--config"])
        .arg(config)
        .args(["--listen", listen, "--metrics-listen", metrics])
        .args(extra)
        .env_remove("QUORUM_AUTH_TOKEN")
        .env_remove("QUORUM_ALLOW_UNAUTHENTICATED")
        .env_remove("QUORUM_LISTEN")
        .env_remove("QUORUM_METRICS_LISTEN");
    cmd
}

/// A server on every interface, gRPC at `grpc` and its HTTP port at `http`, running until
/// dropped.
fn start_on_all_interfaces(config: &Path, grpc: u16, http: u16, extra: &[&str]) -> Server {
    let listen = format!("0.0.0.0:{grpc}");
    let child = serve(config, &listen, &format!("0.0.0.0:{http}"), extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Server(child)
}

/// `GET /metrics` over a plain socket, retried while the port is not yet bound.
fn metrics(port: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .unwrap();
            let mut body = String::new();
            s.read_to_string(&mut body).unwrap();
            return body;
        }
        assert!(Instant::now() < deadline, "the HTTP port never answered");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn no_token_beyond_loopback_is_a_start_up_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), None);
    let exposed = [
        (format!("0.0.0.0:{}", free_port()), String::new()),
        (
            format!("127.0.0.1:{}", free_port()),
            format!("0.0.0.0:{}", free_port()),
        ),
    ];
    for (listen, metrics) in exposed {
        let out = serve(&config, &listen, &metrics, &[]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "started open on {listen} {metrics}");
        assert!(stderr.contains("refusing to serve"), "{stderr}");
        assert!(
            stderr.contains("--auth-token") && stderr.contains("--allow-unauthenticated"),
            "the error says how to set a token: {stderr}"
        );
    }
}

#[test]
fn allowing_it_opens_the_server_and_says_so_and_a_token_needs_no_allowance() {
    let dir = tempfile::tempdir().unwrap();
    let open = config(dir.path(), None);
    let (grpc, http) = (free_port(), free_port());
    let _server = start_on_all_interfaces(&open, grpc, http, &["--allow-unauthenticated"]);
    let text = metrics(http);
    assert!(
        text.contains("\nquorum_unauthenticated_open{} 1\n"),
        "{text}"
    );
    // gRPC health has an entry that says so, for checks that speak only gRPC.
    let health = |grpc: u16| {
        Command::new(env!("CARGO_BIN_EXE_quorum"))
            .args(["health", "--server", &format!("http://127.0.0.1:{grpc}")])
            .args(["--service", "unauthenticated"])
            .output()
            .unwrap()
    };
    let open_health = health(grpc);
    assert!(open_health.status.success(), "{open_health:?}");
    assert_eq!(
        String::from_utf8_lossy(&open_health.stdout).trim(),
        "SERVING"
    );

    let closed_dir = tempfile::tempdir().unwrap();
    let closed = config(closed_dir.path(), Some("s3cret"));
    let (grpc, http) = (free_port(), free_port());
    let _closed = start_on_all_interfaces(&closed, grpc, http, &[]);
    let text = metrics(http);
    assert!(
        text.contains("\nquorum_unauthenticated_open{} 0\n"),
        "{text}"
    );
    assert!(
        !health(grpc).status.success(),
        "no such entry on a closed server"
    );
}
