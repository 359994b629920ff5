//! The tokens file: several tokens, each stored as the SHA-256 of its secret (never the secret
//! itself), with a name, the databases it reaches, its rights and its quotas. The server polls
//! the file and swaps in a changed one without a restart, so a token is revoked by deleting its
//! entry. A file that no longer parses keeps the last good set in force (a typo does not open
//! the server nor lock everyone out) and says so in the log and the metrics.
//!
//! ```toml
//! [[token]]
//! name = "analytics"
//! sha256 = "<64 hex digits: `quorum token new` prints the entry>"
//! databases = ["sales", "hr_*"]
//! rights = ["ask"]
//! max_concurrent_runs = 2
//! requests_per_minute = 120
//! ```
//!
//! Polling rather than file-system events: a Kubernetes Secret mounted as a volume changes by
//! swapping a symlink two directories up, which inotify watches on the file itself miss.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::grant::Grant;
use super::quota::{QuotaLimits, QuotaState};
use super::right::{Right, Rights};
use super::scope::DatabaseScope;

/// How often the file is read for changes: a revoked token stops working within this.
pub const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// One token of the file.
#[derive(Debug)]
pub struct Token {
    pub name: Arc<str>,
    digest: [u8; 32],
    pub grant: Arc<Grant>,
}

/// The tokens in force.
#[derive(Debug, Default)]
pub struct TokenSet {
    tokens: Vec<Token>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    token: Vec<RawToken>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    name: String,
    sha256: String,
    databases: Vec<String>,
    rights: Vec<Right>,
    max_concurrent_runs: Option<u32>,
    requests_per_minute: Option<u32>,
}

/// The SHA-256 of a secret, as the file stores it.
pub fn digest_of(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_digest(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl TokenSet {
    /// Parses a file's text; `usage` carries each name's quota state over from the set before.
    pub fn parse(text: &str, before: Option<&TokenSet>) -> anyhow::Result<Self> {
        let raw: RawFile = toml::from_str(text)?;
        let mut tokens: Vec<Token> = Vec::new();
        for t in raw.token {
            let name = t.name.trim();
            ensure!(
                !name.is_empty()
                    && name.len() <= 64
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')),
                "token name `{}`: 1 to 64 letters, digits, `_`, `-` or `.`",
                t.name
            );
            let Some(digest) = parse_digest(&t.sha256.to_ascii_lowercase()) else {
                bail!(
                    "token `{name}`: sha256 must be the 64 hex digits of the secret's SHA-256 \
                     (`quorum token new` writes it), not the secret"
                );
            };
            ensure!(
                !t.rights.is_empty(),
                "token `{name}` has no rights (ask, register, adapters, admin)"
            );
            let scope = DatabaseScope::parse(&t.databases)
                .map_err(|e| anyhow::anyhow!("token `{name}`: databases {e}"))?;
            for other in &tokens {
                ensure!(&*other.name != name, "two tokens are named `{name}`");
                ensure!(
                    !bool::from(other.digest[..].ct_eq(&digest[..])),
                    "tokens `{}` and `{name}` have the same secret",
                    other.name
                );
            }
            for (field, value) in [
                ("max_concurrent_runs", t.max_concurrent_runs),
                ("requests_per_minute", t.requests_per_minute),
            ] {
                ensure!(
                    value != Some(0),
                    "token `{name}`: {field} must be at least 1 (leave it out for no limit)"
                );
            }
            let usage = before
                .and_then(|b| b.tokens.iter().find(|o| &*o.name == name))
                .map_or_else(Arc::<QuotaState>::default, |o| o.grant.usage.clone());
            tokens.push(Token {
                name: Arc::from(name),
                digest,
                grant: Arc::new(Grant {
                    scope,
                    rights: Rights::new(t.rights),
                    limits: QuotaLimits {
                        max_concurrent_runs: t.max_concurrent_runs,
                        requests_per_minute: t.requests_per_minute,
                    },
                    usage,
                }),
            });
        }
        Ok(Self { tokens })
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The token whose secret is `presented`. Every entry is compared, in constant time each,
    /// so the time taken says nothing about which entry, if any, came close.
    pub fn find(&self, presented: &str) -> Option<&Token> {
        let digest = digest_of(presented);
        let mut found = None;
        for token in &self.tokens {
            if bool::from(token.digest[..].ct_eq(&digest[..])) {
                found = Some(token);
            }
        }
        found
    }
}

/// The file and the set read from it last.
#[derive(Debug)]
pub struct TokensFile {
    path: PathBuf,
    current: RwLock<Arc<TokenSet>>,
    last_text: RwLock<String>,
    /// Reads that failed since start-up (a metric).
    pub failed_reloads: AtomicU64,
}

impl TokensFile {
    /// Reads the file at start-up, where a broken file is an error.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the tokens file {}", path.display()))?;
        let set = TokenSet::parse(&text, None)
            .with_context(|| format!("the tokens file {}", path.display()))?;
        ensure!(
            !set.is_empty(),
            "the tokens file {} lists no token ([[token]] entries)",
            path.display()
        );
        Ok(Self {
            path: path.to_owned(),
            current: RwLock::new(Arc::new(set)),
            last_text: RwLock::new(text),
            failed_reloads: AtomicU64::new(0),
        })
    }

    pub fn current(&self) -> Arc<TokenSet> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Reads the file again and swaps in what changed. Returns whether the set changed.
    pub fn reload(&self) -> bool {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) => {
                self.failed_reloads.fetch_add(1, Ordering::Relaxed);
                tracing::error!(path = %self.path.display(), error = %e, "the tokens file cannot be read; the tokens read before stay in force");
                return false;
            }
        };
        if *self
            .last_text
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            == text
        {
            return false;
        }
        let before = self.current();
        match TokenSet::parse(&text, Some(&before)) {
            Ok(set) => {
                let names: Vec<String> = set.tokens.iter().map(|t| t.name.to_string()).collect();
                tracing::info!(path = %self.path.display(), tokens = ?names, "tokens file reloaded");
                *self
                    .current
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(set);
                *self
                    .last_text
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = text;
                true
            }
            Err(e) => {
                self.failed_reloads.fetch_add(1, Ordering::Relaxed);
                tracing::error!(path = %self.path.display(), error = format!("{e:#}"), "the tokens file does not parse; the tokens read before stay in force");
                // Not remembered: the same broken text is reported again on the next poll.
                false
            }
        }
    }

    /// Polls the file until `stop` is cancelled.
    pub async fn watch(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(RELOAD_EVERY) => {}
                _ = stop.cancelled() => return,
            }
            let file = self.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || file.reload()).await {
                tracing::error!(error = %e, "reading the tokens file panicked; the tokens read before stay in force");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, secret: &str, rest: &str) -> String {
        format!(
            "[[token]]\nname = \"{name}\"\nsha256 = \"{}\"\n{rest}\n",
            hex(&digest_of(secret))
        )
    }

    #[test]
    fn finds_a_token_by_its_secret_and_only_by_it() {
        let text = entry(
            "a",
            "secret-a",
            "databases = [\"sales\"]\nrights = [\"ask\"]",
        ) + &entry(
            "b",
            "secret-b",
            "databases = [\"*\"]\nrights = [\"admin\"]\nmax_concurrent_runs = 2",
        );
        let set = TokenSet::parse(&text, None).expect("parses");
        assert_eq!(set.len(), 2);
        let a = set.find("secret-a").expect("a");
        assert_eq!(&*a.name, "a");
        assert!(a.grant.scope.allows("sales"));
        assert!(!a.grant.scope.allows("hr"));
        assert_eq!(&*set.find("secret-b").expect("b").name, "b");
        assert!(set.find("secret-c").is_none());
        assert!(set.find("").is_none());
        // The digest itself is not a secret that works.
        assert!(set.find(&hex(&digest_of("secret-a"))).is_none());
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let ok_rest = "databases = [\"*\"]\nrights = [\"ask\"]";
        for (text, says) in [
            ("[[token]]\nname = \"a\"\nsha256 = \"s3cret\"\ndatabases = [\"*\"]\nrights = [\"ask\"]\n".to_owned(), "64 hex digits"),
            (entry("a", "x", "databases = [\"*\"]\nrights = []"), "no rights"),
            (entry("a", "x", "databases = []\nrights = [\"ask\"]"), "lists no databases"),
            (entry("a", "x", "databases = [\"../etc\"]\nrights = [\"ask\"]"), "not a database id"),
            (entry("a", "x", "databases = [\"*\"]\nrights = [\"root\"]"), "unknown variant"),
            (entry("a", "x", ok_rest) + &entry("a", "y", ok_rest), "two tokens are named"),
            (entry("a", "x", ok_rest) + &entry("b", "x", ok_rest), "same secret"),
            (entry("a b", "x", ok_rest), "token name"),
            (entry("a", "x", &format!("{ok_rest}\nrequests_per_minute = 0")), "at least 1"),
            (entry("a", "x", &format!("{ok_rest}\nsuperuser = true")), "unknown field"),
        ] {
            let err = format!("{:#}", TokenSet::parse(&text, None).expect_err(&text));
            assert!(err.contains(says), "{err} (wanted: {says})");
        }
    }

    #[test]
    fn a_reload_revokes_keeps_usage_and_survives_a_broken_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.toml");
        let rest = "databases = [\"*\"]\nrights = [\"ask\"]\nmax_concurrent_runs = 1";
        std::fs::write(&path, entry("a", "sa", rest) + &entry("b", "sb", rest)).expect("write");
        let file = TokensFile::open(&path).expect("opens");
        let slot = {
            let set = file.current();
            let a = set.find("sa").expect("a");
            a.grant.usage.start_run("a", a.grant.limits).expect("slot")
        };
        assert!(!file.reload(), "unchanged");
        std::fs::write(&path, entry("a", "sa", rest)).expect("write");
        assert!(file.reload());
        let set = file.current();
        assert!(set.find("sb").is_none(), "b is revoked");
        let a = set.find("sa").expect("a stays");
        assert!(
            a.grant.usage.start_run("a", a.grant.limits).is_err(),
            "a's run carried over"
        );
        drop(slot);
        std::fs::write(&path, "[[token]\nbroken").expect("write");
        assert!(!file.reload());
        assert_eq!(file.failed_reloads.load(Ordering::Relaxed), 1);
        assert!(
            file.current().find("sa").is_some(),
            "the last good set stays"
        );
        std::fs::write(&path, "").expect("write");
        assert!(
            TokensFile::open(&path).is_err(),
            "an empty file does not start a server"
        );
    }
}
