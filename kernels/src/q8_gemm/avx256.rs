//! The 256-bit microkernels: the lanes arithmetic on [`Layout::Strips`] with AVX2 or
//! AVX-VNNI, and candle's tiles with AVX-VNNI.
//!
//! candle's lanes arithmetic keeps, for every output, eight f32 lanes: lane `g` accumulates
//! the exact sum of bytes `4g..4g+4` of each block. A strip stores group `g` of eight columns in
//! one 32-byte vector, so one vector operation yields lane `g` of eight outputs, and eight
//! accumulators (one per lane) cover eight outputs of one row; they are summed in candle's
//! order at the end. The exact sums come from `vpdpbusd` (AVX-VNNI, offset weights) or from
//! `vpmaddubsw` on an absolute value and the other operand with its sign, then `vpmaddwd`
//! against ones (AVX2, signed weights: the operations candle runs, which cannot saturate for
//! Q8_0 operands).

use super::*;
use crate::gemm_split::{Split, tile_rows};
use std::arch::x86_64::*;

/// Activation rows quantized to Q8_0 for the lanes kernels, all `[m][..]`.
struct Q8Rows {
    /// `[m][k]`.
    qs: Vec<i8>,
    /// `[m][k]`, `|qs|`: the unsigned operand of the AVX2 kernel when no weight is -128.
    abs: Vec<u8>,
    /// `[m][k_blocks]`: the f16-rounded scales.
    ds: Vec<f32>,
    /// `[m][k_blocks][8]`, AVX-VNNI only: per group `-128 * (sum of its four bytes)`,
    /// cancelling the weight offset.
    init: Vec<i32>,
}

impl Q8Rows {
    fn quantize(x: &[f32], m: usize, k: usize, with_abs: bool, with_init: bool) -> Self {
        let kb = k / Q8_0_BLOCK;
        let mut rows = Self {
            qs: vec![0; m * k],
            abs: Vec::new(),
            ds: vec![0f32; m * kb],
            init: Vec::new(),
        };
        rows.qs
            .par_chunks_mut(k)
            .zip(rows.ds.par_chunks_mut(kb))
            .zip(x.par_chunks(k))
            .for_each(|((qs, ds), xr)| {
                for ((q, d), xs) in qs
                    .chunks_exact_mut(Q8_0_BLOCK)
                    .zip(ds)
                    .zip(xr.chunks_exact(Q8_0_BLOCK))
                {
                    // SAFETY: these rows feed a kernel of the AVX2 or AVX-VNNI path, which
                    // `from_blocks` checked this CPU supports (both include AVX2).
                    *d = unsafe { quantize_q8_0_avx2(xs, q) };
                }
            });
        if with_abs {
            rows.abs = rows.qs.iter().map(|q| q.unsigned_abs()).collect();
        }
        if with_init {
            rows.init = rows
                .qs
                .chunks_exact(4)
                .map(|g| -128 * g.iter().map(|&b| b as i32).sum::<i32>())
                .collect();
        }
        rows
    }
}

/// [`quantize_q8_0`] with AVX2, bit for bit: the same maximum, scale and products, and
/// `round` (half away from zero) rebuilt from truncation. Blocks whose inverse scale is not
/// finite (values below 1e-36) take the scalar code, whose saturating casts this does not
/// reproduce.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn quantize_q8_0_avx2(xs: &[f32], qs: &mut [i8]) -> f32 {
    assert!(xs.len() == Q8_0_BLOCK && qs.len() == Q8_0_BLOCK);
    // SAFETY: 32 f32 in four loads.
    let v: [__m256; 4] =
        std::array::from_fn(|i| unsafe { _mm256_loadu_ps(xs.as_ptr().add(i * 8)) });
    let sign_bit = _mm256_set1_ps(-0.0);
    // `_mm256_max_ps(x, m)` returns `m` when `x` is NaN, as `f32::max` ignores NaN.
    let mut m = _mm256_setzero_ps();
    for x in v {
        m = _mm256_max_ps(_mm256_andnot_ps(sign_bit, x), m);
    }
    let mut lanes = [0f32; 8];
    // SAFETY: 8 f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
    let amax = lanes.iter().fold(0f32, |a, &b| a.max(b));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    if !id.is_finite() {
        return quantize_q8_0(xs, qs);
    }
    let idv = _mm256_set1_ps(id);
    let half = _mm256_set1_ps(0.5);
    let one = _mm256_set1_ps(1.0);
    let ints: [__m256i; 4] = v.map(|x| {
        let y = _mm256_mul_ps(x, idv);
        let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(y);
        // |y - t| >= 0.5 rounds away from zero: t + copysign(1, y).
        let frac = _mm256_andnot_ps(sign_bit, _mm256_sub_ps(y, t));
        let away = _mm256_cmp_ps::<_CMP_GE_OQ>(frac, half);
        let step = _mm256_and_ps(away, _mm256_or_ps(one, _mm256_and_ps(sign_bit, y)));
        // NaN becomes 0, as `NaN as i8` does.
        let ordered = _mm256_cmp_ps::<_CMP_ORD_Q>(y, y);
        _mm256_cvttps_epi32(_mm256_and_ps(_mm256_add_ps(t, step), ordered))
    });
    // Saturating packs (as `as i8` saturates), then undo their lane interleaving.
    let w01 = _mm256_packs_epi32(ints[0], ints[1]);
    let w23 = _mm256_packs_epi32(ints[2], ints[3]);
    let bytes = _mm256_packs_epi16(w01, w23);
    let bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    // SAFETY: 32 bytes.
    unsafe { _mm256_storeu_si256(qs.as_mut_ptr().cast(), bytes) };
    half::f16::from_f32(d).to_f32()
}

/// Which exact-sum instructions a strip kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StripDot {
    /// AVX2: `|a|` times `w` with the sign of `a` (weights never -128).
    AbsActivations,
    /// AVX2: `|w|` times `a` with the sign of `w` (exact for -128 too).
    AbsWeights,
    /// AVX-VNNI on offset weights.
    Vnni,
}

/// The lanes arithmetic on [`Layout::Strips`] (AVX2 or AVX-VNNI, as packed).
pub(super) fn gemm_strips(w: &PackedQ8_0, x: &[f32], m: usize, out: &mut [f32]) {
    let Layout::Strips {
        blocks,
        scales,
        offset,
        has_min,
    } = &w.layout
    else {
        unreachable!("gemm_strips on another layout")
    };
    let dot = match (offset, has_min) {
        (true, _) => StripDot::Vnni,
        (false, true) => StripDot::AbsWeights,
        (false, false) => StripDot::AbsActivations,
    };
    let (k, n, kb) = (w.k, w.n, w.k_blocks());
    let acts = Q8Rows::quantize(
        x,
        m,
        k,
        dot == StripDot::AbsActivations,
        dot == StripDot::Vnni,
    );
    let row_bytes = 2 * k + 4 * kb + if *offset { 32 * kb } else { 0 };
    let split = Split {
        m,
        n,
        unit_cols: STRIP,
        units: n.div_ceil(STRIP),
        unit_align: 1,
        tile_rows: tile_rows(row_bytes, 1),
    };
    split.run(out, |rows, strips, mut out| {
        let mut lanes = vec![[[0f32; STRIP]; 8]; rows.len()];
        for s in strips.clone() {
            let job = StripJob {
                blocks: &blocks[s * kb..(s + 1) * kb],
                scales: &scales[s * kb..(s + 1) * kb],
                acts: &acts,
                k,
            };
            let c0 = (s - strips.start) * STRIP;
            let cols = (n - s * STRIP).min(STRIP).min(out.cols() - c0);
            // Blocks in runs whose weights (256 bytes a block) stay in the L1 cache while every
            // row passes over them; each row's eight lane accumulators wait in `lanes` between
            // runs, and the last run writes the row's eight outputs.
            for b0 in (0..kb).step_by(BLOCKS_PER_RUN) {
                let run = b0..(b0 + BLOCKS_PER_RUN).min(kb);
                // The first row of a run also asks for the weights that follow it in memory
                // (the next run, or the next strip's first): in a decode step every weight
                // comes from memory, and with the hardware prefetcher alone the output layer
                // ran 25% slower per product than a cache-resident projection.
                let next =
                    (s * kb + run.end)..(s * kb + run.end + BLOCKS_PER_RUN).min(strips.end * kb);
                for (i, (r, l)) in rows.clone().zip(lanes.iter_mut()).enumerate() {
                    let ahead = match i {
                        0 => Ahead {
                            blocks: blocks.get(next.clone()).unwrap_or(&[]),
                        },
                        _ => Ahead::NONE,
                    };
                    let mut sums = [0f32; STRIP];
                    let state = RunState {
                        lanes: l,
                        sums: &mut sums,
                    };
                    // SAFETY: the weight was packed for `CpuPath::AvxVnni` (offset) or
                    // `CpuPath::Avx2`, which `from_blocks` checked this CPU supports; row `r`
                    // exists.
                    unsafe {
                        match dot {
                            StripDot::AbsActivations => {
                                strip_avx2::<true>(&job, r, run.clone(), &ahead, state)
                            }
                            StripDot::AbsWeights => {
                                strip_avx2::<false>(&job, r, run.clone(), &ahead, state)
                            }
                            StripDot::Vnni => strip_vnni(&job, r, run.clone(), &ahead, state),
                        }
                    }
                    if run.end == kb {
                        let row = &mut out.row(i)[c0..];
                        // A whole strip is a copy of known length, which compiles to two vector
                        // moves instead of a call to `memcpy` per row and strip (2% of a
                        // 16-way decode step).
                        if cols == STRIP {
                            row[..STRIP].copy_from_slice(&sums);
                        } else {
                            row[..cols].copy_from_slice(&sums[..cols]);
                        }
                    }
                }
            }
        }
    });
}

/// Blocks of a strip computed for every row before the next run (32 blocks: 8 KiB of weights).
const BLOCKS_PER_RUN: usize = 32;

/// One strip's weights and the quantized rows.
struct StripJob<'a> {
    /// The strip's blocks, `[k_blocks]`.
    blocks: &'a [StripBlock],
    scales: &'a [[f32; STRIP]],
    acts: &'a Q8Rows,
    k: usize,
}

/// Weights to request from memory while a kernel computes (none for most calls): a
/// [`StripBlock`] or [`TileBlock`] per block computed.
struct Ahead<'a, B> {
    blocks: &'a [B],
}

impl<B> Ahead<'_, B> {
    const NONE: Self = Self { blocks: &[] };

    /// Requests the cache lines of the `i`-th block ahead, if there is one.
    #[inline(always)]
    fn request(&self, i: usize) {
        if let Some(block) = self.blocks.get(i) {
            let p: *const u8 = (block as *const B).cast();
            for line in 0..std::mem::size_of::<B>().div_ceil(64) {
                // SAFETY: SSE, which every x86_64 CPU has; a prefetch reads nothing and
                // cannot fault, and the address is inside the block.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(line * 64).cast()) };
            }
        }
    }
}

/// A strip kernel's accumulators for one row: a run that starts at the first block starts its
/// lanes at zero, and one that ends at the last block sums them into the outputs; any other
/// run continues `lanes` and leaves them there. So when one run covers `k` (`k` ≤ 1,024: in
/// Qwen2.5-Coder-0.5B every product but the MLP's down projection), the lanes stay in
/// registers from the first block to the outputs.
struct RunState<'a> {
    lanes: &'a mut [[f32; STRIP]; 8],
    /// The row's eight outputs.
    sums: &'a mut [f32; STRIP],
}

/// The lanes a run starts from (see [`RunState`]).
///
/// # Safety
/// The CPU must support AVX.
#[target_feature(enable = "avx")]
unsafe fn start_lanes(state: &RunState<'_>, run: &std::ops::Range<usize>) -> [__m256; 8] {
    if run.start == 0 {
        [_mm256_setzero_ps(); 8]
    } else {
        // SAFETY: 8 f32 each.
        std::array::from_fn(|g| unsafe { _mm256_loadu_ps(state.lanes[g].as_ptr()) })
    }
}

/// Where a run leaves its lanes (see [`RunState`]): after the last block, candle's final
/// reduction (`hsum_float_8`), `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`, for the
/// eight outputs at once (`acc[g]` holds lane `g` of each).
///
/// # Safety
/// The CPU must support AVX.
#[target_feature(enable = "avx")]
unsafe fn finish_lanes(state: RunState<'_>, acc: &[__m256; 8], last: bool) {
    if last {
        let even = _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6]));
        let odd = _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7]));
        // SAFETY: 8 f32.
        unsafe { _mm256_storeu_ps(state.sums.as_mut_ptr(), _mm256_add_ps(even, odd)) };
    } else {
        for (dst, v) in state.lanes.iter_mut().zip(acc) {
            // SAFETY: 8 f32.
            unsafe { _mm256_storeu_ps(dst.as_mut_ptr(), *v) };
        }
    }
}

/// Row `row` against one strip with AVX2 over blocks `run`, continuing the eight lanes of its
/// eight outputs (see [`RunState`]), and requesting one block `ahead` per block computed.
///
/// # Safety
/// The CPU must support AVX2 and FMA; row `row` must exist, and with `ABS_ACTS` the rows
/// must carry `|a|`.
#[target_feature(enable = "avx2,fma")]
unsafe fn strip_avx2<const ABS_ACTS: bool>(
    job: &StripJob<'_>,
    row: usize,
    run: std::ops::Range<usize>,
    ahead: &Ahead<'_, StripBlock>,
    state: RunState<'_>,
) {
    let (k, kb) = (job.k, job.k / Q8_0_BLOCK);
    // Bounds, checked once: the loop reads through raw pointers.
    assert!(job.blocks.len() == kb && job.scales.len() == kb);
    assert!((row + 1) * k <= job.acts.qs.len() && (row + 1) * kb <= job.acts.ds.len());
    assert!(!ABS_ACTS || job.acts.abs.len() == job.acts.qs.len());
    let qs = job.acts.qs[row * k..].as_ptr();
    let abs = job.acts.abs.as_ptr().wrapping_add(row * k);
    let ds = &job.acts.ds[row * kb..(row + 1) * kb];
    let ones = _mm256_set1_epi16(1);
    assert!(run.end <= kb);
    let last = run.end == kb;
    // SAFETY: AVX is part of AVX2.
    let mut acc = unsafe { start_lanes(&state, &run) };
    let first = run.start;
    for b in run {
        ahead.request(b - first);
        // SAFETY: 8 f32.
        let wd = unsafe { _mm256_loadu_ps(job.scales[b].as_ptr()) };
        let d = _mm256_mul_ps(wd, _mm256_set1_ps(ds[b]));
        let wb = job.blocks[b].0.as_ptr();
        for (g, lane) in acc.iter_mut().enumerate() {
            // SAFETY: `g * 32 + 32 <= 256` bytes of the block; `b * 32 + g * 4 + 4 <= k` bytes
            // of the row (and of `|a|`, which has the same shape when read).
            let sums = unsafe {
                let w = _mm256_loadu_si256(wb.add(g * 32).cast());
                let off = b * Q8_0_BLOCK + g * 4;
                let a = _mm256_set1_epi32(std::ptr::read_unaligned(qs.add(off).cast::<i32>()));
                let pairs = if ABS_ACTS {
                    let abs_a =
                        _mm256_set1_epi32(std::ptr::read_unaligned(abs.add(off).cast::<i32>()));
                    _mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(w, a))
                } else {
                    _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w))
                };
                _mm256_madd_epi16(pairs, ones)
            };
            *lane = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), *lane);
        }
    }
    // SAFETY: AVX is part of AVX2.
    unsafe { finish_lanes(state, &acc, last) };
}

/// [`strip_avx2`] with AVX-VNNI.
///
/// # Safety
/// The CPU must support AVX2, FMA and AVX-VNNI; row `row` must exist and the rows must carry
/// their starting sums.
#[target_feature(enable = "avx2,fma,avxvnni")]
unsafe fn strip_vnni(
    job: &StripJob<'_>,
    row: usize,
    run: std::ops::Range<usize>,
    ahead: &Ahead<'_, StripBlock>,
    state: RunState<'_>,
) {
    let (k, kb) = (job.k, job.k / Q8_0_BLOCK);
    assert!(job.blocks.len() == kb && job.scales.len() == kb);
    assert!((row + 1) * k <= job.acts.qs.len() && (row + 1) * kb <= job.acts.ds.len());
    assert!((row + 1) * kb * 8 <= job.acts.init.len());
    let qs = job.acts.qs[row * k..].as_ptr();
    let init = &job.acts.init[row * kb * 8..(row + 1) * kb * 8];
    let ds = &job.acts.ds[row * kb..(row + 1) * kb];
    assert!(run.end <= kb);
    let last = run.end == kb;
    // SAFETY: AVX is part of AVX2.
    let mut acc = unsafe { start_lanes(&state, &run) };
    let first = run.start;
    for b in run {
        ahead.request(b - first);
        // SAFETY: 8 f32.
        let wd = unsafe { _mm256_loadu_ps(job.scales[b].as_ptr()) };
        let d = _mm256_mul_ps(wd, _mm256_set1_ps(ds[b]));
        let wb = job.blocks[b].0.as_ptr();
        for (g, lane) in acc.iter_mut().enumerate() {
            // SAFETY: as in `strip_avx2`.
            let sums = unsafe {
                let w = _mm256_loadu_si256(wb.add(g * 32).cast());
                let off = b * Q8_0_BLOCK + g * 4;
                let a = _mm256_set1_epi32(std::ptr::read_unaligned(qs.add(off).cast::<i32>()));
                _mm256_dpbusd_avx_epi32(_mm256_set1_epi32(init[b * 8 + g]), w, a)
            };
            *lane = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), *lane);
        }
    }
    // SAFETY: AVX is part of AVX2.
    unsafe { finish_lanes(state, &acc, last) };
}

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
    split.run(out, |rows, tiles, mut out| {
        let mut t = tiles.start;
        while t < tiles.end {
            let mut r = rows.start;
            while r < rows.end {
                let mr = (rows.end - r).min(MR16);
                let mut res = [[0f32; 16]; MR16];
                // The first rows of a tile also ask for the next tile's weights (as the strips
                // do, and for the same reason).
                let ahead = if r == rows.start && t + 1 < tiles.end {
                    Ahead {
                        blocks: &blocks[(t + 1) * kb..(t + 2) * kb],
                    }
                } else {
                    Ahead::NONE
                };
                let job = TileJob {
                    k,
                    blocks: &blocks[t * kb..(t + 1) * kb],
                    scales: &scales[t * kb..(t + 1) * kb],
                    acts: &acts,
                    row: r,
                    ahead,
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
                    let c0 = (t - tiles.start) * 16;
                    out.row(r - rows.start + i)[c0..c0 + 16].copy_from_slice(v);
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
    ahead: Ahead<'a, TileBlock>,
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
        job.ahead.request(b);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avx2_quantization_equals_the_scalar_one() {
        if !CpuPath::Avx2.supported() {
            eprintln!("no AVX2 on this CPU: the AVX2 quantizer cannot run here");
            return;
        }
        let mut blocks: Vec<Vec<f32>> = Vec::new();
        // Ties: with amax 127 the scale is 1, so these values round exactly at .5.
        blocks.push(
            (0..32)
                .map(|i| match i {
                    0 => 127.0,
                    _ => (i as f32 - 16.0) + 0.5,
                })
                .collect(),
        );
        blocks.push((0..32).map(|i| -(i as f32) - 0.5).collect());
        blocks.push(vec![0.0; 32]);
        blocks.push(
            (0..32)
                .map(|i| if i == 3 { f32::NAN } else { i as f32 })
                .collect(),
        );
        blocks.push((0..32).map(|i| i as f32 * 1e-38).collect());
        let mut x = 0x2545_F491_u32;
        for scale in [1e-6f32, 0.01, 1.0, 37.0, 1e6] {
            blocks.push(
                (0..32)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        (x % 20001) as f32 / 10000.0 - 1.0
                    })
                    .map(|v| v * scale)
                    .collect(),
            );
        }
        for (i, xs) in blocks.iter().enumerate() {
            let (mut want, mut got) = ([0i8; 32], [0i8; 32]);
            let dw = quantize_q8_0(xs, &mut want);
            // SAFETY: AVX2 is present (checked above).
            let dg = unsafe { quantize_q8_0_avx2(xs, &mut got) };
            assert_eq!(dw.to_bits(), dg.to_bits(), "block {i}: scale");
            assert_eq!(want, got, "block {i}: values");
        }
    }
}
