//! Q8_0 × f32 matmul for prefill and batched decode, bit-identical to candle's CPU path.
//!
//! candle 0.11.1's `QMatMul::forward` with a Q8_0 weight and f32 input computes every output
//! in one of two ways, depending on the CPU and the shape:
//!
//! - **Lanes** (any x86 CPU with AVX2 and FMA, for shapes candle does not repack):
//!   1. Each activation row is quantized to Q8_0 blocks of 32: `d = amax / 127`,
//!      `q = round(x * (1 / d)) as i8` (0 when `d == 0`), and `d` is stored as f16.
//!   2. A dot product of a weight row and an activation row keeps eight f32 lanes
//!      (`vec_dot_q8_0_q8_0` in candle's `avx.rs`). For each block, lane `l` receives the exact
//!      integer sum of the four products at bytes `4l..4l+4`, converted to f32, and
//!      accumulates `lane = fma(wd * ad, lane_sum, lane)`, where `wd * ad` is the f32 product
//!      of the two f16 scales. The blocks run in order, and the lanes are summed at the end as
//!      `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`.
//! - **Tiles** (CPUs with AVX-512 VNNI or AVX-VNNI, `k` a multiple of 256 and `n` of 16):
//!   candle repacks the weight into 16-column tiles, quantizes each activation row to Q8_K
//!   (one scale per 256 values) and keeps one f32 accumulator per output,
//!   `acc = fma(exact_block_dot, wd * ad, acc)` block by block.
//!
//! [`PackedQ8_0::matmul`] computes the same numbers with an int8 GEMM: each activation row is
//! quantized once, the weights are repacked once for the kernel path chosen at load
//! ([`CpuPath`]), and a register-blocked microkernel reuses each weight load across several
//! rows. Only the order in which outputs are computed differs from candle; the arithmetic of
//! each output is the same operation for operation. The paths differ only in how they obtain
//! the exact integer sums:
//! - AVX-512 VNNI and AVX-VNNI: `vpdpbusd` multiplies unsigned by signed bytes, so the weights
//!   are stored offset by +128 and the sum starts at `-128 * (sum of the activation bytes)`,
//!   which cancels the offset exactly in integer arithmetic.
//! - AVX2: `vpmaddubsw` would saturate on offset weights, so the weights stay signed and, as in
//!   candle, `|w|` multiplies `a` with the sign of `w` (`vpsignb`), then `vpmaddwd` adds pairs.
//!
//! [`PackedQ8_0::reference`] computes both arithmetics one output at a time in plain scalar
//! code; every path is tested against it bit for bit.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use half::f16;
use rayon::prelude::*;

use crate::CpuPath;

/// Values per Q8_0 block.
pub const Q8_0_BLOCK: usize = 32;
/// Bytes per Q8_0 block: an f16 scale and 32 signed bytes.
const Q8_0_BLOCK_BYTES: usize = 2 + Q8_0_BLOCK;
/// Values per Q8_K superblock (candle's activation format on the tiled arithmetic).
const Q8K_BLOCK: usize = 256;

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
    #[error("the int8 GEMM has no `{path}` kernel, or this CPU cannot run it")]
    Path { path: CpuPath },
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
            Self::Path { .. } => "path",
            Self::Candle(_) => "candle",
        }
    }
}

/// Which of candle's two computations a weight reproduces (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arithmetic {
    Lanes,
    Tiles,
}

/// One block of two output columns for the AVX-512 lanes kernel: for each lane `l`, the four
/// bytes `4l..4l+4` of column `2c` then of column `2c + 1`, all offset by +128.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct PairBlock([u8; 64]);

/// Output columns per strip of the 256-bit lanes kernels.
const STRIP: usize = 8;

/// One block of a strip of eight columns for the 256-bit lanes kernels: for each group `g` of
/// four values (candle's lane `g`), the four bytes of each column in turn, signed (AVX2) or
/// offset by +128 (AVX-VNNI). One 32-byte load is one lane of eight columns.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct StripBlock([u8; STRIP * Q8_0_BLOCK]);

/// One block of 16 output columns in candle's repacked order: for each group `g` of four
/// values, the four bytes of each column in turn, offset by +128.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct TileBlock([u8; 16 * Q8_0_BLOCK]);

/// The repacked weight; which layout follows from the path and the arithmetic.
#[derive(Clone)]
enum Layout {
    /// AVX-512 VNNI, lanes: `[n_pairs][k_blocks]` (an odd `n` is padded with a zero column),
    /// and the two columns' f16 scales as f32.
    Pairs {
        blocks: Vec<PairBlock>,
        scales: Vec<[f32; 2]>,
    },
    /// AVX2 (signed) or AVX-VNNI (offset), lanes: `[n / 8][k_blocks]` (the last strip padded
    /// with zero columns), the eight columns' scales as f32.
    Strips {
        blocks: Vec<StripBlock>,
        scales: Vec<[f32; STRIP]>,
        offset: bool,
        /// Whether some weight is -128 (files from other tools may hold it): the AVX2 kernel
        /// then takes `|w|` as the unsigned operand, which is exact for -128, at one more
        /// instruction per product.
        has_min: bool,
    },
    /// Either VNNI width, tiles: `[n / 16][k_blocks]`, the 16 columns' scales as f32.
    Tiles {
        blocks: Vec<TileBlock>,
        scales: Vec<[f32; 16]>,
    },
}

/// A Q8_0 weight `[n, k]` repacked for [`PackedQ8_0::matmul`] on one [`CpuPath`] (about 1.1
/// bytes per weight).
#[derive(Clone)]
pub struct PackedQ8_0 {
    n: usize,
    k: usize,
    path: CpuPath,
    layout: Layout,
}

impl std::fmt::Debug for PackedQ8_0 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedQ8_0")
            .field("n", &self.n)
            .field("k", &self.k)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The weight byte `q` as stored: offset by +128 or as is.
fn stored(q: u8, offset: bool) -> u8 {
    if offset {
        (q as i8 as i16 + 128) as u8
    } else {
        q
    }
}

impl PackedQ8_0 {
    /// Repacks raw Q8_0 blocks (`n` rows of `k / 32` blocks, 34 bytes each: a little-endian f16
    /// scale and 32 `i8`), as `QTensor::data` returns them for a `[n, k]` weight, for `path`,
    /// which this CPU must support and which must have an int8 GEMM.
    pub fn from_blocks(raw: &[u8], n: usize, k: usize, path: CpuPath) -> Result<Self, Q8GemmError> {
        if !path.has_int8_gemm() || !path.supported() {
            return Err(Q8GemmError::Path { path });
        }
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
        let block = |col: usize, b: usize| {
            let off = (col * kb + b) * Q8_0_BLOCK_BYTES;
            let bytes = &raw[off..off + Q8_0_BLOCK_BYTES];
            (
                f16::from_le_bytes([bytes[0], bytes[1]]).to_f32(),
                &bytes[2..],
            )
        };
        let layout = if path.candle_repacks_q8_0(n, k) {
            let n_tiles = n / 16;
            let mut blocks = vec![TileBlock([0; 16 * Q8_0_BLOCK]); n_tiles * kb];
            let mut scales = vec![[0f32; 16]; n_tiles * kb];
            for col in 0..n {
                let (t, r) = (col / 16, col % 16);
                for b in 0..kb {
                    let (d, qs) = block(col, b);
                    scales[t * kb + b][r] = d;
                    let dst = &mut blocks[t * kb + b].0;
                    for (i, &q) in qs.iter().enumerate() {
                        dst[(i / 4) * 64 + r * 4 + i % 4] = stored(q, true);
                    }
                }
            }
            Layout::Tiles { blocks, scales }
        } else if path == CpuPath::Avx512Vnni {
            let n_pairs = n.div_ceil(2);
            let mut blocks = vec![PairBlock([128; 64]); n_pairs * kb];
            let mut scales = vec![[0f32; 2]; n_pairs * kb];
            for col in 0..n {
                let (pair, half) = (col / 2, col % 2);
                for b in 0..kb {
                    let (d, qs) = block(col, b);
                    scales[pair * kb + b][half] = d;
                    let dst = &mut blocks[pair * kb + b].0;
                    for (i, &q) in qs.iter().enumerate() {
                        dst[(i / 4) * 8 + half * 4 + i % 4] = stored(q, true);
                    }
                }
            }
            Layout::Pairs { blocks, scales }
        } else {
            let offset = path == CpuPath::AvxVnni;
            let strips = n.div_ceil(STRIP);
            let mut blocks = vec![StripBlock([stored(0, offset); STRIP * Q8_0_BLOCK]); strips * kb];
            let mut scales = vec![[0f32; STRIP]; strips * kb];
            let mut has_min = false;
            for col in 0..n {
                let (strip, c) = (col / STRIP, col % STRIP);
                for b in 0..kb {
                    let (d, qs) = block(col, b);
                    scales[strip * kb + b][c] = d;
                    let dst = &mut blocks[strip * kb + b].0;
                    for (i, &q) in qs.iter().enumerate() {
                        has_min |= q as i8 == i8::MIN;
                        dst[(i / 4) * STRIP * 4 + c * 4 + i % 4] = stored(q, offset);
                    }
                }
            }
            Layout::Strips {
                blocks,
                scales,
                offset,
                has_min,
            }
        };
        Ok(Self { n, k, path, layout })
    }

    /// Repacks a CPU `QTensor` of dtype Q8_0 and shape `[n, k]` for `path`.
    pub fn from_qtensor(q: &QTensor, path: CpuPath) -> Result<Self, Q8GemmError> {
        if q.dtype() != GgmlDType::Q8_0 {
            return Err(Q8GemmError::NotQ8_0 { dtype: q.dtype() });
        }
        let &[n, k] = q.shape().dims() else {
            return Err(Q8GemmError::NotMatrix {
                dims: q.shape().dims().to_vec(),
            });
        };
        Self::from_blocks(&q.data()?, n, k, path)
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The kernel path this weight was packed for.
    pub fn path(&self) -> CpuPath {
        self.path
    }

    /// `x`: `m` rows of `k` f32, row-major → `m` rows of `n` f32, equal bit for bit to candle's
    /// Q8_0 CPU matmul on a CPU whose best extension is this weight's path (see the module docs).
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>, Q8GemmError> {
        self.check_activations(x, m)?;
        let mut out = vec![0f32; m * self.n];
        if m == 0 || self.n == 0 {
            return Ok(out);
        }
        #[cfg(target_arch = "x86_64")]
        match (&self.layout, self.path) {
            (Layout::Pairs { .. }, _) => avx512::gemm_pairs(self, x, m, &mut out),
            (Layout::Tiles { .. }, CpuPath::Avx512Vnni) => avx512::gemm_tiles(self, x, m, &mut out),
            (Layout::Tiles { .. }, _) => avx256::gemm_tiles(self, x, m, &mut out),
            (Layout::Strips { .. }, _) => avx256::gemm_strips(self, x, m, &mut out),
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no int8 GEMM path is supported off x86_64, so no weight was packed");
        Ok(out)
    }

    /// The same numbers as [`Self::matmul`], one output at a time in scalar code: the reference
    /// every kernel path is tested against.
    pub fn reference(&self, x: &[f32], m: usize) -> Result<Vec<f32>, Q8GemmError> {
        self.check_activations(x, m)?;
        let (k, n, kb) = (self.k, self.n, self.k_blocks());
        let mut out = vec![0f32; m * n];
        if n == 0 {
            return Ok(out);
        }
        let arithmetic = self.arithmetic();
        out.par_chunks_mut(n)
            .enumerate()
            .for_each(|(row, out_row)| {
                let xr = &x[row * k..(row + 1) * k];
                let mut qs = vec![0i8; k];
                // The activation scale of each 32-value block.
                let ds: Vec<f32> = match arithmetic {
                    Arithmetic::Lanes => xr
                        .chunks_exact(Q8_0_BLOCK)
                        .zip(qs.chunks_exact_mut(Q8_0_BLOCK))
                        .map(|(xs, q)| quantize_q8_0(xs, q))
                        .collect(),
                    Arithmetic::Tiles => xr
                        .chunks_exact(Q8K_BLOCK)
                        .zip(qs.chunks_exact_mut(Q8K_BLOCK))
                        .flat_map(|(xs, q)| {
                            let d = quantize_q8k(xs, q);
                            [d; Q8K_BLOCK / Q8_0_BLOCK]
                        })
                        .collect(),
                };
                for (col, o) in out_row.iter_mut().enumerate() {
                    let mut lanes = [0f32; 8];
                    let mut acc = 0f32;
                    for b in 0..kb {
                        let (wd, wq) = self.block(col, b);
                        let aq = &qs[b * Q8_0_BLOCK..(b + 1) * Q8_0_BLOCK];
                        let mut lane_sums = [0i32; 8];
                        for (i, (&w, &a)) in wq.iter().zip(aq).enumerate() {
                            lane_sums[i / 4] += w as i32 * a as i32;
                        }
                        let d = wd * ds[b];
                        match arithmetic {
                            Arithmetic::Lanes => {
                                for (l, &s) in lanes.iter_mut().zip(&lane_sums) {
                                    *l = d.mul_add(s as f32, *l);
                                }
                            }
                            Arithmetic::Tiles => {
                                let dot: i32 = lane_sums.iter().sum();
                                acc = (dot as f32).mul_add(d, acc);
                            }
                        }
                    }
                    *o = match arithmetic {
                        Arithmetic::Lanes => hsum8(lanes),
                        Arithmetic::Tiles => acc,
                    };
                }
            });
        Ok(out)
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

    fn check_activations(&self, x: &[f32], m: usize) -> Result<(), Q8GemmError> {
        let expected = m * self.k;
        if x.len() != expected {
            return Err(Q8GemmError::ActivationLen {
                m,
                k: self.k,
                expected,
                got: x.len(),
            });
        }
        Ok(())
    }

    fn arithmetic(&self) -> Arithmetic {
        match self.layout {
            Layout::Tiles { .. } => Arithmetic::Tiles,
            Layout::Pairs { .. } | Layout::Strips { .. } => Arithmetic::Lanes,
        }
    }

    fn k_blocks(&self) -> usize {
        self.k / Q8_0_BLOCK
    }

    /// Column `col`'s block `b` as stored in the original Q8_0 weight: the scale and the values.
    fn block(&self, col: usize, b: usize) -> (f32, [i8; Q8_0_BLOCK]) {
        let kb = self.k_blocks();
        let mut q = [0i8; Q8_0_BLOCK];
        match &self.layout {
            Layout::Pairs { blocks, scales } => {
                let (pair, half) = (col / 2, col % 2);
                let src = &blocks[pair * kb + b].0;
                for (i, v) in q.iter_mut().enumerate() {
                    *v = (src[(i / 4) * 8 + half * 4 + i % 4] as i16 - 128) as i8;
                }
                (scales[pair * kb + b][half], q)
            }
            Layout::Strips {
                blocks,
                scales,
                offset,
                ..
            } => {
                let (strip, c) = (col / STRIP, col % STRIP);
                let src = &blocks[strip * kb + b].0;
                for (i, v) in q.iter_mut().enumerate() {
                    let s = src[(i / 4) * STRIP * 4 + c * 4 + i % 4];
                    *v = if *offset {
                        (s as i16 - 128) as i8
                    } else {
                        s as i8
                    };
                }
                (scales[strip * kb + b][c], q)
            }
            Layout::Tiles { blocks, scales } => {
                let (t, r) = (col / 16, col % 16);
                let src = &blocks[t * kb + b].0;
                for (i, v) in q.iter_mut().enumerate() {
                    *v = (src[(i / 4) * 64 + r * 4 + i % 4] as i16 - 128) as i8;
                }
                (scales[t * kb + b][r], q)
            }
        }
    }
}

/// One 32-value block quantized to Q8_0 as candle does it; returns the f16-rounded scale.
fn quantize_q8_0(xs: &[f32], qs: &mut [i8]) -> f32 {
    let amax = xs.iter().fold(0f32, |m, x| m.max(x.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (q, &x) in qs.iter_mut().zip(xs) {
        *q = (x * id).round() as i8;
    }
    f16::from_f32(d).to_f32()
}

/// candle's final reduction of the eight lanes (`hsum_float_8`); the K-quant GEMM ends the
/// same way.
pub(crate) fn hsum8(l: [f32; 8]) -> f32 {
    ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

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

/// Activation rows quantized to Q8_K for the tiled arithmetic: values `[m][k]`, the integer
/// start `-128 * (sum of the block's values)` per 32-value block (cancelling the weight
/// offset), and the scale per 256-value superblock.
struct Q8kRows {
    qs: Vec<i8>,
    init: Vec<i32>,
    ds: Vec<f32>,
}

impl Q8kRows {
    fn quantize(x: &[f32], m: usize, k: usize) -> Self {
        let (kb, sb) = (k / Q8_0_BLOCK, k / Q8K_BLOCK);
        let mut rows = Self {
            qs: vec![0i8; m * k],
            init: vec![0i32; m * kb],
            ds: vec![0f32; m * sb],
        };
        rows.qs
            .par_chunks_mut(k)
            .zip(rows.init.par_chunks_mut(kb))
            .zip(rows.ds.par_chunks_mut(sb))
            .zip(x.par_chunks(k))
            .for_each(|(((q, i), d), xr)| {
                for ((xs, qb), db) in xr
                    .chunks_exact(Q8K_BLOCK)
                    .zip(q.chunks_exact_mut(Q8K_BLOCK))
                    .zip(d)
                {
                    *db = quantize_q8k(xs, qb);
                }
                for (v, qb) in i.iter_mut().zip(q.chunks_exact(Q8_0_BLOCK)) {
                    *v = -128 * qb.iter().map(|&q| q as i32).sum::<i32>();
                }
            });
        rows
    }
}

#[cfg(target_arch = "x86_64")]
mod avx256;
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(test)]
mod tests;
