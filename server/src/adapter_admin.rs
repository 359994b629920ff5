//! Loading and unloading LoRA adapters while the server runs (`Inference.LoadAdapter` and
//! `UnloadAdapter`). Only a server with an auth token offers them: on an open server anyone
//! could change what its models answer. Adapters are read from under one directory, so a
//! request cannot make the server open arbitrary files.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use quorum_proto::v1 as pb;

use crate::state::AppState;
use crate::status::ServiceError;

/// Longest adapter name; names show up in logs, metrics labels and prefix-cache keys.
const MAX_NAME_LEN: usize = 64;

/// Loads the adapter of `request` into its model; answers the model's adapters after it.
/// Blocking (reads the files and waits for the engine's next step): run it off async workers.
pub fn load(
    state: &Arc<AppState>,
    request: &pb::LoadAdapterRequest,
) -> Result<pb::AdapterList, ServiceError> {
    let root = admin_dir(state)?;
    check_name(&request.name)?;
    let dir = adapter_dir(root, &request.path)?;
    let (_admission, models) = state.admit()?;
    let decoder = models.decoder(&request.model)?;
    decoder
        .engine
        .load_adapter(&request.name, &dir)
        .map_err(|e| match e {
            // The files are the caller's input: a wrong shape or a broken file is theirs to fix.
            quorum_engine::EngineError::Model(e) => ServiceError::invalid("path", e.to_string()),
            e => e.into(),
        })?;
    tracing::info!(model = %decoder.spec.name, adapter = %request.name, dir = %dir.display(), "adapter loaded over the admin RPC");
    Ok(list(&decoder.spec.name, decoder.engine.adapters()))
}

/// Unloads an adapter no pipeline generator is configured with and no request uses.
pub fn unload(
    state: &Arc<AppState>,
    request: &pb::UnloadAdapterRequest,
) -> Result<pb::AdapterList, ServiceError> {
    admin_dir(state)?;
    let (_admission, models) = state.admit()?;
    let decoder = models.decoder(&request.model)?;
    let users =
        state
            .pipeline_runtime()?
            .users_of_adapter(&models, &decoder.spec.name, &request.name);
    if !users.is_empty() {
        return Err(ServiceError::InUse {
            what: "adapter",
            id: request.name.clone(),
            reason: format!("the pipeline's {} run with it", users.join(", ")),
        });
    }
    decoder.engine.unload_adapter(&request.name)?;
    tracing::info!(model = %decoder.spec.name, adapter = %request.name, "adapter unloaded over the admin RPC");
    Ok(list(&decoder.spec.name, decoder.engine.adapters()))
}

fn list(model: &str, adapters: Vec<String>) -> pb::AdapterList {
    pb::AdapterList {
        model: model.to_owned(),
        adapters,
    }
}

fn admin_dir(state: &AppState) -> Result<&Path, ServiceError> {
    state
        .adapter_admin
        .as_deref()
        .ok_or_else(|| ServiceError::PermissionDenied {
            reason: "adapter administration needs a server with an auth token \
                     (server.auth_token)"
                .into(),
        })
}

fn check_name(name: &str) -> Result<(), ServiceError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(allowed) {
        return Err(ServiceError::invalid(
            "name",
            format!("1 to {MAX_NAME_LEN} of A-Z a-z 0-9 . _ -"),
        ));
    }
    Ok(())
}

/// `path` under `root`: relative, without `..`, and still under `root` once symbolic links
/// are followed; a PEFT directory.
fn adapter_dir(root: &Path, path: &str) -> Result<PathBuf, ServiceError> {
    let relative = Path::new(path);
    let plain = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if path.is_empty() || !plain {
        return Err(ServiceError::invalid(
            "path",
            "a relative path under the server's adapter directory, without `..`",
        ));
    }
    let not_found = || ServiceError::NotFound {
        what: "adapter directory",
        id: path.to_owned(),
    };
    let root = root.canonicalize().map_err(|_| not_found())?;
    let dir = root
        .join(relative)
        .canonicalize()
        .map_err(|_| not_found())?;
    if !dir.starts_with(&root) {
        return Err(ServiceError::invalid(
            "path",
            "leads outside the server's adapter directory",
        ));
    }
    if !dir.join("adapter_config.json").is_file() {
        return Err(ServiceError::invalid(
            "path",
            "not a PEFT adapter directory (no adapter_config.json)",
        ));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_plain_words() {
        for good in ["rep-s1", "a", "coder_rep.v2", &"x".repeat(MAX_NAME_LEN)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "a b",
            "a#1",
            "../x",
            "naïve",
            &"x".repeat(MAX_NAME_LEN + 1),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_stay_under_the_adapter_directory() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        for dir in [root.path().join("good"), outside.path().join("peft")] {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("adapter_config.json"), "{}").unwrap();
        }
        std::fs::create_dir_all(root.path().join("empty")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("peft"), root.path().join("link")).unwrap();
        let code = |path: &str| adapter_dir(root.path(), path).map_err(|e| e.code());
        assert!(code("good").is_ok());
        assert!(code("./good").is_ok());
        use tonic::Code;
        assert_eq!(code("../good"), Err(Code::InvalidArgument));
        assert_eq!(code("good/../good"), Err(Code::InvalidArgument));
        let absolute = outside.path().join("peft");
        assert_eq!(code(absolute.to_str().unwrap()), Err(Code::InvalidArgument));
        assert_eq!(code(""), Err(Code::InvalidArgument));
        assert_eq!(
            code("link"),
            Err(Code::InvalidArgument),
            "a link out of the directory"
        );
        assert_eq!(
            code("empty"),
            Err(Code::InvalidArgument),
            "no adapter_config.json"
        );
        assert_eq!(code("missing"), Err(Code::NotFound));
    }
}
