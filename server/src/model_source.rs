//! Resolves what a user names as a model (`--model`, a config's `source`): a path, a short name
//! of a default model, or a hub repository id (`org/name` for a model directory, `org/name:FILE`
//! for one file of a repository, such as a GGUF file).
//!
//! Hub ids are looked up in the standard Hugging Face hub cache, offline: without `--download`
//! nothing here touches the network, and a model missing from the cache is an error that says
//! how to get it (`scripts/fetch-models.sh` puts the default models in place). With
//! `--download` ([`ModelDirs::hub_download`] set), a hub model missing from the cache is
//! downloaded into it first, from `HF_ENDPOINT` (default `https://huggingface.co`) with
//! `HF_TOKEN` when set; see `quorum_weights::download_hub_model` for which files are fetched.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use quorum_weights::{
    DEFAULT_HUB_ENDPOINT, HubCache, HubDownload, HubModel, WeightsError, download_hub_model,
    resolve_hub_model,
};

/// The default models: short name, hub id, file or directory name in the models directory.
const CATALOG: &[(&str, &str, &str)] = &[
    (
        "qwen2.5-coder-0.5b",
        "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    ),
    (
        "qwen2.5-coder-1.5b",
        "Qwen/Qwen2.5-Coder-1.5B-Instruct",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    ),
    (
        "smollm2-135m",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "smollm2-135m-instruct-q4_1.gguf",
    ),
    (
        "all-minilm-l6-v2",
        "sentence-transformers/all-MiniLM-L6-v2",
        "all-minilm-l6-v2",
    ),
];

/// Where models are looked up; built from the environment by the binary only.
#[derive(Debug, Clone)]
pub struct ModelDirs {
    pub models_dir: PathBuf,
    pub hub_cache: HubCache,
    /// The LoRA adapters shipped with Quorum: the first of [`ModelDirs::adapters_searched`] that
    /// exists (the last one when none does, so that errors name a real candidate).
    pub adapters_dir: PathBuf,
    /// Every directory the shipped adapters were looked for in, in order, for error messages.
    pub adapters_searched: Vec<PathBuf>,
    /// Where hub models missing from the cache are downloaded from. `None` (the default): model
    /// resolution is offline and never makes a network request.
    pub hub_download: Option<HubDownload>,
}

/// The checkout this binary was built from: `cargo run` and `cargo install --path server` find
/// the shipped adapters there, whatever the working directory.
const BUILD_CHECKOUT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Where the shipped adapters are looked for, in order: the directory named by `--adapters-dir`
/// or `QUORUM_ADAPTERS_DIR` alone when one is; else `$QUORUM_HOME/adapters`, then
/// `share/quorum/adapters` beside the binary's directory (`scripts/install.sh` and the images
/// put them there), then the checkout the binary was built from.
pub fn adapter_candidates(
    explicit: Option<PathBuf>,
    quorum_home: Option<PathBuf>,
    executable: Option<PathBuf>,
) -> Vec<PathBuf> {
    if let Some(dir) = explicit {
        return vec![absolute(&dir)];
    }
    let mut out = Vec::new();
    if let Some(home) = quorum_home {
        out.push(absolute(&home.join("adapters")));
    }
    if let Some(bin_dir) = executable.as_deref().and_then(Path::parent)
        && let Some(prefix) = bin_dir.parent()
    {
        out.push(prefix.join("share/quorum/adapters"));
    }
    out.push(absolute(&Path::new(BUILD_CHECKOUT).join("adapters")));
    out
}

/// A path made absolute against the working directory, its directory cleaned of `..` where the
/// file system allows, so that logs and errors say exactly which file was meant. The last
/// component is kept as named, never followed: a hub cache's `model.gguf` is a link to a blob
/// without an extension, and the loader tells formats apart by the name.
pub fn absolute(path: &Path) -> PathBuf {
    let lexical = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (lexical.parent(), lexical.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|dir| dir.join(name))
            .unwrap_or(lexical),
        _ => lexical,
    }
}

/// The download settings `--download` turns on: `HF_ENDPOINT` (default `https://huggingface.co`)
/// and `HF_TOKEN` when set, with progress bars on stderr. Read by the binary only.
pub fn hub_download_from_env() -> HubDownload {
    let endpoint = std::env::var("HF_ENDPOINT")
        .ok()
        .map(|e| e.trim().to_owned())
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| DEFAULT_HUB_ENDPOINT.to_owned());
    let mut download = HubDownload::new(endpoint);
    download.token = std::env::var("HF_TOKEN")
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty());
    download.progress = true;
    download
}

impl ModelDirs {
    /// `QUORUM_MODELS_DIR`, else `$XDG_CACHE_HOME/quorum/models` (default `~/.cache`); the hub
    /// cache is `HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`; the
    /// shipped adapters as [`adapter_candidates`] says, with `explicit_adapters` from
    /// `--adapters-dir` (or `QUORUM_ADAPTERS_DIR`) and `QUORUM_HOME`. Downloads are off.
    pub fn from_env(explicit_adapters: Option<PathBuf>) -> Self {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".cache"));
        let models_dir = std::env::var_os("QUORUM_MODELS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| cache.join("quorum/models"));
        let hub_root = std::env::var_os("HF_HUB_CACHE")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HF_HOME").map(|h| PathBuf::from(h).join("hub")))
            .unwrap_or_else(|| cache.join("huggingface/hub"));
        let explicit = explicit_adapters.or_else(|| {
            std::env::var_os("QUORUM_ADAPTERS_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
        });
        let quorum_home = std::env::var_os("QUORUM_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from);
        let executable = std::env::current_exe().ok().map(|e| absolute(&e));
        Self::with_adapter_candidates(
            models_dir,
            HubCache { root: hub_root },
            adapter_candidates(explicit, quorum_home, executable),
        )
    }

    /// Directories with the shipped adapters looked for in `candidates`, in order.
    pub fn with_adapter_candidates(
        models_dir: PathBuf,
        hub_cache: HubCache,
        candidates: Vec<PathBuf>,
    ) -> Self {
        let adapters_dir = candidates
            .iter()
            .find(|d| d.is_dir())
            .or(candidates.last())
            .cloned()
            .unwrap_or_default();
        Self {
            models_dir,
            hub_cache,
            adapters_dir,
            adapters_searched: candidates,
            hub_download: None,
        }
    }

    /// Points the shipped adapters at one directory (tests, and callers that know it).
    pub fn set_adapters_dir(&mut self, dir: PathBuf) {
        self.adapters_dir = absolute(&dir);
        self.adapters_searched = vec![self.adapters_dir.clone()];
    }

    /// Resolves a model name to a file (GGUF) or directory (Hugging Face layout).
    pub fn resolve(&self, name: &str) -> anyhow::Result<PathBuf> {
        let as_path = Path::new(name);
        if as_path.exists() {
            return Ok(as_path.to_path_buf());
        }
        let entry = CATALOG.iter().find(|(short, hub, _)| {
            short.eq_ignore_ascii_case(name) || hub.eq_ignore_ascii_case(name)
        });
        if let Some((_, hub_id, file)) = entry {
            let local = self.models_dir.join(file);
            if local.exists() {
                return Ok(local);
            }
            let model = HubModel::new(*hub_id);
            if let Ok(snapshot) = resolve_hub_model(&self.hub_cache, &model) {
                return Ok(snapshot);
            }
            if let Some(source) = &self.hub_download {
                return download_hub_model(&self.hub_cache, &model, source)
                    .with_context(|| format!("model `{name}`"));
            }
            bail!(
                "model `{name}` is not at {} nor in the hub cache {}; run \
                 scripts/fetch-models.sh, or pass --download to fetch {hub_id} from the hub",
                local.display(),
                self.hub_cache.root.display()
            );
        }
        if let Some(model) = HubModel::parse(name) {
            return self.resolve_hub(name, &model);
        }
        let known: Vec<&str> = CATALOG.iter().map(|(s, _, _)| *s).collect();
        bail!(
            "model `{name}` is not a path, a hub id (org/name, or org/name:FILE for one file), \
             or a known model ({})",
            known.join(", ")
        )
    }

    /// A hub model from the cache; when it is missing there, downloaded first if downloads are
    /// on, else an error that says how to get it.
    fn resolve_hub(&self, name: &str, model: &HubModel) -> anyhow::Result<PathBuf> {
        match resolve_hub_model(&self.hub_cache, model) {
            Ok(path) => Ok(path),
            Err(e @ WeightsError::NotInHubCache { .. }) => match &self.hub_download {
                Some(source) => download_hub_model(&self.hub_cache, model, source)
                    .with_context(|| format!("model `{name}`")),
                None => Err(anyhow::Error::new(e).context(format!(
                    "model `{name}` is not in the hub cache; pass --download to fetch it from \
                     the hub (HF_ENDPOINT), or fill the cache with a hub client \
                     (scripts/fetch-models.sh does for the default models)"
                ))),
            },
            Err(e) => Err(anyhow::Error::new(e).context(format!("model `{name}`"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_keep_a_linked_file_as_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blob = dir.path().join("blob-sha");
        std::fs::write(&blob, b"x").expect("write");
        let sub = dir.path().join("snapshots");
        std::fs::create_dir(&sub).expect("mkdir");
        std::os::unix::fs::symlink(&blob, sub.join("model.gguf")).expect("link");
        let named = absolute(&sub.join("../snapshots/model.gguf"));
        assert_eq!(
            named.file_name().and_then(|n| n.to_str()),
            Some("model.gguf")
        );
        assert!(
            !named.to_string_lossy().contains(".."),
            "{}",
            named.display()
        );
        assert!(named.is_absolute());
    }
}
