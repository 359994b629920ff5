//! Row-wise loops over token-major f32 rows that repeat a candle op's arithmetic exactly (same
//! operations in the same order, no fused multiply-add), for the CPU forward pass and the
//! norms that run beside it.

use rayon::prelude::*;

/// Rows from which row-wise loops run in parallel (candle's norm uses the same cut-off).
const PARALLEL_ROWS: usize = 32;

/// candle's `rms_norm` on rows of `alpha.len()` values: the sum of squares in order, then
/// `x / sqrt(sum / n + eps) * alpha`.
pub(crate) fn rms_norm_rows(x: &[f32], alpha: &[f32], eps: f32) -> Vec<f32> {
    let n = alpha.len();
    let mut out = vec![0f32; x.len()];
    let row = |(src, dst): (&[f32], &mut [f32])| {
        let sum2 = src.iter().map(|&v| v * v).sum::<f32>();
        let m = (sum2 / n as f32 + eps).sqrt();
        for ((d, s), a) in dst.iter_mut().zip(src).zip(alpha) {
            *d = *s / m * *a;
        }
    };
    if x.len() / n.max(1) <= PARALLEL_ROWS {
        x.chunks_exact(n).zip(out.chunks_exact_mut(n)).for_each(row);
    } else {
        x.par_chunks_exact(n)
            .zip(out.par_chunks_exact_mut(n))
            .for_each(row);
    }
    out
}

/// `silu(gate) * up` in place of `gate`, as candle computes `silu` (`v / (1 + exp(-v))`) and
/// then the product.
pub(crate) fn silu_mul(gate: &mut [f32], up: &[f32], width: usize) {
    let row = |(g, u): (&mut [f32], &[f32])| {
        for (g, u) in g.iter_mut().zip(u) {
            *g = *g / (1.0 + (-*g).exp()) * u;
        }
    };
    if gate.len() / width.max(1) <= PARALLEL_ROWS {
        gate.chunks_mut(width).zip(up.chunks(width)).for_each(row);
    } else {
        gate.par_chunks_mut(width)
            .zip(up.par_chunks(width))
            .for_each(row);
    }
}

/// `x += y` element-wise (`y + x`: the same sum).
pub(crate) fn add_into(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += *b;
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::*;

    fn bits(x: &[f32]) -> Vec<u32> {
        x.iter().map(|v| v.to_bits()).collect()
    }

    fn host(t: &Tensor) -> Vec<f32> {
        t.flatten_all()
            .expect("flat")
            .to_vec1::<f32>()
            .expect("vec")
    }

    #[test]
    fn row_ops_equal_candles_bit_for_bit() {
        let dev = Device::Cpu;
        for rows in [1, 5, 40] {
            let x = (Tensor::randn(0f32, 1.0, (rows, 96), &dev).expect("x") * 4.0).expect("s");
            let alpha = Tensor::randn(0f32, 1.0, 96, &dev).expect("alpha");
            let want = candle_nn::ops::rms_norm(&x, &alpha, 1e-6).expect("norm");
            let got = rms_norm_rows(&host(&x), &host(&alpha), 1e-6);
            assert_eq!(bits(&got), bits(&host(&want)), "rms_norm, {rows} rows");

            let up = Tensor::randn(0f32, 1.0, (rows, 96), &dev).expect("up");
            let want = (candle_nn::ops::silu(&x).expect("silu") * &up).expect("mul");
            let mut got = host(&x);
            silu_mul(&mut got, &host(&up), 96);
            assert_eq!(bits(&got), bits(&host(&want)), "silu * up, {rows} rows");
        }
    }
}
