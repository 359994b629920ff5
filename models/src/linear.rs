//! A linear layer over quantized (GGUF) or dense weights.

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Module, Result, Tensor};
use quorum_kernels::CpuPath;
use quorum_weights::{StoredTensor, TensorStore, WeightsResult};

use crate::int8_weight::Int8Weight;

/// Which kernel runs a quantized layer.
///
/// candle's quantized CPU matmul quantizes the activations and runs one dot product per output:
/// right for decode (one row, bandwidth-bound), slow for prefill, where many rows could share each
/// weight read. (A dense f32 copy of the weights was tried for prefill: 1.4x faster, 4 bytes per
/// weight, and not bit-identical, so it was dropped for the int8 GEMM below.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatmulPolicy {
    /// Always the quantized kernel: bit-compatible with candle's own GGUF models.
    #[default]
    QuantizedOnly,
    /// For Q8_0 weights on the CPU, an int8 GEMM ([`PackedQ8_0`], with the kernels of `path`)
    /// for batches of at least `min_rows` f32 rows, bit-identical to the quantized kernel, so
    /// greedy outputs stay equal to candle's own GGUF models; other weights and smaller batches
    /// as `QuantizedOnly`, and every weight when `path` is [`CpuPath::Candle`]. The repacked
    /// copy costs about 1.1 bytes per weight. Where candle repacks the weight itself (`in` a
    /// multiple of 256, `out` of 16, on CPUs with VNNI) the GEMM follows candle's repacked
    /// arithmetic instead (see [`CpuPath::candle_repacks_q8_0`]).
    Int8Prefill { min_rows: usize, path: CpuPath },
    /// `Int8Prefill`, and a row's result never depends on how many rows share the call: candle
    /// runs Q6_K weights through a different kernel (other activation quantization) for one row
    /// than for several, so a single row is padded to two there. With `min_rows` at most 1,
    /// Q4_K and Q6_K weights run on Quorum's K-quant GEMM instead ([`PackedKQuant`], the
    /// file's blocks as stored, every row count), which is not candle's arithmetic. The engine
    /// uses this so that a request's tokens do not change with what else is batched;
    /// single-stream loops that must match candle's own models bit for bit use `Int8Prefill`.
    ///
    /// [`PackedKQuant`]: quorum_kernels::PackedKQuant
    BatchInvariant { min_rows: usize, path: CpuPath },
}

impl MatmulPolicy {
    /// The engine's policy: every Q8_0 row through the int8 GEMM on `path`, single rows too
    /// (on the AVX2 path one row ran 1.4-2.3x faster than candle's kernel and spared a hand-off
    /// between candle's and rayon's threads: decode 13 → 16 tok/s, docs/RESULTS.md), and rows
    /// independent of what else is batched. A packed layer then keeps no candle copy of its
    /// weight.
    pub fn engine(path: CpuPath) -> Self {
        Self::BatchInvariant { min_rows: 1, path }
    }

    fn int8_min_rows(self) -> Option<usize> {
        match self {
            Self::QuantizedOnly => None,
            Self::Int8Prefill { min_rows, .. } | Self::BatchInvariant { min_rows, .. } => {
                Some(min_rows)
            }
        }
    }

    /// Whether the int8 GEMM takes a packed weight's rows at every count (one and up), so
    /// candle's copy of the weight is never read again and is not kept: about 1.06 bytes a
    /// weight (1.4 GiB for Qwen2.5-Coder-1.5B).
    fn int8_takes_every_row(self) -> bool {
        self.int8_min_rows().is_some_and(|m| m <= 1)
    }

    /// Whether Q4_K and Q6_K weights run on the K-quant GEMM: only where every row count goes
    /// to the int8 GEMMs and the arithmetic need not be candle's.
    fn reads_kquants(self) -> bool {
        matches!(self, Self::BatchInvariant { .. }) && self.int8_takes_every_row()
    }

    /// The int8 GEMM's kernel path, if this policy uses one.
    pub fn int8_path(self) -> Option<CpuPath> {
        match self {
            Self::QuantizedOnly => None,
            Self::Int8Prefill { path, .. } | Self::BatchInvariant { path, .. } => {
                Some(path).filter(|p| p.has_int8_gemm())
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Weight {
    Quantized {
        /// candle's product; `None` once the int8 GEMM runs every row count (see
        /// [`MatmulPolicy::int8_takes_every_row`]), which frees the tensor's bytes.
        qmatmul: Option<QMatMul>,
        int8: Option<Box<Int8Weight>>,
        dtype: GgmlDType,
    },
    /// `[out, in]`.
    Dense(Tensor),
}

#[derive(Debug, Clone)]
pub struct Linear {
    weight: Weight,
    bias: Option<Tensor>,
    /// The bias on the host, for [`Linear::forward_rows`].
    bias_rows: Option<Vec<f32>>,
    policy: MatmulPolicy,
    /// On a CUDA device, the dense product through `fixed_order_matmul`, whose rows do not
    /// depend on the batch ([`Linear::use_fixed_order`]).
    fixed_order: bool,
    out_features: usize,
    in_features: usize,
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
        let (out_features, in_features) = (w.dims()[0], w.dims().get(1).copied().unwrap_or(0));
        let bias_rows = match &bias {
            Some(b) if b.device().is_cpu() => Some(b.to_dtype(DType::F32)?.to_vec1::<f32>()?),
            _ => None,
        };
        let weight = match w {
            StoredTensor::Quantized(q) => Self::quantized_weight(q, policy)?,
            StoredTensor::Dense(t) => Weight::Dense(t.to_dtype(dtype)?),
        };
        Ok(Self {
            weight,
            bias,
            bias_rows,
            policy,
            fixed_order: false,
            out_features,
            in_features,
        })
    }

    fn quantized_weight(q: &Arc<QTensor>, policy: MatmulPolicy) -> Result<Weight> {
        let int8 = match policy.int8_path() {
            Some(path) => Int8Weight::pack(q, path, policy.reads_kquants())?.map(Box::new),
            None => None,
        };
        let qmatmul = if int8.is_some() && policy.int8_takes_every_row() {
            None
        } else {
            Some(QMatMul::from_arc(q.clone())?)
        };
        Ok(Weight::Quantized {
            qmatmul,
            int8,
            dtype: q.dtype(),
        })
    }

    /// From now on, on a CUDA device, every output is summed over the inputs in one fixed order
    /// whatever the number of rows (the batch-invariant mode); the CPU path is batch-invariant
    /// already. Refused for a quantized weight, whose CUDA kernels candle chooses by shape.
    pub(crate) fn use_fixed_order(&mut self) -> std::result::Result<(), String> {
        match &self.weight {
            Weight::Dense(_) => {
                self.fixed_order = true;
                Ok(())
            }
            Weight::Quantized { dtype, .. } => Err(format!(
                "the weight is quantized ({dtype:?}); batch invariance needs dense weights"
            )),
        }
    }

    pub fn out_features(&self) -> usize {
        self.out_features
    }

    /// Whether one row must be computed as two (see [`MatmulPolicy::BatchInvariant`]).
    fn pads_single_row(&self) -> bool {
        matches!(self.policy, MatmulPolicy::BatchInvariant { .. })
            && matches!(
                &self.weight,
                Weight::Quantized {
                    dtype: GgmlDType::Q6K,
                    ..
                }
            )
    }

    /// [`Linear::forward`] on host rows (`rows × in` f32) → `rows × out` f32, with the same
    /// arithmetic: the int8 GEMM straight on the slice where the policy sends these rows there,
    /// else through a tensor. CPU weights only.
    pub fn forward_rows(&self, x: &[f32], rows: usize) -> Result<Vec<f32>> {
        let mut y = match &self.weight {
            Weight::Quantized {
                int8: Some(packed), ..
            } if self
                .policy
                .int8_min_rows()
                .is_some_and(|m| rows >= m || rows == 0) =>
            {
                packed.matmul(x, rows)?
            }
            _ => {
                let t = Tensor::from_slice(x, (rows, self.in_features), &candle_core::Device::Cpu)?;
                return self.forward(&t)?.flatten_all()?.to_vec1::<f32>();
            }
        };
        if let Some(b) = &self.bias_rows {
            for row in y.chunks_exact_mut(self.out_features) {
                for (o, b) in row.iter_mut().zip(b) {
                    *o += b;
                }
            }
        }
        Ok(y)
    }

    /// `x`: `[rows, in]` → `[rows, out]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let rows = x.dim(0)?;
        let y = match &self.weight {
            Weight::Quantized { qmatmul, int8, .. } => match (int8, self.policy, qmatmul) {
                (Some(packed), policy, _)
                    if policy
                        .int8_min_rows()
                        .is_some_and(|min_rows| rows >= min_rows || rows == 0)
                        && x.dtype() == DType::F32
                        && x.device().is_cpu() =>
                {
                    packed.forward(x)?
                }
                (_, _, None) => candle_core::bail!(
                    "this layer runs only the int8 GEMM (f32 rows on the CPU), not {:?} rows on {:?}",
                    x.dtype(),
                    x.device()
                ),
                (_, _, Some(qmatmul)) => {
                    Self::candle_forward(qmatmul, x, rows, self.pads_single_row())?
                }
            },
            Weight::Dense(w) if self.fixed_order && w.device().is_cuda() => {
                fixed_order_matmul(x, w)?
            }
            Weight::Dense(w) if w.device().is_cuda() && skinny_matmul_fits(x, &[w]) => {
                skinny_matmul(x, &[w])?.remove(0)
            }
            Weight::Dense(w) => x.matmul(&w.t()?)?,
        };
        self.add_bias(y)
    }

    /// candle's quantized product of `rows` rows, a single row padded to two where `pad`.
    fn candle_forward(qmatmul: &QMatMul, x: &Tensor, rows: usize, pad: bool) -> Result<Tensor> {
        if rows == 1 && pad {
            let padded = Tensor::cat(&[x, &x.zeros_like()?], 0)?;
            return qmatmul.forward(&padded)?.narrow(0, 0, 1);
        }
        // candle's quantized kernels take f32 rows: a half-precision model converts around them.
        if x.dtype() != DType::F32 {
            return qmatmul
                .forward(&x.to_dtype(DType::F32)?)?
                .to_dtype(x.dtype());
        }
        qmatmul.forward(x)
    }

    fn add_bias(&self, y: Tensor) -> Result<Tensor> {
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }

    /// [`Linear::forward`] of each of `linears` on the same `x`, in one launch where all of them
    /// can: a few rows (decode at small batch) on a CUDA device take one pass over the weights
    /// for all rows (`skinny_matmul`, which cuBLAS's tiles, sized for many rows, are not made
    /// for), and projections of one input (q, k and v; gate and up) share the launch, so the
    /// small ones fill the GPU beside the large one. Otherwise each runs its own `forward`.
    pub fn forward_group(linears: &[&Linear], x: &Tensor) -> Result<Vec<Tensor>> {
        let dense: Option<Vec<&Tensor>> = linears
            .iter()
            .map(|l| match &l.weight {
                Weight::Dense(w) if w.device().is_cuda() && !l.fixed_order => Some(w),
                _ => None,
            })
            .collect();
        match dense {
            Some(ws) if skinny_matmul_fits(x, &ws) => skinny_matmul(x, &ws)?
                .into_iter()
                .zip(linears)
                .map(|(y, l)| l.add_bias(y))
                .collect(),
            _ => linears.iter().map(|l| l.forward(x)).collect(),
        }
    }
}

#[cfg(feature = "cuda")]
fn fixed_order_matmul(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    quorum_kernels::cuda::device::fixed_order_matmul(x, w)
}

#[cfg(not(feature = "cuda"))]
fn fixed_order_matmul(_x: &Tensor, _w: &Tensor) -> Result<Tensor> {
    candle_core::bail!("a CUDA device in a build without the `cuda` feature")
}

/// Whether these products run `skinny_matmul`: Quorum's kernels on, `QUORUM_SKINNY_KERNEL` not
/// off, and tensors the kernel takes.
#[cfg(feature = "cuda")]
fn skinny_matmul_fits(x: &Tensor, ws: &[&Tensor]) -> bool {
    quorum_kernels::cuda::skinny_kernel_enabled()
        && quorum_kernels::cuda::device::skinny_matmul_fits(x, ws)
}

#[cfg(not(feature = "cuda"))]
fn skinny_matmul_fits(_x: &Tensor, _ws: &[&Tensor]) -> bool {
    false
}

#[cfg(feature = "cuda")]
fn skinny_matmul(x: &Tensor, ws: &[&Tensor]) -> Result<Vec<Tensor>> {
    quorum_kernels::cuda::device::skinny_matmul(x, ws)
}

#[cfg(not(feature = "cuda"))]
fn skinny_matmul(_x: &Tensor, _ws: &[&Tensor]) -> Result<Vec<Tensor>> {
    candle_core::bail!("a CUDA device in a build without the `cuda` feature")
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    fn layer(policy: MatmulPolicy, n: usize, k: usize) -> Linear {
        let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu).expect("w");
        let q = QTensor::quantize(&w, GgmlDType::Q8_0).expect("quantize");
        let bias = Tensor::randn(0f32, 1.0, n, &Device::Cpu).expect("bias");
        Linear::from_stored(
            &StoredTensor::Quantized(Arc::new(q)),
            Some(bias),
            policy,
            DType::F32,
        )
        .expect("linear")
    }

    fn bits(t: &Tensor) -> Vec<u32> {
        let v = t
            .flatten_all()
            .expect("flat")
            .to_vec1::<f32>()
            .expect("vec");
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn fixed_order_needs_a_dense_weight_and_changes_nothing_on_the_cpu() {
        let mut quantized = layer(MatmulPolicy::QuantizedOnly, 16, 32);
        let err = quantized.use_fixed_order().expect_err("quantized refused");
        assert!(err.contains("Q8_0") && err.contains("dense"), "{err}");
        let w = Tensor::randn(0f32, 1.0, (16, 32), &Device::Cpu).expect("w");
        let mut dense = Linear::from_stored(
            &StoredTensor::Dense(w),
            None,
            MatmulPolicy::QuantizedOnly,
            DType::F32,
        )
        .expect("linear");
        let x = Tensor::randn(0f32, 1.0, (3, 32), &Device::Cpu).expect("x");
        let before = bits(&dense.forward(&x).expect("forward"));
        dense.use_fixed_order().expect("dense accepted");
        assert_eq!(bits(&dense.forward(&x).expect("forward")), before);
    }

    #[test]
    fn int8_prefill_is_bit_identical_to_quantized_only() {
        // Same weights under both policies: build one layer and swap the policy on a copy.
        let path = CpuPath::detect();
        for (n, k) in [(48, 96), (33, 64), (32, 256), (16, 512)] {
            let int8 = layer(MatmulPolicy::Int8Prefill { min_rows: 2, path }, n, k);
            let mut plain = int8.clone();
            plain.policy = MatmulPolicy::QuantizedOnly;
            let packed = matches!(&int8.weight, Weight::Quantized { int8: Some(_), .. });
            assert_eq!(packed, path.has_int8_gemm(), "n={n} k={k}");
            for rows in [1, 2, 7, 40] {
                let x = Tensor::randn(0f32, 1.0, (rows, k), &Device::Cpu).expect("x");
                let got = int8.forward(&x).expect("int8");
                let want = plain.forward(&x).expect("plain");
                assert_eq!(got.dims(), &[rows, n]);
                assert_eq!(bits(&got), bits(&want), "rows={rows} n={n} k={k}");
            }
        }
    }

    #[test]
    fn the_engines_layers_keep_only_the_packed_copy_and_give_the_same_bits() {
        let path = CpuPath::detect();
        let (n, k) = (48, 256);
        let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu).expect("w");
        let stored = StoredTensor::Quantized(Arc::new(
            QTensor::quantize(&w, GgmlDType::Q8_0).expect("quantize"),
        ));
        let bias = Tensor::randn(0f32, 1.0, n, &Device::Cpu).expect("bias");
        let load = |policy| {
            Linear::from_stored(&stored, Some(bias.clone()), policy, DType::F32).expect("linear")
        };
        let engine = load(MatmulPolicy::engine(path));
        // Without an int8 GEMM (no AVX2) candle's product is all there is, and it stays.
        let kept = matches!(
            &engine.weight,
            Weight::Quantized {
                qmatmul: Some(_),
                ..
            }
        );
        assert_eq!(kept, !path.has_int8_gemm());
        let candle = load(MatmulPolicy::QuantizedOnly);
        for rows in [0, 1, 2, 7] {
            let x = Tensor::randn(0f32, 1.0, (rows, k), &Device::Cpu).expect("x");
            let got = engine.forward(&x).expect("forward");
            assert_eq!(got.dims(), &[rows, n]);
            assert_eq!(
                bits(&got),
                bits(&candle.forward(&x).expect("candle")),
                "rows={rows}"
            );
            let flat = x
                .flatten_all()
                .expect("flat")
                .to_vec1::<f32>()
                .expect("vec");
            let on_rows = engine.forward_rows(&flat, rows).expect("rows");
            let on_rows: Vec<u32> = on_rows.iter().map(|v| v.to_bits()).collect();
            assert_eq!(on_rows, bits(&got), "rows={rows}");
        }
        if path.has_int8_gemm() {
            let half = Tensor::zeros((2, k), DType::BF16, &Device::Cpu).expect("bf16");
            let err = engine.forward(&half).expect_err("bf16 rows");
            assert!(err.to_string().contains("only the int8 GEMM"), "{err}");
        }
    }
}
