//! The token embedding table, and the rows of it a batch looks up.

use std::sync::Arc;

use candle_core::quantized::{QTensor, ggml_file::qtensor_from_ggml};
use candle_core::{DType, Device, Result, Tensor};
use quorum_weights::StoredTensor;

use crate::error::ModelResult;

/// A model's `[vocab, hidden]` token embeddings.
///
/// A batch reads one row per token, so a quantized table on the CPU stays as stored and each
/// row is dequantized when it is looked up (by the same per-block code that would dequantize the
/// whole table, so the values are the same). Held dense in f32 the table would cost 4 bytes a
/// weight beside the quantized copy the tied output layer keeps: 545 MB for
/// Qwen2.5-Coder-0.5B, 934 MB for the 1.5B. Elsewhere (a GPU, a half-precision model, dense
/// weights) the table is a dense tensor on the device.
#[derive(Debug, Clone)]
pub(crate) enum TokenEmbedding {
    Dense(Tensor),
    QuantizedRows {
        table: Arc<QTensor>,
        /// Bytes of one stored row.
        row_bytes: usize,
        hidden: usize,
    },
}

impl TokenEmbedding {
    pub(crate) fn load(stored: &StoredTensor, dtype: DType, device: &Device) -> ModelResult<Self> {
        match stored {
            StoredTensor::Quantized(q)
                if device.is_cpu() && dtype == DType::F32 && q.device().is_cpu() =>
            {
                let (vocab, hidden) = q.shape().dims2()?;
                let block = q.dtype().block_size();
                if vocab == 0 || !hidden.is_multiple_of(block) {
                    return Err(candle_core::Error::Msg(format!(
                        "token embeddings [{vocab}, {hidden}] do not split into rows of {:?} blocks",
                        q.dtype()
                    ))
                    .into());
                }
                Ok(Self::QuantizedRows {
                    table: q.clone(),
                    row_bytes: hidden / block * q.dtype().type_size(),
                    hidden,
                })
            }
            _ => Ok(Self::Dense(
                stored.to_dense()?.to_dtype(dtype)?.to_device(device)?,
            )),
        }
    }

    /// The rows of `tokens`, `[tokens.len(), hidden]`, on the table's device.
    pub(crate) fn lookup(&self, tokens: &[u32], device: &Device) -> Result<Tensor> {
        match self {
            Self::Dense(table) => {
                let ids = Tensor::from_slice(tokens, tokens.len(), device)?;
                table.index_select(&ids, 0)
            }
            Self::QuantizedRows { hidden, .. } => {
                Tensor::from_vec(self.lookup_rows(tokens)?, (tokens.len(), *hidden), device)
            }
        }
    }

    /// The rows of `tokens` on the host, row-major f32.
    pub(crate) fn lookup_rows(&self, tokens: &[u32]) -> Result<Vec<f32>> {
        match self {
            Self::Dense(table) => self
                .lookup(tokens, table.device())?
                .to_dtype(DType::F32)?
                .flatten_all()?
                .to_vec1::<f32>(),
            Self::QuantizedRows {
                table,
                row_bytes,
                hidden,
            } => {
                let raw = table.data()?;
                let vocab = raw.len() / row_bytes;
                let mut out = Vec::with_capacity(tokens.len() * hidden);
                for &t in tokens {
                    let t = t as usize;
                    if t >= vocab {
                        candle_core::bail!("token id {t} is outside the vocabulary of {vocab}");
                    }
                    let bytes = &raw[t * row_bytes..(t + 1) * row_bytes];
                    let row = qtensor_from_ggml(table.dtype(), bytes, vec![*hidden], &Device::Cpu)?;
                    out.extend(row.dequantize(&Device::Cpu)?.to_vec1::<f32>()?);
                }
                Ok(out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::GgmlDType;

    use super::*;

    #[test]
    fn quantized_rows_equal_the_dense_tables_rows() {
        let dense = Tensor::randn(0f32, 1.0, (40, 512), &Device::Cpu).expect("table");
        for dtype in [
            GgmlDType::Q8_0,
            GgmlDType::Q4K,
            GgmlDType::Q6K,
            GgmlDType::Q5_0,
        ] {
            let q = Arc::new(QTensor::quantize(&dense, dtype).expect("quantize"));
            let stored = StoredTensor::Quantized(q);
            let rows = TokenEmbedding::load(&stored, DType::F32, &Device::Cpu).expect("rows");
            assert!(
                matches!(rows, TokenEmbedding::QuantizedRows { .. }),
                "{dtype:?}"
            );
            let whole = TokenEmbedding::Dense(stored.to_dense().expect("dense"));
            let tokens = [0, 39, 7, 7, 21];
            let got = rows.lookup_rows(&tokens).expect("looked up");
            let want = whole.lookup_rows(&tokens).expect("indexed");
            assert_eq!(got.len(), 5 * 512);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{dtype:?}");
            let t = rows.lookup(&tokens, &Device::Cpu).expect("tensor");
            assert_eq!(t.dims(), &[5, 512]);
            let err = rows.lookup_rows(&[40]).expect_err("outside");
            assert!(
                err.to_string().contains("outside the vocabulary of 40"),
                "{err}"
            );
        }
    }

    #[test]
    fn dense_weights_and_other_dtypes_stay_dense() {
        let dense = Tensor::randn(0f32, 1.0, (8, 64), &Device::Cpu).expect("table");
        let stored = StoredTensor::Dense(dense.clone());
        let e = TokenEmbedding::load(&stored, DType::F32, &Device::Cpu).expect("dense");
        assert!(matches!(e, TokenEmbedding::Dense(_)));
        let q = Arc::new(QTensor::quantize(&dense, GgmlDType::Q8_0).expect("quantize"));
        let half = TokenEmbedding::load(&StoredTensor::Quantized(q), DType::BF16, &Device::Cpu)
            .expect("bf16 table");
        assert!(matches!(&half, TokenEmbedding::Dense(t) if t.dtype() == DType::BF16));
        assert_eq!(half.lookup_rows(&[3, 5]).expect("rows").len(), 2 * 64);
    }
}
