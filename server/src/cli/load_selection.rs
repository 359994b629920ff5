//! Which Spider databases a loader copies (those of a slice's questions and those named), and
//! the account of each copy.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use quorum_sql::dataset::{database_path, load_examples, load_slices};
use quorum_sql::sqlite_copy::LoadReport;

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

/// Copies each of `selected` with `copy` (id, SQLite file), printing what each copy kept and
/// what `server` could not express, then the totals.
pub fn load_each(
    selected: &[(String, PathBuf)],
    server: &str,
    mut copy: impl FnMut(&str, &Path) -> Result<LoadReport>,
) -> Result<()> {
    let (mut dropped_keys, mut skipped_fks) = (0, 0);
    for (id, path) in selected {
        let started = Instant::now();
        let report = copy(id, path).with_context(|| id.clone())?;
        println!(
            "{id}: {} tables, {} rows, {} foreign keys in {:.1} s",
            report.tables,
            report.rows,
            report.foreign_keys,
            started.elapsed().as_secs_f64()
        );
        for key in &report.primary_keys_dropped {
            println!("  primary key not kept (the data violates it): {key}");
        }
        for fk in &report.foreign_keys_skipped {
            println!("  foreign key not kept ({server} cannot express it): {fk}");
        }
        dropped_keys += report.primary_keys_dropped.len();
        skipped_fks += report.foreign_keys_skipped.len();
    }
    println!(
        "{} databases loaded; {dropped_keys} primary keys and {skipped_fks} foreign keys not kept",
        selected.len()
    );
    Ok(())
}
