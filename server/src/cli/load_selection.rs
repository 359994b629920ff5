//! Which Spider databases a loader copies: those of a slice's questions and those named.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use quorum_sql::dataset::{database_path, load_examples, load_slices};

/// The database ids of `slice`'s questions (of `data`'s dev.json) and `dbs`, each with its
/// SQLite file.
pub fn selected_databases(
    data: &Path,
    slice: Option<&str>,
    dbs: &[String],
) -> Result<Vec<(String, PathBuf)>> {
    let mut ids: BTreeSet<String> = dbs.iter().cloned().collect();
    if let Some(slice) = slice {
        let dev = load_examples(&data.join("dev.json"))?;
        let slices = load_slices(&data.join("slices.json"))?;
        let indices = slices
            .get(slice)
            .with_context(|| format!("no slice named {slice:?}"))?;
        ids.extend(indices.iter().map(|&i| dev[i].db_id.clone()));
    }
    anyhow::ensure!(!ids.is_empty(), "name databases with --slice or --db");
    Ok(ids
        .into_iter()
        .map(|id| {
            let path = database_path(&data.join("database"), &id);
            (id, path)
        })
        .collect())
}
