//! Loading Spider-format data: question files (dev.json, train.json, and BIRD's, whose gold SQL
//! is `SQL` and which carry `evidence`), the schema file (tables.json), the evaluation slices
//! (slices.json) and the database paths.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One question with its gold SQL. Other fields of the file (tokens, parsed SQL, BIRD's
/// `question_id` and `difficulty`) are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Example {
    pub db_id: String,
    pub question: String,
    /// Spider's `query`, BIRD's `SQL`.
    #[serde(alias = "SQL")]
    pub query: String,
    /// BIRD's external knowledge for the question; Spider has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// Every gold query that counts as right (SQL-Eval's benchmarks list acceptable column
    /// choices); empty when `query` is the only one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<String>,
    /// The question's kind in benchmarks that group them (SQL-Eval's `category`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

impl Example {
    /// The evidence to send with the question: `None` when absent or blank.
    pub fn evidence(&self) -> Option<&str> {
        self.evidence.as_deref().filter(|e| !e.trim().is_empty())
    }

    /// The gold queries a prediction may match: the alternatives when the file lists them,
    /// else the one gold query.
    pub fn golds(&self) -> Vec<&str> {
        match self.alternatives.is_empty() {
            true => vec![self.query.as_str()],
            false => self.alternatives.iter().map(String::as_str).collect(),
        }
    }
}

/// A primary key in tables.json: a column index, or a list of them in later Spider-format
/// releases with composite keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PrimaryKeyEntry {
    Column(usize),
    Composite(Vec<usize>),
}

/// One database entry of tables.json. Column index 0 is the `*` pseudo-column (table -1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TablesEntry {
    pub db_id: String,
    pub table_names_original: Vec<String>,
    pub table_names: Vec<String>,
    /// `(table index, name)`; the table index is -1 for `*`.
    pub column_names_original: Vec<(i64, String)>,
    pub column_names: Vec<(i64, String)>,
    pub column_types: Vec<String>,
    pub primary_keys: Vec<PrimaryKeyEntry>,
    /// `(column index, referenced column index)`.
    pub foreign_keys: Vec<(usize, usize)>,
}

/// Named lists of indices into dev.json (`usable`, `dev100`, `smoke10`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Slices(pub BTreeMap<String, Vec<usize>>);

impl Slices {
    pub fn get(&self, name: &str) -> Option<&[usize]> {
        self.0.get(name).map(Vec::as_slice)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot parse {path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
}

impl DatasetError {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Read { .. } => "read",
            Self::Parse { .. } => "parse",
        }
    }
}

fn load_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, DatasetError> {
    let text = std::fs::read_to_string(path).map_err(|source| DatasetError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| DatasetError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// Reads a question file (dev.json, train.json or any list of `{db_id, question, query}`).
pub fn load_examples(path: &Path) -> Result<Vec<Example>, DatasetError> {
    load_json(path)
}

pub fn load_tables(path: &Path) -> Result<Vec<TablesEntry>, DatasetError> {
    load_json(path)
}

pub fn load_slices(path: &Path) -> Result<Slices, DatasetError> {
    load_json(path)
}

/// [`load_slices`], or no slices when the file does not exist (BIRD ships none).
pub fn load_slices_if_present(path: &Path) -> Result<Slices, DatasetError> {
    match path.exists() {
        true => load_slices(path),
        false => Ok(Slices::default()),
    }
}

/// `<db_dir>/<db_id>/<db_id>.sqlite`, Spider's layout.
pub fn database_path(db_dir: &Path, db_id: &str) -> PathBuf {
    db_dir.join(db_id).join(format!("{db_id}.sqlite"))
}

/// A Spider directory with the standard file names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpiderDataset {
    root: PathBuf,
}

impl SpiderDataset {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn dev(&self) -> Result<Vec<Example>, DatasetError> {
        load_examples(&self.root.join("dev.json"))
    }

    pub fn train(&self) -> Result<Vec<Example>, DatasetError> {
        load_examples(&self.root.join("train.json"))
    }

    pub fn tables(&self) -> Result<Vec<TablesEntry>, DatasetError> {
        load_tables(&self.root.join("tables.json"))
    }

    pub fn slices(&self) -> Result<Slices, DatasetError> {
        load_slices(&self.root.join("slices.json"))
    }

    pub fn database_dir(&self) -> PathBuf {
        self.root.join("database")
    }

    pub fn database_path(&self, db_id: &str) -> PathBuf {
        database_path(&self.database_dir(), db_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spider_fixture::spider;

    #[test]
    fn loads_spider_files() {
        let data = spider();
        let dev = data.dev().expect("dev.json");
        assert_eq!(dev.len(), 1034);
        assert_eq!(dev[0].db_id, "concert_singer");
        assert_eq!(dev[0].question, "How many singers do we have?");
        assert_eq!(dev[0].query, "SELECT count(*) FROM singer");
        assert_eq!(data.train().expect("train.json").len(), 7000);
        let tables = data.tables().expect("tables.json");
        let concert = tables
            .iter()
            .find(|t| t.db_id == "concert_singer")
            .expect("concert_singer entry");
        assert_eq!(concert.table_names_original[0], "stadium");
        assert_eq!(concert.column_names_original[0], (-1, "*".to_owned()));
        assert_eq!(concert.foreign_keys[0], (18, 1));
        let slices = data.slices().expect("slices.json");
        assert_eq!(slices.get("usable").map(<[usize]>::len), Some(972));
        assert_eq!(slices.get("smoke10").map(<[usize]>::len), Some(10));
        assert!(slices.get("nope").is_none());
    }

    #[test]
    fn database_path_follows_spider_layout() {
        let data = SpiderDataset::new("/d");
        assert_eq!(
            data.database_path("pets_1"),
            PathBuf::from("/d/database/pets_1/pets_1.sqlite")
        );
        assert!(data.database_path("concert_singer").as_os_str().len() > 10);
    }

    #[test]
    fn errors_name_the_file() {
        let err = load_examples(Path::new("/nonexistent/dev.json")).expect_err("missing");
        assert_eq!(err.kind(), "read");
        let dir = std::env::temp_dir().join(format!("quorum-sql-dataset-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "[{\"db_id\": 1}]").expect("write");
        let err = load_examples(&bad).expect_err("malformed");
        assert_eq!(err.kind(), "parse");
        assert!(err.to_string().contains("bad.json"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn bird_question_files_read_their_sql_and_evidence() {
        let bird = r#"[{"question_id": 0, "db_id": "california_schools",
            "question": "What is the highest eligible free rate for K-12 students?",
            "evidence": "Eligible free rate = `Free Meal Count (K-12)` / `Enrollment (K-12)`",
            "SQL": "SELECT 1", "difficulty": "simple"},
            {"question_id": 1, "db_id": "x", "question": "q", "evidence": " ", "SQL": "SELECT 2"}]"#;
        let examples: Vec<Example> = serde_json::from_str(bird).expect("BIRD format");
        assert_eq!(examples[0].query, "SELECT 1");
        assert!(
            examples[0]
                .evidence()
                .is_some_and(|e| e.starts_with("Eligible"))
        );
        assert_eq!(examples[1].evidence(), None, "blank evidence is none");
        let spider: Vec<Example> =
            serde_json::from_str(r#"[{"db_id": "x", "question": "q", "query": "SELECT 3"}]"#)
                .expect("Spider format");
        assert_eq!(
            (spider[0].query.as_str(), spider[0].evidence()),
            ("SELECT 3", None)
        );
        assert!(
            !serde_json::to_string(&spider[0])
                .unwrap()
                .contains("evidence")
        );
    }
}
