use std::collections::HashMap;
use std::sync::Arc;

use candle_core::Tensor;
use candle_core::quantized::QTensor;

use crate::error::{WeightsError, WeightsResult};

/// One tensor of a checkpoint: quantized blocks as stored in a GGUF file, or a dense tensor.
#[derive(Debug, Clone)]
pub enum StoredTensor {
    Quantized(Arc<QTensor>),
    Dense(Tensor),
}

impl StoredTensor {
    pub fn dims(&self) -> Vec<usize> {
        match self {
            Self::Quantized(q) => q.shape().dims().to_vec(),
            Self::Dense(t) => t.dims().to_vec(),
        }
    }

    /// The tensor as dense values (dequantizing if needed), in its natural dtype.
    pub fn to_dense(&self) -> WeightsResult<Tensor> {
        match self {
            Self::Quantized(q) => Ok(q.dequantize(&q.device())?),
            Self::Dense(t) => Ok(t.clone()),
        }
    }
}

/// All tensors of a checkpoint, keyed by their Hugging Face names
/// (`model.layers.0.self_attn.q_proj.weight`).
#[derive(Debug, Default, Clone)]
pub struct TensorStore {
    tensors: HashMap<String, StoredTensor>,
}

impl TensorStore {
    pub fn insert(&mut self, name: String, tensor: StoredTensor) {
        self.tensors.insert(name, tensor);
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    pub fn get(&self, name: &str) -> WeightsResult<&StoredTensor> {
        self.tensors
            .get(name)
            .ok_or_else(|| WeightsError::MissingTensor {
                name: name.to_string(),
            })
    }

    /// Fetches a tensor and checks its shape, so that a wrong checkpoint fails at load time with
    /// the tensor's name rather than deep inside a matmul.
    pub fn get_checked(&self, name: &str, expected: &[usize]) -> WeightsResult<&StoredTensor> {
        let t = self.get(name)?;
        let actual = t.dims();
        if actual != expected {
            return Err(WeightsError::ShapeMismatch {
                name: name.to_string(),
                expected: expected.to_vec(),
                actual,
            });
        }
        Ok(t)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}
