//! `quorum token new`: makes a secret and prints the tokens-file entry that stores its hash.
//! The secret is shown once, on stderr, so that redirecting stdout into the file keeps it out.

use anyhow::{Result, ensure};
use base64::Engine;
use quorum_server::auth::right::Right;
use quorum_server::auth::scope::DatabaseScope;
use quorum_server::auth::tokens_file::{digest_of, hex};
use rand::RngCore;

#[derive(clap::Args, Debug)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum TokenCommand {
    /// Makes a new secret: the secret to stderr, its `[[token]]` entry to stdout.
    New {
        /// The token's name, as the audit trail shows it.
        #[arg(long)]
        name: String,
        /// Databases it reaches: ids or patterns (`*`, `?`), comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "*")]
        databases: Vec<String>,
        /// Its rights, comma-separated: ask, register, adapters, admin.
        #[arg(long, value_delimiter = ',', default_value = "ask")]
        rights: Vec<String>,
        /// Text-to-SQL runs it may have going at once.
        #[arg(long)]
        max_concurrent_runs: Option<u32>,
        /// Requests it may send a minute.
        #[arg(long)]
        requests_per_minute: Option<u32>,
    },
}

pub fn token(args: TokenArgs) -> Result<()> {
    let TokenCommand::New {
        name,
        databases,
        rights,
        max_concurrent_runs,
        requests_per_minute,
    } = args.command;
    DatabaseScope::parse(&databases).map_err(|e| anyhow::anyhow!("--databases {e}"))?;
    for r in &rights {
        ensure!(
            toml::Value::String(r.clone()).try_into::<Right>().is_ok(),
            "--rights: `{r}` is not one of ask, register, adapters, admin"
        );
    }
    // 32 random bytes: a guess is hopeless, so one unsalted SHA-256 suffices to store it.
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = format!(
        "qrm_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let quoted = |v: &[String]| {
        v.iter()
            .map(|x| format!("\"{x}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut entry = format!(
        "[[token]]\nname = \"{name}\"\nsha256 = \"{}\"\ndatabases = [{}]\nrights = [{}]\n",
        hex(&digest_of(&secret)),
        quoted(&databases),
        quoted(&rights)
    );
    if let Some(n) = max_concurrent_runs {
        entry.push_str(&format!("max_concurrent_runs = {n}\n"));
    }
    if let Some(n) = requests_per_minute {
        entry.push_str(&format!("requests_per_minute = {n}\n"));
    }
    // Checked as the server will read it.
    quorum_server::auth::tokens_file::TokenSet::parse(&entry, None)?;
    eprintln!(
        "secret for `{name}` (shown once; clients send `authorization: Bearer <secret>`):\n{secret}"
    );
    print!("{entry}");
    Ok(())
}
