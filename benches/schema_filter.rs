//! What the schema filter keeps, measured without a generator: for each question of a slice,
//! asked against its database (typically the 50+-table files `scripts/merge-spider-schemas.py`
//! writes), the tables `filter_tables` shows with the real MiniLM embedder, whether every table
//! of the gold query is among them, and how often a question gets exactly a table set an
//! earlier question of its database got (then its whole round-1 prompt up to the question can
//! come from the prefix cache).
//!
//! `cargo run -p quorum-benches --bin quorum-bench-schema-filter -- --database-dir DIR --slice dev300`

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use quorum_sql::database::DatabaseHandle;
use quorum_sql::dataset::{SpiderDataset, database_path};
use quorum_sql::linking::schema_filter::filter_tables;
use quorum_sql::linking::tables::link_tables;
use quorum_sql::schema::IntrospectOptions;
use quorum_tests::{MiniLm, spider_dir};

#[derive(Parser, Debug)]
struct Args {
    /// Where the slice's databases are (`<dir>/<db_id>/<db_id>.sqlite`).
    #[arg(long)]
    database_dir: PathBuf,
    #[arg(long, default_value = "dev300")]
    slice: String,
    /// The filter's threshold, as the `schema_filter_above` knob.
    #[arg(long, default_value_t = 20)]
    above: usize,
    /// Print each question whose gold tables were not all kept.
    #[arg(long)]
    misses: bool,
    /// Print every filtered question's shown tables (to compare two builds' filters line by
    /// line).
    #[arg(long)]
    list: bool,
    /// Forget the databases' foreign keys, as for a schema that declares none.
    #[arg(long)]
    no_foreign_keys: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let embedder = MiniLm::load()?;
    let data = SpiderDataset::new(spider_dir());
    let dev = data.dev()?;
    let slices = data.slices()?;
    let chosen = slices
        .get(&args.slice)
        .with_context(|| format!("no slice {}", args.slice))?;

    let mut handles: BTreeMap<String, DatabaseHandle> = BTreeMap::new();
    let mut sets_seen: BTreeMap<String, HashSet<Vec<String>>> = BTreeMap::new();
    let (mut asked, mut filtered, mut kept_all, mut repeated) = (0, 0, 0, 0);
    let (mut shown_total, mut schema_total) = (0, 0);
    for &i in chosen.iter() {
        let example = &dev[i];
        let handle = match handles.get(&example.db_id) {
            Some(handle) => handle,
            None => {
                let path = database_path(&args.database_dir, &example.db_id);
                let mut handle =
                    DatabaseHandle::open(&path, &example.db_id, IntrospectOptions::default())
                        .with_context(|| format!("opening {}", path.display()))?;
                if args.no_foreign_keys {
                    handle.schema.foreign_keys.clear();
                }
                handles.entry(example.db_id.clone()).or_insert(handle)
            }
        };
        asked += 1;
        let tables = handle.table_vectors(&embedder)?;
        let question = tables.embed_question(&embedder, &example.question)?;
        let Some(shown) = filter_tables(
            &handle.schema,
            args.above,
            &example.question,
            Some((tables, &question)),
            &[],
        ) else {
            continue;
        };
        filtered += 1;
        if args.list {
            println!("dev {i} ({}): shown {shown:?}", example.db_id);
        }
        shown_total += shown.len();
        schema_total += handle.schema.tables.len();
        let gold = link_tables(&example.query, &handle.schema).tables;
        let missing: Vec<&String> = gold
            .iter()
            .filter(|g| !shown.iter().any(|s| s.eq_ignore_ascii_case(g)))
            .collect();
        if missing.is_empty() {
            kept_all += 1;
        } else if args.misses {
            println!(
                "dev {i} ({}): missing {missing:?}; shown {shown:?}",
                example.db_id
            );
        }
        if !sets_seen
            .entry(example.db_id.clone())
            .or_default()
            .insert(shown)
        {
            repeated += 1;
        }
    }
    let per = |total: usize| total as f64 / filtered.max(1) as f64;
    println!(
        "{} ({asked} questions): filtered {filtered}; every gold table kept for {kept_all}; \
         {:.1} of {:.1} tables shown on average; {repeated} questions got a table set an earlier \
         question of their database got",
        args.slice,
        per(shown_total),
        per(schema_total),
    );
    Ok(())
}
