//! `quorum adapter list | load | unload`: the adapter administration RPCs of `Inference` from
//! the command line, with the server's bearer token.

use anyhow::{Context, Result};
use quorum_proto::v1 as pb;
use quorum_proto::v1::inference_client::InferenceClient;

use crate::ask::ClientArgs;

#[derive(clap::Args, Debug)]
pub struct AdapterArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The server's auth token (sent as `authorization: Bearer <token>`); loading and unloading
    /// need it.
    #[arg(long, env = "QUORUM_AUTH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[command(subcommand)]
    pub action: AdapterAction,
}

#[derive(clap::Subcommand, Debug)]
pub enum AdapterAction {
    /// Each model's adapters.
    List,
    /// Loads a PEFT directory (relative to the server's `adapter_dir`) into a model as NAME.
    Load {
        /// The model it adapts (default: the first generator).
        #[arg(long, default_value = "")]
        model: String,
        name: String,
        path: String,
    },
    /// Unloads adapter NAME from a model.
    Unload {
        #[arg(long, default_value = "")]
        model: String,
        name: String,
    },
}

pub async fn adapter(args: AdapterArgs) -> Result<()> {
    let channel = args.client.connect().await?;
    let mut client = InferenceClient::new(channel);
    let list = match args.action {
        AdapterAction::List => {
            let models = client
                .list_models(authorized(pb::ListModelsRequest {}, args.token.as_deref())?)
                .await
                .context("Inference.ListModels")?
                .into_inner()
                .models;
            for m in models {
                println!("{}: {}", m.name, m.adapters.join(", "));
            }
            return Ok(());
        }
        AdapterAction::Load { model, name, path } => client
            .load_adapter(authorized(
                pb::LoadAdapterRequest { model, name, path },
                args.token.as_deref(),
            )?)
            .await
            .context("Inference.LoadAdapter")?,
        AdapterAction::Unload { model, name } => client
            .unload_adapter(authorized(
                pb::UnloadAdapterRequest { model, name },
                args.token.as_deref(),
            )?)
            .await
            .context("Inference.UnloadAdapter")?,
    }
    .into_inner();
    println!("{}: {}", list.model, list.adapters.join(", "));
    Ok(())
}

/// `body` as a request carrying the bearer token, when there is one.
fn authorized<T>(body: T, token: Option<&str>) -> Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(body);
    if let Some(token) = token {
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {token}")
                .parse()
                .context("the token must be printable ASCII")?,
        );
    }
    Ok(request)
}
