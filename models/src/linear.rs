//! A linear layer over quantized (GGUF) or dense weights.

use std::sync::Arc;

use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Module, Result, Tensor};
use quorum_weights::{StoredTensor, TensorStore, WeightsResult};

/// When to run a quantized layer through a dense copy of its weights.
///
/// candle's quantized CPU matmul quantizes the activations and runs one dot product per output
/// (fast for decode, bandwidth-bound); a dense f32 GEMM is several times faster once many rows
/// share each weight read (prefill). The dense copy costs 4 bytes per weight of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatmulPolicy {
    /// Always the quantized kernel: bit-compatible with candle's own GGUF models.
    #[default]
    QuantizedOnly,
    /// Dense f32 GEMM for batches of at least this many rows.
    DenseFromRows(usize),
}

#[derive(Debug, Clone)]
enum Weight {
    Quantized {
        qmatmul: QMatMul,
        dense: Option<Tensor>,
    },
    /// `[out, in]`.
    Dense(Tensor),
}

#[derive(Debug, Clone)]
pub struct Linear {
    weight: Weight,
    bias: Option<Tensor>,
    policy: MatmulPolicy,
    out_features: usize,
}

impl Linear {
    /// Loads `{prefix}.weight` (checked against `[out, in]`) and `{prefix}.bias` if present.
    pub fn load(
        store: &TensorStore,
        prefix: &str,
        shape: (usize, usize),
        policy: MatmulPolicy,
        dtype: DType,
    ) -> WeightsResult<Self> {
        let w = store.get_checked(&format!("{prefix}.weight"), &[shape.0, shape.1])?;
        let bias_name = format!("{prefix}.bias");
        let bias = if store.contains(&bias_name) {
            Some(
                store
                    .get_checked(&bias_name, &[shape.0])?
                    .to_dense()?
                    .to_dtype(dtype)?,
            )
        } else {
            None
        };
        Ok(Self::from_stored(w, bias, policy, dtype)?)
    }

    pub fn from_stored(
        w: &StoredTensor,
        bias: Option<Tensor>,
        policy: MatmulPolicy,
        dtype: DType,
    ) -> Result<Self> {
        let out_features = w.dims()[0];
        let weight = match w {
            StoredTensor::Quantized(q) => Self::quantized_weight(q, policy)?,
            StoredTensor::Dense(t) => Weight::Dense(t.to_dtype(dtype)?),
        };
        Ok(Self {
            weight,
            bias,
            policy,
            out_features,
        })
    }

    fn quantized_weight(q: &Arc<QTensor>, policy: MatmulPolicy) -> Result<Weight> {
        let dense = match policy {
            MatmulPolicy::QuantizedOnly => None,
            MatmulPolicy::DenseFromRows(_) => Some(q.dequantize(&q.device())?),
        };
        Ok(Weight::Quantized {
            qmatmul: QMatMul::from_arc(q.clone())?,
            dense,
        })
    }

    pub fn out_features(&self) -> usize {
        self.out_features
    }

    /// `x`: `[rows, in]` → `[rows, out]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let rows = x.dim(0)?;
        let y = match &self.weight {
            Weight::Quantized { qmatmul, dense } => match (dense, self.policy) {
                (Some(w), MatmulPolicy::DenseFromRows(min)) if rows >= min => x.matmul(&w.t()?)?,
                _ => qmatmul.forward(x)?,
            },
            Weight::Dense(w) => x.matmul(&w.t()?)?,
        };
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}
