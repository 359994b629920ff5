//! The 256-bit microkernels: the lanes arithmetic on [`Layout::Columns`] with AVX2 or
//! AVX-VNNI, and candle's tiles with AVX-VNNI.
//!
//! A 256-bit vector holds one column's 32-value block, so the eight f32 lanes of candle's dot
//! product are the eight lanes of one accumulator: lane `l` gets the exact sum of bytes
//! `4l..4l+4`, from `vpdpbusd` (AVX-VNNI, offset weights) or from `vpmaddubsw` on `|w|` and
//! `a` with the sign of `w`, then `vpmaddwd` against ones (AVX2, signed weights; the same
//! operations candle runs, which cannot saturate for Q8_0 operands).

use super::split::{Split, tile_rows};
use super::*;
use std::arch::x86_64::*;

/// Rows per lanes microkernel call.
const MR: usize = 4;
/// Columns per lanes microkernel call.
const NP: usize = 2;

/// Activation rows quantized to Q8_0 for the lanes kernels.
struct Q8Rows {
    /// `[m][k_blocks]`.
    qs: Vec<[i8; Q8_0_BLOCK]>,
    /// `[m][k_blocks]`: the f16-rounded scales.
    ds: Vec<f32>,
    /// `[m][k_blocks]`, AVX-VNNI only: per lane `-128 * (sum of its four bytes)`, cancelling
    /// the weight offset.
    init: Vec<[i32; 8]>,
}

impl Q8Rows {
    fn quantize(x: &[f32], m: usize, k: usize, with_init: bool) -> Self {
        let kb = k / Q8_0_BLOCK;
        let mut rows = Self {
            qs: vec![[0; Q8_0_BLOCK]; m * kb],
            ds: vec![0f32; m * kb],
            init: vec![[0; 8]; if with_init { m * kb } else { 0 }],
        };
        rows.qs
            .par_chunks_mut(kb)
            .zip(rows.ds.par_chunks_mut(kb))
            .zip(x.par_chunks(k))
            .for_each(|((qs, ds), xr)| {
                for ((q, d), xs) in qs.iter_mut().zip(ds).zip(xr.chunks_exact(Q8_0_BLOCK)) {
                    *d = quantize_q8_0(xs, q);
                }
            });
        if with_init {
            rows.init
                .par_iter_mut()
                .zip(rows.qs.par_iter())
                .for_each(|(init, q)| {
                    for (l, v) in init.iter_mut().enumerate() {
                        *v = -128 * q[l * 4..l * 4 + 4].iter().map(|&b| b as i32).sum::<i32>();
                    }
                });
        }
        rows
    }
}

/// The lanes arithmetic on [`Layout::Columns`] (AVX2 or AVX-VNNI, as packed).
pub(super) fn gemm_columns(w: &PackedQ8_0, x: &[f32], m: usize, out: &mut [f32]) {
    let Layout::Columns {
        blocks,
        scales,
        offset,
    } = &w.layout
    else {
        unreachable!("gemm_columns on another layout")
    };
    let (k, n, kb) = (w.k, w.n, w.k_blocks());
    let acts = Q8Rows::quantize(x, m, k, *offset);
    let row_bytes = kb * (Q8_0_BLOCK + 4 + if *offset { 32 } else { 0 });
    let split = Split {
        m,
        n,
        unit_cols: 1,
        units: n,
        unit_align: NP,
        tile_rows: tile_rows(row_bytes, MR),
    };
    let columns = Columns {
        blocks,
        scales,
        kb,
        vnni: *offset,
    };
    split.run(out, |rows, cols, out, stride| {
        columns_tile(&columns, &acts, rows, cols, out, stride);
    });
}

/// The fields of [`Layout::Columns`].
struct Columns<'a> {
    blocks: &'a [ColumnBlock],
    scales: &'a [f32],
    kb: usize,
    /// Offset weights for `vpdpbusd` (AVX-VNNI); else signed weights (AVX2).
    vnni: bool,
}

/// Rows `rows` of `acts` against columns `cols`; `out` holds `rows.len()` rows of `stride`
/// floats whose first column is `cols.start`.
fn columns_tile(
    w: &Columns<'_>,
    acts: &Q8Rows,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    out: &mut [f32],
    stride: usize,
) {
    let kb = w.kb;
    let mut c = cols.start;
    while c < cols.end {
        let np = (cols.end - c).min(NP);
        let mut r = rows.start;
        while r < rows.end {
            let mr = (rows.end - r).min(MR);
            let mut lanes = [[[0f32; 8]; NP]; MR];
            // The first row group of a column group also asks for the next group's weights
            // (as in the AVX-512 kernel: in a decode step every weight comes from memory).
            let next = c + np;
            let prefetch = if r == rows.start && next < cols.end {
                let np_next = (cols.end - next).min(NP);
                &w.blocks[next * kb..(next + np_next) * kb]
            } else {
                &[]
            };
            let job = ColumnJob {
                w,
                acts,
                row: r,
                col: c,
                prefetch,
            };
            // SAFETY: the weight was packed for `CpuPath::AvxVnni` (offset) or
            // `CpuPath::Avx2`, which `from_blocks` checked this CPU supports; rows
            // `r..r + mr` and columns `c..c + np` exist.
            unsafe {
                if w.vnni {
                    columns_vnni(&job, mr, np, &mut lanes);
                } else {
                    columns_avx2(&job, mr, np, &mut lanes);
                }
            }
            for (i, row_lanes) in lanes.iter().enumerate().take(mr) {
                let o = (r - rows.start + i) * stride + (c - cols.start);
                for (j, l) in row_lanes.iter().enumerate().take(np) {
                    out[o + j] = hsum8(*l);
                }
            }
            r += mr;
        }
        c += np;
    }
}

struct ColumnJob<'a> {
    w: &'a Columns<'a>,
    acts: &'a Q8Rows,
    /// First row.
    row: usize,
    /// First column.
    col: usize,
    /// Weights to pull into the cache while this call computes.
    prefetch: &'a [ColumnBlock],
}

/// Generates a lanes microkernel for one instruction set: `$prep` turns a weight vector into
/// the operand shared by all rows, `$start` loads a row block's starting sums, `$dot` yields
/// the eight exact lane sums of one block.
macro_rules! columns_kernel {
    ($dispatch:ident, $micro:ident, $feature:literal, $prep:ident, $start:ident, $dot:ident) => {
        /// Dispatches to the microkernel for `mr` rows and `np` columns.
        ///
        /// # Safety
        #[doc = concat!("The CPU must support ", $feature, "; rows `job.row + mr` and columns `job.col + np` must exist.")]
        #[target_feature(enable = $feature)]
        unsafe fn $dispatch(job: &ColumnJob<'_>, mr: usize, np: usize, lanes: &mut [[[f32; 8]; NP]; MR]) {
            // SAFETY: forwarded from the caller.
            unsafe {
                match (mr, np) {
                    (4, 2) => $micro::<4, 2>(job, lanes),
                    (4, _) => $micro::<4, 1>(job, lanes),
                    (3, 2) => $micro::<3, 2>(job, lanes),
                    (3, _) => $micro::<3, 1>(job, lanes),
                    (2, 2) => $micro::<2, 2>(job, lanes),
                    (2, _) => $micro::<2, 1>(job, lanes),
                    (_, 2) => $micro::<1, 2>(job, lanes),
                    _ => $micro::<1, 1>(job, lanes),
                }
            }
        }

        /// `R` rows × `P` columns over all blocks; writes the eight f32 lanes of each output.
        ///
        /// # Safety
        #[doc = concat!("The CPU must support ", $feature, "; rows `job.row + R` and columns `job.col + P` must exist.")]
        #[target_feature(enable = $feature)]
        unsafe fn $micro<const R: usize, const P: usize>(
            job: &ColumnJob<'_>,
            lanes: &mut [[[f32; 8]; NP]; MR],
        ) {
            let kb = job.w.kb;
            // The loop reads through raw pointers (bounds checks and index arithmetic cost as
            // much as the arithmetic here); these checks make every read below in bounds.
            assert!((job.col + P) * kb <= job.w.blocks.len() && job.w.scales.len() == job.w.blocks.len());
            assert!((job.row + R) * kb <= job.acts.qs.len() && job.acts.ds.len() == job.acts.qs.len());
            assert!(job.prefetch.len() <= P * kb);
            let wq = job.w.blocks[job.col * kb..].as_ptr();
            let ws = job.w.scales[job.col * kb..].as_ptr();
            let aq = job.acts.qs[job.row * kb..].as_ptr();
            let ad = job.acts.ds[job.row * kb..].as_ptr();
            // Only AVX-VNNI reads starting sums (`$start`); elsewhere the vector is empty and the
            // pointer is never dereferenced.
            let init = job.acts.init.as_ptr().wrapping_add(job.row * kb);
            let prefetch_cols = job.prefetch.len() / kb.max(1);
            let pf = job.prefetch.as_ptr();
            let mut acc = [[_mm256_setzero_ps(); P]; R];
            for b in 0..kb {
                // The next column group's block `b`, one request per column.
                for j in 0..prefetch_cols {
                    // SAFETY: `j * kb + b < prefetch.len()`.
                    _mm_prefetch::<_MM_HINT_T0>(unsafe { pf.add(j * kb + b) }.cast());
                }
                let mut wv = [_mm256_setzero_si256(); P];
                let mut wp = [_mm256_setzero_si256(); P];
                let mut wd = [_mm256_setzero_ps(); P];
                for j in 0..P {
                    // SAFETY: column `job.col + j < job.col + P` exists (asserted above); a
                    // `ColumnBlock` is 32 bytes and unaligned loads accept any address.
                    unsafe {
                        wv[j] = _mm256_loadu_si256(wq.add(j * kb + b).cast());
                        wd[j] = _mm256_set1_ps(*ws.add(j * kb + b));
                    }
                    wp[j] = $prep(wv[j]);
                }
                for i in 0..R {
                    // SAFETY: row `job.row + i` exists (asserted above); 32 bytes each.
                    let (a, d_act, start) = unsafe {
                        (
                            _mm256_loadu_si256(aq.add(i * kb + b).cast()),
                            _mm256_set1_ps(*ad.add(i * kb + b)),
                            $start(init.wrapping_add(i * kb + b)),
                        )
                    };
                    for j in 0..P {
                        let sums = $dot(start, wv[j], wp[j], a);
                        let d = _mm256_mul_ps(wd[j], d_act);
                        acc[i][j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc[i][j]);
                    }
                }
            }
            for i in 0..R {
                for j in 0..P {
                    // SAFETY: the destination is 8 f32.
                    unsafe { _mm256_storeu_ps(lanes[i][j].as_mut_ptr(), acc[i][j]) };
                }
            }
        }
    };
}

/// AVX2: no starting sums (the weights are not offset).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn zero_start(_init: *const [i32; 8]) -> __m256i {
    _mm256_setzero_si256()
}

/// AVX-VNNI: `-128 * (sum of each lane's four activation bytes)`.
///
/// # Safety
/// `init` must point to a row block's starting sums.
#[inline]
#[target_feature(enable = "avx2,fma,avxvnni")]
unsafe fn load_start(init: *const [i32; 8]) -> __m256i {
    // SAFETY: forwarded from the caller.
    unsafe { _mm256_loadu_si256(init.cast()) }
}

/// AVX2: `|w|`, shared by every row.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn abs_weights(w: __m256i) -> __m256i {
    _mm256_sign_epi8(w, w)
}

/// AVX2: the lane sums of signed `w` and `a` as candle computes them: `|w|` times `a` with the
/// sign of `w`, pairs added to i16 (exact: |products| ≤ 128 · 127), then pairs to i32.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn dot_avx2(_start: __m256i, w: __m256i, abs_w: __m256i, a: __m256i) -> __m256i {
    let pairs = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(a, w));
    _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
}

/// AVX-VNNI: nothing to prepare.
#[inline]
#[target_feature(enable = "avx2,fma,avxvnni")]
fn same_weights(w: __m256i) -> __m256i {
    w
}

/// AVX-VNNI: the lane sums of offset `w` and `a`, starting from `-128 * (sum of a)`.
#[inline]
#[target_feature(enable = "avx2,fma,avxvnni")]
fn dot_vnni(start: __m256i, w: __m256i, _same: __m256i, a: __m256i) -> __m256i {
    _mm256_dpbusd_avx_epi32(start, w, a)
}

columns_kernel!(
    columns_avx2,
    micro_avx2,
    "avx2,fma",
    abs_weights,
    zero_start,
    dot_avx2
);
columns_kernel!(
    columns_vnni,
    micro_vnni,
    "avx2,fma,avxvnni",
    same_weights,
    load_start,
    dot_vnni
);

/// Rows per tiles microkernel call.
const MR16: usize = 3;

/// candle's repacked Q8_0 arithmetic with AVX-VNNI: each 16-column tile as two 256-bit halves.
pub(super) fn gemm_tiles(w: &PackedQ8_0, x: &[f32], m: usize, out: &mut [f32]) {
    let Layout::Tiles { blocks, scales } = &w.layout else {
        unreachable!("gemm_tiles on another layout")
    };
    let (k, n, kb) = (w.k, w.n, w.k_blocks());
    let sb = k / Q8K_BLOCK;
    let acts = Q8kRows::quantize(x, m, k);
    let split = Split {
        m,
        n,
        unit_cols: 16,
        units: n / 16,
        unit_align: 1,
        tile_rows: tile_rows(k + 4 * kb + 4 * sb, MR16),
    };
    split.run(out, |rows, tiles, out, stride| {
        let mut t = tiles.start;
        while t < tiles.end {
            let mut r = rows.start;
            while r < rows.end {
                let mr = (rows.end - r).min(MR16);
                let mut res = [[0f32; 16]; MR16];
                let job = TileJob {
                    k,
                    blocks: &blocks[t * kb..(t + 1) * kb],
                    scales: &scales[t * kb..(t + 1) * kb],
                    acts: &acts,
                    row: r,
                };
                // SAFETY: the weight was packed for `CpuPath::AvxVnni`, which `from_blocks`
                // checked this CPU supports; rows `r..r + mr` exist.
                unsafe {
                    match mr {
                        3 => tile_vnni::<3>(&job, &mut res),
                        2 => tile_vnni::<2>(&job, &mut res),
                        _ => tile_vnni::<1>(&job, &mut res),
                    }
                }
                for (i, v) in res.iter().enumerate().take(mr) {
                    let o = (r - rows.start + i) * stride + (t - tiles.start) * 16;
                    out[o..o + 16].copy_from_slice(v);
                }
                r += mr;
            }
            t += 1;
        }
    });
}

struct TileJob<'a> {
    k: usize,
    /// One tile's blocks, `[k_blocks]`.
    blocks: &'a [TileBlock],
    scales: &'a [[f32; 16]],
    acts: &'a Q8kRows,
    row: usize,
}

/// `R` rows × one 16-column tile over all blocks.
///
/// # Safety
/// The CPU must support AVX2, FMA and AVX-VNNI; rows `job.row + R` must exist.
#[target_feature(enable = "avx2,fma,avxvnni")]
unsafe fn tile_vnni<const R: usize>(job: &TileJob<'_>, res: &mut [[f32; 16]; MR16]) {
    let k = job.k;
    let (kb, sb) = (k / Q8_0_BLOCK, k / Q8K_BLOCK);
    let qs = &job.acts.qs[job.row * k..(job.row + R) * k];
    let init = &job.acts.init[job.row * kb..(job.row + R) * kb];
    let ds = &job.acts.ds[job.row * sb..(job.row + R) * sb];
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for b in 0..kb {
        let mut isum = [[_mm256_setzero_si256(); 2]; R];
        for i in 0..R {
            isum[i] = [_mm256_set1_epi32(init[i * kb + b]); 2];
        }
        for g in 0..Q8_0_BLOCK / 4 {
            // SAFETY: `g * 64 + 64 <= 512`, the size of a `TileBlock`.
            let wv = unsafe {
                let p = job.blocks[b].0.as_ptr().add(g * 64);
                [
                    _mm256_loadu_si256(p.cast()),
                    _mm256_loadu_si256(p.add(32).cast()),
                ]
            };
            for (i, sums) in isum.iter_mut().enumerate() {
                let off = i * k + b * Q8_0_BLOCK + g * 4;
                // SAFETY: `off + 4 <= qs.len()`: row `i < R` of `k` bytes.
                let four = unsafe { std::ptr::read_unaligned(qs.as_ptr().add(off).cast::<i32>()) };
                let a = _mm256_set1_epi32(four);
                for h in 0..2 {
                    sums[h] = _mm256_dpbusd_avx_epi32(sums[h], wv[h], a);
                }
            }
        }
        for i in 0..R {
            let ad = _mm256_set1_ps(ds[i * sb + b * Q8_0_BLOCK / Q8K_BLOCK]);
            for h in 0..2 {
                // SAFETY: 8 f32 of the tile's 16 scales.
                let wd = unsafe { _mm256_loadu_ps(job.scales[b].as_ptr().add(h * 8)) };
                let d = _mm256_mul_ps(wd, ad);
                acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][h]), d, acc[i][h]);
            }
        }
    }
    for (row, halves) in res.iter_mut().zip(&acc) {
        for (h, v) in halves.iter().enumerate() {
            // SAFETY: the destination is 8 f32 of a 16-f32 row.
            unsafe { _mm256_storeu_ps(row.as_mut_ptr().add(h * 8), *v) };
        }
    }
}
