//! The results file of a run: one JSON object per line, one line per finished question.
//!
//! Lines are written whole and handed to the OS immediately, so interrupting a run (Ctrl-C, a
//! crash, a lost machine) loses at most the question in progress; a rerun reads the file, skips
//! the finished indices and appends the rest. An interruption in the middle of a write leaves a
//! partial last line; the reader ignores it and the writer cuts it off before appending, so it
//! cannot glue itself to the next record. A malformed line anywhere else means the file was
//! edited or corrupted, and that is an error rather than something to skip silently.
//!
//! A finished file may be kept gzip-compressed (`.jsonl.gz`, as the repository keeps its run
//! records): it is read as it is, and refused as the output of a run, which appends.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use quorum_sql::hardness::Hardness;

/// Everything recorded about one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position of the question in its question file (dev.json).
    pub index: usize,
    pub db_id: String,
    pub question: String,
    pub gold: String,
    pub prediction: String,
    /// Spider hardness of the gold SQL.
    pub hardness: Hardness,
    /// The question's category in benchmarks that group them (SQL-Eval's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    pub ex: bool,
    pub valid: bool,
    /// Why the prediction did not execute.
    pub error: Option<String>,
    /// Why the gold SQL did not execute (the question then counts as wrong).
    #[serde(default)]
    pub gold_error: Option<String>,
    #[serde(default)]
    pub gold_ms: Option<f64>,
    #[serde(default)]
    pub pred_ms: Option<f64>,
    /// Cleaned mean gold/pred time ratio for VES; only for correct, timed predictions.
    #[serde(default)]
    pub ves_ratio: Option<f64>,
    /// Tables the pipeline linked, or the tables of its answer when it linked none; `None`
    /// only in records written before that rule.
    pub linked_tables: Option<Vec<String>>,
    /// Tables the gold SQL reads, spelled as in the schema.
    pub gold_tables: Vec<String>,
    /// The pipeline's candidates, opaque to the harness.
    #[serde(default)]
    pub candidates: serde_json::Value,
    /// The pipeline's voting details, opaque to the harness.
    #[serde(default)]
    pub votes: serde_json::Value,
    /// Wall time per pipeline stage as the server reported it, opaque to the harness.
    #[serde(default)]
    pub stage_ms: serde_json::Value,
    /// Stored values the prompts showed (value retrieval), opaque to the harness; absent when
    /// there were none.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub matched_values: serde_json::Value,
    /// The question's words the prompts were told mean a table or column (`term_hints`),
    /// opaque to the harness; absent when there were none.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub term_hints: serde_json::Value,
    /// The statements of the evidence and notes the prompts were not told (`evidence_filter`);
    /// absent when none was set aside.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_set_aside: Vec<String>,
    /// The tables the prompts showed when the schema filter cut the schema down; absent when
    /// it was shown whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filtered_tables: Option<Vec<String>>,
    pub latency_ms: f64,
    pub tokens_generated: u64,
}

/// The finished records of a results file, one per index (a later line wins, so a question
/// scored twice keeps its latest score).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordLog {
    pub records: Vec<Record>,
    /// True when the file ended in a partial line that was ignored.
    pub dropped_partial_line: bool,
}

impl RecordLog {
    pub fn finished(&self) -> impl Iterator<Item = usize> + '_ {
        self.records.iter().map(|r| r.index)
    }
}

/// Reads the records of `path` in index order; a missing file is an empty log.
pub fn read_records(path: &Path) -> Result<RecordLog, EvalError> {
    let mut bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RecordLog::default()),
        Err(source) => return Err(io_error(path, source)),
    };
    if is_compressed(path) {
        let mut text = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes.as_slice())
            .read_to_end(&mut text)
            .map_err(|e| io_error(path, e))?;
        bytes = text;
    }
    let (complete, tail) = split_tail(&bytes);
    let mut by_index = BTreeMap::new();
    for (i, line) in complete.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let record: Record = serde_json::from_slice(line).map_err(|source| EvalError::Corrupt {
            path: path.to_path_buf(),
            line: i + 1,
            source,
        })?;
        by_index.insert(record.index, record);
    }
    let mut dropped_partial_line = false;
    if !tail.is_empty() {
        match parse_tail(tail) {
            Some(record) => {
                by_index.insert(record.index, record);
            }
            None => dropped_partial_line = true,
        }
    }
    Ok(RecordLog {
        records: by_index.into_values().collect(),
        dropped_partial_line,
    })
}

/// Splits the file into its newline-terminated lines (without the last newline) and the bytes
/// after the last newline.
fn split_tail(bytes: &[u8]) -> (&[u8], &[u8]) {
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(last) => (&bytes[..last], &bytes[last + 1..]),
        None => (&[], bytes),
    }
}

/// A last line without its newline is complete when it parses: the write may have stopped just
/// before the newline. Anything else there is the remains of an interrupted write.
fn parse_tail(tail: &[u8]) -> Option<Record> {
    if tail.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    serde_json::from_slice(tail).ok()
}

/// A gzip-compressed results file, by its name.
fn is_compressed(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "gz")
}

fn io_error(path: &Path, source: std::io::Error) -> EvalError {
    EvalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Appends records to a results file, one flushed line each.
#[derive(Debug)]
pub struct RecordWriter {
    file: File,
    path: PathBuf,
}

impl RecordWriter {
    /// Opens `path` for appending, creating it (and its directory) if needed, and repairs an
    /// interrupted last line: a complete one gets its newline, a partial one is cut off.
    pub fn open(path: &Path) -> Result<RecordWriter, EvalError> {
        if is_compressed(path) {
            return Err(EvalError::CompressedOutput {
                path: path.to_path_buf(),
            });
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)
            .map_err(|e| io_error(path, e))?;
        let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
        let (complete, tail) = split_tail(&bytes);
        if parse_tail(tail).is_some() {
            file.write_all(b"\n").map_err(|e| io_error(path, e))?;
        } else if !tail.is_empty() {
            let keep = if bytes.len() == tail.len() {
                0
            } else {
                complete.len() + 1
            };
            file.set_len(keep as u64).map_err(|e| io_error(path, e))?;
        }
        Ok(RecordWriter {
            file,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one record as one line. The line goes to the OS in a single write and is flushed
    /// before returning; no fsync, because the point is surviving an interrupted process, and
    /// syncing every question would slow a run on slow disks for little gain.
    pub fn append(&mut self, record: &Record) -> Result<(), EvalError> {
        let mut line = serde_json::to_vec(record).map_err(|source| EvalError::Encode {
            index: record.index,
            source,
        })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.flush())
            .map_err(|e| io_error(&self.path, e))
    }
}

#[cfg(test)]
pub(crate) mod tests;
