//! Server configuration in two stages: [`file::RawConfig`] is what the TOML file and the
//! command line say (every field optional, flags win over the file), [`resolved::ServerConfig`]
//! is the resolved and validated result the server runs with (model names resolved to files,
//! databases found, limits checked against each other).
//!
//! With no file at all the defaults ([`shipped`]) serve the project's default models over the
//! Spider dev databases, so that `quorum serve` works right after `scripts/fetch-models.sh`;
//! `--profile` ([`profile::Profile`]) picks another shipped set of models.

pub mod cors;
pub mod file;
pub mod profile;
pub mod resolved;
pub mod shipped;
#[cfg(test)]
mod tests;
