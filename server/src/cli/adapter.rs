//! `quorum adapter list | load | unload`: the adapter administration RPCs of `Inference` from
//! the command line; loads and unloads need the server's bearer token (`--token`).

use anyhow::{Context, Result};
use quorum_proto::v1 as pb;
use quorum_proto::v1::inference_client::InferenceClient;

use super::ask::ClientArgs;

#[derive(clap::Args, Debug)]
pub struct AdapterArgs {
    #[command(flatten)]
    pub client: ClientArgs,
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
                .list_models(pb::ListModelsRequest {})
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
            .load_adapter(pb::LoadAdapterRequest { model, name, path })
            .await
            .context("Inference.LoadAdapter")?,
        AdapterAction::Unload { model, name } => client
            .unload_adapter(pb::UnloadAdapterRequest { model, name })
            .await
            .context("Inference.UnloadAdapter")?,
    }
    .into_inner();
    println!("{}: {}", list.model, list.adapters.join(", "));
    Ok(())
}
