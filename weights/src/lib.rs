//! quorum-weights: turns checkpoints on disk into tensors, a tokenizer and a chat template.
//!
//! Formats: Hugging Face model directories (config.json, tokenizer.json, single or sharded
//! safetensors in f32/f16/bf16), GGUF files (quantized tensors; tokenizer and chat template built
//! from the metadata), and PEFT LoRA adapter directories. Models in Hugging Face hub repositories
//! are found in the standard hub cache and, when the caller asks, downloaded into it (`hub`,
//! through the `hf-hub` crate). Every tensor is exposed under its
//! Hugging Face name, so model code has one naming scheme whatever the file format.
//!
//! This crate knows nothing about model architectures beyond tensor names: `quorum-models`
//! reads the configuration and builds the layers.

mod chat_template;
mod checkpoint;
mod error;
mod gguf;
mod gguf_tokenizer;
mod hf_dir;
mod hub;
mod lora_adapter;
mod store;
mod synthetic;

pub use chat_template::{ChatMessage, ChatTemplate, render_turn};
pub use checkpoint::{Checkpoint, CheckpointFormat, ModelConfigSource};
pub use error::{WeightsError, WeightsResult};
pub use gguf::{GgufLoadOptions, Reencode, load_gguf, reencode_gguf_file};
pub use gguf_tokenizer::tokenizer_from_gguf;
pub use hf_dir::load_hf_dir;
pub use hub::{
    DEFAULT_HUB_ENDPOINT, HubCache, HubDownload, HubModel, download_hub_model, resolve_hub_model,
    resolve_hub_snapshot,
};
pub use lora_adapter::{DECODER_PROJECTIONS, LoraAdapter, LoraAdapterConfig, load_lora_adapter};
pub use store::{StoredTensor, TensorStore};
pub use synthetic::{
    SYNTHETIC_ARCHS, SyntheticArch, SyntheticDtype, synthetic_arch, write_synthetic_adapter,
    write_synthetic_checkpoint,
};

/// Loads a checkpoint from a GGUF file or a Hugging Face model directory, chosen by what `path` is.
pub fn load_checkpoint(
    path: &std::path::Path,
    device: &candle_core::Device,
    dense_dtype: candle_core::DType,
) -> WeightsResult<Checkpoint> {
    load_checkpoint_with(path, device, dense_dtype, &GgufLoadOptions::default())
}

/// [`load_checkpoint`] with the GGUF re-encoding chosen by the caller.
pub fn load_checkpoint_with(
    path: &std::path::Path,
    device: &candle_core::Device,
    dense_dtype: candle_core::DType,
    gguf: &GgufLoadOptions,
) -> WeightsResult<Checkpoint> {
    if path.is_dir() {
        load_hf_dir(path, device, dense_dtype)
    } else if path.is_file() {
        load_gguf(path, device, gguf)
    } else {
        Err(WeightsError::MissingFile {
            path: path.to_path_buf(),
        })
    }
}
