//! What opening a database costs: introspection (with the sampled rows and values prompts
//! show) and the value index, time and resident memory, for the largest Spider database (by
//! file size) and for a generated table of a million rows, through the same calls the server
//! makes when it opens a database, and what one question's lookup then costs. The generated
//! table is measured as a SQLite file and, when asked, as a Parquet file through DuckDB
//! (`--duckdb`) and as a copy on a MySQL or MariaDB server (`--mysql URL`).
//!
//! `cargo run -p quorum-benches --bin quorum-bench-value-index -- --rows 1000000 --duckdb`
//!
//! Memory is the growth of the process's resident set across each step, kept after it and at
//! its peak (`VmRSS` and `VmHWM` of `/proc/self/status`, the peak reset and freed heap returned
//! to the system before each step, so that one step does not hide in what another freed); each
//! database gets a fresh handle. DuckDB's memory is its own allocator's and counts the same.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser;
use quorum_duckdb::load::{TableFormat, write_sqlite_as_files};
use quorum_duckdb::{DuckDbDatabase, DuckDbSource};
use quorum_mysql::{MySqlDatabase, MySqlSource};
use quorum_sql::database::DatabaseHandle;
use quorum_sql::linking::value_index::ValueIndexLimits;
use quorum_sql::sandbox::Limits;
use quorum_sql::schema::IntrospectOptions;
use quorum_sql::value::Value;
use quorum_tests::spider_dir;

#[derive(Parser, Debug)]
struct Args {
    /// Rows of the generated table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: usize,
    /// A SQLite file to measure instead of the largest Spider database.
    #[arg(long)]
    db: Option<PathBuf>,
    /// Also the generated table as a Parquet file, through DuckDB.
    #[arg(long)]
    duckdb: bool,
    /// Also the generated table copied into this MySQL or MariaDB server (an admin URL).
    #[arg(long)]
    mysql: Option<String>,
}

/// Resident memory of this process, in bytes (`VmRSS` of `/proc/self/status`).
fn resident_bytes() -> Result<u64> {
    status_bytes("VmRSS:")
}

unsafe extern "C" {
    /// glibc's: returns freed heap memory to the system.
    fn malloc_trim(pad: usize) -> i32;
}

/// Starts a step's memory account: memory the earlier steps freed goes back to the system (or
/// the step would reuse it unseen), and the peak resident set is reset to the current one
/// (`5` to `/proc/self/clear_refs`). Returns the resident set then.
fn start_account() -> Result<u64> {
    // SAFETY: malloc_trim only releases free pages of glibc's heap.
    unsafe { malloc_trim(0) };
    std::fs::write("/proc/self/clear_refs", "5").context("resetting the peak resident set")?;
    resident_bytes()
}

/// A line of `/proc/self/status` in bytes (`VmRSS:`, `VmHWM:`).
fn status_bytes(key: &str) -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .with_context(|| format!("no {key} line"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib * 1024)
}

/// The largest `.sqlite` file under Spider's database directory.
fn largest_spider_database() -> Result<PathBuf> {
    let dir = spider_dir().join("database");
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let db_dir = entry?.path();
        let Some(name) = db_dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let file = db_dir.join(format!("{name}.sqlite"));
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        if best.as_ref().is_none_or(|(size, _)| meta.len() > *size) {
            best = Some((meta.len(), file));
        }
    }
    best.map(|(_, path)| path)
        .context("no Spider database found")
}

/// A table of `rows` rows shaped like a customer ledger: a million distinct customer names, a
/// few hundred cities, five statuses, and a free-text note too long to be looked up.
fn generate(path: &Path, rows: usize) -> Result<()> {
    let conn = rusqlite::Connection::open(path)?;
    conn.execute_batch(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, city TEXT, status TEXT, \
         note TEXT, amount REAL);",
    )?;
    let tx = conn.unchecked_transaction()?;
    {
        let mut insert = tx.prepare(
            "INSERT INTO orders (customer, city, status, note, amount) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        const STATUSES: [&str; 5] = ["open", "paid", "shipped", "returned", "cancelled"];
        for i in 0..rows {
            insert.execute(rusqlite::params![
                format!("Customer {i:07}"),
                format!("City {}", (i * 7919) % 400),
                STATUSES[i % STATUSES.len()],
                format!(
                    "Order {i} was placed through the web shop and handled by the night shift team"
                ),
                (i % 1000) as f64 * 1.25,
            ])?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// Opens a database with `open` (introspection included), then builds its value index.
fn measure(label: &str, open: impl FnOnce() -> Result<DatabaseHandle>) -> Result<()> {
    let before = start_account()?;
    let start = Instant::now();
    let handle = open().with_context(|| format!("opening {label}"))?;
    let opened = start.elapsed();
    let open_peak = status_bytes("VmHWM:")?.saturating_sub(before);
    let after_open = start_account()?;
    let start = Instant::now();
    let index = handle.value_index().context("building the value index")?;
    let built = start.elapsed();
    let index_peak = status_bytes("VmHWM:")?.saturating_sub(after_open);
    let grown = resident_bytes()?.saturating_sub(after_open);
    let question = "Which orders of Customer 0004242 in city 17 were returned?";
    let start = Instant::now();
    let rounds = 20;
    let mut found = 0;
    for _ in 0..rounds {
        found = index.matches(question, 6, 2).len();
    }
    let lookup = start.elapsed() / rounds;
    let mut session = handle
        .backend
        .open_session(Limits::default())
        .context("a session")?;
    let dialect = handle.backend.dialect();
    let mut rows: i64 = 0;
    for table in &handle.schema.tables {
        let counted = session
            .execute(&format!(
                "SELECT count(*) FROM {}",
                dialect.quote(&table.name)
            ))
            .with_context(|| format!("counting the rows of {}", table.name))?;
        if let Some(Value::Integer(n)) = counted.rows.first().and_then(|r| r.first()) {
            rows += n;
        }
    }
    println!(
        "{label} ({}): {} tables, {rows} rows, {} columns; opened and introspected in {:.2} s, \
         resident memory +{:.1} MiB kept (peak +{:.1} MiB); {} values indexed ({} columns \
         skipped) in {:.2} s, +{:.1} MiB kept (peak +{:.1} MiB); one question's lookup {:.2} ms \
         ({found} matches)",
        dialect.name(),
        handle.schema.tables.len(),
        handle
            .schema
            .tables
            .iter()
            .map(|t| t.columns.len())
            .sum::<usize>(),
        opened.as_secs_f64(),
        after_open.saturating_sub(before) as f64 / (1024.0 * 1024.0),
        open_peak as f64 / (1024.0 * 1024.0),
        index.len(),
        index.skipped_columns,
        built.as_secs_f64(),
        grown as f64 / (1024.0 * 1024.0),
        index_peak as f64 / (1024.0 * 1024.0),
        lookup.as_secs_f64() * 1e3,
    );
    Ok(())
}

fn sqlite(path: &Path, db_id: &str) -> Result<DatabaseHandle> {
    Ok(DatabaseHandle::open(
        path,
        db_id,
        IntrospectOptions::default(),
    )?)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let limits = ValueIndexLimits::default();
    println!(
        "limits: {} distinct values a column, {} a database, values over {} characters skipped",
        limits.per_column, limits.total, limits.max_chars
    );
    let spider = match &args.db {
        Some(path) => path.clone(),
        None => largest_spider_database()?,
    };
    let db_id = spider
        .file_stem()
        .and_then(|s| s.to_str())
        .context("database file name")?
        .to_owned();
    measure(&db_id, || sqlite(&spider, &db_id))?;

    if args.rows == 0 {
        bail!("--rows must be at least 1");
    }
    let dir = tempfile::tempdir()?;
    let generated = dir.path().join("orders.sqlite");
    let start = Instant::now();
    generate(&generated, args.rows)?;
    println!(
        "generated {} rows in {:.1} s ({:.0} MiB on disk)",
        args.rows,
        start.elapsed().as_secs_f64(),
        std::fs::metadata(&generated)?.len() as f64 / (1024.0 * 1024.0)
    );
    measure("orders (generated)", || sqlite(&generated, "orders"))?;
    if args.duckdb {
        let files = dir.path().join("orders_files");
        let start = Instant::now();
        write_sqlite_as_files(&generated, &files, TableFormat::Parquet)?;
        println!(
            "wrote it as Parquet in {:.1} s ({:.0} MiB on disk)",
            start.elapsed().as_secs_f64(),
            std::fs::metadata(files.join("orders.parquet"))?.len() as f64 / (1024.0 * 1024.0)
        );
        measure("orders (generated, Parquet)", || {
            Ok(
                DuckDbDatabase::open(DuckDbSource::new(&files), Some(dir.path()))?
                    .into_handle("orders", IntrospectOptions::default())?,
            )
        })?;
    }
    if let Some(url) = &args.mysql {
        let start = Instant::now();
        let mut admin = quorum_mysql::connect_admin(url)?;
        quorum_mysql::load::load_sqlite(&mut admin, &generated, "orders")?;
        println!(
            "copied it into MySQL in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        measure("orders (generated, MySQL)", || {
            Ok(
                MySqlDatabase::connect(MySqlSource::new(url.clone(), Some("orders".into())))?
                    .into_handle("orders", IntrospectOptions::default())?,
            )
        })?;
    }
    Ok(())
}
