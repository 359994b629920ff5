//! `quorum mysql-load`: copies Spider-format SQLite databases into a MySQL or MariaDB server,
//! one database per id, so that `quorum eval --mysql` can ask the same questions of both.

use std::path::PathBuf;

use anyhow::{Context, Result};
use mysql::prelude::Queryable;
use quorum_mysql::load::load_sqlite;

use crate::cli::load_selection::{load_each, selected_databases};

#[derive(clap::Args, Debug)]
pub struct MySqlLoadArgs {
    /// The server, as an admin that may create databases (`mysql://user:password@host:port`).
    #[arg(long, env = "QUORUM_MYSQL_LOAD_URL")]
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
    /// Grant `SELECT` on each database to this user (`'name'@'host'`, the server's user).
    #[arg(long)]
    pub grant_to: Option<String>,
}

pub fn mysql_load(args: MySqlLoadArgs) -> Result<()> {
    let selected = selected_databases(&args.data, args.slice.as_deref(), &args.dbs)?;
    let mut conn = quorum_mysql::connect_admin(&args.url)?;
    load_each(&selected, "MySQL", |id, path| {
        let report = load_sqlite(&mut conn, path, id)?;
        if let Some(user) = &args.grant_to {
            conn.query_drop(format!("GRANT SELECT ON `{id}`.* TO {user}"))
                .with_context(|| format!("granting {id} to {user}"))?;
        }
        Ok(report)
    })
}
