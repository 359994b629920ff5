//! `quorum pg-load`: copies Spider-format SQLite databases into a PostgreSQL server, one schema
//! per database id, so that `quorum eval --postgres` can ask the same questions of both.

use std::path::PathBuf;

use anyhow::{Context, Result};
use quorum_postgres::load::load_sqlite;

use crate::cli::load_selection::{load_each, selected_databases};

#[derive(clap::Args, Debug)]
pub struct PgLoadArgs {
    /// The server, as an admin that may create schemas (libpq URL or key/value string).
    #[arg(long, env = "QUORUM_PG_LOAD_URL")]
    pub url: String,
    /// Spider-format data directory (`database/`, the question files, `slices.json`).
    #[arg(long, env = "QUORUM_SPIDER_DIR", default_value = quorum_server::config::shipped::DEFAULT_SPIDER_DIR)]
    pub data: PathBuf,
    /// The databases of this slice's questions (of dev.json).
    #[arg(long)]
    pub slice: Option<String>,
    /// These database ids (besides the slice's).
    #[arg(long = "db")]
    pub dbs: Vec<String>,
    /// Grant read access on each schema to this role (the role the server connects as).
    #[arg(long)]
    pub grant_to: Option<String>,
}

pub fn pg_load(args: PgLoadArgs) -> Result<()> {
    let selected = selected_databases(&args.data, args.slice.as_deref(), &args.dbs)?;
    let mut client = quorum_postgres::connect_client(&args.url)?;
    load_each(&selected, "PostgreSQL", |id, path| {
        let report = load_sqlite(&mut client, path, id)?;
        if let Some(role) = &args.grant_to {
            client
                .batch_execute(&format!(
                    "GRANT USAGE ON SCHEMA \"{id}\" TO \"{role}\"; \
                     GRANT SELECT ON ALL TABLES IN SCHEMA \"{id}\" TO \"{role}\""
                ))
                .with_context(|| format!("granting {id} to {role}"))?;
        }
        Ok(report)
    })
}
