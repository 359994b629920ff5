//! PEFT LoRA adapter directories: adapter_config.json + adapter_model.safetensors.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

use crate::error::{WeightsError, WeightsResult};
use crate::hf_dir::{load_safetensors_into, read_json};
use crate::store::{StoredTensor, TensorStore};

/// The fields of PEFT's adapter_config.json that change the computation.
#[derive(Debug, Clone, Deserialize)]
pub struct LoraAdapterConfig {
    pub r: usize,
    pub lora_alpha: f64,
    #[serde(default)]
    pub target_modules: Vec<String>,
    #[serde(default)]
    pub use_rslora: bool,
    #[serde(default)]
    pub base_model_name_or_path: Option<String>,
    #[serde(default)]
    pub peft_type: Option<String>,
}

impl LoraAdapterConfig {
    /// The factor applied to B·A: alpha/r, or alpha/sqrt(r) with rank-stabilized LoRA.
    pub fn scale(&self) -> f64 {
        if self.use_rslora {
            self.lora_alpha / (self.r as f64).sqrt()
        } else {
            self.lora_alpha / self.r as f64
        }
    }
}

/// A loaded adapter: for each adapted module (HF name without `.weight`, e.g.
/// `model.layers.0.self_attn.q_proj`) its A `[r, in]` and B `[out, r]` matrices.
#[derive(Debug, Clone)]
pub struct LoraAdapter {
    pub name: String,
    pub config: LoraAdapterConfig,
    pub modules: HashMap<String, (Tensor, Tensor)>,
}

/// The projections of a decoder layer, under their Hugging Face names (`model.layers.{i}.` +
/// one of these), in the order the decoder stores its adapters' weights.
pub const DECODER_PROJECTIONS: [&str; 7] = [
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
];

/// PEFT prefixes module names with `base_model.model.`.
fn module_name(tensor_name: &str) -> Option<(String, bool)> {
    let name = tensor_name
        .strip_prefix("base_model.model.")
        .unwrap_or(tensor_name);
    if let Some(m) = name.strip_suffix(".lora_A.weight") {
        return Some((m.to_string(), true));
    }
    name.strip_suffix(".lora_B.weight")
        .map(|m| (m.to_string(), false))
}

pub fn load_lora_adapter(
    dir: &Path,
    name: &str,
    device: &Device,
    dtype: DType,
) -> WeightsResult<LoraAdapter> {
    let cfg_path = dir.join("adapter_config.json");
    let config: LoraAdapterConfig =
        serde_json::from_value(read_json(&cfg_path)?).map_err(|e| WeightsError::Corrupt {
            path: cfg_path.clone(),
            detail: e.to_string(),
        })?;
    if let Some(kind) = &config.peft_type
        && kind != "LORA"
    {
        return Err(WeightsError::Corrupt {
            path: cfg_path,
            detail: format!("peft_type `{kind}` is not LORA"),
        });
    }
    let mut store = TensorStore::default();
    load_safetensors_into(
        &dir.join("adapter_model.safetensors"),
        device,
        dtype,
        &mut store,
    )?;
    let mut a_mats = HashMap::new();
    let mut b_mats = HashMap::new();
    for tensor_name in store.names().map(str::to_string).collect::<Vec<_>>() {
        let Some((module, is_a)) = module_name(&tensor_name) else {
            continue;
        };
        let StoredTensor::Dense(t) = store.get(&tensor_name)?.clone() else {
            continue;
        };
        if is_a {
            a_mats.insert(module, t)
        } else {
            b_mats.insert(module, t)
        };
    }
    let mut modules = HashMap::new();
    for (module, a) in a_mats {
        let b = b_mats
            .remove(&module)
            .ok_or_else(|| WeightsError::MissingTensor {
                name: format!("{module}.lora_B.weight"),
            })?;
        let (ra, _in) = a.dims2()?;
        let (_out, rb) = b.dims2()?;
        if ra != config.r || rb != config.r {
            return Err(WeightsError::ShapeMismatch {
                name: module,
                expected: vec![config.r],
                actual: vec![ra, rb],
            });
        }
        modules.insert(module, (a, b));
    }
    if let Some(module) = b_mats.into_keys().next() {
        return Err(WeightsError::MissingTensor {
            name: format!("{module}.lora_A.weight"),
        });
    }
    Ok(LoraAdapter {
        name: name.to_string(),
        config,
        modules,
    })
}
