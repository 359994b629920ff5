//! The 256-bit kernels (AVX2, AVX-VNNI): half a tile (eight columns, a column per lane)
//! against up to four activation rows; four activation bytes broadcast and multiplied with four
//! values of every column (`vpmaddubsw` on AVX2, its pairs widened once per run that fits an
//! i16; `vpdpbusd` on AVX-VNNI), each sub-block's sum scaled in f32.

use std::arch::x86_64::*;

use super::{
    ActRows, KQ_BLOCK, KQuant, PREFETCH_AHEAD, PackedKQuant, TILE, TileOffsets, prefetch_lines,
};
use crate::CpuPath;
use crate::gemm_split::{Split, tile_rows};

/// Activation rows per kernel call.
const MR: usize = 4;
/// Columns per kernel call: half a tile.
const HALF: usize = TILE / 2;

pub(super) fn gemm(w: &PackedKQuant, acts: &ActRows, out: &mut [f32]) {
    let (n, k) = (w.n, w.k);
    let m = out.len() / n;
    let vnni = w.path == CpuPath::AvxVnni;
    let row_bytes = k + (k / KQ_BLOCK) * (4 + 32 + 16);
    let split = Split {
        m,
        n,
        unit_cols: HALF,
        units: n.div_ceil(HALF),
        unit_align: 2,
        tile_rows: tile_rows(row_bytes, MR),
    };
    split.run(out, |rows, halves, mut out| {
        for u in halves.clone() {
            let c0 = (u - halves.start) * HALF;
            let cols = HALF.min(out.cols() - c0);
            let mut r = rows.start;
            while r < rows.end {
                let mr = (rows.end - r).min(MR);
                let mut res = [[0f32; HALF]; MR];
                let job = Job {
                    tile: w.tile(u / 2),
                    half: u % 2,
                    sbs: w.superblocks(),
                    acts,
                    row: r,
                    // The first pass over a tile (its first half, first row block) reads it
                    // from memory; the second half and later rows find it in the cache.
                    prefetch: r == rows.start && u % 2 == 0,
                };
                // SAFETY: the weight was packed for this path, which `from_blocks` checked
                // this CPU supports; rows `r..r + mr` exist.
                unsafe {
                    match (w.kind, vnni) {
                        (KQuant::Q4K, false) => dispatch::<false, false>(&job, mr, &mut res),
                        (KQuant::Q4K, true) => dispatch::<false, true>(&job, mr, &mut res),
                        (KQuant::Q6K, false) => dispatch::<true, false>(&job, mr, &mut res),
                        (KQuant::Q6K, true) => dispatch::<true, true>(&job, mr, &mut res),
                    }
                }
                for (i, v) in res.iter().enumerate().take(mr) {
                    out.row(r - rows.start + i)[c0..c0 + cols].copy_from_slice(&v[..cols]);
                }
                r += mr;
            }
        }
    });
}

/// # Safety
/// As [`half_rows_dot`] for `mr` rows (1 to 4), with AVX-VNNI where `VNNI`.
unsafe fn dispatch<const Q6: bool, const VNNI: bool>(
    job: &Job<'_>,
    mr: usize,
    res: &mut [[f32; HALF]; MR],
) {
    // SAFETY: forwarded.
    unsafe {
        match (mr, VNNI) {
            (4, false) => half_rows_dot::<4, Q6>(job, res),
            (3, false) => half_rows_dot::<3, Q6>(job, res),
            (2, false) => half_rows_dot::<2, Q6>(job, res),
            (_, false) => half_rows_dot::<1, Q6>(job, res),
            (4, true) => half_rows_dot_vnni::<4, Q6>(job, res),
            (3, true) => half_rows_dot_vnni::<3, Q6>(job, res),
            (2, true) => half_rows_dot_vnni::<2, Q6>(job, res),
            (_, true) => half_rows_dot_vnni::<1, Q6>(job, res),
        }
    }
}

/// Half a tile against a block of activation rows.
struct Job<'a> {
    tile: &'a [u8],
    /// Columns `8 * half..8 * half + 8` of the tile.
    half: usize,
    sbs: usize,
    acts: &'a ActRows,
    row: usize,
    /// Whether to prefetch the weights ahead ([`PREFETCH_AHEAD`]).
    prefetch: bool,
}

/// # Safety
/// `p..p + 4` must be readable; AVX.
#[inline]
#[target_feature(enable = "avx")]
unsafe fn broadcast4(p: *const i8) -> __m256i {
    // SAFETY: the caller's.
    _mm256_set1_epi32(unsafe { std::ptr::read_unaligned(p.cast::<i32>()) })
}

/// Two high bits per byte (bits 0-1 of `v`) moved to bits 4-5.
#[inline]
#[target_feature(enable = "avx2")]
fn high_bits(v: __m256i) -> __m256i {
    _mm256_slli_epi16::<4>(_mm256_and_si256(v, _mm256_set1_epi8(3)))
}

/// One sub-block's `Σ u * q` per column on AVX2, exact: the `vpmaddubsw` pairs are added in
/// i16 as far as no sum can leave its range, and widened by one `vpmaddwd` per such run
/// instead of one per group of four values (on a cache-resident weight, one thread, Q4_K ran
/// 1.2 to 1.5 times as fast; docs/RESULTS.md). With `|q| <= 127` (the activations'
/// quantization), a pair of products is at most `2 * 15 * 127 = 3,810` for Q4_K, whose eight
/// pairs per lane sum to at most 30,480, and `2 * 63 * 127 = 16,002` for Q6_K, two of which sum
/// to 32,004: under 32,767 either way, so no sum saturates or wraps and the integer is exact.
///
/// # Safety
/// AVX2; `a..a + 4 * groups` (32 bytes for Q4_K, 16 for Q6_K) must be readable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn sub_block_dot_avx2<const Q6: bool>(w: &[__m256i; 8], a: *const i8) -> __m256i {
    // SAFETY: the caller's.
    let pair = |t: usize| _mm256_maddubs_epi16(w[t], unsafe { broadcast4(a.add(4 * t)) });
    let ones = _mm256_set1_epi16(1);
    if Q6 {
        let p01 = _mm256_add_epi16(pair(0), pair(1));
        let p23 = _mm256_add_epi16(pair(2), pair(3));
        _mm256_add_epi32(_mm256_madd_epi16(p01, ones), _mm256_madd_epi16(p23, ones))
    } else {
        let p = (1..8).fold(pair(0), |p, t| _mm256_add_epi16(p, pair(t)));
        _mm256_madd_epi16(p, ones)
    }
}

#[inline]
#[target_feature(enable = "avx2,avxvnni")]
fn dpbusd_vnni(acc: __m256i, values: __m256i, acts: __m256i) -> __m256i {
    _mm256_dpbusd_avx_epi32(acc, values, acts)
}

/// Sub-block `j`'s values for this half's columns, unpacked from the packed superblock at
/// `base`: one vector per group of four values (4 for Q6_K, 8 for Q4_K), a column per lane.
///
/// # Safety
/// AVX2; `base` must point at a packed superblock; `val_off` is 0 or 32 (the half).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn sub_block_values<const Q6: bool>(
    base: *const u8,
    o: TileOffsets,
    j: usize,
    val_off: usize,
) -> [__m256i; 8] {
    let low4 = _mm256_set1_epi8(0x0F);
    let mut w = [_mm256_setzero_si256(); 8];
    // SAFETY: offsets inside the superblock (`TileOffsets`).
    unsafe {
        if Q6 {
            let lo0 = _mm256_loadu_si256(base.add(o.values + 128 * j + val_off).cast());
            let lo1 = _mm256_loadu_si256(base.add(o.values + 128 * j + 64 + val_off).cast());
            let hb = _mm256_loadu_si256(base.add(o.high + 64 * j + val_off).cast());
            w[0] = _mm256_or_si256(_mm256_and_si256(lo0, low4), high_bits(hb));
            w[1] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(lo0), low4),
                high_bits(_mm256_srli_epi16::<2>(hb)),
            );
            w[2] = _mm256_or_si256(
                _mm256_and_si256(lo1, low4),
                high_bits(_mm256_srli_epi16::<4>(hb)),
            );
            w[3] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(lo1), low4),
                high_bits(_mm256_srli_epi16::<6>(hb)),
            );
        } else {
            for p in 0..4 {
                let v = _mm256_loadu_si256(base.add(o.values + 64 * (4 * j + p) + val_off).cast());
                w[2 * p] = _mm256_and_si256(v, low4);
                w[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(v), low4);
            }
        }
    }
    w
}

/// `R` activation rows from `job.row` against half a tile on AVX2.
///
/// # Safety
/// AVX2 and FMA; `job.tile` must hold `job.sbs` superblocks of the format, and rows
/// `job.row..job.row + R` must exist in `job.acts`.
#[target_feature(enable = "avx2,fma")]
unsafe fn half_rows_dot<const R: usize, const Q6: bool>(
    job: &Job<'_>,
    res: &mut [[f32; HALF]; MR],
) {
    // SAFETY: forwarded.
    unsafe { half_rows::<R, Q6, false>(job, res) }
}

/// [`half_rows_dot`] on AVX-VNNI.
///
/// # Safety
/// AVX2, FMA and AVX-VNNI; as [`half_rows_dot`].
#[target_feature(enable = "avx2,fma,avxvnni")]
unsafe fn half_rows_dot_vnni<const R: usize, const Q6: bool>(
    job: &Job<'_>,
    res: &mut [[f32; HALF]; MR],
) {
    // SAFETY: forwarded.
    unsafe { half_rows::<R, Q6, true>(job, res) }
}

/// # Safety
/// AVX2 and FMA, and AVX-VNNI where `VNNI`; as [`half_rows_dot`].
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn half_rows<const R: usize, const Q6: bool, const VNNI: bool>(
    job: &Job<'_>,
    res: &mut [[f32; HALF]; MR],
) {
    let kind = if Q6 { KQuant::Q6K } else { KQuant::Q4K };
    let (o, tb, sbs) = (TileOffsets::of(kind), kind.tile_bytes(), job.sbs);
    let groups = if Q6 { 4 } else { 8 };
    let acts = job.acts;
    // Byte offsets of this half's columns in the parts of a superblock.
    let (f32_off, byte_off, val_off, pair_off) =
        (32 * job.half, 8 * job.half, 32 * job.half, 16 * job.half);
    let mut acc = [_mm256_setzero_ps(); R];
    let mut macc = [_mm256_setzero_ps(); R];
    // SAFETY (whole body): the CPU features above; every offset stays inside the superblock
    // at `base` (`TileOffsets` and `tile_bytes` agree), the activation pointers inside the
    // rows' superblock `sb` (256 values, 16 and 8 sums).
    unsafe {
        for sb in 0..sbs {
            let base = job.tile.as_ptr().add(sb * tb);
            // A few lines at each sub-block, `PREFETCH_AHEAD` bytes on (past the tile's end,
            // the next tile's, which follows it in memory).
            let ahead = base.wrapping_add(PREFETCH_AHEAD);
            let lines = tb.div_ceil(64);
            let at: [usize; R] = std::array::from_fn(|i| (job.row + i) * sbs + sb);
            let a: [*const i8; R] = std::array::from_fn(|i| acts.qs.as_ptr().add(at[i] * KQ_BLOCK));
            let mut sb_acc = [_mm256_setzero_ps(); R];
            let mut imin = [_mm256_setzero_si256(); R];
            let d = _mm256_loadu_ps(base.add(o.d + f32_off).cast());
            let subs = kind.sub_blocks();
            for j in 0..subs {
                if job.prefetch {
                    prefetch_lines(ahead, j * lines / subs, (j + 1) * lines / subs);
                }
                let scale_bytes = _mm_loadl_epi64(base.add(o.scales + 16 * j + byte_off).cast());
                let s = if Q6 {
                    _mm256_cvtepi8_epi32(scale_bytes)
                } else {
                    _mm256_cvtepu8_epi32(scale_bytes)
                };
                let ds = _mm256_mul_ps(d, _mm256_cvtepi32_ps(s));
                let w = sub_block_values::<Q6>(base, o, j, val_off);
                for i in 0..R {
                    let at = a[i].add(4 * groups * j);
                    let sub = if VNNI {
                        // One chain a row: two (as on AVX-512) left too few of the 16
                        // registers.
                        let mut sub = _mm256_setzero_si256();
                        for (t, &wt) in w.iter().enumerate().take(groups) {
                            // `VNNI` is set only for weights packed for the AVX-VNNI path,
                            // whose callers enable the feature (`half_rows_dot_vnni`).
                            sub = dpbusd_vnni(sub, wt, broadcast4(at.add(4 * t)));
                        }
                        sub
                    } else {
                        sub_block_dot_avx2::<Q6>(&w, at)
                    };
                    let sum = _mm256_cvtepi32_ps(sub);
                    sb_acc[i] = _mm256_fmadd_ps(sum, ds, sb_acc[i]);
                }
            }
            if Q6 {
                for p in 0..8 {
                    let s0 = _mm_loadu_si128(base.add(o.scales + 32 * p).cast());
                    let s1 = _mm_loadu_si128(base.add(o.scales + 32 * p + 16).cast());
                    let interleaved = if job.half == 0 {
                        _mm_unpacklo_epi8(s0, s1)
                    } else {
                        _mm_unpackhi_epi8(s0, s1)
                    };
                    let pairs = _mm256_cvtepi8_epi16(interleaved);
                    for i in 0..R {
                        let sums = broadcast4(acts.sums16[at[i]].as_ptr().add(2 * p).cast());
                        imin[i] = _mm256_add_epi32(imin[i], _mm256_madd_epi16(pairs, sums));
                    }
                }
                for m in imin.iter_mut() {
                    *m = _mm256_slli_epi32::<5>(*m);
                }
            } else {
                for p in 0..4 {
                    let mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(
                        base.add(o.mins + 32 * p + pair_off).cast(),
                    ));
                    for i in 0..R {
                        let sums = broadcast4(acts.sums32[at[i]].as_ptr().add(2 * p).cast());
                        imin[i] = _mm256_add_epi32(imin[i], _mm256_madd_epi16(mins, sums));
                    }
                }
            }
            let dmin = _mm256_loadu_ps(base.add(o.dmin + f32_off).cast());
            for i in 0..R {
                let ad = _mm256_set1_ps(acts.ds[at[i]]);
                acc[i] = _mm256_fmadd_ps(sb_acc[i], ad, acc[i]);
                macc[i] = _mm256_fmadd_ps(
                    _mm256_cvtepi32_ps(imin[i]),
                    _mm256_mul_ps(dmin, ad),
                    macc[i],
                );
            }
        }
        for i in 0..R {
            _mm256_storeu_ps(res[i].as_mut_ptr(), _mm256_sub_ps(acc[i], macc[i]));
        }
    }
}
