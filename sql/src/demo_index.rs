//! The few-shot demonstration index over a Spider-format train pool (DAIL-SQL / PET-SQL).
//!
//! Every train example is stored with its de-semanticized question (schema words → `<mask>`,
//! values → `<unk>`) and its SQL skeleton; the masked questions are embedded once, and the
//! index is cached on disk ([`cache`]). Retrieval embeds the target question masked the same
//! way, ranks the pool by cosine similarity and leaves out the target's own database: Spider
//! is cross-domain, and a demo from the same database would leak its schema and values.
//!
//! Round 2 re-orders the same ranking: demos whose skeleton is close to the PreSQL's come
//! first (multiset Jaccard ≥ 0.85, DAIL-SQL's threshold), and with XiYan's filter, when two or
//! more tables were linked, demos that read several tables come before single-table ones.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::dataset::{Example, database_path};
use crate::linking::skeleton::{skeleton_jaccard, sql_skeleton};
use crate::linking::tables::link_tables;
use crate::model::ContextEncoder;
use crate::model::{self, EmbedFailure, Embedder, EmbeddingShape, ModelCallError};
use crate::prompt::Demo;
use crate::schema::{IntrospectOptions, Schema};

pub mod cache;
mod masking;
#[cfg(test)]
pub(crate) mod tests;

pub use cache::{CacheStatus, DemoIndexSource, RebuildReason};
pub use masking::MaskingMode;

/// DAIL-SQL's skeleton similarity threshold for "similar enough to come first".
pub const SKELETON_THRESHOLD: f64 = 0.85;

/// Texts per embedder call while building: large enough to keep a batching engine busy,
/// small enough that one call's memory stays modest.
const EMBED_CHUNK: usize = 64;

/// One train example as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DemoEntry {
    pub db_id: String,
    pub question: String,
    pub sql: String,
    pub masked_question: String,
    pub skeleton: String,
    /// Tables the SQL reads (linking's count; XiYan's multi-table filter needs ≥ 2).
    pub table_count: usize,
}

impl DemoEntry {
    pub fn demo(&self) -> Demo {
        Demo::new(&self.question, &self.sql)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DemoIndexError {
    #[error("cannot read the train pool {path}: {source}")]
    ReadTrain {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot parse the train pool {path}: {source}")]
    ParseTrain {
        path: std::path::PathBuf,
        source: serde_json::Error,
    },
    #[error("embedding failed: {source}")]
    Embed { source: ModelCallError },
    #[error("masking a question failed: {source}")]
    Mask { source: ModelCallError },
    #[error(transparent)]
    EmbeddingShape(EmbeddingShape),
    #[error("cannot write the demo index cache {path}: {source}")]
    WriteCache {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

impl DemoIndexError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ReadTrain { .. } => "read_train",
            Self::ParseTrain { .. } => "parse_train",
            Self::Embed { .. } => "embed",
            Self::Mask { .. } => "mask",
            Self::EmbeddingShape(_) => "embedding_shape",
            Self::WriteCache { .. } => "write_cache",
        }
    }
}

/// How round 2 re-orders a ranking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rerank<'a> {
    /// The PreSQL's skeleton: demos at or above `threshold` Jaccard with it come first.
    pub skeleton: Option<&'a str>,
    pub threshold: f64,
    /// Multi-table demos before single-table ones (XiYan, when ≥ 2 tables are linked).
    pub prefer_multi_table: bool,
}

impl Default for Rerank<'_> {
    fn default() -> Self {
        Self {
            skeleton: None,
            threshold: SKELETON_THRESHOLD,
            prefer_multi_table: false,
        }
    }
}

/// The masked question the index is keyed by, masked lexically (see [`MaskingMode::Lexical`]).
pub fn masked_question(question: &str, schema: &Schema) -> String {
    MaskingMode::Lexical
        .mask(question, schema, None)
        .expect("lexical masking calls no model")
}

/// The demo pool with unit-length embeddings of the masked questions.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoIndex {
    entries: Vec<DemoEntry>,
    /// Row-major, `entries.len() × dim`, each row of unit length (or zero).
    embeddings: Vec<f32>,
    dim: usize,
    skipped_databases: Vec<String>,
    /// How the pool's questions were masked; the asked question must be masked alike.
    masking: MaskingMode,
}

impl DemoIndex {
    /// Builds the index: introspects each train database once, masks and skeletonizes every
    /// example, and embeds the masked questions in chunks. Examples whose database cannot be
    /// opened are left out and their databases listed in [`DemoIndex::skipped_databases`]:
    /// without a schema a question cannot be masked, and Spider's public release lacks a few
    /// train databases, which should cost those demos rather than the whole index.
    pub fn build(
        examples: &[Example],
        database_dir: &Path,
        embedder: &dyn Embedder,
    ) -> Result<Self, DemoIndexError> {
        Self::build_masked(examples, database_dir, embedder, MaskingMode::Lexical, None)
    }

    /// [`DemoIndex::build`] with questions masked by `masking` (the relevance mode needs
    /// `encoder`).
    pub fn build_masked(
        examples: &[Example],
        database_dir: &Path,
        embedder: &dyn Embedder,
        masking: MaskingMode,
        encoder: Option<&dyn ContextEncoder>,
    ) -> Result<Self, DemoIndexError> {
        let (entries, skipped_databases) = describe(examples, database_dir, masking, encoder)?;
        let mut embeddings = Vec::new();
        let mut dim = None;
        for chunk in entries.chunks(EMBED_CHUNK) {
            let texts: Vec<&str> = chunk.iter().map(|e| e.masked_question.as_str()).collect();
            for vector in embed_checked(embedder, &texts, dim)? {
                dim = Some(vector.len());
                embeddings.extend(normalized(vector));
            }
        }
        Ok(Self {
            entries,
            embeddings,
            dim: dim.unwrap_or(0),
            skipped_databases,
            masking,
        })
    }

    /// How the pool's questions were masked.
    pub fn masking(&self) -> MaskingMode {
        self.masking
    }

    pub(crate) fn from_parts(
        entries: Vec<DemoEntry>,
        embeddings: Vec<f32>,
        dim: usize,
        skipped_databases: Vec<String>,
        masking: MaskingMode,
    ) -> Option<Self> {
        (embeddings.len() == entries.len() * dim).then_some(Self {
            entries,
            embeddings,
            dim,
            masking,
            skipped_databases,
        })
    }

    /// Train databases that could not be opened; their examples are not in the index.
    pub fn skipped_databases(&self) -> &[String] {
        &self.skipped_databases
    }

    pub fn entries(&self) -> &[DemoEntry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub(crate) fn raw_embeddings(&self) -> &[f32] {
        &self.embeddings
    }

    /// Every entry not from `exclude_db`, most similar masked question first (ties by pool
    /// order, so rankings are deterministic).
    pub fn rank(
        &self,
        embedder: &dyn Embedder,
        masked_question: &str,
        exclude_db: &str,
    ) -> Result<Vec<usize>, DemoIndexError> {
        let expected_dim = (!self.is_empty()).then_some(self.dim);
        let vector = embed_checked(embedder, &[masked_question], expected_dim)?
            .into_iter()
            .next()
            .map(normalized)
            .unwrap_or_default();
        let mut scored: Vec<(usize, f32)> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.db_id != exclude_db)
            .map(|(i, _)| (i, dot(&vector, self.row(i))))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(scored.into_iter().map(|(i, _)| i).collect())
    }

    /// The first `k` entries of `ranked` after round 2's re-ordering. The sort is stable, so
    /// within each preference class the similarity order is kept.
    pub fn select(&self, ranked: &[usize], k: usize, rerank: Rerank<'_>) -> Vec<&DemoEntry> {
        let mut order: Vec<(bool, bool, usize)> = ranked
            .iter()
            .map(|&i| {
                let entry = &self.entries[i];
                let skeleton_miss = rerank
                    .skeleton
                    .is_some_and(|s| skeleton_jaccard(s, &entry.skeleton) < rerank.threshold);
                let single_table = rerank.prefer_multi_table && entry.table_count < 2;
                (skeleton_miss, single_table, i)
            })
            .collect();
        order.sort_by_key(|&(skeleton_miss, single_table, _)| (skeleton_miss, single_table));
        order
            .into_iter()
            .take(k)
            .map(|(_, _, i)| &self.entries[i])
            .collect()
    }

    fn row(&self, i: usize) -> &[f32] {
        &self.embeddings[i * self.dim..(i + 1) * self.dim]
    }
}

/// The entries for `examples`, and the databases that could not be introspected.
fn describe(
    examples: &[Example],
    database_dir: &Path,
    masking: MaskingMode,
    encoder: Option<&dyn ContextEncoder>,
) -> Result<(Vec<DemoEntry>, Vec<String>), DemoIndexError> {
    let mut schemas: HashMap<&str, Option<Schema>> = HashMap::new();
    let mut entries = Vec::with_capacity(examples.len());
    for example in examples {
        let db_id = example.db_id.as_str();
        let schema = schemas.entry(db_id).or_insert_with(|| {
            let path = database_path(database_dir, db_id);
            Schema::from_sqlite(&path, db_id, IntrospectOptions::default()).ok()
        });
        let Some(schema) = schema else { continue };
        let masked_question = masking
            .mask(&example.question, schema, encoder)
            .map_err(|source| DemoIndexError::Mask { source })?;
        entries.push(DemoEntry {
            db_id: example.db_id.clone(),
            question: example.question.clone(),
            sql: example.query.clone(),
            masked_question,
            skeleton: sql_skeleton(&example.query, schema),
            table_count: link_tables(&example.query, schema).tables.len(),
        });
    }
    let mut skipped: Vec<String> = schemas
        .into_iter()
        .filter(|(_, schema)| schema.is_none())
        .map(|(db_id, _)| db_id.to_owned())
        .collect();
    skipped.sort();
    Ok((entries, skipped))
}

/// [`model::embed_checked`] with its failures as the index's.
fn embed_checked(
    embedder: &dyn Embedder,
    texts: &[&str],
    expected_dim: Option<usize>,
) -> Result<Vec<Vec<f32>>, DemoIndexError> {
    model::embed_checked(embedder, texts, expected_dim).map_err(|failure| match failure {
        EmbedFailure::Call(source) => DemoIndexError::Embed { source },
        EmbedFailure::Shape(shape) => DemoIndexError::EmbeddingShape(shape),
    })
}

/// Scales to unit length so that a dot product is the cosine; a zero vector stays zero (it is
/// then equally dissimilar to everything rather than NaN).
fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
