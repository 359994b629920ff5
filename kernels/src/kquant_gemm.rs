//! Q4_K and Q6_K × f32 matmul that reads the weights in the file's own formats, at every row
//! count.
//!
//! A decode step reads every weight once, so its speed on a CPU is the speed of memory divided
//! by the bytes of the model. Re-encoding a K-quant file to Q8_0 (what [`crate::PackedQ8_0`]
//! runs) costs 1.8 times the bytes of Q4_K; this GEMM reads 152 bytes per 256 weights of Q4_K
//! (the file's 144, with the scales unpacked) and 212 per 256 of Q6_K (the file's 210).
//!
//! The weights are repacked once into tiles of 16 output columns, so that a vector lane is an
//! output column: the kernels broadcast four activation bytes and multiply them with four values
//! of every column of the tile, and no output needs a horizontal sum. The arithmetic is
//! Quorum's own (not candle's), the same on every path, and each output depends only on its
//! own row, so a row's result does not depend on the batch beside it:
//!
//! 1. Each activation row is quantized per 256-value superblock: `ad = amax / 127`,
//!    `q = round(x * (127 / amax))` to nearest, ties to even (all 0 where `amax == 0`), and
//!    the sums of `q` over each group of 16 and of 32 values are kept.
//! 2. A weight superblock of one column holds unsigned values `u` (Q4_K: 0..15; Q6_K: 0..63,
//!    the file's value plus 32), an integer scale `S` per sub-block (Q4_K: 6 bits per 32
//!    values; Q6_K: signed 8 bits per 16 values), an integer min `M` per sub-block (Q4_K: 6
//!    bits; Q6_K: `32 * S`), and two f32 factors `d` and `dmin` (Q6_K: `dmin = d`). Its
//!    weights are `d * S * u - dmin * M`.
//! 3. For each superblock: per sub-block `j` the exact integer `sum_j = Σ u * q`, and in f32
//!    `t = fma(sum_j, d * S_j, t)` sub-block by sub-block from `t = 0`, then
//!    `acc = fma(t, ad, acc)`; and the exact integer `imin = Σ M_j * (sum of q over sub-block
//!    j)`, then `macc = fma(imin, dmin * ad, macc)`; superblock by superblock.
//! 4. The output is `acc - macc`.
//!
//! No product or sum can overflow an i32 (nor exceed the 2^24 an f32 holds exactly), so the
//! integers are exact whatever instructions produce them (`vpdpbusd` on AVX-512 VNNI and
//! AVX-VNNI, `vpmaddubsw` then `vpmaddwd` on AVX2), and the f32 steps are the same
//! operations in the same order: every path equals [`PackedKQuant::reference`] bit for bit.

use candle_core::quantized::{GgmlDType, QTensor};
use half::f16;
use rayon::prelude::*;

use crate::CpuPath;

/// Values per K-quant superblock.
pub const KQ_BLOCK: usize = 256;
/// Output columns per tile: one per lane of a 512-bit vector of i32.
pub(crate) const TILE: usize = 16;
/// Bytes of a Q4_K superblock in the file: f16 `d`, f16 `dmin`, 12 bytes of packed 6-bit
/// scales and mins, 128 bytes of 4-bit values.
const Q4K_FILE_BYTES: usize = 144;
/// Bytes of a Q6_K superblock in the file: 128 bytes of low 4 bits, 64 of high 2 bits, 16
/// signed scales, f16 `d`.
const Q6K_FILE_BYTES: usize = 210;

/// How far ahead of the superblock being computed the weights are prefetched, by every path:
/// in a decode step every weight comes from memory, and the hardware prefetcher alone left
/// the kernels waiting on their loads (a burst of a whole superblock's or tile's lines
/// stalled on the line-fill buffers instead).
pub(crate) const PREFETCH_AHEAD: usize = 8192;

/// Prefetch hints for lines `from..to` (of 64 bytes) after `p`: hints only, so a line past the
/// end of the weight does no harm.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn prefetch_lines(p: *const u8, from: usize, to: usize) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    for line in from..to {
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64 * line).cast()) };
    }
}

/// Which K-quant a weight is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KQuant {
    Q4K,
    Q6K,
}

impl KQuant {
    /// The format of a ggml dtype, if this GEMM reads it.
    pub fn of(dtype: GgmlDType) -> Option<Self> {
        match dtype {
            GgmlDType::Q4K => Some(Self::Q4K),
            GgmlDType::Q6K => Some(Self::Q6K),
            _ => None,
        }
    }

    /// Sub-blocks (scale groups) per superblock.
    pub(crate) const fn sub_blocks(self) -> usize {
        match self {
            Self::Q4K => 8,
            Self::Q6K => 16,
        }
    }

    /// Bytes of one tile's superblock (16 columns × 256 values) as packed; see
    /// [`TileOffsets`].
    pub(crate) const fn tile_bytes(self) -> usize {
        match self {
            // d, dmin, 8 scales, 8 mins, 4-bit values.
            Self::Q4K => 64 + 64 + 128 + 128 + 2048,
            // d, 16 scales, 4-bit low parts, 2-bit high parts.
            Self::Q6K => 64 + 256 + 2048 + 1024,
        }
    }

    const fn file_bytes(self) -> usize {
        match self {
            Self::Q4K => Q4K_FILE_BYTES,
            Self::Q6K => Q6K_FILE_BYTES,
        }
    }
}

/// Where the parts of a packed tile superblock start, in bytes. For a column `c` of the tile:
///
/// - `d` and (Q4_K) `dmin`: 16 f32 each, column `c` at `4c`.
/// - `scales`: per sub-block `j`, 16 bytes (u8 for Q4_K, i8 for Q6_K), column `c` at `16j + c`.
/// - `mins` (Q4_K): per pair `i` of sub-blocks, 32 bytes, `m[2i]` of column `c` at `32i + 2c`
///   and `m[2i + 1]` at `32i + 2c + 1` (the layout `vpmaddwd` pairs take).
/// - `values`: per group `g` of eight values `8g..8g + 8` of the superblock, 64 bytes: byte
///   `4c + i` holds value `8g + i` of column `c` in its low nibble and value `8g + 4 + i` in its
///   high nibble (for Q6_K: the low four bits of the six).
/// - `high` (Q6_K): per group `h` of sixteen values, 64 bytes: byte `4c + i` holds the high two
///   bits of values `16h + i`, `16h + 4 + i`, `16h + 8 + i` and `16h + 12 + i` of column `c`,
///   at bits 0, 2, 4 and 6.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TileOffsets {
    pub d: usize,
    pub dmin: usize,
    pub scales: usize,
    pub mins: usize,
    pub values: usize,
    pub high: usize,
}

impl TileOffsets {
    pub(crate) const fn of(kind: KQuant) -> Self {
        match kind {
            KQuant::Q4K => Self {
                d: 0,
                dmin: 64,
                scales: 128,
                mins: 256,
                values: 384,
                high: 384 + 2048,
            },
            KQuant::Q6K => Self {
                d: 0,
                dmin: 0,
                scales: 64,
                mins: 64,
                values: 320,
                high: 320 + 2048,
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KQuantGemmError {
    #[error("k = {k} is not a multiple of the K-quant superblock size {KQ_BLOCK}")]
    KNotBlockMultiple { k: usize },
    #[error("expected {expected} bytes of {kind:?} blocks for [{n}, {k}], got {got}")]
    WeightBytes {
        kind: KQuant,
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
    #[error("the weight is {dtype:?}, not Q4_K or Q6_K")]
    NotKQuant { dtype: GgmlDType },
    #[error("the weight must be two-dimensional [n, k], got {dims:?}")]
    NotMatrix { dims: Vec<usize> },
    #[error("the K-quant GEMM has no `{path}` kernel, or this CPU cannot run it")]
    Path { path: CpuPath },
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

/// A Q4_K or Q6_K weight `[n, k]` packed for [`PackedKQuant::matmul`]: tiles of 16 output
/// columns (the last padded with zero columns), each tile's superblocks in order, each
/// [`KQuant::tile_bytes`] long and laid out as [`TileOffsets`] says. One layout serves every
/// path; the 256-bit kernels take a tile as two halves of eight columns.
#[derive(Clone)]
pub struct PackedKQuant {
    n: usize,
    k: usize,
    kind: KQuant,
    path: CpuPath,
    tiles: Vec<u8>,
}

impl std::fmt::Debug for PackedKQuant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedKQuant")
            .field("n", &self.n)
            .field("k", &self.k)
            .field("kind", &self.kind)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// One column's superblock in the arithmetic's terms (step 2 of the module docs).
#[derive(Clone)]
pub(crate) struct Superblock {
    pub d: f32,
    pub dmin: f32,
    pub values: [u8; KQ_BLOCK],
    /// Per sub-block.
    pub scales: [i32; 16],
    /// Per sub-block.
    pub mins: [i32; 16],
}

impl Superblock {
    const ZERO: Self = Self {
        d: 0.0,
        dmin: 0.0,
        values: [0; KQ_BLOCK],
        scales: [0; 16],
        mins: [0; 16],
    };

    /// Decodes a superblock as the file stores it.
    fn from_file(kind: KQuant, src: &[u8]) -> Self {
        let mut b = Self::ZERO;
        match kind {
            KQuant::Q4K => {
                b.d = f16_at(src, 0);
                b.dmin = f16_at(src, 2);
                let packed = &src[4..16];
                for j in 0..8 {
                    let (s, m) = q4k_scale_min(packed, j);
                    b.scales[j] = s as i32;
                    b.mins[j] = m as i32;
                }
                let qs = &src[16..Q4K_FILE_BYTES];
                for (v, u) in b.values.iter_mut().enumerate() {
                    let (c, i) = (v / 64, v % 64);
                    let byte = qs[c * 32 + i % 32];
                    *u = if i >= 32 { byte >> 4 } else { byte & 0x0F };
                }
            }
            KQuant::Q6K => {
                b.d = f16_at(src, 208);
                b.dmin = b.d;
                for g in 0..16 {
                    b.scales[g] = src[192 + g] as i8 as i32;
                    b.mins[g] = 32 * b.scales[g];
                }
                let (ql, qh) = (&src[..128], &src[128..192]);
                for (v, u) in b.values.iter_mut().enumerate() {
                    let (h, i) = (v / 128, v % 128);
                    let (part, l) = (i / 32, i % 32);
                    let low = ql[64 * h + l + 32 * (part % 2)];
                    let low = if part < 2 { low & 0x0F } else { low >> 4 };
                    *u = low | (((qh[32 * h + l] >> (2 * part)) & 3) << 4);
                }
            }
        }
        b
    }
}

/// The Q4_K file's 6-bit scale and min of sub-block `j` from its 12 packed bytes.
fn q4k_scale_min(packed: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (packed[j] & 63, packed[j + 4] & 63)
    } else {
        (
            (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4),
            (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
        )
    }
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// Writes column `c`'s superblock `b` into a tile superblock `dst` (see [`TileOffsets`]).
fn pack_column(kind: KQuant, b: &Superblock, c: usize, dst: &mut [u8]) {
    let o = TileOffsets::of(kind);
    dst[o.d + 4 * c..o.d + 4 * c + 4].copy_from_slice(&b.d.to_le_bytes());
    if kind == KQuant::Q4K {
        dst[o.dmin + 4 * c..o.dmin + 4 * c + 4].copy_from_slice(&b.dmin.to_le_bytes());
        for i in 0..4 {
            dst[o.mins + 32 * i + 2 * c] = b.mins[2 * i] as u8;
            dst[o.mins + 32 * i + 2 * c + 1] = b.mins[2 * i + 1] as u8;
        }
    }
    for j in 0..kind.sub_blocks() {
        dst[o.scales + 16 * j + c] = b.scales[j] as u8;
    }
    for g in 0..KQ_BLOCK / 8 {
        for i in 0..4 {
            let (lo, hi) = (b.values[8 * g + i] & 0x0F, b.values[8 * g + 4 + i] & 0x0F);
            dst[o.values + 64 * g + 4 * c + i] = lo | (hi << 4);
        }
    }
    if kind == KQuant::Q6K {
        for h in 0..KQ_BLOCK / 16 {
            for i in 0..4 {
                let bits = (0..4).fold(0u8, |acc, q| {
                    acc | ((b.values[16 * h + 4 * q + i] >> 4) << (2 * q))
                });
                dst[o.high + 64 * h + 4 * c + i] = bits;
            }
        }
    }
}

/// Reads column `c`'s superblock back from a tile superblock (the inverse of [`pack_column`]).
fn unpack_column(kind: KQuant, src: &[u8], c: usize) -> Superblock {
    let o = TileOffsets::of(kind);
    let f32_at = |at: usize| f32::from_le_bytes(src[at..at + 4].try_into().expect("4 bytes"));
    let mut b = Superblock::ZERO;
    b.d = f32_at(o.d + 4 * c);
    for j in 0..kind.sub_blocks() {
        let s = src[o.scales + 16 * j + c];
        b.scales[j] = match kind {
            KQuant::Q4K => s as i32,
            KQuant::Q6K => s as i8 as i32,
        };
    }
    match kind {
        KQuant::Q4K => {
            b.dmin = f32_at(o.dmin + 4 * c);
            for j in 0..8 {
                b.mins[j] = src[o.mins + 32 * (j / 2) + 2 * c + j % 2] as i32;
            }
        }
        KQuant::Q6K => {
            b.dmin = b.d;
            for j in 0..16 {
                b.mins[j] = 32 * b.scales[j];
            }
        }
    }
    for (v, u) in b.values.iter_mut().enumerate() {
        let (g, r) = (v / 8, v % 8);
        let byte = src[o.values + 64 * g + 4 * c + r % 4];
        *u = if r < 4 { byte & 0x0F } else { byte >> 4 };
        if kind == KQuant::Q6K {
            let (h, r) = (v / 16, v % 16);
            let bits = src[o.high + 64 * h + 4 * c + r % 4] >> (2 * (r / 4));
            *u |= (bits & 3) << 4;
        }
    }
    b
}

impl PackedKQuant {
    /// Packs raw superblocks (`n` rows of `k / 256`, as `QTensor::data` returns them for a
    /// `[n, k]` weight) for `path`, which this CPU must support and which must have an int8
    /// GEMM.
    pub fn from_blocks(
        raw: &[u8],
        kind: KQuant,
        n: usize,
        k: usize,
        path: CpuPath,
    ) -> Result<Self, KQuantGemmError> {
        if !path.has_int8_gemm() || !path.supported() {
            return Err(KQuantGemmError::Path { path });
        }
        if !k.is_multiple_of(KQ_BLOCK) {
            return Err(KQuantGemmError::KNotBlockMultiple { k });
        }
        let sbs = k / KQ_BLOCK;
        let expected = n * sbs * kind.file_bytes();
        if raw.len() != expected {
            return Err(KQuantGemmError::WeightBytes {
                kind,
                n,
                k,
                expected,
                got: raw.len(),
            });
        }
        let tile_bytes = kind.tile_bytes();
        let mut tiles = vec![0u8; n.div_ceil(TILE) * sbs * tile_bytes];
        tiles
            .par_chunks_mut(sbs * tile_bytes)
            .enumerate()
            .for_each(|(t, tile)| {
                for (sb, dst) in tile.chunks_exact_mut(tile_bytes).enumerate() {
                    for c in 0..TILE.min(n - t * TILE) {
                        let at = ((t * TILE + c) * sbs + sb) * kind.file_bytes();
                        let b = Superblock::from_file(kind, &raw[at..at + kind.file_bytes()]);
                        pack_column(kind, &b, c, dst);
                    }
                }
            });
        Ok(Self {
            n,
            k,
            kind,
            path,
            tiles,
        })
    }

    /// Packs a CPU `QTensor` of dtype Q4_K or Q6_K and shape `[n, k]` for `path`.
    pub fn from_qtensor(q: &QTensor, path: CpuPath) -> Result<Self, KQuantGemmError> {
        let kind = KQuant::of(q.dtype()).ok_or(KQuantGemmError::NotKQuant { dtype: q.dtype() })?;
        let &[n, k] = q.shape().dims() else {
            return Err(KQuantGemmError::NotMatrix {
                dims: q.shape().dims().to_vec(),
            });
        };
        Self::from_blocks(&q.data()?, kind, n, k, path)
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The weight's format.
    pub fn kind(&self) -> KQuant {
        self.kind
    }

    /// The kernel path this weight was packed for.
    pub fn path(&self) -> CpuPath {
        self.path
    }

    /// Bytes held (what a decode step reads of this weight).
    pub fn bytes(&self) -> usize {
        self.tiles.len()
    }

    pub(crate) fn superblocks(&self) -> usize {
        self.k / KQ_BLOCK
    }

    /// Tile `t`'s packed superblocks; tile `t + 1`'s follow them in memory.
    pub(crate) fn tile(&self, t: usize) -> &[u8] {
        let len = self.superblocks() * self.kind.tile_bytes();
        &self.tiles[t * len..(t + 1) * len]
    }

    /// Column `col`'s superblock `sb` in the arithmetic's terms.
    pub(crate) fn superblock(&self, col: usize, sb: usize) -> Superblock {
        let tile_bytes = self.kind.tile_bytes();
        let tile = &self.tile(col / TILE)[sb * tile_bytes..(sb + 1) * tile_bytes];
        unpack_column(self.kind, tile, col % TILE)
    }

    /// `x`: `m` rows of `k` f32, row-major → `m` rows of `n` f32, equal bit for bit to
    /// [`Self::reference`] (see the module docs).
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>, KQuantGemmError> {
        self.check_activations(x, m)?;
        let mut out = vec![0f32; m * self.n];
        if m == 0 || self.n == 0 {
            return Ok(out);
        }
        let acts = ActRows::quantize(x, m, self.k);
        #[cfg(target_arch = "x86_64")]
        match self.path {
            CpuPath::Avx512Vnni => avx512::gemm(self, &acts, &mut out),
            CpuPath::AvxVnni | CpuPath::Avx2 => avx256::gemm(self, &acts, &mut out),
            CpuPath::Candle => unreachable!("no weight is packed for candle's path"),
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no int8 GEMM path is supported off x86_64, so no weight was packed");
        Ok(out)
    }

    /// The same numbers as [`Self::matmul`], one output at a time in scalar code: the reference
    /// every kernel path is tested against.
    pub fn reference(&self, x: &[f32], m: usize) -> Result<Vec<f32>, KQuantGemmError> {
        self.check_activations(x, m)?;
        let n = self.n;
        let mut out = vec![0f32; m * n];
        if n == 0 {
            return Ok(out);
        }
        let acts = ActRows::quantize(x, m, self.k);
        let (sbs, subs) = (self.superblocks(), self.kind.sub_blocks());
        let sub_len = KQ_BLOCK / subs;
        out.par_chunks_mut(n)
            .enumerate()
            .for_each(|(row, out_row)| {
                for (col, o) in out_row.iter_mut().enumerate() {
                    let (mut acc, mut macc) = (0f32, 0f32);
                    for sb in 0..sbs {
                        let b = self.superblock(col, sb);
                        let at = row * sbs + sb;
                        let a = &acts.qs[at * KQ_BLOCK..(at + 1) * KQ_BLOCK];
                        let mut sb_acc = 0f32;
                        let mut imin = 0i32;
                        for j in 0..subs {
                            let range = j * sub_len..(j + 1) * sub_len;
                            let sum: i32 = b.values[range.clone()]
                                .iter()
                                .zip(&a[range.clone()])
                                .map(|(&u, &q)| u as i32 * q as i32)
                                .sum();
                            let ds = b.d * b.scales[j] as f32;
                            sb_acc = (sum as f32).mul_add(ds, sb_acc);
                            imin += b.mins[j] * a[range].iter().map(|&q| q as i32).sum::<i32>();
                        }
                        let ad = acts.ds[at];
                        acc = sb_acc.mul_add(ad, acc);
                        macc = (imin as f32).mul_add(b.dmin * ad, macc);
                    }
                    *o = acc - macc;
                }
            });
        Ok(out)
    }

    fn check_activations(&self, x: &[f32], m: usize) -> Result<(), KQuantGemmError> {
        let expected = m * self.k;
        if x.len() != expected {
            return Err(KQuantGemmError::ActivationLen {
                m,
                k: self.k,
                expected,
                got: x.len(),
            });
        }
        Ok(())
    }
}

/// Activation rows quantized per superblock (step 1 of the module docs), superblock after
/// superblock: `[m * k / 256]` of each part.
pub(crate) struct ActRows {
    /// 256 values per superblock.
    pub qs: Vec<i8>,
    pub ds: Vec<f32>,
    /// Sums over each group of 16 values.
    pub sums16: Vec<[i16; 16]>,
    /// Sums over each group of 32 values.
    pub sums32: Vec<[i16; 8]>,
}

impl ActRows {
    fn quantize(x: &[f32], m: usize, k: usize) -> Self {
        let count = m * k / KQ_BLOCK;
        let mut rows = Self {
            qs: vec![0; count * KQ_BLOCK],
            ds: vec![0.0; count],
            sums16: vec![[0; 16]; count],
            sums32: vec![[0; 8]; count],
        };
        // Rows of at least this many values are quantized in parallel: below it, handing the
        // work to the other threads costs more than it saves (a decode step's one row).
        const PARALLEL_VALUES: usize = 16 * 1024;
        let sbs = k / KQ_BLOCK;
        if m * k < PARALLEL_VALUES || m < 2 {
            quantize_rows(
                x,
                &mut rows.qs,
                &mut rows.ds,
                &mut rows.sums16,
                &mut rows.sums32,
            );
        } else {
            rows.qs
                .par_chunks_mut(k)
                .zip(rows.ds.par_chunks_mut(sbs))
                .zip(rows.sums16.par_chunks_mut(sbs))
                .zip(rows.sums32.par_chunks_mut(sbs))
                .zip(x.par_chunks(k))
                .for_each(|((((q, d), s16), s32), xs)| quantize_rows(xs, q, d, s16, s32));
        }
        rows
    }
}

/// Quantizes whole superblocks of `x`: `x.len() / 256` of them, into the parts alike.
fn quantize_rows(
    x: &[f32],
    qs: &mut [i8],
    ds: &mut [f32],
    sums16: &mut [[i16; 16]],
    sums32: &mut [[i16; 8]],
) {
    for ((((q, d), s16), s32), xs) in qs
        .chunks_exact_mut(KQ_BLOCK)
        .zip(ds.iter_mut())
        .zip(sums16.iter_mut())
        .zip(sums32.iter_mut())
        .zip(x.chunks_exact(KQ_BLOCK))
    {
        *d = quantize_superblock(xs, q, s16, s32);
    }
}

/// One superblock of activations (step 1 of the module docs): writes the values and group
/// sums and returns the scale. Rounding is to nearest, ties to even, which the vector
/// instructions do.
fn quantize_superblock(xs: &[f32], q: &mut [i8], s16: &mut [i16; 16], s32: &mut [i16; 8]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { quantize_superblock_avx2(xs, q, s16, s32) };
    }
    quantize_superblock_portable(xs, q, s16, s32)
}

/// [`quantize_superblock_portable`] compiled for AVX2, so that the loops become vector code
/// (the same operations, so the same results).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_superblock_avx2(
    xs: &[f32],
    q: &mut [i8],
    s16: &mut [i16; 16],
    s32: &mut [i16; 8],
) -> f32 {
    quantize_superblock_portable(xs, q, s16, s32)
}

#[inline(always)]
fn quantize_superblock_portable(
    xs: &[f32],
    q: &mut [i8],
    s16: &mut [i16; 16],
    s32: &mut [i16; 8],
) -> f32 {
    let amax = xs.iter().fold(0f32, |a, x| a.max(x.abs()));
    if amax == 0.0 {
        q.fill(0);
        s16.fill(0);
        s32.fill(0);
        return 0.0;
    }
    let id = 127.0 / amax;
    for (q, &x) in q.iter_mut().zip(xs) {
        // |x * id| <= 127 up to rounding, so the conversion never saturates past 127.
        *q = (x * id).round_ties_even() as i8;
    }
    for (s, g) in s16.iter_mut().zip(q.chunks_exact(16)) {
        *s = g.iter().map(|&v| v as i16).sum();
    }
    for (s, g) in s32.iter_mut().zip(s16.chunks_exact(2)) {
        *s = g[0] + g[1];
    }
    amax / 127.0
}

#[cfg(target_arch = "x86_64")]
mod avx256;
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(test)]
mod tests;
