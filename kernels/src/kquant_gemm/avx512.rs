//! The AVX-512 VNNI kernel: one 16-column tile against up to four activation rows, a column
//! per lane; four activation bytes broadcast, `vpdpbusd` against four values of every column
//! (half the instructions per product of `vpmaddubsw` then `vpdpwssd`), each sub-block's sum
//! scaled in f32.

use std::arch::x86_64::*;

use super::{
    ActRows, KQ_BLOCK, KQuant, PREFETCH_AHEAD, PackedKQuant, TILE, TileOffsets, prefetch_lines,
};
use crate::gemm_split::{Split, tile_rows};

/// Activation rows per kernel call: each weight value is unpacked once for them.
const MR: usize = 6;

pub(super) fn gemm(w: &PackedKQuant, acts: &ActRows, out: &mut [f32]) {
    let (n, k) = (w.n, w.k);
    let m = out.len() / n;
    let row_bytes = k + (k / KQ_BLOCK) * (4 + 32 + 16);
    let split = Split {
        m,
        n,
        unit_cols: TILE,
        units: n.div_ceil(TILE),
        unit_align: 1,
        tile_rows: tile_rows(row_bytes, MR),
    };
    let sbs = w.superblocks();
    split.run(out, |rows, tiles, mut out| {
        let mut unpacked = if rows.len() >= UNPACK_MIN_ROWS {
            vec![0u8; sbs * UNPACKED_SUPERBLOCK]
        } else {
            Vec::new()
        };
        for t in tiles.clone() {
            let values = if unpacked.is_empty() {
                None
            } else {
                // SAFETY: the CPU supports the path this weight was packed for; the tile holds
                // `sbs` superblocks of its kind.
                unsafe {
                    match w.kind {
                        KQuant::Q4K => unpack_tile::<false>(w.tile(t), sbs, &mut unpacked),
                        KQuant::Q6K => unpack_tile::<true>(w.tile(t), sbs, &mut unpacked),
                    }
                }
                Some(&unpacked[..])
            };
            let c0 = (t - tiles.start) * TILE;
            let cols = TILE.min(out.cols() - c0);
            let mut r = rows.start;
            while r < rows.end {
                let mr = (rows.end - r).min(MR);
                let mut res = [[0f32; TILE]; MR];
                let job = Job {
                    tile: w.tile(t),
                    sbs,
                    acts,
                    row: r,
                    prefetch: r == rows.start && values.is_none(),
                };
                // SAFETY: the weight was packed for `CpuPath::Avx512Vnni`, which `from_blocks`
                // checked this CPU supports; rows `r..r + mr` exist.
                unsafe {
                    match (w.kind, mr) {
                        (KQuant::Q4K, 6) => tile_rows_dot::<6, false>(&job, values, &mut res),
                        (KQuant::Q4K, 5) => tile_rows_dot::<5, false>(&job, values, &mut res),
                        (KQuant::Q4K, 4) => tile_rows_dot::<4, false>(&job, values, &mut res),
                        (KQuant::Q4K, 3) => tile_rows_dot::<3, false>(&job, values, &mut res),
                        (KQuant::Q4K, 2) => tile_rows_dot::<2, false>(&job, values, &mut res),
                        (KQuant::Q4K, _) => tile_rows_dot::<1, false>(&job, values, &mut res),
                        (KQuant::Q6K, 6) => tile_rows_dot::<6, true>(&job, values, &mut res),
                        (KQuant::Q6K, 5) => tile_rows_dot::<5, true>(&job, values, &mut res),
                        (KQuant::Q6K, 4) => tile_rows_dot::<4, true>(&job, values, &mut res),
                        (KQuant::Q6K, 3) => tile_rows_dot::<3, true>(&job, values, &mut res),
                        (KQuant::Q6K, 2) => tile_rows_dot::<2, true>(&job, values, &mut res),
                        (KQuant::Q6K, _) => tile_rows_dot::<1, true>(&job, values, &mut res),
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

/// One tile against a block of activation rows.
struct Job<'a> {
    /// The tile's packed superblocks; the next tile's follow them in memory.
    tile: &'a [u8],
    sbs: usize,
    acts: &'a ActRows,
    row: usize,
    /// Whether to prefetch the weights ahead (the first row block of a tile reads them from
    /// memory; the others find them in the cache).
    prefetch: bool,
}

/// Four activation bytes as one i32, broadcast to every lane.
///
/// # Safety
/// `p..p + 4` must be readable; AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn broadcast4(p: *const i8) -> __m512i {
    // SAFETY: the caller's.
    _mm512_set1_epi32(unsafe { std::ptr::read_unaligned(p.cast::<i32>()) })
}

/// Two high bits per byte (bits 0-1 of `v`) moved to bits 4-5, above the low four.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn high_bits(v: __m512i) -> __m512i {
    _mm512_slli_epi16::<4>(_mm512_and_si512(v, _mm512_set1_epi8(3)))
}

/// Tile superblocks with their values unpacked, one byte each: per superblock 4096 bytes,
/// the 64 bytes of group `g` of four values at `64g`, byte `4c + i` value `4g + i` of column
/// `c`. Prefill's calls unpack each tile once into this and let every row block read bytes
/// straight into `vpdpbusd`, where a decode step reads the packed tile (half the bytes).
const UNPACKED_SUPERBLOCK: usize = TILE * KQ_BLOCK;

/// Rows from which a call unpacks each tile first (measured: `kquant_gemm_throughput`).
pub(super) const UNPACK_MIN_ROWS: usize = 8;

/// The tile's values, unpacked into `out` (`sbs` superblocks of [`UNPACKED_SUPERBLOCK`]).
///
/// # Safety
/// The CPU must support avx512f and avx512bw; `tile` must hold `sbs` superblocks of the format.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn unpack_tile<const Q6: bool>(tile: &[u8], sbs: usize, out: &mut [u8]) {
    let kind = if Q6 { KQuant::Q6K } else { KQuant::Q4K };
    let (o, tb) = (TileOffsets::of(kind), kind.tile_bytes());
    assert!(tile.len() >= sbs * tb && out.len() >= sbs * UNPACKED_SUPERBLOCK);
    for sb in 0..sbs {
        // SAFETY: inside `tile` and `out` (asserted above).
        unsafe {
            let base = tile.as_ptr().add(sb * tb);
            let dst = out.as_mut_ptr().add(sb * UNPACKED_SUPERBLOCK);
            for j in 0..kind.sub_blocks() {
                let w = sub_block_values::<Q6>(base, o, j);
                for (t, v) in w.iter().enumerate().take(groups_per_sub_block::<Q6>()) {
                    let g = groups_per_sub_block::<Q6>() * j + t;
                    _mm512_storeu_si512(dst.add(64 * g).cast(), *v);
                }
            }
        }
    }
}

/// Groups of four values per sub-block: 8 for Q4_K (32 values), 4 for Q6_K (16).
const fn groups_per_sub_block<const Q6: bool>() -> usize {
    if Q6 { 4 } else { 8 }
}

/// Sub-block `j`'s values, unpacked from the packed superblock at `base`: one vector per group
/// of four values (the first [`groups_per_sub_block`] entries), a column per i32 lane.
///
/// # Safety
/// The CPU must support avx512f and avx512bw; `base` must point at a packed superblock.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn sub_block_values<const Q6: bool>(
    base: *const u8,
    o: TileOffsets,
    j: usize,
) -> [__m512i; 8] {
    let low4 = _mm512_set1_epi8(0x0F);
    let mut w = [_mm512_setzero_si512(); 8];
    // SAFETY: offsets inside the superblock (`TileOffsets`).
    unsafe {
        if Q6 {
            let lo0 = _mm512_loadu_si512(base.add(o.values + 128 * j).cast());
            let lo1 = _mm512_loadu_si512(base.add(o.values + 128 * j + 64).cast());
            let hb = _mm512_loadu_si512(base.add(o.high + 64 * j).cast());
            w[0] = _mm512_or_si512(_mm512_and_si512(lo0, low4), high_bits(hb));
            w[1] = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16::<4>(lo0), low4),
                high_bits(_mm512_srli_epi16::<2>(hb)),
            );
            w[2] = _mm512_or_si512(
                _mm512_and_si512(lo1, low4),
                high_bits(_mm512_srli_epi16::<4>(hb)),
            );
            w[3] = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16::<4>(lo1), low4),
                high_bits(_mm512_srli_epi16::<6>(hb)),
            );
        } else {
            for p in 0..4 {
                let v = _mm512_loadu_si512(base.add(o.values + 64 * (4 * j + p)).cast());
                w[2 * p] = _mm512_and_si512(v, low4);
                w[2 * p + 1] = _mm512_and_si512(_mm512_srli_epi16::<4>(v), low4);
            }
        }
    }
    w
}

/// `R` activation rows from `job.row` against one tile, into `res[..R]`. `Q6` selects Q6_K
/// (else Q4_K); `unpacked`, if given, holds the tile's values unpacked ([`unpack_tile`]),
/// read instead of the packed ones.
///
/// # Safety
/// The CPU must support avx512f, avx512bw and avx512vnni; `job.tile` must hold `job.sbs`
/// superblocks of the format (and `unpacked` their values), and rows `job.row..job.row + R`
/// must exist in `job.acts`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
unsafe fn tile_rows_dot<const R: usize, const Q6: bool>(
    job: &Job<'_>,
    unpacked: Option<&[u8]>,
    res: &mut [[f32; TILE]; MR],
) {
    let kind = if Q6 { KQuant::Q6K } else { KQuant::Q4K };
    let (o, tb, sbs) = (TileOffsets::of(kind), kind.tile_bytes(), job.sbs);
    let groups = groups_per_sub_block::<Q6>();
    let acts = job.acts;
    let mut acc = [_mm512_setzero_ps(); R];
    let mut macc = [_mm512_setzero_ps(); R];
    // SAFETY (whole body): the CPU features above; every offset stays inside the superblock
    // at `base` (`TileOffsets` and `tile_bytes` agree) or its unpacked values, the activation
    // pointers inside the rows' superblock `sb` (256 values, 16 and 8 sums).
    unsafe {
        for sb in 0..sbs {
            let base = job.tile.as_ptr().add(sb * tb);
            // The weights `PREFETCH_AHEAD` bytes on, a few lines at each sub-block: in a decode
            // step every weight comes from memory, and the hardware prefetcher alone left the
            // kernel waiting (a burst of a whole superblock's lines stalled on the line-fill
            // buffers instead).
            let ahead = base.wrapping_add(PREFETCH_AHEAD);
            let lines = tb.div_ceil(64);
            let at: [usize; R] = std::array::from_fn(|i| (job.row + i) * sbs + sb);
            let a: [*const i8; R] = std::array::from_fn(|i| acts.qs.as_ptr().add(at[i] * KQ_BLOCK));
            // Per row and sub-block, `vpdpbusd` sums the products (unsigned values times signed
            // activation bytes) in two chains; the sum is scaled in f32 (`vpmulld` would take
            // two more uops of the port `vpdpbusd` runs on). (Every index into these arrays
            // must be known at compile time, or they live on the stack.)
            let mut sb_acc = [_mm512_setzero_ps(); R];
            let mut imin = [_mm512_setzero_si512(); R];
            let d = _mm512_loadu_ps(base.add(o.d).cast());
            let subs = kind.sub_blocks();
            for j in 0..subs {
                if job.prefetch {
                    prefetch_lines(ahead, j * lines / subs, (j + 1) * lines / subs);
                }
                let scale_bytes = _mm_loadu_si128(base.add(o.scales + 16 * j).cast());
                let s = if Q6 {
                    _mm512_cvtepi8_epi32(scale_bytes)
                } else {
                    _mm512_cvtepu8_epi32(scale_bytes)
                };
                let ds = _mm512_mul_ps(d, _mm512_cvtepi32_ps(s));
                let w = match unpacked {
                    Some(values) => {
                        let first = values
                            .as_ptr()
                            .add(sb * UNPACKED_SUPERBLOCK + 64 * groups * j);
                        std::array::from_fn(|t| {
                            if t < groups {
                                _mm512_loadu_si512(first.add(64 * t).cast())
                            } else {
                                _mm512_setzero_si512()
                            }
                        })
                    }
                    None => sub_block_values::<Q6>(base, o, j),
                };
                for i in 0..R {
                    let mut sub = [_mm512_setzero_si512(); 2];
                    for (t, &wt) in w.iter().enumerate().take(groups) {
                        let av = broadcast4(a[i].add(4 * (groups * j + t)));
                        sub[t % 2] = _mm512_dpbusd_epi32(sub[t % 2], wt, av);
                    }
                    let sum = _mm512_cvtepi32_ps(_mm512_add_epi32(sub[0], sub[1]));
                    sb_acc[i] = _mm512_fmadd_ps(sum, ds, sb_acc[i]);
                }
            }
            if Q6 {
                for p in 0..8 {
                    let s0 = _mm_loadu_si128(base.add(o.scales + 32 * p).cast());
                    let s1 = _mm_loadu_si128(base.add(o.scales + 32 * p + 16).cast());
                    let pairs = _mm512_cvtepi8_epi16(_mm256_set_m128i(
                        _mm_unpackhi_epi8(s0, s1),
                        _mm_unpacklo_epi8(s0, s1),
                    ));
                    for i in 0..R {
                        let sums = broadcast4(acts.sums16[at[i]].as_ptr().add(2 * p).cast());
                        imin[i] = _mm512_dpwssd_epi32(imin[i], pairs, sums);
                    }
                }
                for m in imin.iter_mut() {
                    *m = _mm512_slli_epi32::<5>(*m);
                }
            } else {
                for p in 0..4 {
                    let mins =
                        _mm512_cvtepu8_epi16(_mm256_loadu_si256(base.add(o.mins + 32 * p).cast()));
                    for i in 0..R {
                        let sums = broadcast4(acts.sums32[at[i]].as_ptr().add(2 * p).cast());
                        imin[i] = _mm512_dpwssd_epi32(imin[i], mins, sums);
                    }
                }
            }
            let dmin = _mm512_loadu_ps(base.add(o.dmin).cast());
            for i in 0..R {
                let ad = _mm512_set1_ps(acts.ds[at[i]]);
                acc[i] = _mm512_fmadd_ps(sb_acc[i], ad, acc[i]);
                macc[i] = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(imin[i]),
                    _mm512_mul_ps(dmin, ad),
                    macc[i],
                );
            }
        }
        for i in 0..R {
            _mm512_storeu_ps(res[i].as_mut_ptr(), _mm512_sub_ps(acc[i], macc[i]));
        }
    }
}
