//! Q4_K and Q6_K × f32 for a few rows (decode), reading the weights as the GGUF file stores
//! them, bit-identical to candle's repacked x86 kernels.
//!
//! candle 0.11.1 runs a `[n, k]` Q4_K weight (any number of rows) or Q6_K weight (two rows or
//! more), `n` a multiple of 16 and `k` of 256, on any x86 CPU with AVX2 and FMA, through 16-row
//! tiles it repacks the weight into once (`repack_x86`). Each activation row is quantized to
//! Q8_K (per 256 values an f32 scale `da`, the values as `i8`, and the sum of each 16 of them),
//! and each output keeps one f32 accumulator over its weight row's sub-blocks, in order:
//! - Q4_K, eight sub-blocks of 32 values (a 6-bit scale `sc` and min `m` each, under the
//!   block's f16 `d` and `dmin`): `acc = fma(isum, (d·sc)·da, acc)`, then
//!   `acc = fma(-(dmin·m), da·bsum, acc)`;
//! - Q6_K, sixteen sub-blocks of 16 values (an `i8` scale `sc` under the block's f16 `d`,
//!   values stored as `v + 32`): `acc = fma(isum − 32·bsum, (d·sc)·da, acc)`;
//!
//! where `isum` is the exact integer dot product of the stored values and the activation bytes,
//! and `bsum` the sum of those activation bytes. The tiles hold an f32 scale (and min) for every
//! row and sub-block and the values unpacked to one byte (Q6_K) or nibble pairs: 0.75 bytes a
//! weight for Q4_K and 1.25 for Q6_K, against the file's 0.5625 and 0.8203. A one-row product
//! is bound by how fast the weights stream from memory, so on hosts with little bandwidth it
//! pays to read the file's bytes. [`KQuantRows`] does so: one vector lane per weight row, eight
//! rows at a time, the scales unpacked from the block as it is read (`d·sc` and `dmin·m` are
//! exact in f32, so they equal the tiles' stored products), the integer sums from
//! `vpmaddubsw`/`vpmaddwd` (no pair of products can saturate: 15·128·2 and 63·128·2 fit in
//! an `i16`) summed across a vector by `vphaddd`, and then candle's float operations in
//! candle's order. A row's result is therefore the same whichever of the two computed it, and
//! the engine can hand decode steps to this kernel and prefill to candle's tiles without a
//! request's tokens depending on what else is batched.
//!
//! [`KQuantRows::reference`] is the same arithmetic one output at a time in scalar code; the
//! kernel is tested against it and against candle's `QMatMul::forward` bit for bit.

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use half::f16;
use rayon::prelude::*;

use crate::CpuPath;
use crate::q8_gemm::quantize_q8k;

/// Values per superblock (one Q8_K activation block).
const QK_K: usize = 256;
/// Weight rows one kernel call covers: a vector lane each.
const GROUP: usize = 8;
/// Activation rows that share each read of the weights.
const MAX_SHARED: usize = 4;

/// A superblock format this kernel reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Q4K,
    Q6K,
}

impl Format {
    fn of(dtype: GgmlDType) -> Option<Self> {
        match dtype {
            GgmlDType::Q4K => Some(Self::Q4K),
            GgmlDType::Q6K => Some(Self::Q6K),
            _ => None,
        }
    }

    /// Bytes per 256-value block as the file stores it.
    fn block_bytes(self) -> usize {
        match self {
            // f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles.
            Self::Q4K => 144,
            // 128 bytes of low nibbles, 64 of high bit pairs, 16 i8 scales, f16 d.
            Self::Q6K => 210,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KQuantError {
    #[error("expected {expected} activation values ({m} rows of {k}), got {got}")]
    ActivationLen {
        m: usize,
        k: usize,
        expected: usize,
        got: usize,
    },
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

/// A CPU Q4_K or Q6_K weight `[n, k]` that [`KQuantRows::matmul`] multiplies as candle's
/// repacked kernels do, reading the blocks in place (it holds the tensor, no copy).
#[derive(Clone)]
pub struct KQuantRows {
    weight: Arc<QTensor>,
    format: Format,
    n: usize,
    k: usize,
}

impl std::fmt::Debug for KQuantRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KQuantRows")
            .field("format", &self.format)
            .field("n", &self.n)
            .field("k", &self.k)
            .finish_non_exhaustive()
    }
}

impl KQuantRows {
    /// Rows up to which the engine gives a product to this kernel rather than to candle's
    /// tiles: beyond it the tiles' compute, not the weights' bytes, bounds the product.
    pub const MAX_ROWS: usize = 8;

    /// The weight, if candle multiplies it through its repacked tiles for two rows or more (so
    /// the two agree) and `path`, a kernel path this CPU supports, has AVX2 (and the CPU F16C):
    /// a CPU Q4_K or Q6_K matrix with `n` a multiple of 16 and `k` of 256.
    pub fn new(weight: &Arc<QTensor>, path: CpuPath) -> Option<Self> {
        let format = Format::of(weight.dtype())?;
        let &[n, k] = weight.shape().dims() else {
            return None;
        };
        let fits = n > 0 && n.is_multiple_of(16) && k > 0 && k.is_multiple_of(QK_K);
        let cpu = path.has_int8_gemm() && path.supported() && has_f16c();
        (fits && weight.device().is_cpu() && cpu).then(|| Self {
            weight: weight.clone(),
            format,
            n,
            k,
        })
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }

    /// `x`: `m` rows of `k` f32, row-major → `m` rows of `n` f32, equal bit for bit to candle's
    /// repacked product (see the module docs).
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>, KQuantError> {
        let acts = self.quantize(x, m)?;
        let raw = self.weight.data()?;
        let groups = self.n / GROUP;
        // Each task writes one group of eight outputs for every activation row; the rows are
        // put in place after.
        let mut grouped = vec![0f32; groups * m * GROUP];
        if m > 0 {
            grouped
                .par_chunks_mut(m * GROUP)
                .with_min_len(8)
                .enumerate()
                .for_each(|(g, out)| self.group(&raw, &acts, g, out));
        }
        let mut out = vec![0f32; m * self.n];
        for (g, chunk) in grouped.chunks_exact(m.max(1) * GROUP).enumerate() {
            for (i, vals) in chunk.chunks_exact(GROUP).enumerate() {
                out[i * self.n + g * GROUP..][..GROUP].copy_from_slice(vals);
            }
        }
        Ok(out)
    }

    /// [`Self::matmul`] on a contiguous f32 CPU tensor `[.., k]` → `[.., n]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor, KQuantError> {
        let dims = x.dims();
        let m = dims[..dims.len().saturating_sub(1)].iter().product();
        let y = self.matmul(&x.flatten_all()?.to_vec1::<f32>()?, m)?;
        let mut out_dims = dims.to_vec();
        if let Some(last) = out_dims.last_mut() {
            *last = self.n;
        }
        Ok(Tensor::from_vec(y, out_dims, &Device::Cpu)?)
    }

    /// The same numbers as [`Self::matmul`], one output at a time in scalar code.
    pub fn reference(&self, x: &[f32], m: usize) -> Result<Vec<f32>, KQuantError> {
        let acts = self.quantize(x, m)?;
        let raw = self.weight.data()?;
        let kb = self.k / QK_K;
        let mut out = vec![0f32; m * self.n];
        for (i, row) in out.chunks_exact_mut(self.n.max(1)).enumerate().take(m) {
            for (r, o) in row.iter_mut().enumerate() {
                let mut acc = 0f32;
                for b in 0..kb {
                    let blk = self.block(&raw, r, b);
                    let a = &acts.qs[(i * kb + b) * QK_K..][..QK_K];
                    let bsums = &acts.bsums[(i * kb + b) * 16..][..16];
                    let da = acts.ds[i * kb + b];
                    acc = match self.format {
                        Format::Q4K => q4k_reference(blk, a, bsums, da, acc),
                        Format::Q6K => q6k_reference(blk, a, bsums, da, acc),
                    };
                }
                *o = acc;
            }
        }
        Ok(out)
    }

    /// Weight row `r`'s block `b` as the file stores it.
    fn block<'a>(&self, raw: &'a [u8], r: usize, b: usize) -> &'a [u8] {
        let bytes = self.format.block_bytes();
        &raw[(r * (self.k / QK_K) + b) * bytes..][..bytes]
    }

    fn quantize(&self, x: &[f32], m: usize) -> Result<Q8kRows, KQuantError> {
        let expected = m * self.k;
        if x.len() != expected {
            return Err(KQuantError::ActivationLen {
                m,
                k: self.k,
                expected,
                got: x.len(),
            });
        }
        Ok(Q8kRows::quantize(x, self.k))
    }

    /// Outputs `g * 8 .. g * 8 + 8` for every activation row into `out` (`[m][8]`).
    fn group(&self, raw: &[u8], acts: &Q8kRows, g: usize, out: &mut [f32]) {
        let kb = self.k / QK_K;
        let stride = kb * self.format.block_bytes();
        let rows = &raw[g * GROUP * stride..][..GROUP * stride];
        // A group's rows are short (864 bytes at k = 1,536) and read eight at a time, too
        // short for the hardware prefetcher: the kernel requests the next group's as it goes.
        let next = raw.get((g + 1) * GROUP * stride..(g + 2) * GROUP * stride);
        for (first, out) in (0..acts.m)
            .step_by(MAX_SHARED)
            .zip(out.chunks_mut(MAX_SHARED * GROUP))
        {
            let shared = (acts.m - first).min(MAX_SHARED);
            let ahead = if first == 0 { next } else { None };
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `new` admitted this weight only where this CPU has AVX2, FMA and F16C.
            unsafe {
                avx2::group(self.format, rows, ahead, kb, acts, first, shared, out)
            };
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("no path with AVX2 off x86_64, so `new` admitted no weight");
        }
    }
}

/// Activation rows quantized to Q8_K as candle does it, all `[m][..]`.
struct Q8kRows {
    m: usize,
    /// `[m][k]`.
    qs: Vec<i8>,
    /// `[m][k / 256]`.
    ds: Vec<f32>,
    /// `[m][k / 16]`: the sum of each 16 values.
    bsums: Vec<i32>,
}

impl Q8kRows {
    fn quantize(x: &[f32], k: usize) -> Self {
        let m = x.len() / k.max(1);
        let mut rows = Self {
            m,
            qs: vec![0; m * k],
            ds: vec![0f32; m * (k / QK_K)],
            bsums: vec![0; m * (k / 16)],
        };
        for ((xs, qs), d) in x
            .chunks_exact(QK_K)
            .zip(rows.qs.chunks_exact_mut(QK_K))
            .zip(&mut rows.ds)
        {
            *d = quantize_q8k(xs, qs);
        }
        for (s, qs) in rows.bsums.iter_mut().zip(rows.qs.chunks_exact(16)) {
            *s = qs.iter().map(|&q| q as i32).sum();
        }
        rows
    }
}

/// Whether the CPU converts f16 to f32 in vectors (every CPU with AVX2 so far does).
fn has_f16c() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// ggml's 6-bit scale and min of Q4_K sub-block `j` from the block's 12 packed bytes.
fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// One Q4_K block against one Q8_K block, continuing `acc`.
fn q4k_reference(blk: &[u8], a: &[i8], bsums: &[i32], da: f32, mut acc: f32) -> f32 {
    let (d, dmin) = (f16_at(blk, 0), f16_at(blk, 2));
    let (scales, qs) = (&blk[4..16], &blk[16..144]);
    for sub in 0..8 {
        // Sub-block 2c holds the low nibbles of bytes 32c..32c+32, 2c+1 their high nibbles.
        let bytes = &qs[(sub / 2) * 32..][..32];
        let isum: i32 = bytes
            .iter()
            .zip(&a[sub * 32..][..32])
            .map(|(&q, &x)| {
                let v = if sub % 2 == 0 { q & 0x0F } else { q >> 4 };
                v as i32 * x as i32
            })
            .sum();
        let (sc, mn) = scale_min_k4(sub, scales);
        let bsum = (bsums[sub * 2] + bsums[sub * 2 + 1]) as f32;
        acc = (isum as f32).mul_add((d * sc as f32) * da, acc);
        acc = (-(dmin * mn as f32)).mul_add(da * bsum, acc);
    }
    acc
}

/// Q6_K value `i` (0..256) of a block, as stored (`v + 32`, 0..64).
fn q6k_value(blk: &[u8], i: usize) -> u8 {
    let (ql, qh) = (&blk[..128], &blk[128..192]);
    let (half, quarter, j) = (i / 128, (i % 128) / 32, i % 32);
    let low = ql[half * 64 + (quarter % 2) * 32 + j];
    let low = if quarter < 2 { low & 0x0F } else { low >> 4 };
    low | (((qh[half * 32 + j] >> (2 * quarter)) & 3) << 4)
}

/// One Q6_K block against one Q8_K block, continuing `acc`.
fn q6k_reference(blk: &[u8], a: &[i8], bsums: &[i32], da: f32, mut acc: f32) -> f32 {
    let d = f16_at(blk, 208);
    for (sub, &bsum) in bsums.iter().enumerate() {
        let isum: i32 = (sub * 16..sub * 16 + 16)
            .map(|i| q6k_value(blk, i) as i32 * a[i] as i32)
            .sum();
        let f = isum as f32 - 32.0 * bsum as f32;
        acc = f.mul_add((d * blk[192 + sub] as i8 as f32) * da, acc);
    }
    acc
}

#[cfg(target_arch = "x86_64")]
mod avx2;

#[cfg(test)]
mod tests;
