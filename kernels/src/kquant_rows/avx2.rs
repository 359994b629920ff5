//! The AVX2 kernel: eight weight rows, one per f32 lane, against up to four activation rows.
//!
//! Per block, each weight row's scales are unpacked into a vector over its sub-blocks and the
//! eight such vectors transposed, so that one vector holds a sub-block's scale for the eight
//! rows; the integer dot products of a sub-block are computed row by row (eight `i32` partial
//! sums each) and summed across the vector with `vphaddd`, leaving one `i32` per row in that
//! row's lane. From there the float operations are candle's, lane for lane.

use std::arch::x86_64::*;

use super::{Format, GROUP, MAX_SHARED, Q8kRows, QK_K};

/// Outputs of weight rows `rows` (`GROUP` rows of `kb` blocks each, as stored) for activation
/// rows `first..first + shared` into `out` (`[shared][8]`).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn group(
    format: Format,
    rows: &[u8],
    ahead: Option<&[u8]>,
    kb: usize,
    acts: &Q8kRows,
    first: usize,
    shared: usize,
    out: &mut [f32],
) {
    let mut acc = [_mm256_setzero_ps(); MAX_SHARED];
    let stride = kb * format.block_bytes();
    for b in 0..kb {
        let at = |r: usize| r * stride + b * format.block_bytes();
        let blocks: [&[u8]; GROUP] = std::array::from_fn(|r| &rows[at(r)..]);
        if let Some(next) = ahead {
            for r in 0..GROUP {
                let p = next[at(r)..].as_ptr();
                for line in 0..format.block_bytes().div_ceil(64) {
                    // A prefetch reads nothing and cannot fault.
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line * 64).cast());
                }
            }
        }
        let act = |i: usize| Act {
            qs: &acts.qs[((first + i) * kb + b) * QK_K..][..QK_K],
            da: acts.ds[(first + i) * kb + b],
            bsums: &acts.bsums[((first + i) * kb + b) * 16..][..16],
        };
        match (format, shared) {
            (Format::Q4K, 1) => q4k_block(&blocks, &[act(0)], &mut acc),
            (Format::Q4K, 2) => q4k_block(&blocks, &[act(0), act(1)], &mut acc),
            (Format::Q4K, 3) => q4k_block(&blocks, &[act(0), act(1), act(2)], &mut acc),
            (Format::Q4K, _) => q4k_block(&blocks, &[act(0), act(1), act(2), act(3)], &mut acc),
            (Format::Q6K, 1) => q6k_block(&blocks, &[act(0)], &mut acc),
            (Format::Q6K, 2) => q6k_block(&blocks, &[act(0), act(1)], &mut acc),
            (Format::Q6K, 3) => q6k_block(&blocks, &[act(0), act(1), act(2)], &mut acc),
            (Format::Q6K, _) => q6k_block(&blocks, &[act(0), act(1), act(2), act(3)], &mut acc),
        }
    }
    for (i, acc) in acc.iter().take(shared).enumerate() {
        // SAFETY: the slice holds the 8 values written.
        unsafe { _mm256_storeu_ps(out[i * GROUP..][..GROUP].as_mut_ptr(), *acc) };
    }
}

/// One activation row's Q8_K block.
struct Act<'a> {
    /// 256 values.
    qs: &'a [i8],
    da: f32,
    /// The sum of each 16 values.
    bsums: &'a [i32],
}

impl Act<'_> {
    /// Values `at..at + 32`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn at(&self, at: usize) -> __m256i {
        let qs = &self.qs[at..][..32];
        // SAFETY: the slice holds the 32 bytes read.
        unsafe { _mm256_loadu_si256(qs.as_ptr().cast()) }
    }
}

/// The exact products of unsigned weight bytes and signed activation bytes, summed in
/// groups of four (`vpmaddubsw`, then `vpmaddwd` against ones).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn dot4(w: __m256i, a: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1))
}

/// Eight rows' partial sums (eight `i32` each) → each row's total in its lane.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn sum_rows(v: &[__m256i; GROUP]) -> __m256i {
    let h01 = _mm256_hadd_epi32(v[0], v[1]);
    let h23 = _mm256_hadd_epi32(v[2], v[3]);
    let h45 = _mm256_hadd_epi32(v[4], v[5]);
    let h67 = _mm256_hadd_epi32(v[6], v[7]);
    // Each 128-bit half: rows 0-3 (4-7) over that half's partial sums.
    let lo = _mm256_hadd_epi32(h01, h23);
    let hi = _mm256_hadd_epi32(h45, h67);
    _mm256_add_epi32(
        _mm256_permute2x128_si256(lo, hi, 0x20),
        _mm256_permute2x128_si256(lo, hi, 0x31),
    )
}

/// Eight rows' partial sums of two sub-blocks (the low 128 bits one, the high the other) →
/// each row's total of the first and of the second, in its lane.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn sum_rows_pair(v: &[__m256i; GROUP]) -> (__m256i, __m256i) {
    let h01 = _mm256_hadd_epi32(v[0], v[1]);
    let h23 = _mm256_hadd_epi32(v[2], v[3]);
    let h45 = _mm256_hadd_epi32(v[4], v[5]);
    let h67 = _mm256_hadd_epi32(v[6], v[7]);
    let lo = _mm256_hadd_epi32(h01, h23);
    let hi = _mm256_hadd_epi32(h45, h67);
    (
        _mm256_permute2x128_si256(lo, hi, 0x20),
        _mm256_permute2x128_si256(lo, hi, 0x31),
    )
}

/// An 8×8 transpose: row `r`'s lane `s` becomes vector `s`'s lane `r`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn transpose(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(s0, s4),
        _mm256_permute2f128_ps::<0x20>(s1, s5),
        _mm256_permute2f128_ps::<0x20>(s2, s6),
        _mm256_permute2f128_ps::<0x20>(s3, s7),
        _mm256_permute2f128_ps::<0x31>(s0, s4),
        _mm256_permute2f128_ps::<0x31>(s1, s5),
        _mm256_permute2f128_ps::<0x31>(s2, s6),
        _mm256_permute2f128_ps::<0x31>(s3, s7),
    ]
}

fn u32_at(blk: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([blk[at], blk[at + 1], blk[at + 2], blk[at + 3]])
}

/// Eight unsigned bytes (lanes 0-7) as f32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn bytes_f32(bytes: u64) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes as i64)))
}

/// The eight signed bytes at `at` as f32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn signed_bytes_f32(blk: &[u8], at: usize) -> __m256 {
    // SAFETY: the slice holds the 8 bytes read.
    let v = _mm256_cvtepi8_epi32(unsafe { _mm_loadl_epi64(blk[at..][..8].as_ptr().cast()) });
    _mm256_cvtepi32_ps(v)
}

/// The f16 at `at` of each row's block, a lane each.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn f16_lanes(blocks: &[&[u8]; GROUP], at: usize) -> __m256 {
    let bits: [u16; GROUP] =
        std::array::from_fn(|r| u16::from_le_bytes([blocks[r][at], blocks[r][at + 1]]));
    // SAFETY: the array holds the 16 bytes read.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(bits.as_ptr().cast()) })
}

/// One Q4_K block of each of the eight rows against a block of `SHARED` activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn q4k_block<const SHARED: usize>(
    blocks: &[&[u8]; GROUP],
    acts: &[Act<'_>; SHARED],
    acc: &mut [__m256; MAX_SHARED],
) {
    // d·sc and dmin·m of every sub-block, a vector per row, then per sub-block.
    let mut scales = [_mm256_setzero_ps(); 8];
    let mut mins = [_mm256_setzero_ps(); 8];
    let d = f16_lanes(blocks, 0);
    let dmin = f16_lanes(blocks, 2);
    for (r, blk) in blocks.iter().enumerate() {
        let (s0, s1, s2) = (u32_at(blk, 4), u32_at(blk, 8), u32_at(blk, 12));
        // ggml's packing: sub-blocks 0-3 in the low six bits of bytes 0-3 (scales) and 4-7
        // (mins); 4-7 in the nibbles of bytes 8-11 with their top two bits in the top bits of
        // bytes 0-3 and 4-7.
        let sc = (s0 & 0x3F3F_3F3F) as u64
            | ((((s2 & 0x0F0F_0F0F) | (((s0 >> 6) & 0x0303_0303) << 4)) as u64) << 32);
        let mn = (s1 & 0x3F3F_3F3F) as u64
            | (((((s2 >> 4) & 0x0F0F_0F0F) | (((s1 >> 6) & 0x0303_0303) << 4)) as u64) << 32);
        scales[r] = bytes_f32(sc);
        mins[r] = bytes_f32(mn);
    }
    // The products are exact in f32 (at most 11 + 6 significant bits), as in candle's tiles.
    let scales = transpose(scales).map(|s| _mm256_mul_ps(s, d));
    let mins = transpose(mins).map(|m| _mm256_mul_ps(m, dmin));
    let nibble = _mm256_set1_epi8(0x0F);
    for c in 0..4 {
        // Sub-blocks 2c (low nibbles of bytes 32c..32c+32) and 2c+1 (high nibbles).
        let a_low: [__m256i; SHARED] = std::array::from_fn(|i| acts[i].at(64 * c));
        let a_high: [__m256i; SHARED] = std::array::from_fn(|i| acts[i].at(64 * c + 32));
        let mut low = [[_mm256_setzero_si256(); GROUP]; SHARED];
        let mut high = [[_mm256_setzero_si256(); GROUP]; SHARED];
        for (r, blk) in blocks.iter().enumerate() {
            // SAFETY: the slice holds the 32 bytes read.
            let w = unsafe { _mm256_loadu_si256(blk[16 + c * 32..][..32].as_ptr().cast()) };
            let lo = _mm256_and_si256(w, nibble);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(w), nibble);
            for i in 0..SHARED {
                low[i][r] = dot4(lo, a_low[i]);
                high[i][r] = dot4(hi, a_high[i]);
            }
        }
        for (i, act) in acts.iter().enumerate() {
            let (da, bsums) = (act.da, act.bsums);
            for (sub, isum) in [(2 * c, sum_rows(&low[i])), (2 * c + 1, sum_rows(&high[i]))] {
                let bsum = (bsums[sub * 2] + bsums[sub * 2 + 1]) as f32;
                let f = _mm256_cvtepi32_ps(isum);
                acc[i] = _mm256_fmadd_ps(f, _mm256_mul_ps(scales[sub], _mm256_set1_ps(da)), acc[i]);
                acc[i] = _mm256_fnmadd_ps(mins[sub], _mm256_set1_ps(da * bsum), acc[i]);
            }
        }
    }
}

/// One Q6_K block of each of the eight rows against a block of `SHARED` activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn q6k_block<const SHARED: usize>(
    blocks: &[&[u8]; GROUP],
    acts: &[Act<'_>; SHARED],
    acc: &mut [__m256; MAX_SHARED],
) {
    // d·sc of sub-blocks 0-7 and 8-15, a vector per row, then per sub-block.
    let mut first_half = [_mm256_setzero_ps(); 8];
    let mut second_half = [_mm256_setzero_ps(); 8];
    for (r, blk) in blocks.iter().enumerate() {
        first_half[r] = signed_bytes_f32(blk, 192);
        second_half[r] = signed_bytes_f32(blk, 200);
    }
    // Exact in f32 (at most 11 + 8 significant bits), as in candle's tiles.
    let d = f16_lanes(blocks, 208);
    let first_half = transpose(first_half).map(|s| _mm256_mul_ps(s, d));
    let second_half = transpose(second_half).map(|s| _mm256_mul_ps(s, d));
    let nibble = _mm256_set1_epi8(0x0F);
    let pair = _mm256_set1_epi8(3);
    for half in 0..2 {
        for quarter in 0..4 {
            // Values 128·half + 32·quarter .. +32: sub-blocks 8·half + 2·quarter and the next.
            let a: [__m256i; SHARED] =
                std::array::from_fn(|i| acts[i].at(128 * half + 32 * quarter));
            let mut sums = [[_mm256_setzero_si256(); GROUP]; SHARED];
            for (r, blk) in blocks.iter().enumerate() {
                // SAFETY: the slices hold the 32 bytes read.
                let (ql, qh) = unsafe {
                    (
                        _mm256_loadu_si256(
                            blk[half * 64 + (quarter % 2) * 32..][..32].as_ptr().cast(),
                        ),
                        _mm256_loadu_si256(blk[128 + half * 32..][..32].as_ptr().cast()),
                    )
                };
                let low = if quarter < 2 {
                    _mm256_and_si256(ql, nibble)
                } else {
                    _mm256_and_si256(_mm256_srli_epi16::<4>(ql), nibble)
                };
                let top = match quarter {
                    0 => _mm256_and_si256(qh, pair),
                    1 => _mm256_and_si256(_mm256_srli_epi16::<2>(qh), pair),
                    2 => _mm256_and_si256(_mm256_srli_epi16::<4>(qh), pair),
                    _ => _mm256_and_si256(_mm256_srli_epi16::<6>(qh), pair),
                };
                let w = _mm256_or_si256(low, _mm256_slli_epi16::<4>(top));
                for i in 0..SHARED {
                    sums[i][r] = dot4(w, a[i]);
                }
            }
            for (i, act) in acts.iter().enumerate() {
                let (da, bsums) = (act.da, act.bsums);
                let (even, odd) = sum_rows_pair(&sums[i]);
                let sub0 = 8 * half + 2 * quarter;
                for (sub, isum) in [(sub0, even), (sub0 + 1, odd)] {
                    let scale = if sub < 8 {
                        first_half[sub]
                    } else {
                        second_half[sub - 8]
                    };
                    let f = _mm256_sub_ps(
                        _mm256_cvtepi32_ps(isum),
                        _mm256_set1_ps(32.0 * bsums[sub] as f32),
                    );
                    acc[i] = _mm256_fmadd_ps(f, _mm256_mul_ps(scale, _mm256_set1_ps(da)), acc[i]);
                }
            }
        }
    }
}
