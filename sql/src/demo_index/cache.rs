//! The demo index on disk, so that the 7000 train questions are masked and embedded once.
//!
//! The file is keyed by a hash of the train pool's bytes, the embedder's name, the prompt
//! format version and this file format's version: any of them changing makes the cache stale.
//! Layout (little-endian): magic, key (u64), entries as JSON (u64 length + bytes), dimension
//! (u64), count (u64), `count × dimension` f32, then an FNV-1a checksum (u64) of everything
//! before it. A file that is missing, stale or fails any check is rebuilt and rewritten; a
//! cache is never trusted over the data it stands for.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{DemoEntry, DemoIndex, DemoIndexError, MaskingMode};
use crate::dataset::Example;
use crate::fingerprint::Fnv64;
use crate::model::ContextEncoder;
use crate::model::Embedder;
use crate::prompt::PROMPT_FORMAT_VERSION;

const MAGIC: &[u8; 8] = b"QDEMOIX\x01";
/// Bumped when masking, skeletons or this layout change the cached content.
const INDEX_FORMAT_VERSION: &str = "demo-index-1";

/// Where the pool comes from and which embedder indexes it.
#[derive(Clone, Copy)]
pub struct DemoIndexSource<'a> {
    /// A Spider-format question file (train.json).
    pub train_json: &'a Path,
    /// Spider's `database/` directory holding the train databases.
    pub database_dir: &'a Path,
    /// Identifies the embedding model: vectors from another model are meaningless here.
    pub embedder_name: &'a str,
    /// How the pool's questions are masked; part of the cache key.
    pub masking: MaskingMode,
    /// The masked language model the relevance mode probes (same model as the embedder here).
    pub encoder: Option<&'a dyn ContextEncoder>,
}

impl std::fmt::Debug for DemoIndexSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemoIndexSource")
            .field("train_json", &self.train_json)
            .field("database_dir", &self.database_dir)
            .field("embedder_name", &self.embedder_name)
            .field("masking", &self.masking)
            .finish_non_exhaustive()
    }
}

/// What [`DemoIndex::load_or_build`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    Loaded,
    Built { reason: RebuildReason },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebuildReason {
    Missing,
    /// Written for other train data, another embedder or another format version.
    Stale,
    /// Truncated, altered or unreadable.
    Corrupt,
}

impl DemoIndex {
    /// Loads the index from `cache_path` when it matches `source`, else builds it and writes
    /// the cache (atomically: a temporary file renamed over the old one).
    pub fn load_or_build(
        source: DemoIndexSource<'_>,
        embedder: &dyn Embedder,
        cache_path: &Path,
    ) -> Result<(Self, CacheStatus), DemoIndexError> {
        let train_bytes =
            std::fs::read(source.train_json).map_err(|e| DemoIndexError::ReadTrain {
                path: source.train_json.to_owned(),
                source: e,
            })?;
        let key = cache_key(&train_bytes, source.embedder_name, source.masking);
        let reason = match std::fs::read(cache_path) {
            Err(_) => RebuildReason::Missing,
            Ok(bytes) => match decode(&bytes, key) {
                Ok(index) => return Ok((index, CacheStatus::Loaded)),
                Err(reason) => reason,
            },
        };
        let examples: Vec<Example> =
            serde_json::from_slice(&train_bytes).map_err(|e| DemoIndexError::ParseTrain {
                path: source.train_json.to_owned(),
                source: e,
            })?;
        let index = DemoIndex::build_masked(
            &examples,
            source.database_dir,
            embedder,
            source.masking,
            source.encoder,
        )?;
        write_atomically(cache_path, &encode(&index, key))?;
        Ok((index, CacheStatus::Built { reason }))
    }
}

fn cache_key(train_bytes: &[u8], embedder_name: &str, masking: MaskingMode) -> u64 {
    let mut hash = Fnv64::default();
    hash.write_field(train_bytes);
    hash.write_field(embedder_name.as_bytes());
    // Lexical indexes keep the key they had before the mode existed.
    if masking != MaskingMode::Lexical {
        hash.write_field(masking.label().as_bytes());
    }
    hash.write_field(PROMPT_FORMAT_VERSION.as_bytes());
    hash.write_field(INDEX_FORMAT_VERSION.as_bytes());
    hash.finish()
}

fn encode(index: &DemoIndex, key: u64) -> Vec<u8> {
    // Serializing plain strings and integers cannot fail.
    let meta = Meta {
        entries: index.entries().to_vec(),
        skipped_databases: index.skipped_databases().to_vec(),
        masking: index.masking(),
    };
    let meta = serde_json::to_vec(&meta).expect("demo entries serialize to JSON");
    let floats = index.raw_embeddings();
    let mut out = Vec::with_capacity(48 + meta.len() + floats.len() * 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    out.extend_from_slice(&meta);
    out.extend_from_slice(&(index.dim() as u64).to_le_bytes());
    out.extend_from_slice(&(index.len() as u64).to_le_bytes());
    for x in floats {
        out.extend_from_slice(&x.to_le_bytes());
    }
    let mut hash = Fnv64::default();
    hash.write(&out);
    out.extend_from_slice(&hash.finish().to_le_bytes());
    out
}

fn decode(bytes: &[u8], key: u64) -> Result<DemoIndex, RebuildReason> {
    use RebuildReason::Corrupt;
    let Some(body_len) = bytes.len().checked_sub(8) else {
        return Err(Corrupt);
    };
    let (body, checksum) = bytes.split_at(body_len);
    let stored = checksum
        .try_into()
        .map(u64::from_le_bytes)
        .map_err(|_| Corrupt)?;
    let mut hash = Fnv64::default();
    hash.write(body);
    if stored != hash.finish() {
        return Err(Corrupt);
    }
    let mut reader = Reader(body);
    if reader.take(MAGIC.len())? != MAGIC {
        return Err(Corrupt);
    }
    if reader.u64()? != key {
        return Err(RebuildReason::Stale);
    }
    let meta_len = usize::try_from(reader.u64()?).map_err(|_| Corrupt)?;
    let meta: Meta = serde_json::from_slice(reader.take(meta_len)?).map_err(|_| Corrupt)?;
    let dim = usize::try_from(reader.u64()?).map_err(|_| Corrupt)?;
    let count = usize::try_from(reader.u64()?).map_err(|_| Corrupt)?;
    let n_floats = count.checked_mul(dim).ok_or(Corrupt)?;
    let raw = reader.take(n_floats.checked_mul(4).ok_or(Corrupt)?)?;
    if !reader.0.is_empty() || count != meta.entries.len() {
        return Err(Corrupt);
    }
    let embeddings = raw
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    DemoIndex::from_parts(
        meta.entries,
        embeddings,
        dim,
        meta.skipped_databases,
        meta.masking,
    )
    .ok_or(Corrupt)
}

/// The JSON part of the file.
#[derive(Serialize, Deserialize)]
struct Meta {
    entries: Vec<DemoEntry>,
    skipped_databases: Vec<String>,
    /// Absent in files written before the relevance mode: those are lexical.
    #[serde(default)]
    masking: MaskingMode,
}

/// A cursor over the cache bytes; running out is corruption.
struct Reader<'b>(&'b [u8]);

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], RebuildReason> {
        let (head, tail) = self.0.split_at_checked(n).ok_or(RebuildReason::Corrupt)?;
        self.0 = tail;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64, RebuildReason> {
        let bytes = self.take(8)?;
        let array: [u8; 8] = bytes.try_into().map_err(|_| RebuildReason::Corrupt)?;
        Ok(u64::from_le_bytes(array))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), DemoIndexError> {
    let err = |source| DemoIndexError::WriteCache {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    // The process id keeps two servers building at once from writing the same temporary file.
    let mut tmp: PathBuf = path.to_owned();
    tmp.as_mut_os_string()
        .push(format!(".tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}
