use candle_core::quantized::gguf_file;
use std::collections::HashMap;
use std::path::PathBuf;

use crate::chat_template::ChatTemplate;
use crate::store::TensorStore;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointFormat {
    Gguf,
    Safetensors,
}

/// Where the model's hyper-parameters come from: GGUF metadata or a `config.json`.
#[derive(Debug, Clone)]
pub enum ModelConfigSource {
    Gguf(HashMap<String, gguf_file::Value>),
    HfConfig(serde_json::Value),
}

/// A loaded checkpoint: tensors, tokenizer, and what is needed to talk to the model.
#[derive(Debug)]
pub struct Checkpoint {
    pub path: PathBuf,
    pub format: CheckpointFormat,
    /// Architecture label as the file states it (`qwen2`, `llama`, `bert`, ...), lower case.
    pub architecture: String,
    pub config: ModelConfigSource,
    pub tensors: TensorStore,
    pub tokenizer: tokenizers::Tokenizer,
    pub chat_template: Option<ChatTemplate>,
    /// Token ids that end generation according to the checkpoint (EOS and the chat end token).
    pub eos_token_ids: Vec<u32>,
    /// True when q/k projection rows are stored in GGUF's interleaved rotary order (llama.cpp
    /// permutes them for `llama` models), so the rotary embedding must pair adjacent dims.
    pub rope_interleaved: bool,
}
