//! Models stored in Hugging Face hub repositories, kept in the standard hub cache.
//!
//! The cache layout is the one every hub client shares: `models--{org}--{name}/refs/{revision}`
//! holds the commit whose files sit in `snapshots/{commit}/` (links into `blobs/`). The `hf-hub`
//! crate reads and writes that layout, so a cache filled by the Python `huggingface_hub` client,
//! by `scripts/fetch-models.sh` or by [`download_hub_model`] serves the others.
//!
//! Resolution ([`resolve_hub_model`]) is offline: it only looks at the cache. Downloading
//! ([`download_hub_model`]) is a separate call that the caller makes only when the user asked
//! for it; it fetches the files the loaders read and nothing else.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use hf_hub::api::sync::{ApiBuilder, ApiRepo};
use hf_hub::{Cache, CacheRepo, Repo, RepoType};

use crate::error::{WeightsError, WeightsResult};
use crate::hf_dir::safetensors_shards;

/// The public hub, where downloads come from unless the caller names another endpoint.
pub const DEFAULT_HUB_ENDPOINT: &str = "https://huggingface.co";

const CONFIG: &str = "config.json";
const TOKENIZER: &str = "tokenizer.json";
const SINGLE_WEIGHTS: &str = "model.safetensors";
const WEIGHTS_INDEX: &str = "model.safetensors.index.json";
/// Read by the loader when present; a repository without them still loads.
const OPTIONAL_FILES: &[&str] = &["tokenizer_config.json", "generation_config.json"];

/// The cache root (e.g. `~/.cache/huggingface/hub`). The caller decides where it is (libraries do
/// not read the environment); see `quorum-server` for the HF_HUB_CACHE / HF_HOME rules.
#[derive(Debug, Clone)]
pub struct HubCache {
    pub root: PathBuf,
}

impl HubCache {
    fn repo(&self, model: &HubModel) -> CacheRepo {
        Cache::new(self.root.clone()).repo(model.repo())
    }
}

/// A model in a hub repository: a Hugging Face model directory (config.json, tokenizer.json,
/// safetensors), or one file of the repository (a GGUF file) when `file` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubModel {
    /// `org/name`.
    pub repo_id: String,
    /// Branch, tag or commit; `main` when unset.
    pub revision: Option<String>,
    /// The one file to load, relative to the repository root.
    pub file: Option<String>,
}

impl HubModel {
    /// The model directory at the head of `main`.
    pub fn new(repo_id: impl Into<String>) -> Self {
        Self {
            repo_id: repo_id.into(),
            revision: None,
            file: None,
        }
    }

    /// Reads `org/name` (a model directory) or `org/name:file` (one file of the repository,
    /// e.g. `Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`).
    /// `None` when `spec` is not of that form: the organization and the name are made of ASCII
    /// letters, digits, `-`, `_` and `.` and do not start with `.`; the file is a relative path
    /// inside the repository.
    pub fn parse(spec: &str) -> Option<Self> {
        let (repo_id, file) = match spec.split_once(':') {
            Some((repo_id, file)) => (repo_id, Some(file)),
            None => (spec, None),
        };
        let (org, name) = repo_id.split_once('/')?;
        let valid_part = |part: &str| {
            !part.is_empty()
                && !part.starts_with('.')
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        if !valid_part(org) || !valid_part(name) {
            return None;
        }
        if let Some(file) = file
            && !is_repo_relative(file)
        {
            return None;
        }
        Some(Self {
            repo_id: repo_id.to_owned(),
            revision: None,
            file: file.map(str::to_owned),
        })
    }

    fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or("main")
    }

    fn repo(&self) -> Repo {
        Repo::with_revision(
            self.repo_id.clone(),
            RepoType::Model,
            self.revision().to_owned(),
        )
    }
}

impl fmt::Display for HubModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repo_id)?;
        if let Some(file) = &self.file {
            write!(f, ":{file}")?;
        }
        Ok(())
    }
}

/// A path inside a repository: relative, with plain components only (no `..`, no root).
fn is_repo_relative(file: &str) -> bool {
    !file.is_empty()
        && Path::new(file)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// Where and how [`download_hub_model`] downloads.
#[derive(Clone)]
pub struct HubDownload {
    /// Base URL of the hub ([`DEFAULT_HUB_ENDPOINT`], or a mirror).
    pub endpoint: String,
    /// Sent as a bearer token (gated and private repositories). `None`: the token file that the
    /// hub's login command writes beside the cache (`<cache>/../token`), when there is one.
    pub token: Option<String>,
    /// Draw a progress bar per file on stderr (hidden when stderr is not a terminal).
    pub progress: bool,
}

impl HubDownload {
    /// Downloads from `endpoint`, with no token of its own and no progress bars.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            token: None,
            progress: false,
        }
    }
}

// By hand, so that the token never reaches a log line.
impl fmt::Debug for HubDownload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HubDownload")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("progress", &self.progress)
            .finish()
    }
}

/// Returns the snapshot directory of `repo_id` at `revision` (default `main`), offline; see
/// [`resolve_hub_model`].
pub fn resolve_hub_snapshot(
    cache: &HubCache,
    repo_id: &str,
    revision: Option<&str>,
) -> WeightsResult<PathBuf> {
    let model = HubModel {
        repo_id: repo_id.to_owned(),
        revision: revision.map(str::to_owned),
        file: None,
    };
    resolve_hub_model(cache, &model)
}

/// Finds `model` in the cache without any network access: the file itself when the model names
/// one, else the snapshot directory, which must hold everything the directory loader needs
/// (config.json, tokenizer.json, and model.safetensors or the index and all its shards).
/// Anything missing is [`WeightsError::NotInHubCache`], naming the first missing file.
pub fn resolve_hub_model(cache: &HubCache, model: &HubModel) -> WeightsResult<PathBuf> {
    let repo = cache.repo(model);
    let missing = |file: &str| WeightsError::NotInHubCache {
        repo_id: model.repo_id.clone(),
        cache: cache.root.clone(),
        missing: file.to_owned(),
    };
    if let Some(file) = &model.file {
        return repo.get(file).ok_or_else(|| missing(file));
    }
    let config = repo.get(CONFIG).ok_or_else(|| missing(CONFIG))?;
    repo.get(TOKENIZER).ok_or_else(|| missing(TOKENIZER))?;
    match repo.get(WEIGHTS_INDEX) {
        Some(index) => {
            for shard in safetensors_shards(&index)? {
                repo.get(&shard).ok_or_else(|| missing(&shard))?;
            }
        }
        None => {
            repo.get(SINGLE_WEIGHTS)
                .ok_or_else(|| missing(SINGLE_WEIGHTS))?;
        }
    }
    config
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| missing(CONFIG))
}

/// Downloads what `model` needs from the hub into the cache, then resolves it as
/// [`resolve_hub_model`] does. Files already in the cache at the repository's current commit
/// are not downloaded again.
///
/// For a model directory the repository's file list decides what is fetched: config.json and
/// tokenizer.json (required), tokenizer_config.json and generation_config.json (when present),
/// and model.safetensors or model.safetensors.index.json with every shard it names. Nothing
/// else (other weight formats, READMEs) is fetched. For a model that names a file, only that
/// file is fetched.
pub fn download_hub_model(
    cache: &HubCache,
    model: &HubModel,
    source: &HubDownload,
) -> WeightsResult<PathBuf> {
    let fail = |detail: String| WeightsError::HubDownload {
        repo_id: model.repo_id.clone(),
        endpoint: source.endpoint.clone(),
        detail,
    };
    let mut builder = ApiBuilder::from_cache(Cache::new(cache.root.clone()))
        .with_endpoint(source.endpoint.trim_end_matches('/').to_owned())
        .with_progress(source.progress)
        .with_user_agent("quorum", env!("CARGO_PKG_VERSION"));
    if let Some(token) = &source.token {
        builder = builder.with_token(Some(token.clone()));
    }
    let api = builder
        .build()
        .map_err(|e| fail(format!("starting the HTTP client: {e}")))?;
    let remote = api.repo(model.repo());
    match &model.file {
        Some(file) => {
            tracing::info!(repo = %model.repo_id, file, endpoint = %source.endpoint, "downloading");
            remote
                .get(file)
                .map_err(|e| fail(request_failed(&remote, file, &e)))?;
        }
        None => download_directory(cache, model, &remote, &fail)?,
    }
    resolve_hub_model(cache, model).map_err(|e| match e {
        WeightsError::NotInHubCache { missing, .. } => fail(format!(
            "{missing} is not in the snapshot `refs/{}` names after the download (did the \
             repository change meanwhile? a second run completes it)",
            model.revision()
        )),
        other => other,
    })
}

fn download_directory(
    cache: &HubCache,
    model: &HubModel,
    remote: &ApiRepo,
    fail: &dyn Fn(String) -> WeightsError,
) -> WeightsResult<()> {
    let info = remote
        .info()
        .map_err(|e| fail(format!("listing the repository's files: {e}")))?;
    let listed: BTreeSet<&str> = info.siblings.iter().map(|s| s.rfilename.as_str()).collect();
    let no_directory = |file: &str| {
        let gguf: Vec<&str> = listed
            .iter()
            .copied()
            .filter(|f| f.ends_with(".gguf"))
            .collect();
        let hint = if gguf.is_empty() {
            String::new()
        } else {
            format!(
                "; to load one of its GGUF files, name it as `{}:FILE` ({})",
                model.repo_id,
                gguf.join(", ")
            )
        };
        fail(format!(
            "the repository has no {file}, so it is not a model directory Quorum loads{hint}"
        ))
    };
    for required in [CONFIG, TOKENIZER] {
        if !listed.contains(required) {
            return Err(no_directory(required));
        }
    }
    // Files already in this commit's snapshot (an earlier, interrupted download) are kept.
    let snapshot = cache.repo(model).pointer_path(&info.sha);
    let fetch = |file: &str| -> WeightsResult<PathBuf> {
        let local = snapshot.join(file);
        if local.exists() {
            return Ok(local);
        }
        tracing::info!(repo = %model.repo_id, file, commit = %info.sha, "downloading");
        remote
            .download(file)
            .map_err(|e| fail(request_failed(remote, file, &e)))
    };
    let mut files: Vec<String> = [CONFIG, TOKENIZER]
        .into_iter()
        .chain(
            OPTIONAL_FILES
                .iter()
                .copied()
                .filter(|f| listed.contains(f)),
        )
        .map(str::to_owned)
        .collect();
    if listed.contains(WEIGHTS_INDEX) {
        let index = fetch(WEIGHTS_INDEX)?;
        for shard in safetensors_shards(&index)? {
            if !is_repo_relative(&shard) {
                return Err(fail(format!(
                    "{WEIGHTS_INDEX} names the shard `{shard}`, which is not a file inside the \
                     repository"
                )));
            }
            files.push(shard);
        }
    } else if listed.contains(SINGLE_WEIGHTS) {
        files.push(SINGLE_WEIGHTS.to_owned());
    } else {
        return Err(no_directory(&format!(
            "{SINGLE_WEIGHTS} nor {WEIGHTS_INDEX}"
        )));
    }
    for file in &files {
        fetch(file)?;
    }
    // Point the revision at the commit whose files are now complete, also when every file was
    // already there and nothing was downloaded.
    cache
        .repo(model)
        .create_ref(&info.sha)
        .map_err(|source| WeightsError::Io {
            path: cache.root.clone(),
            source,
        })
}

fn request_failed(remote: &ApiRepo, file: &str, e: &hf_hub::api::sync::ApiError) -> String {
    format!("{file} ({}): {e}", remote.url(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot laid out the way hub clients write it: `refs/main` holds the commit (no
    /// newline), the files sit in `snapshots/{commit}/`.
    fn write_snapshot(root: &Path, repo_id: &str, commit: &str, files: &[&str]) -> PathBuf {
        let repo = root.join(format!("models--{}", repo_id.replace('/', "--")));
        let snapshot = repo.join("snapshots").join(commit);
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::create_dir_all(&snapshot).unwrap();
        std::fs::write(repo.join("refs/main"), commit).unwrap();
        for file in files {
            let body = if *file == WEIGHTS_INDEX {
                r#"{"weight_map": {"a": "model-00001-of-00002.safetensors",
                    "b": "model-00002-of-00002.safetensors"}}"#
            } else {
                "{}"
            };
            std::fs::write(snapshot.join(file), body).unwrap();
        }
        snapshot
    }

    #[test]
    fn resolves_ref_to_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        write_snapshot(
            dir.path(),
            "org/m",
            "abc123",
            &[CONFIG, TOKENIZER, SINGLE_WEIGHTS],
        );
        let cache = HubCache {
            root: dir.path().to_path_buf(),
        };
        let snap = resolve_hub_snapshot(&cache, "org/m", None).unwrap();
        assert!(snap.ends_with("models--org--m/snapshots/abc123"));
        let err = resolve_hub_snapshot(&cache, "org/other", None).unwrap_err();
        assert_eq!(err.kind(), "not_in_hub_cache");
        assert!(err.to_string().contains("org/other"), "{err}");
    }

    #[test]
    fn an_incomplete_snapshot_names_the_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let cache = HubCache {
            root: dir.path().to_path_buf(),
        };
        write_snapshot(dir.path(), "org/no-weights", "c1", &[CONFIG, TOKENIZER]);
        let err = resolve_hub_snapshot(&cache, "org/no-weights", None).unwrap_err();
        assert!(
            matches!(&err, WeightsError::NotInHubCache { missing, .. } if missing == SINGLE_WEIGHTS),
            "{err}"
        );
        // Sharded: the index is there, one of its two shards is not.
        write_snapshot(
            dir.path(),
            "org/sharded",
            "c2",
            &[
                CONFIG,
                TOKENIZER,
                WEIGHTS_INDEX,
                "model-00001-of-00002.safetensors",
            ],
        );
        let err = resolve_hub_snapshot(&cache, "org/sharded", None).unwrap_err();
        assert!(
            matches!(&err, WeightsError::NotInHubCache { missing, .. }
                if missing == "model-00002-of-00002.safetensors"),
            "{err}"
        );
        let snapshot = dir.path().join("models--org--sharded/snapshots/c2");
        std::fs::write(snapshot.join("model-00002-of-00002.safetensors"), "x").unwrap();
        assert_eq!(
            resolve_hub_snapshot(&cache, "org/sharded", None).unwrap(),
            snapshot
        );
    }

    #[test]
    fn a_named_file_resolves_to_that_file() {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = write_snapshot(dir.path(), "org/m-GGUF", "c3", &["m-q8_0.gguf"]);
        let cache = HubCache {
            root: dir.path().to_path_buf(),
        };
        let model = HubModel::parse("org/m-GGUF:m-q8_0.gguf").unwrap();
        assert_eq!(
            resolve_hub_model(&cache, &model).unwrap(),
            snapshot.join("m-q8_0.gguf")
        );
        let other = HubModel::parse("org/m-GGUF:m-q4_0.gguf").unwrap();
        let err = resolve_hub_model(&cache, &other).unwrap_err();
        assert!(
            matches!(&err, WeightsError::NotInHubCache { missing, .. } if missing == "m-q4_0.gguf"),
            "{err}"
        );
    }

    #[test]
    fn parses_hub_model_names() {
        let m = HubModel::parse("Qwen/Qwen2.5-Coder-0.5B-Instruct").unwrap();
        assert_eq!(m, HubModel::new("Qwen/Qwen2.5-Coder-0.5B-Instruct"));
        let m = HubModel::parse("org/m-GGUF:sub/m.gguf").unwrap();
        assert_eq!(m.repo_id, "org/m-GGUF");
        assert_eq!(m.file.as_deref(), Some("sub/m.gguf"));
        assert_eq!(m.to_string(), "org/m-GGUF:sub/m.gguf");
        for bad in [
            "name-only",
            "/abs/path",
            "./rel/path",
            "org/",
            "/name",
            "a/b/c",
            "org/.hidden",
            "org/na me",
            "org/m:",
            "org/m:../escape.gguf",
            "org/m:/etc/passwd",
        ] {
            assert_eq!(HubModel::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_download_settings_hide_the_token() {
        let mut source = HubDownload::new(DEFAULT_HUB_ENDPOINT);
        source.token = Some("hf_secret".into());
        let shown = format!("{source:?}");
        assert!(!shown.contains("hf_secret"), "{shown}");
        assert!(shown.contains("<set>"), "{shown}");
    }
}
