//! Resolves what a user names as a model (`--model`): a path, a short name of a default model,
//! or a hub repository id found in the local hub cache. Nothing is downloaded here: the fetch
//! script (`scripts/fetch-models.sh`) puts the default models in place.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use quorum_weights::{HubCache, resolve_hub_snapshot};

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
    /// The LoRA adapters shipped with Quorum (`adapters/` of the checkout or image).
    pub adapters_dir: PathBuf,
}

impl ModelDirs {
    /// `QUORUM_MODELS_DIR`, else `$XDG_CACHE_HOME/quorum/models` (default `~/.cache`); the hub
    /// cache is `HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`; the
    /// shipped adapters are under `QUORUM_ADAPTERS_DIR`, else `adapters` in the working
    /// directory (the checkout's root, where the scripts run).
    pub fn from_env() -> Self {
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
        let adapters_dir = std::env::var_os("QUORUM_ADAPTERS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("adapters"));
        Self {
            models_dir,
            hub_cache: HubCache { root: hub_root },
            adapters_dir,
        }
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
            if let Ok(snapshot) = resolve_hub_snapshot(&self.hub_cache, hub_id, None) {
                return Ok(snapshot);
            }
            bail!(
                "model `{name}` is not at {} nor in the hub cache {}; run scripts/fetch-models.sh",
                local.display(),
                self.hub_cache.root.display()
            );
        }
        if name.contains('/') && !name.starts_with('/') && !name.starts_with('.') {
            return resolve_hub_snapshot(&self.hub_cache, name, None)
                .with_context(|| format!("model `{name}` is neither a path nor a known model"));
        }
        let known: Vec<&str> = CATALOG.iter().map(|(s, _, _)| *s).collect();
        bail!(
            "model `{name}` is not a path, a hub id in the cache, or a known model ({})",
            known.join(", ")
        )
    }
}
