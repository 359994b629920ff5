//! The trainable part: one LoRA pair (A `[r, in]`, B `[out, r]`) per adapted projection, and its
//! export as a Hugging Face PEFT adapter directory (which `quorum_weights::load_lora_adapter`,
//! and so the server, loads back).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use candle_core::{DType, Device, Tensor, Var};
use quorum_models::DecoderConfig;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::{TrainError, TrainResult};

/// Every linear projection of a Qwen2/Llama layer, PEFT's names for them.
pub const ALL_PROJECTIONS: [&str; 7] = [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// The shape of an adapter: which projections, rank, scale and dropout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoraSpec {
    pub rank: usize,
    pub alpha: f64,
    /// Dropout on the adapter's input (PEFT's `lora_dropout`), training only.
    pub dropout: f32,
    /// Projection names from [`ALL_PROJECTIONS`].
    pub targets: Vec<String>,
}

impl LoraSpec {
    /// alpha / r, as PEFT scales B·A without rank-stabilized LoRA.
    pub fn scale(&self) -> f64 {
        self.alpha / self.rank as f64
    }

    pub fn validate(&self) -> TrainResult<()> {
        if self.rank == 0 {
            return Err(TrainError::invalid("rank", "must be at least 1"));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(TrainError::invalid("dropout", "must be in [0, 1)"));
        }
        if self.targets.is_empty() {
            return Err(TrainError::invalid(
                "targets",
                "name at least one projection",
            ));
        }
        if let Some(bad) = self
            .targets
            .iter()
            .find(|t| !ALL_PROJECTIONS.contains(&t.as_str()))
        {
            return Err(TrainError::invalid(
                "targets",
                format!("`{bad}` is not one of {}", ALL_PROJECTIONS.join(", ")),
            ));
        }
        Ok(())
    }
}

/// One adapted projection's trainable matrices.
#[derive(Debug, Clone)]
pub struct LoraPair {
    pub a: Var,
    pub b: Var,
}

/// The adapter being trained, keyed by module (`model.layers.3.self_attn.q_proj`).
#[derive(Debug, Clone)]
pub struct LoraParams {
    spec: LoraSpec,
    modules: BTreeMap<String, LoraPair>,
}

/// `(in, out)` of a projection.
fn projection_shape(cfg: &DecoderConfig, name: &str) -> (usize, usize) {
    let (h, q, kv, i) = (
        cfg.hidden_size,
        cfg.num_heads * cfg.head_dim,
        cfg.num_kv_heads * cfg.head_dim,
        cfg.intermediate_size,
    );
    match name {
        "q_proj" => (h, q),
        "k_proj" | "v_proj" => (h, kv),
        "o_proj" => (q, h),
        "gate_proj" | "up_proj" => (h, i),
        _ => (i, h), // down_proj
    }
}

/// The module path of a projection in layer `layer`.
pub fn module_name(layer: usize, projection: &str) -> String {
    let block = match projection {
        "gate_proj" | "up_proj" | "down_proj" => "mlp",
        _ => "self_attn",
    };
    format!("model.layers.{layer}.{block}.{projection}")
}

impl LoraParams {
    /// PEFT's initialization: A uniform in ±1/√in (Kaiming-uniform with a = √5), B zero, so the
    /// adapted model starts equal to the base. Drawn from `seed`, so runs are reproducible.
    pub fn init(cfg: &DecoderConfig, spec: LoraSpec, seed: u64) -> TrainResult<Self> {
        spec.validate()?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut modules = BTreeMap::new();
        for layer in 0..cfg.num_layers {
            for projection in ALL_PROJECTIONS {
                if !spec.targets.iter().any(|t| t == projection) {
                    continue;
                }
                let (n_in, n_out) = projection_shape(cfg, projection);
                let bound = 1.0 / (n_in as f32).sqrt();
                let a: Vec<f32> = (0..spec.rank * n_in)
                    .map(|_| rng.random_range(-bound..bound))
                    .collect();
                let a = Var::from_vec(a, (spec.rank, n_in), &Device::Cpu)?;
                let b = Var::zeros((n_out, spec.rank), DType::F32, &Device::Cpu)?;
                modules.insert(module_name(layer, projection), LoraPair { a, b });
            }
        }
        Ok(Self { spec, modules })
    }

    pub fn spec(&self) -> &LoraSpec {
        &self.spec
    }

    pub fn get(&self, module: &str) -> Option<&LoraPair> {
        self.modules.get(module)
    }

    /// Every trainable tensor under its PEFT name (`{module}.lora_A.weight`), in a fixed order.
    pub fn named_vars(&self) -> Vec<(String, Var)> {
        self.modules
            .iter()
            .flat_map(|(m, p)| {
                [
                    (format!("{m}.lora_A.weight"), p.a.clone()),
                    (format!("{m}.lora_B.weight"), p.b.clone()),
                ]
            })
            .collect()
    }

    pub fn num_parameters(&self) -> usize {
        self.named_vars()
            .iter()
            .map(|(_, v)| v.as_tensor().elem_count())
            .sum()
    }

    /// The same adapter with its matrices on `device` (new variables).
    pub fn to_device(&self, device: &Device) -> TrainResult<Self> {
        let mut modules = BTreeMap::new();
        for (name, pair) in &self.modules {
            let moved = |v: &Var| -> TrainResult<Var> {
                Ok(Var::from_tensor(&v.as_tensor().to_device(device)?)?)
            };
            modules.insert(
                name.clone(),
                LoraPair {
                    a: moved(&pair.a)?,
                    b: moved(&pair.b)?,
                },
            );
        }
        Ok(Self {
            spec: self.spec.clone(),
            modules,
        })
    }

    /// Replaces every matrix by the tensor of the same name (a checkpoint being resumed).
    pub fn load_values(&self, values: &HashMap<String, Tensor>) -> TrainResult<()> {
        for (name, var) in self.named_vars() {
            let value = values
                .get(&name)
                .ok_or_else(|| TrainError::Checkpoint(format!("no tensor `{name}`")))?;
            if value.dims() != var.as_tensor().dims() {
                return Err(TrainError::Checkpoint(format!(
                    "`{name}` is {:?}, expected {:?}",
                    value.dims(),
                    var.as_tensor().dims()
                )));
            }
            var.set(&value.to_device(var.as_tensor().device())?)?;
        }
        Ok(())
    }

    /// Replaces every matrix by the one of a PEFT adapter directory written by
    /// [`Self::save_peft`] (or PEFT itself) with the same rank, alpha and targets: training
    /// goes on from a finished adapter on new data. Stored bf16 or f16 widens exactly.
    pub fn load_peft(&self, dir: &Path) -> TrainResult<()> {
        let config_path = dir.join("adapter_config.json");
        let text =
            std::fs::read_to_string(&config_path).map_err(|e| TrainError::io(&config_path, e))?;
        let config: PeftShape = serde_json::from_str(&text)
            .map_err(|e| TrainError::Checkpoint(format!("{}: {e}", config_path.display())))?;
        let mut theirs = config.target_modules.clone();
        theirs.sort_unstable();
        let mut ours = self.spec.targets.clone();
        ours.sort_unstable();
        if config.r != self.spec.rank || config.lora_alpha != self.spec.alpha || theirs != ours {
            return Err(TrainError::Checkpoint(format!(
                "{} is rank {}, alpha {}, targets {:?}; this run trains rank {}, alpha {}, \
                 targets {:?}",
                dir.display(),
                config.r,
                config.lora_alpha,
                config.target_modules,
                self.spec.rank,
                self.spec.alpha,
                self.spec.targets
            )));
        }
        let tensors =
            candle_core::safetensors::load(dir.join("adapter_model.safetensors"), &Device::Cpu)?;
        let values = tensors
            .into_iter()
            .map(|(name, t)| {
                let name = name
                    .strip_prefix("base_model.model.")
                    .unwrap_or(&name)
                    .to_owned();
                Ok((name, t.to_dtype(DType::F32)?))
            })
            .collect::<TrainResult<HashMap<String, Tensor>>>()?;
        self.load_values(&values)
    }

    /// Writes a PEFT adapter directory: `adapter_config.json` with PEFT's fields and
    /// `adapter_model.safetensors` with PEFT's tensor names. What Quorum needs beyond PEFT
    /// (prompt format and its version, data, command) goes to `quorum_adapter.json` beside them,
    /// since PEFT refuses unknown config fields in some versions. `dtype` is the stored type
    /// (bf16 halves the file; the server converts to its own type at load).
    pub fn save_peft(
        &self,
        dir: &Path,
        base_model: &str,
        card: &serde_json::Value,
        dtype: candle_core::DType,
    ) -> TrainResult<()> {
        std::fs::create_dir_all(dir).map_err(|e| TrainError::io(dir, e))?;
        let tensors = self
            .named_vars()
            .into_iter()
            .map(|(name, var)| {
                let t = var.as_tensor().to_dtype(dtype)?;
                Ok((format!("base_model.model.{name}"), t))
            })
            .collect::<TrainResult<HashMap<String, Tensor>>>()?;
        candle_core::safetensors::save(&tensors, dir.join("adapter_model.safetensors"))?;
        let config = serde_json::json!({
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "base_model_name_or_path": base_model,
            "r": self.spec.rank,
            "lora_alpha": self.spec.alpha,
            "lora_dropout": self.spec.dropout,
            "target_modules": self.spec.targets,
            "bias": "none",
            "fan_in_fan_out": false,
            "use_rslora": false,
            "inference_mode": true,
        });
        write_json(&dir.join("adapter_config.json"), &config)?;
        write_json(&dir.join("quorum_adapter.json"), card)
    }
}

/// The fields of a PEFT `adapter_config.json` that fix an adapter's shape.
#[derive(Deserialize)]
struct PeftShape {
    r: usize,
    lora_alpha: f64,
    target_modules: Vec<String>,
}

pub(crate) fn write_json(path: &Path, value: &serde_json::Value) -> TrainResult<()> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| TrainError::Checkpoint(e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|e| TrainError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_follow_hugging_face() {
        assert_eq!(module_name(3, "q_proj"), "model.layers.3.self_attn.q_proj");
        assert_eq!(module_name(0, "down_proj"), "model.layers.0.mlp.down_proj");
        assert_eq!(module_name(1, "up_proj"), "model.layers.1.mlp.up_proj");
        assert_eq!(module_name(1, "o_proj"), "model.layers.1.self_attn.o_proj");
    }

    #[test]
    fn bad_specs_are_refused_with_the_field() {
        let spec = |rank, dropout, targets: &[&str]| LoraSpec {
            rank,
            alpha: 16.0,
            dropout,
            targets: targets.iter().map(|s| s.to_string()).collect(),
        };
        let field = |s: LoraSpec| match s.validate() {
            Err(TrainError::InvalidConfig { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(spec(0, 0.0, &["q_proj"])), "rank");
        assert_eq!(field(spec(8, 1.0, &["q_proj"])), "dropout");
        assert_eq!(field(spec(8, 0.0, &[])), "targets");
        assert_eq!(field(spec(8, 0.0, &["qproj"])), "targets");
        assert!(spec(8, 0.1, &["q_proj", "down_proj"]).validate().is_ok());
    }
}
