//! A stand-in for the Hugging Face hub on a loopback port, for download tests. It answers the
//! requests a hub client makes, with the headers the hub sends:
//!
//! - `GET /api/models/{org}/{name}/revision/{rev}`: the repository's commit and file list
//!   (`{"sha": ..., "siblings": [{"rfilename": ...}]}`);
//! - `GET /{org}/{name}/resolve/{rev}/{file}`: the file with `x-repo-commit` and `etag`,
//!   honouring `Range`; large files (`*.safetensors`, `*.gguf`, as the hub keeps them in LFS)
//!   answer with a redirect to `/cdn/...` carrying `x-linked-etag` instead, the way the hub
//!   sends clients to its storage;
//! - `GET /cdn/{org}/{name}/{file}`: the large file's bytes, honouring `Range`.
//!
//! Every request is recorded (method, path, headers), so a test can check that none was made.
//! Shared by the quorum-weights and quorum-server tests.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// One repository the fake hub serves, at one commit.
#[derive(Debug, Clone)]
pub struct FakeRepo {
    pub repo_id: String,
    pub commit: String,
    pub files: BTreeMap<String, Vec<u8>>,
}

impl FakeRepo {
    pub fn new(repo_id: &str, commit: &str) -> Self {
        Self {
            repo_id: repo_id.to_owned(),
            commit: commit.to_owned(),
            files: BTreeMap::new(),
        }
    }

    pub fn with_file(mut self, name: &str, bytes: impl Into<Vec<u8>>) -> Self {
        self.files.insert(name.to_owned(), bytes.into());
        self
    }

    /// Every regular file of `dir` (not recursive), under its file name.
    pub fn with_dir(mut self, dir: &std::path::Path) -> Self {
        for entry in std::fs::read_dir(dir).expect("read the repository directory") {
            let path = entry.expect("directory entry").path();
            if path.is_file() {
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .expect("file name")
                    .to_owned();
                self.files
                    .insert(name, std::fs::read(&path).expect("read a repository file"));
            }
        }
        self
    }
}

/// A request as the fake hub received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

struct State {
    addr: SocketAddr,
    repos: Vec<FakeRepo>,
    requests: Mutex<Vec<Request>>,
}

/// The running server; [`FakeHub::stop`] (or dropping it) closes the port.
pub struct FakeHub {
    state: Arc<State>,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeHub {
    pub fn start(repos: Vec<FakeRepo>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let state = Arc::new(State {
            addr: listener.local_addr().expect("local address"),
            repos,
            requests: Mutex::new(Vec::new()),
        });
        let stopping = Arc::new(AtomicBool::new(false));
        let thread = {
            let state = Arc::clone(&state);
            let stopping = Arc::clone(&stopping);
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let state = Arc::clone(&state);
                    // One thread per connection: a client may hold one response open while it
                    // makes the next request.
                    std::thread::spawn(move || serve(conn, &state));
                }
            })
        };
        Self {
            state,
            stopping,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.state.addr)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.requests.lock().expect("request log").clone()
    }

    /// Stops accepting connections and closes the port: later connections are refused.
    pub fn stop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.stopping.store(true, Ordering::SeqCst);
            // Wakes the accept loop, which then sees the flag and drops the listener.
            let _ = TcpStream::connect(self.state.addr);
            thread.join().expect("the accept loop ends");
        }
    }
}

impl Drop for FakeHub {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads one request, records it and answers it; the connection is closed afterwards.
fn serve(conn: TcpStream, state: &State) {
    let mut reader = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return; // the stop wake-up, or a client that went away
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let request = Request {
        method,
        path,
        headers,
    };
    state
        .requests
        .lock()
        .expect("request log")
        .push(request.clone());
    let response = answer(&request, state);
    let mut conn = conn;
    let _ = response.write_to(&mut conn);
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    fn write_to(self, conn: &mut TcpStream) -> std::io::Result<()> {
        let reason = match self.status {
            200 => "OK",
            206 => "Partial Content",
            302 => "Found",
            404 => "Not Found",
            416 => "Range Not Satisfiable",
            _ => "Status",
        };
        let mut head = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            self.body.len()
        );
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        conn.write_all(head.as_bytes())?;
        conn.write_all(&self.body)?;
        conn.flush()
    }
}

fn not_found(code: &str) -> Response {
    Response::status(404).header("x-error-code", code)
}

/// Large files live in the hub's LFS storage, reached through a redirect.
fn is_large(file: &str) -> bool {
    file.ends_with(".safetensors") || file.ends_with(".gguf")
}

/// A content hash for etags (FNV-1a, 64 bits, as hex); any stable, content-derived name works
/// as a blob name.
fn etag(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}{:08x}", bytes.len())
}

fn answer(request: &Request, state: &State) -> Response {
    if request.method != "GET" {
        return Response::status(405);
    }
    let path = request.path.split('?').next().unwrap_or_default();
    let path = path.trim_start_matches('/');
    let find = |org: &str, name: &str| {
        let id = format!("{org}/{name}");
        state.repos.iter().find(|r| r.repo_id == id)
    };
    let at_revision = |repo: &FakeRepo, rev: &str| rev == "main" || rev == repo.commit;
    let segments: Vec<&str> = path.split('/').collect();
    match segments.as_slice() {
        ["api", "models", org, name, "revision", rev] => {
            let Some(repo) = find(org, name).filter(|r| at_revision(r, rev)) else {
                return not_found("RepositoryNotFound");
            };
            let siblings: Vec<serde_json::Value> = repo
                .files
                .keys()
                .map(|f| serde_json::json!({ "rfilename": f }))
                .collect();
            let body = serde_json::json!({
                "id": repo.repo_id,
                "sha": repo.commit,
                "siblings": siblings,
            });
            let mut r = Response::status(200).header("content-type", "application/json");
            r.body = body.to_string().into_bytes();
            r
        }
        [org, name, "resolve", rev, file @ ..] => {
            let Some(repo) = find(org, name).filter(|r| at_revision(r, rev)) else {
                return not_found("RepositoryNotFound");
            };
            let file = file.join("/");
            let Some(bytes) = repo.files.get(&file) else {
                return not_found("EntryNotFound");
            };
            if is_large(&file) {
                Response::status(302)
                    .header(
                        "location",
                        format!("http://{}/cdn/{org}/{name}/{file}", state.addr),
                    )
                    .header("x-repo-commit", repo.commit.clone())
                    .header("x-linked-etag", format!("\"{}\"", etag(bytes)))
                    .header("x-linked-size", bytes.len().to_string())
            } else {
                ranged(request, bytes)
                    .header("x-repo-commit", repo.commit.clone())
                    .header("etag", format!("\"{}\"", etag(bytes)))
            }
        }
        ["cdn", org, name, file @ ..] => {
            let Some(repo) = find(org, name) else {
                return not_found("RepositoryNotFound");
            };
            match repo.files.get(&file.join("/")) {
                Some(bytes) => ranged(request, bytes),
                None => not_found("EntryNotFound"),
            }
        }
        _ => not_found("RepositoryNotFound"),
    }
}

/// The whole file, or the part a `Range: bytes=START-[END]` header asks for.
fn ranged(request: &Request, bytes: &[u8]) -> Response {
    let Some(range) = request.header("range") else {
        let mut r = Response::status(200);
        r.body = bytes.to_vec();
        return r;
    };
    let total = bytes.len();
    let parsed = range.strip_prefix("bytes=").and_then(|spec| {
        let (start, end) = spec.split_once('-')?;
        let start: usize = start.parse().ok()?;
        let end: usize = if end.is_empty() {
            total.checked_sub(1)?
        } else {
            end.parse::<usize>().ok()?.min(total.checked_sub(1)?)
        };
        (start <= end).then_some((start, end))
    });
    match parsed {
        Some((start, end)) => {
            let mut r = Response::status(206)
                .header("content-range", format!("bytes {start}-{end}/{total}"));
            r.body = bytes[start..=end].to_vec();
            r
        }
        None => Response::status(416).header("content-range", format!("bytes */{total}")),
    }
}
