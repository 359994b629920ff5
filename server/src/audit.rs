//! The audit trail: one JSON line per request that reached a Quorum service (and one per
//! refused authentication), saying who asked what of which database through which surface,
//! the SQL that ran, how it ended, how many rows came back and how long it took. No secret
//! (tokens, passwords, connection strings) and no result value is ever written: the question
//! and the SQL are the request's own text. To stdout (`-`) or to a file rotated by size.
//! The fields are documented in docs/DEPLOY.md for log shippers.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

/// Longest question or SQL written: enough to read, bounded so that a huge request cannot
/// flood the trail.
const MAX_TEXT_CHARS: usize = 4000;

/// One line of the trail.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    /// RFC 3339, UTC.
    pub time: String,
    pub request_id: Option<String>,
    /// The token's name; `anonymous` without tokens; absent when authentication failed.
    pub token: Option<String>,
    pub surface: &'static str,
    pub peer: Option<String>,
    /// The RPC (`Text2Sql/Generate`, ...), or `authenticate` for a refused token.
    pub method: &'static str,
    pub database: Option<String>,
    pub question: Option<String>,
    /// The SQL the server executed for the answer.
    pub sql: Option<String>,
    /// The gRPC status code name (`OK`, `NOT_FOUND`, `PERMISSION_DENIED`, ...).
    pub outcome: String,
    pub rows: Option<u64>,
    pub latency_ms: f64,
}

pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

pub fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

impl AuditRecord {
    /// A request whose token was missing or wrong.
    pub fn refused(surface: &'static str, peer: Option<IpAddr>) -> Self {
        Self {
            time: now_rfc3339(),
            request_id: None,
            token: None,
            surface,
            peer: peer.map(|p| p.to_string()),
            method: "authenticate",
            database: None,
            question: None,
            sql: None,
            outcome: "UNAUTHENTICATED".to_owned(),
            rows: None,
            latency_ms: 0.0,
        }
    }
}

/// Where the lines go.
#[derive(Debug)]
enum Sink {
    Stdout,
    File {
        path: PathBuf,
        file: File,
        written: u64,
        max_bytes: u64,
        keep: u32,
    },
}

#[derive(Debug)]
pub struct AuditLog {
    sink: Mutex<Sink>,
}

impl AuditLog {
    pub fn stdout() -> Self {
        Self {
            sink: Mutex::new(Sink::Stdout),
        }
    }

    /// Appends to `path`; past `max_bytes` it becomes `path.1` (and `.1` `.2`, up to `keep`).
    pub fn file(path: &Path, max_bytes: u64, keep: u32) -> std::io::Result<Self> {
        let file = open_append(path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            sink: Mutex::new(Sink::File {
                path: path.to_owned(),
                file,
                written,
                max_bytes: max_bytes.max(1),
                keep: keep.max(1),
            }),
        })
    }

    /// Writes one line. A failure to write is logged, not raised: the request has happened.
    pub fn write(&self, record: &AuditRecord) {
        let mut line = match serde_json::to_string(record) {
            Ok(line) => line,
            Err(e) => {
                tracing::error!(error = %e, "an audit record did not serialize");
                return;
            }
        };
        line.push('\n');
        let mut sink = self
            .sink
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let result = match &mut *sink {
            Sink::Stdout => std::io::stdout().lock().write_all(line.as_bytes()),
            Sink::File {
                path,
                file,
                written,
                max_bytes,
                keep,
            } => (|| {
                if *written > 0 && *written + line.len() as u64 > *max_bytes {
                    rotate(path, *keep)?;
                    *file = open_append(path)?;
                    *written = 0;
                }
                file.write_all(line.as_bytes())?;
                *written += line.len() as u64;
                Ok(())
            })(),
        };
        if let Err(e) = result {
            tracing::error!(error = %e, "writing the audit trail failed");
        }
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// `path.{keep-1}` → `path.{keep}` ... `path` → `path.1`; the oldest falls off.
fn rotate(path: &Path, keep: u32) -> std::io::Result<()> {
    let numbered = |n: u32| {
        let mut p = path.as_os_str().to_owned();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    };
    for n in (1..keep).rev() {
        let from = numbered(n);
        if from.exists() {
            std::fs::rename(&from, numbered(n + 1))?;
        }
    }
    std::fs::rename(path, numbered(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(question: &str) -> AuditRecord {
        AuditRecord {
            question: Some(bounded(question)),
            ..AuditRecord::refused("grpc", None)
        }
    }

    #[test]
    fn lines_are_json_and_the_file_rotates_by_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::file(&path, 600, 2).expect("opens");
        for i in 0..12 {
            log.write(&record(&format!("question {i}")));
        }
        let current = std::fs::read_to_string(&path).expect("current");
        for line in current.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            assert_eq!(v["outcome"], "UNAUTHENTICATED");
            assert!(v["time"].as_str().expect("time").ends_with('Z'));
        }
        assert!(current.len() <= 600);
        assert!(dir.path().join("audit.jsonl.1").exists());
        assert!(dir.path().join("audit.jsonl.2").exists());
        assert!(
            !dir.path().join("audit.jsonl.3").exists(),
            "only `keep` old files"
        );
        let all: String = ["audit.jsonl.2", "audit.jsonl.1", "audit.jsonl"]
            .iter()
            .map(|f| std::fs::read_to_string(dir.path().join(f)).expect("read"))
            .collect();
        assert!(all.contains("question 11"));
    }

    #[test]
    fn long_text_is_bounded() {
        let long = "x".repeat(MAX_TEXT_CHARS + 10);
        assert_eq!(bounded(&long).chars().count(), MAX_TEXT_CHARS + 1);
        assert_eq!(bounded("short"), "short");
    }
}
