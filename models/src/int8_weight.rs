//! A quantized weight packed for one of Quorum's CPU int8 GEMMs.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Result, Tensor};
use quorum_kernels::{CpuPath, KQ_BLOCK, KQuant, PackedKQuant, PackedQ8_0};

/// Which GEMM a layer's weight runs on: Q8_0 (bit-identical to candle's kernels) or the
/// K-quant GEMM over the file's Q4_K / Q6_K blocks (Quorum's own arithmetic, about half the
/// bytes a decode step reads).
#[derive(Debug, Clone)]
pub(crate) enum Int8Weight {
    Q8_0(PackedQ8_0),
    KQuant(PackedKQuant),
}

impl Int8Weight {
    /// Packs `q` (`[n, k]`, on the CPU) for `path` if one of the GEMMs reads its format:
    /// Q8_0 always, Q4_K and Q6_K where `kquants`.
    pub(crate) fn pack(q: &QTensor, path: CpuPath, kquants: bool) -> Result<Option<Self>> {
        let &[n, k] = q.shape().dims() else {
            return Ok(None);
        };
        if n == 0 || k == 0 || !q.device().is_cpu() {
            return Ok(None);
        }
        Ok(match q.dtype() {
            GgmlDType::Q8_0 => Some(Self::Q8_0(
                PackedQ8_0::from_qtensor(q, path).map_err(candle_core::Error::wrap)?,
            )),
            dtype if kquants && KQuant::of(dtype).is_some() && k.is_multiple_of(KQ_BLOCK) => {
                Some(Self::KQuant(
                    PackedKQuant::from_qtensor(q, path).map_err(candle_core::Error::wrap)?,
                ))
            }
            _ => None,
        })
    }

    /// `m` rows of `k` f32 → `m` rows of `n` f32.
    pub(crate) fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>> {
        match self {
            Self::Q8_0(w) => w.matmul(x, m).map_err(candle_core::Error::wrap),
            Self::KQuant(w) => w.matmul(x, m).map_err(candle_core::Error::wrap),
        }
    }

    fn n(&self) -> usize {
        match self {
            Self::Q8_0(w) => w.n(),
            Self::KQuant(w) => w.n(),
        }
    }

    /// [`Self::matmul`] on a contiguous f32 CPU tensor `[.., k]` → `[.., n]`.
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims();
        let m = dims[..dims.len().saturating_sub(1)].iter().product();
        let y = self.matmul(&x.flatten_all()?.to_vec1::<f32>()?, m)?;
        let mut out_dims = dims.to_vec();
        if let Some(last) = out_dims.last_mut() {
            *last = self.n();
        }
        Tensor::from_vec(y, out_dims, &Device::Cpu)
    }
}
