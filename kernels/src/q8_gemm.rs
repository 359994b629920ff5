//! Q8_0 × f32 matmul for prefill, bit-identical to candle's generic CPU path.
//!
//! candle 0.11.1's `QMatMul::forward` with a Q8_0 weight and f32 input, when the weight is not
//! repacked (see [`PackedQ8_0::candle_repacks`] for the other case, which is reproduced too),
//! computes every output as follows:
//! 1. Each activation row is quantized to Q8_0 blocks of 32: `d = amax / 127`,
//!    `q = round(x * (1 / d)) as i8` (0 when `d == 0`), and `d` is stored as f16.
//! 2. With AVX2 and FMA detected at run time (`vec_dot_q8_0_q8_0` in candle's `avx.rs`), a dot
//!    product of a weight row and an activation row keeps eight f32 lanes. For each block, lane
//!    `l` receives the exact integer sum of the four products at bytes `4l..4l+4` (the
//!    `maddubs`/`madd` pairs never saturate for Q8_0 operands), converted to f32, and
//!    accumulates `lane = fma(wd * ad, lane_sum, lane)`, where `wd * ad` is the f32 product of
//!    the two f16 scales. The blocks run in order, and the lanes are summed at the end as
//!    `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`.
//! 3. Without AVX2+FMA, a scalar loop: `sum += (isum as f32 * wd) * ad`, block by block.
//!
//! [`PackedQ8_0::matmul`] computes the same numbers with an int8 GEMM: each activation row is
//! quantized once, the weights are repacked once so that one AVX-512 VNNI `vpdpbusd` yields the
//! eight lane sums of two output columns, and a register-blocked microkernel reuses each weight
//! load across several rows. Only the order in which outputs are computed differs from candle;
//! the arithmetic of each output is the same operation for operation.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes, so the weights are stored offset by +128 and
//! the accumulator starts at `-128 * (sum of the four activation bytes)`, which cancels the
//! offset exactly in integer arithmetic.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use half::f16;
use rayon::prelude::*;

/// Values per Q8_0 block.
pub const Q8_0_BLOCK: usize = 32;
/// Bytes per Q8_0 block: an f16 scale and 32 signed bytes.
const Q8_0_BLOCK_BYTES: usize = 2 + Q8_0_BLOCK;
/// candle repacks Q8_0 weights (and quantizes activations differently) when `k` is a multiple
/// of this and `n` a multiple of [`CANDLE_REPACK_TILE_N`], on CPUs with AVX-VNNI or AVX-512 VNNI.
const CANDLE_REPACK_K: usize = 256;
const CANDLE_REPACK_TILE_N: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum Q8GemmError {
    #[error("k = {k} is not a multiple of the Q8_0 block size {Q8_0_BLOCK}")]
    KNotBlockMultiple { k: usize },
    #[error("expected {expected} bytes of Q8_0 blocks for [{n}, {k}], got {got}")]
    WeightBytes {
        n: usize,
        k: usize,
        expected: usize,
        got: usize,
    },
    #[error("expected {expected} activation values ({m} rows of {k}), got {got}")]
    ActivationLen {
        m: usize,
        k: usize,
        expected: usize,
        got: usize,
    },
    #[error("the weight is {dtype:?}, not Q8_0")]
    NotQ8_0 { dtype: GgmlDType },
    #[error("the weight must be two-dimensional [n, k], got {dims:?}")]
    NotMatrix { dims: Vec<usize> },
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

impl Q8GemmError {
    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::KNotBlockMultiple { .. } => "k_not_block_multiple",
            Self::WeightBytes { .. } => "weight_bytes",
            Self::ActivationLen { .. } => "activation_len",
            Self::NotQ8_0 { .. } => "not_q8_0",
            Self::NotMatrix { .. } => "not_matrix",
            Self::Candle(_) => "candle",
        }
    }
}

/// One block of two output columns: for each lane `l`, the four bytes `4l..4l+4` of column
/// `2c` then of column `2c + 1`, all offset by +128.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct PairBlock([u8; 64]);

/// A Q8_0 weight `[n, k]` repacked for [`PackedQ8_0::matmul`] (about 1.1 bytes per weight).
#[derive(Clone)]
pub struct PackedQ8_0 {
    n: usize,
    k: usize,
    /// `[n_pairs][k_blocks]`; an odd `n` is padded with a zero column.
    pairs: Vec<PairBlock>,
    /// `[n_pairs][k_blocks][2]`: the f16 scales of the two columns, as f32.
    scales: Vec<[f32; 2]>,
    /// Set instead of `pairs` where candle repacks the weight ([`PackedQ8_0::candle_repacks`]).
    tiles: Option<Tiles>,
}

/// One block of 16 output columns in candle's repacked order: for each group `g` of four
/// values, the four bytes of each column in turn, offset by +128.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct TileBlock([u8; 16 * Q8_0_BLOCK]);

/// The weight in 16-column tiles, for candle's repacked arithmetic.
#[derive(Clone)]
struct Tiles {
    /// `[n / 16][k_blocks]`.
    qs: Vec<TileBlock>,
    /// `[n / 16][k_blocks]`: the 16 columns' scales, as f32.
    scales: Vec<[f32; 16]>,
}

impl std::fmt::Debug for PackedQ8_0 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedQ8_0")
            .field("n", &self.n)
            .field("k", &self.k)
            .finish_non_exhaustive()
    }
}

impl PackedQ8_0 {
    /// Repacks raw Q8_0 blocks (`n` rows of `k / 32` blocks, 34 bytes each: a little-endian f16
    /// scale and 32 `i8`), as `QTensor::data` returns them for a `[n, k]` weight.
    pub fn from_blocks(raw: &[u8], n: usize, k: usize) -> Result<Self, Q8GemmError> {
        if !k.is_multiple_of(Q8_0_BLOCK) {
            return Err(Q8GemmError::KNotBlockMultiple { k });
        }
        let kb = k / Q8_0_BLOCK;
        let expected = n * kb * Q8_0_BLOCK_BYTES;
        if raw.len() != expected {
            return Err(Q8GemmError::WeightBytes {
                n,
                k,
                expected,
                got: raw.len(),
            });
        }
        if Self::candle_repacks(n, k) {
            return Ok(Self::tiled(raw, n, k));
        }
        let n_pairs = n.div_ceil(2);
        let mut pairs = vec![PairBlock([128; 64]); n_pairs * kb];
        let mut scales = vec![[0f32; 2]; n_pairs * kb];
        for col in 0..n {
            let (pair, half) = (col / 2, col % 2);
            for b in 0..kb {
                let off = (col * kb + b) * Q8_0_BLOCK_BYTES;
                let block = &raw[off..off + Q8_0_BLOCK_BYTES];
                scales[pair * kb + b][half] = f16::from_le_bytes([block[0], block[1]]).to_f32();
                let dst = &mut pairs[pair * kb + b].0;
                for (i, &q) in block[2..].iter().enumerate() {
                    let (lane, byte) = (i / 4, i % 4);
                    dst[lane * 8 + half * 4 + byte] = (q as i8 as i16 + 128) as u8;
                }
            }
        }
        Ok(Self {
            n,
            k,
            pairs,
            scales,
            tiles: None,
        })
    }

    fn tiled(raw: &[u8], n: usize, k: usize) -> Self {
        let kb = k / Q8_0_BLOCK;
        let n_tiles = n / CANDLE_REPACK_TILE_N;
        let mut qs = vec![TileBlock([0; 16 * Q8_0_BLOCK]); n_tiles * kb];
        let mut scales = vec![[0f32; 16]; n_tiles * kb];
        for col in 0..n {
            let (t, r) = (col / 16, col % 16);
            for b in 0..kb {
                let off = (col * kb + b) * Q8_0_BLOCK_BYTES;
                let block = &raw[off..off + Q8_0_BLOCK_BYTES];
                scales[t * kb + b][r] = f16::from_le_bytes([block[0], block[1]]).to_f32();
                let dst = &mut qs[t * kb + b].0;
                for (i, &q) in block[2..].iter().enumerate() {
                    dst[(i / 4) * 64 + r * 4 + i % 4] = (q as i8 as i16 + 128) as u8;
                }
            }
        }
        Self {
            n,
            k,
            pairs: Vec::new(),
            scales: Vec::new(),
            tiles: Some(Tiles { qs, scales }),
        }
    }

    /// Repacks a CPU `QTensor` of dtype Q8_0 and shape `[n, k]`.
    pub fn from_qtensor(q: &QTensor) -> Result<Self, Q8GemmError> {
        if q.dtype() != GgmlDType::Q8_0 {
            return Err(Q8GemmError::NotQ8_0 { dtype: q.dtype() });
        }
        let &[n, k] = q.shape().dims() else {
            return Err(Q8GemmError::NotMatrix {
                dims: q.shape().dims().to_vec(),
            });
        };
        Self::from_blocks(&q.data()?, n, k)
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Whether candle's `QMatMul::forward` repacks a `[n, k]` Q8_0 weight on this CPU: `k` a
    /// multiple of 256, `n` of 16, and AVX-512 VNNI or AVX-VNNI present. It then quantizes the
    /// activations to Q8_K (one scale per 256 values) and keeps one f32 accumulator per output,
    /// `acc = fma(exact_block_dot, wd * ad, acc)` block by block; [`Self::matmul`] follows it.
    ///
    /// candle also honours `MISTRALRS_FORCE_AVX2=1` (and `MISTRALRS_FORCE_AVXVNNI=1`) from the
    /// environment here; with `MISTRALRS_FORCE_AVX2=1` it takes the generic path instead and
    /// this packing no longer matches it bit for bit. This library does not read the
    /// environment.
    pub fn candle_repacks(n: usize, k: usize) -> bool {
        if !(k > 0 && k.is_multiple_of(CANDLE_REPACK_K) && n.is_multiple_of(CANDLE_REPACK_TILE_N)) {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            (is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"))
                || (is_x86_feature_detected!("avxvnni") && is_x86_feature_detected!("avx2"))
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// `x`: `m` rows of `k` f32, row-major → `m` rows of `n` f32, equal bit for bit to candle's
    /// generic Q8_0 CPU matmul (see the module docs).
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>, Q8GemmError> {
        let expected = m * self.k;
        if x.len() != expected {
            return Err(Q8GemmError::ActivationLen {
                m,
                k: self.k,
                expected,
                got: x.len(),
            });
        }
        Ok(self.matmul_on(Path::detect(), x, m))
    }

    /// [`Self::matmul`] on a given path; `x` has been checked.
    fn matmul_on(&self, path: Path, x: &[f32], m: usize) -> Vec<f32> {
        let mut out = vec![0f32; m * self.n];
        if m == 0 || self.n == 0 {
            return out;
        }
        if let Some(tiles) = &self.tiles {
            match path {
                #[cfg(target_arch = "x86_64")]
                Path::Avx512Vnni => vnni::gemm_tiles(self, tiles, x, m, &mut out),
                _ => scalar_tiles(self, tiles, x, &mut out),
            }
            return out;
        }
        match path {
            #[cfg(target_arch = "x86_64")]
            Path::Avx512Vnni => gemm_vnni(self, x, m, &mut out),
            Path::Lanes => scalar_matmul(self, x, &mut out, true),
            Path::Scalar => scalar_matmul(self, x, &mut out, false),
        }
        out
    }

    /// [`Self::matmul`] on a contiguous f32 CPU tensor `[.., k]` → `[.., n]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor, Q8GemmError> {
        let dims = x.dims();
        let m = dims[..dims.len().saturating_sub(1)].iter().product();
        let flat = x.flatten_all()?.to_vec1::<f32>()?;
        let y = self.matmul(&flat, m)?;
        let mut out_dims = dims.to_vec();
        if let Some(last) = out_dims.last_mut() {
            *last = self.n;
        }
        Ok(Tensor::from_vec(y, out_dims, &Device::Cpu)?)
    }

    fn k_blocks(&self) -> usize {
        self.k / Q8_0_BLOCK
    }
}

/// Which of candle's dot products to reproduce, and how fast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// candle's eight-lane AVX2 arithmetic, computed with AVX-512 VNNI.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
    /// candle's eight-lane AVX2 arithmetic, emulated in scalar code (AVX2 without AVX-512).
    Lanes,
    /// candle's scalar fallback (no AVX2+FMA).
    Scalar,
}

impl Path {
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            // candle takes the lane path exactly when AVX2 and FMA are detected at run time.
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                if is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vnni")
                {
                    return Self::Avx512Vnni;
                }
                return Self::Lanes;
            }
        }
        Self::Scalar
    }
}

/// One activation row quantized to Q8_0 as candle does it: `(qs, d)` per block.
fn quantize_block(xs: &[f32], qs: &mut [i8; Q8_0_BLOCK]) -> f32 {
    let amax = xs.iter().fold(0f32, |m, x| m.max(x.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (q, &x) in qs.iter_mut().zip(xs) {
        *q = (x * id).round() as i8;
    }
    f16::from_f32(d).to_f32()
}

/// candle's final reduction of the eight lanes (`hsum_float_8`).
fn hsum8(l: [f32; 8]) -> f32 {
    ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

/// The reference: candle's per-output arithmetic, one output at a time.
fn scalar_matmul(w: &PackedQ8_0, x: &[f32], out: &mut [f32], lanes: bool) {
    let (k, n, kb) = (w.k, w.n, w.k_blocks());
    out.par_chunks_mut(n)
        .enumerate()
        .for_each(|(row, out_row)| {
            let mut qs = vec![[0i8; Q8_0_BLOCK]; kb];
            let ds: Vec<f32> = (0..kb)
                .map(|b| quantize_block(&x[row * k + b * 32..row * k + b * 32 + 32], &mut qs[b]))
                .collect();
            for (col, o) in out_row.iter_mut().enumerate() {
                let (pair, half) = (col / 2, col % 2);
                let mut acc = [0f32; 8];
                let mut sum = 0f32;
                for b in 0..kb {
                    let wq = &w.pairs[pair * kb + b].0;
                    let wd = w.scales[pair * kb + b][half];
                    let mut lane_sums = [0i32; 8];
                    for (l, s) in lane_sums.iter_mut().enumerate() {
                        for byte in 0..4 {
                            let wv = wq[l * 8 + half * 4 + byte] as i32 - 128;
                            *s += wv * qs[b][l * 4 + byte] as i32;
                        }
                    }
                    if lanes {
                        let d = wd * ds[b];
                        for (a, &s) in acc.iter_mut().zip(&lane_sums) {
                            *a = d.mul_add(s as f32, *a);
                        }
                    } else {
                        sum += lane_sums.iter().sum::<i32>() as f32 * wd * ds[b];
                    }
                }
                *o = if lanes { hsum8(acc) } else { sum };
            }
        });
}

/// Values per Q8_K superblock (candle's activation format on the repacked path).
const Q8K_BLOCK: usize = 256;

/// One 256-value superblock quantized to Q8_K as candle does it; returns the scale `d` and
/// writes the values. Unlike Q8_0, the scale follows the signed value of largest magnitude
/// (the first one, on ties).
fn quantize_q8k(xs: &[f32], qs: &mut [i8]) -> f32 {
    let (mut max, mut amax) = (0f32, 0f32);
    for &x in xs {
        if amax < x.abs() {
            amax = x.abs();
            max = x;
        }
    }
    if amax == 0.0 {
        qs.fill(0);
        return 0.0;
    }
    let iscale = -127f32 / max;
    for (q, &x) in qs.iter_mut().zip(xs) {
        *q = (iscale * x).round().clamp(-128.0, 127.0) as i8;
    }
    1.0 / iscale
}

/// The reference for repacked shapes: one accumulator per output, block by block.
fn scalar_tiles(w: &PackedQ8_0, tiles: &Tiles, x: &[f32], out: &mut [f32]) {
    let (k, n, kb) = (w.k, w.n, w.k_blocks());
    out.par_chunks_mut(n)
        .enumerate()
        .for_each(|(row, out_row)| {
            let xr = &x[row * k..(row + 1) * k];
            let mut qs = vec![0i8; k];
            let ds: Vec<f32> = xr
                .chunks_exact(Q8K_BLOCK)
                .zip(qs.chunks_exact_mut(Q8K_BLOCK))
                .map(|(xs, q)| quantize_q8k(xs, q))
                .collect();
            for (col, o) in out_row.iter_mut().enumerate() {
                let (t, r) = (col / 16, col % 16);
                let mut acc = 0f32;
                for b in 0..kb {
                    let wq = &tiles.qs[t * kb + b].0;
                    let dot: i32 = (0..Q8_0_BLOCK)
                        .map(|i| {
                            (wq[(i / 4) * 64 + r * 4 + i % 4] as i32 - 128) * qs[b * 32 + i] as i32
                        })
                        .sum();
                    let d = tiles.scales[t * kb + b][r] * ds[b * Q8_0_BLOCK / Q8K_BLOCK];
                    acc = (dot as f32).mul_add(d, acc);
                }
                *o = acc;
            }
        });
}

#[cfg(target_arch = "x86_64")]
use vnni::gemm_vnni;

#[cfg(target_arch = "x86_64")]
mod vnni;

#[cfg(test)]
mod tests;
