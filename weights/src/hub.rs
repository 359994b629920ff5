//! Resolves a hub repository id (`Qwen/Qwen2.5-Coder-0.5B-Instruct`) to a snapshot directory in
//! the standard Hugging Face hub cache, offline: `models--{org}--{name}/refs/{revision}` names the
//! commit whose files sit in `snapshots/{commit}/`.

use std::path::{Path, PathBuf};

use crate::error::{WeightsError, WeightsResult};

/// The cache root (e.g. `~/.cache/huggingface/hub`). The caller decides where it is (libraries do
/// not read the environment); see `quorum-server` for the HF_HUB_CACHE / HF_HOME rules.
#[derive(Debug, Clone)]
pub struct HubCache {
    pub root: PathBuf,
}

/// Returns the snapshot directory of `repo_id` at `revision` (default `main`).
pub fn resolve_hub_snapshot(
    cache: &HubCache,
    repo_id: &str,
    revision: Option<&str>,
) -> WeightsResult<PathBuf> {
    let not_found = || WeightsError::NotInHubCache {
        repo_id: repo_id.to_string(),
        cache: cache.root.clone(),
    };
    let repo_dir = cache
        .root
        .join(format!("models--{}", repo_id.replace('/', "--")));
    if !repo_dir.is_dir() {
        return Err(not_found());
    }
    let revision = revision.unwrap_or("main");
    let commit = read_ref(&repo_dir, revision).unwrap_or_else(|| revision.to_string());
    let snapshot = repo_dir.join("snapshots").join(commit);
    if snapshot.is_dir() {
        Ok(snapshot)
    } else {
        Err(not_found())
    }
}

fn read_ref(repo_dir: &Path, revision: &str) -> Option<String> {
    let text = std::fs::read_to_string(repo_dir.join("refs").join(revision)).ok()?;
    Some(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_ref_to_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("models--org--m");
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::create_dir_all(repo.join("snapshots/abc123")).unwrap();
        std::fs::write(repo.join("refs/main"), "abc123\n").unwrap();
        let cache = HubCache {
            root: dir.path().to_path_buf(),
        };
        let snap = resolve_hub_snapshot(&cache, "org/m", None).unwrap();
        assert!(snap.ends_with("snapshots/abc123"));
        let err = resolve_hub_snapshot(&cache, "org/other", None).unwrap_err();
        assert_eq!(err.kind(), "not_in_hub_cache");
    }
}
