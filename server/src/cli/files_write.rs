//! `quorum files-write`: writes Spider-format SQLite databases as files, one folder per id and
//! one Parquet (or CSV) file per table, so that `quorum eval --duckdb` can ask the same
//! questions of the files through DuckDB.

use std::path::PathBuf;

use anyhow::Result;
use quorum_duckdb::load::{TableFormat, write_sqlite_as_files};

use crate::cli::load_selection::{load_each, selected_databases};

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum FormatArg {
    Parquet,
    Csv,
}

#[derive(clap::Args, Debug)]
pub struct FilesWriteArgs {
    /// The folder to write into: `<out>/<db_id>/<table>.<format>`.
    #[arg(long)]
    pub out: PathBuf,
    /// The file format of the tables.
    #[arg(long, value_enum, default_value = "parquet")]
    pub format: FormatArg,
    /// Spider-format data directory (`database/`, the question files, `slices.json`).
    #[arg(long, env = "QUORUM_SPIDER_DIR", default_value = quorum_server::config::shipped::DEFAULT_SPIDER_DIR)]
    pub data: PathBuf,
    /// The databases of this slice's questions (of dev.json).
    #[arg(long)]
    pub slice: Option<String>,
    /// These database ids (besides the slice's).
    #[arg(long = "db")]
    pub dbs: Vec<String>,
}

pub fn files_write(args: FilesWriteArgs) -> Result<()> {
    let selected = selected_databases(&args.data, args.slice.as_deref(), &args.dbs)?;
    let format = match args.format {
        FormatArg::Parquet => TableFormat::Parquet,
        FormatArg::Csv => TableFormat::Csv,
    };
    load_each(&selected, "files", |id, path| {
        Ok(write_sqlite_as_files(path, &args.out.join(id), format)?)
    })
}
