//! The AVX-512 VNNI microkernels: the lanes arithmetic on column pairs, and candle's tiles.

use super::*;
use crate::gemm_split::{OutRows, Split, tile_rows};
use std::arch::x86_64::*;

/// One quantized activation block laid out for the microkernel: the 32 bytes with each
/// four-byte group repeated (lanes `2l` and `2l + 1` see bytes `4l..4l+4`), and the integer
/// start value `-128 * (sum of the group)` per lane that cancels the weight offset.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct ActBlock {
    qs: [i8; 64],
    init: [i32; 16],
}

const ZERO_ACT: ActBlock = ActBlock {
    qs: [0; 64],
    init: [0; 16],
};

/// Rows per microkernel call.
const MR: usize = 4;
/// Column pairs per microkernel call.
const NP: usize = 3;

fn quantize_row(x: &[f32], acts: &mut [ActBlock], ds: &mut [f32]) {
    let mut qs = [0i8; Q8_0_BLOCK];
    for ((xs, a), d) in x.chunks_exact(Q8_0_BLOCK).zip(acts).zip(ds) {
        // SAFETY: only the AVX-512 path quantizes here, and its CPUs have AVX2.
        *d = unsafe { super::avx256::quantize_q8_0_avx2(xs, &mut qs) };
        for l in 0..8 {
            let group = &qs[l * 4..l * 4 + 4];
            a.qs[l * 8..l * 8 + 4].copy_from_slice(group);
            a.qs[l * 8 + 4..l * 8 + 8].copy_from_slice(group);
            let s = -128 * group.iter().map(|&q| q as i32).sum::<i32>();
            a.init[2 * l] = s;
            a.init[2 * l + 1] = s;
        }
    }
}

/// Rows of one tile, quantized.
struct Acts<'a> {
    blocks: &'a [ActBlock],
    ds: &'a [f32],
}

/// The lanes arithmetic on [`Layout::Pairs`].
pub(super) fn gemm_pairs(w: &PackedQ8_0, x: &[f32], m: usize, out: &mut [f32]) {
    let Layout::Pairs {
        blocks: pairs,
        scales,
    } = &w.layout
    else {
        unreachable!("gemm_pairs on another layout")
    };
    let weights = Pairs { pairs, scales };
    let (k, n, kb) = (w.k, w.n, w.k_blocks());
    let mut blocks = vec![ZERO_ACT; m * kb];
    let mut ds = vec![0f32; m * kb];
    blocks
        .par_chunks_mut(kb)
        .zip(ds.par_chunks_mut(kb))
        .zip(x.par_chunks(k))
        .for_each(|((a, d), xr)| quantize_row(xr, a, d));

    let row_bytes = kb * (std::mem::size_of::<ActBlock>() + 4);
    let split = Split {
        m,
        n,
        unit_cols: 2,
        units: n.div_ceil(2),
        unit_align: NP,
        tile_rows: tile_rows(row_bytes, MR),
    };
    split.run(out, |rows, units, mut out| {
        let acts = Acts {
            blocks: &blocks[rows.start * kb..rows.end * kb],
            ds: &ds[rows.start * kb..rows.end * kb],
        };
        tile(w, &weights, &acts, rows.len(), units, &mut out);
    });
}

/// The fields of [`Layout::Pairs`].
struct Pairs<'a> {
    pairs: &'a [PairBlock],
    scales: &'a [[f32; 2]],
}

/// All `rows` of `acts` against column pairs `pairs`; `out`'s first column is column pair
/// `pairs.start`'s first column.
fn tile(
    w: &PackedQ8_0,
    weights: &Pairs<'_>,
    acts: &Acts<'_>,
    rows: usize,
    pairs: std::ops::Range<usize>,
    out: &mut OutRows<'_>,
) {
    let kb = w.k_blocks();
    let mut p = pairs.start;
    while p < pairs.end {
        let np = (pairs.end - p).min(NP);
        let mut r = 0;
        while r < rows {
            let mr = (rows - r).min(MR);
            let mut lanes = [[[0f32; 16]; NP]; MR];
            // The first row group of a column triple also asks for the next triple's weights:
            // in a decode step every weight comes from memory, and the hardware prefetcher
            // alone left the kernel waiting on it (lm_head ran at half the speed of a
            // cache-resident projection).
            let next = p + np;
            let prefetch = if r == 0 && next < pairs.end {
                let np_next = (pairs.end - next).min(NP);
                Some(&weights.pairs[next * kb..(next + np_next) * kb])
            } else {
                None
            };
            let job = Job {
                weights,
                acts,
                row: r,
                pair: p,
                kb,
                prefetch,
            };
            // SAFETY: the weight was packed for `CpuPath::Avx512Vnni`, which `from_blocks`
            // checked this CPU supports; the indices are in bounds by construction of `tile`.
            unsafe {
                match (mr, np) {
                    (4, 3) => micro::<4, 3>(&job, &mut lanes),
                    (4, 2) => micro::<4, 2>(&job, &mut lanes),
                    (4, 1) => micro::<4, 1>(&job, &mut lanes),
                    (3, 3) => micro::<3, 3>(&job, &mut lanes),
                    (3, 2) => micro::<3, 2>(&job, &mut lanes),
                    (3, 1) => micro::<3, 1>(&job, &mut lanes),
                    (2, 3) => micro::<2, 3>(&job, &mut lanes),
                    (2, 2) => micro::<2, 2>(&job, &mut lanes),
                    (2, 1) => micro::<2, 1>(&job, &mut lanes),
                    (1, 3) => micro::<1, 3>(&job, &mut lanes),
                    (1, 2) => micro::<1, 2>(&job, &mut lanes),
                    _ => micro::<1, 1>(&job, &mut lanes),
                }
            }
            for (i, row_lanes) in lanes.iter().enumerate().take(mr) {
                let out_row = out.row(r + i);
                for (j, l) in row_lanes.iter().enumerate().take(np) {
                    // SAFETY: this path runs only on CPUs with AVX-512 (`from_blocks`).
                    let pair = unsafe { hsum8_pair(l) };
                    for (half, &sum) in pair.iter().enumerate() {
                        let col = 2 * (p + j - pairs.start) + half;
                        if col < out_row.len() && 2 * (p + j) + half < w.n {
                            out_row[col] = sum;
                        }
                    }
                }
            }
            r += mr;
        }
        p += np;
    }
}

/// The two outputs of a column pair from its 16 lanes (lane `2e + c` is candle's lane `e` of
/// column `c`), each summed as [`hsum8`] sums eight lanes, `((l0 + l4) + (l2 + l6)) + ((l1 +
/// l5) + (l3 + l7))`, both columns with the same vector adds. (Done here rather than at the
/// end of `micro`: there 16-row products ran 1.6x slower, with stores to the stack in
/// `micro`'s hot loop.)
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn hsum8_pair(lanes: &[f32; 16]) -> [f32; 2] {
    // SAFETY: 16 f32.
    let v = unsafe { _mm512_loadu_ps(lanes.as_ptr()) };
    let low = _mm512_castps512_ps256(v);
    let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    // Lane 2e + c: l_e + l_{e+4}, for e < 4.
    let t = _mm256_add_ps(low, high);
    // Lane 2e + c: (l_e + l_{e+4}) + (l_{e+2} + l_{e+6}), for e < 2.
    let u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps::<1>(t));
    // Lane c: the e = 0 sum plus the e = 1 sum.
    let w = _mm_add_ps(u, _mm_movehl_ps(u, u));
    let mut out = [0f32; 4];
    // SAFETY: 4 f32.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), w) };
    [out[0], out[1]]
}

struct Job<'a> {
    weights: &'a Pairs<'a>,
    acts: &'a Acts<'a>,
    /// First row within `acts`.
    row: usize,
    /// First column pair.
    pair: usize,
    kb: usize,
    /// Weights to pull into the cache while this call computes.
    prefetch: Option<&'a [PairBlock]>,
}

/// `R` rows × `P` column pairs over all blocks; writes the 16 f32 lanes of each pair.
///
/// # Safety
/// The CPU must support avx512f, avx512bw and avx512vnni; `job.row + R` rows and
/// `job.pair + P` column pairs must exist.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn micro<const R: usize, const P: usize>(job: &Job<'_>, lanes: &mut [[[f32; 16]; NP]; MR]) {
    let kb = job.kb;
    let acts = &job.acts.blocks[job.row * kb..(job.row + R) * kb];
    let ads = &job.acts.ds[job.row * kb..(job.row + R) * kb];
    let wq = &job.weights.pairs[job.pair * kb..(job.pair + P) * kb];
    let ws = &job.weights.scales[job.pair * kb..(job.pair + P) * kb];
    let mut acc = [[_mm512_setzero_ps(); P]; R];
    let prefetch = job.prefetch.unwrap_or(&[]);
    // Blocks of the next weights to request per block computed, so the requests spread over
    // the call.
    let per_block = prefetch.len().div_ceil(kb);
    for b in 0..kb {
        for blk in prefetch.iter().skip(b * per_block).take(per_block) {
            _mm_prefetch::<_MM_HINT_T0>(blk.0.as_ptr().cast());
        }
        let mut wv = [_mm512_setzero_si512(); P];
        let mut wd = [_mm512_setzero_ps(); P];
        for j in 0..P {
            // SAFETY: `PairBlock` is 64 bytes; unaligned loads accept any address.
            wv[j] = unsafe { _mm512_loadu_si512(wq[j * kb + b].0.as_ptr().cast()) };
            let [d0, d1] = ws[j * kb + b];
            // Lanes alternate between the pair's two columns.
            wd[j] = _mm512_castpd_ps(_mm512_set1_pd(f64::from_bits(
                (d0.to_bits() as u64) | ((d1.to_bits() as u64) << 32),
            )));
        }
        for i in 0..R {
            let a = &acts[i * kb + b];
            // SAFETY: both fields are 64 bytes.
            let (av, init) = unsafe {
                (
                    _mm512_loadu_si512(a.qs.as_ptr().cast()),
                    _mm512_loadu_si512(a.init.as_ptr().cast()),
                )
            };
            let ad = _mm512_set1_ps(ads[i * kb + b]);
            for j in 0..P {
                let sums = _mm512_dpbusd_epi32(init, wv[j], av);
                let d = _mm512_mul_ps(wd[j], ad);
                acc[i][j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc[i][j]);
            }
        }
    }
    for i in 0..R {
        for j in 0..P {
            // SAFETY: the destination is 16 f32.
            unsafe { _mm512_storeu_ps(lanes[i][j].as_mut_ptr(), acc[i][j]) };
        }
    }
}

/// Rows per call of the repacked-path microkernel.
const MR16: usize = 4;
/// 16-column tiles per call of the repacked-path microkernel.
const NT16: usize = 2;

/// candle's repacked Q8_0 arithmetic (see [`CpuPath::candle_repacks_q8_0`]), 16 outputs per vector.
pub(super) fn gemm_tiles(w: &PackedQ8_0, x: &[f32], m: usize, out: &mut [f32]) {
    let Layout::Tiles { blocks, scales } = &w.layout else {
        unreachable!("gemm_tiles on another layout")
    };
    let tiles = Tiles { blocks, scales };
    let (k, n, kb) = (w.k, w.n, w.k_blocks());
    let sb = k / Q8K_BLOCK;
    let Q8kRows { qs, init, ds } = Q8kRows::quantize(x, m, k);
    let split = Split {
        m,
        n,
        unit_cols: 16,
        units: n / 16,
        unit_align: NT16,
        tile_rows: tile_rows(k + 4 * kb + 4 * sb, MR16),
    };
    split.run(out, |rows, units, mut out| {
        let acts = ActsQ8K {
            qs: &qs[rows.start * k..rows.end * k],
            init: &init[rows.start * kb..rows.end * kb],
            ds: &ds[rows.start * sb..rows.end * sb],
        };
        tile16(w, &tiles, &acts, rows.len(), units, &mut out);
    });
}

/// The fields of [`Layout::Tiles`].
struct Tiles<'a> {
    blocks: &'a [TileBlock],
    scales: &'a [[f32; 16]],
}

/// Activations quantized to Q8_K, laid out for [`micro16`] (rows of a [`Q8kRows`]).
struct ActsQ8K<'a> {
    /// `[rows][k]`.
    qs: &'a [i8],
    /// `[rows][k / 32]`: `-128 * (sum of the block's values)`, cancelling the weight offset.
    init: &'a [i32],
    /// `[rows][k / 256]`.
    ds: &'a [f32],
}

fn tile16(
    w: &PackedQ8_0,
    tiles: &Tiles<'_>,
    acts: &ActsQ8K<'_>,
    rows: usize,
    units: std::ops::Range<usize>,
    out: &mut OutRows<'_>,
) {
    let kb = w.k_blocks();
    let mut t = units.start;
    while t < units.end {
        let nt = (units.end - t).min(NT16);
        let mut r = 0;
        while r < rows {
            let mr = (rows - r).min(MR16);
            let mut res = [[[0f32; 16]; NT16]; MR16];
            // As in `tile`: the first row group requests the next tiles' weights.
            let next = t + nt;
            let prefetch = if r == 0 && next < units.end {
                let nt_next = (units.end - next).min(NT16);
                Some(&tiles.blocks[next * kb..(next + nt_next) * kb])
            } else {
                None
            };
            let job = Job16 {
                k: w.k,
                tiles,
                acts,
                row: r,
                tile: t,
                prefetch,
            };
            // SAFETY: the weight was packed for `CpuPath::Avx512Vnni`, which `from_blocks`
            // checked this CPU supports; `r + mr <= rows` and `t + nt <= units.end`.
            unsafe {
                match (mr, nt) {
                    (4, 2) => micro16::<4, 2>(&job, &mut res),
                    (4, _) => micro16::<4, 1>(&job, &mut res),
                    (3, 2) => micro16::<3, 2>(&job, &mut res),
                    (3, _) => micro16::<3, 1>(&job, &mut res),
                    (2, 2) => micro16::<2, 2>(&job, &mut res),
                    (2, _) => micro16::<2, 1>(&job, &mut res),
                    (_, 2) => micro16::<1, 2>(&job, &mut res),
                    _ => micro16::<1, 1>(&job, &mut res),
                }
            }
            for (i, row_res) in res.iter().enumerate().take(mr) {
                let c0 = (t - units.start) * 16;
                let out_row = out.row(r + i);
                for (j, v) in row_res.iter().enumerate().take(nt) {
                    out_row[c0 + j * 16..c0 + j * 16 + 16].copy_from_slice(v);
                }
            }
            r += mr;
        }
        t += nt;
    }
}

struct Job16<'a> {
    k: usize,
    tiles: &'a Tiles<'a>,
    acts: &'a ActsQ8K<'a>,
    row: usize,
    tile: usize,
    /// Weights to pull into the cache while this call computes.
    prefetch: Option<&'a [TileBlock]>,
}

/// `R` rows × `T` 16-column tiles over all blocks.
///
/// # Safety
/// The CPU must support avx512f, avx512bw and avx512vnni; rows `job.row + R` and tiles
/// `job.tile + T` must exist.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn micro16<const R: usize, const T: usize>(
    job: &Job16<'_>,
    res: &mut [[[f32; 16]; NT16]; MR16],
) {
    let k = job.k;
    let (kb, sb) = (k / Q8_0_BLOCK, k / Q8K_BLOCK);
    let qs = &job.acts.qs[job.row * k..(job.row + R) * k];
    let init = &job.acts.init[job.row * kb..(job.row + R) * kb];
    let ds = &job.acts.ds[job.row * sb..(job.row + R) * sb];
    let wq = &job.tiles.blocks[job.tile * kb..(job.tile + T) * kb];
    let ws = &job.tiles.scales[job.tile * kb..(job.tile + T) * kb];
    let mut acc = [[_mm512_setzero_ps(); T]; R];
    let prefetch = job.prefetch.unwrap_or(&[]);
    let per_block = prefetch.len().div_ceil(kb);
    for b in 0..kb {
        for blk in prefetch.iter().skip(b * per_block).take(per_block) {
            for line in 0..std::mem::size_of::<TileBlock>() / 64 {
                // SAFETY: `line * 64` is inside the 512-byte block.
                _mm_prefetch::<_MM_HINT_T0>(unsafe { blk.0.as_ptr().add(line * 64).cast() });
            }
        }
        let mut isum = [[_mm512_setzero_si512(); T]; R];
        for i in 0..R {
            for s in isum[i].iter_mut() {
                *s = _mm512_set1_epi32(init[i * kb + b]);
            }
        }
        for g in 0..Q8_0_BLOCK / 4 {
            let mut wv = [_mm512_setzero_si512(); T];
            for (j, v) in wv.iter_mut().enumerate() {
                // SAFETY: `g * 64 + 64 <= 512`, the size of a `TileBlock`.
                *v = unsafe { _mm512_loadu_si512(wq[j * kb + b].0.as_ptr().add(g * 64).cast()) };
            }
            for (i, row_sums) in isum.iter_mut().enumerate() {
                let off = i * k + b * Q8_0_BLOCK + g * 4;
                // One broadcast load of the row's four bytes (building the word from four byte
                // loads made this loop slower than the pair kernel's).
                // SAFETY: `off + 4 <= qs.len()`: row `i < R` of `k` bytes, `b * 32 + g * 4 + 4 <= k`.
                let four = unsafe { std::ptr::read_unaligned(qs.as_ptr().add(off).cast::<i32>()) };
                let a = _mm512_set1_epi32(four);
                for (s, &wj) in row_sums.iter_mut().zip(&wv) {
                    *s = _mm512_dpbusd_epi32(*s, wj, a);
                }
            }
        }
        for i in 0..R {
            let ad = _mm512_set1_ps(ds[i * sb + b * Q8_0_BLOCK / Q8K_BLOCK]);
            for j in 0..T {
                // SAFETY: 16 f32.
                let wd = unsafe { _mm512_loadu_ps(ws[j * kb + b].as_ptr()) };
                let d = _mm512_mul_ps(wd, ad);
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i][j]), d, acc[i][j]);
            }
        }
    }
    for i in 0..R {
        for j in 0..T {
            // SAFETY: the destination is 16 f32.
            unsafe { _mm512_storeu_ps(res[i][j].as_mut_ptr(), acc[i][j]) };
        }
    }
}
