//! What the host KV cache stores one key or value element as: f32, or f16 at half the bytes.
//!
//! A decode step reads every cached key and value of every sequence it decodes, once a layer:
//! at a business schema's 2,400-token prompt that is 140 MB of f32 a row, as much as the
//! weights once eight rows decode together. Stored as f16 the same context costs half. The
//! attention kernels widen each element to f32 as they load it (exact: every f16 is an f32),
//! so attention over f16 blocks computes, bit for bit, what it computes over f32 blocks
//! holding the same rounded values; only the rounding at the write differs.

use candle_core::DType;

/// A key or value element of the host KV cache.
pub trait KvElement: Copy + Send + Sync + 'static {
    /// The dtype the cache reports for blocks of this element.
    const DTYPE: DType;

    /// The element nearest `x` (round to nearest, ties to even).
    fn from_f32(x: f32) -> Self;

    /// The element's exact value.
    fn to_f32(self) -> f32;

    /// `len` zeros, allocated zeroed: the system commits the pages as they are first written,
    /// so a cache sized for its whole budget is resident only as far as it was used (a fill
    /// element by element would touch every page at start-up).
    fn zeroed(len: usize) -> Vec<Self>;

    /// `dst[i] = from_f32(src[i])`; the slices have the same length.
    fn convert_from(dst: &mut [Self], src: &[f32]);

    /// `dst[i] = src[i].to_f32()`; the slices have the same length.
    fn widen(dst: &mut [f32], src: &[Self]);

    /// The elements as they are, when they are f32 already.
    fn as_f32(x: &[Self]) -> Option<&[f32]>;

    /// Eight consecutive elements from `p`, widened to f32 lanes.
    ///
    /// # Safety
    /// The CPU must support AVX2 and F16C (callers compile with them: the AVX2 attention path
    /// is chosen only where both are present), and `p..p + 8` must be readable.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl KvElement for f32 {
    const DTYPE: DType = DType::F32;

    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }

    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }

    fn zeroed(len: usize) -> Vec<Self> {
        vec![0.0; len]
    }

    fn convert_from(dst: &mut [Self], src: &[f32]) {
        dst.copy_from_slice(src);
    }

    fn widen(dst: &mut [f32], src: &[Self]) {
        dst.copy_from_slice(src);
    }

    fn as_f32(x: &[Self]) -> Option<&[f32]> {
        Some(x)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        // SAFETY: the caller's contract.
        unsafe { std::arch::x86_64::_mm256_loadu_ps(p) }
    }
}

impl KvElement for half::f16 {
    const DTYPE: DType = DType::F16;

    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        half::f16::from_f32(x)
    }

    #[inline(always)]
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }

    fn zeroed(len: usize) -> Vec<Self> {
        use half::vec::HalfBitsVecExt;
        // The bits of 0.0 are 0, and a `Vec<u16>` of zeros is allocated zeroed.
        vec![0u16; len].reinterpret_into()
    }

    fn convert_from(dst: &mut [Self], src: &[f32]) {
        use half::slice::HalfFloatSliceExt;
        dst.convert_from_f32_slice(src);
    }

    fn widen(dst: &mut [f32], src: &[Self]) {
        use half::slice::HalfFloatSliceExt;
        src.convert_to_f32_slice(dst);
    }

    fn as_f32(_: &[Self]) -> Option<&[f32]> {
        None
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_cvtph_ps};
        // SAFETY: the caller's contract: eight f16 are sixteen readable bytes, and F16C is
        // present.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast::<__m128i>())) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounds_to_nearest_and_widens_exactly() {
        let xs = [
            0.0f32,
            -0.0,
            1.0,
            1.0 + 1.0 / 2048.0,
            65504.0,
            1e-8,
            -3.25,
            70000.0,
        ];
        let mut h = vec![half::f16::ZERO; xs.len()];
        <half::f16 as KvElement>::convert_from(&mut h, &xs);
        for (&x, &e) in xs.iter().zip(&h) {
            assert_eq!(e, half::f16::from_f32(x), "{x}");
            assert_eq!(e.to_f32(), f32::from(e), "{x}");
        }
        // 1 + 2^-11 is halfway between two f16 values: ties go to the even one, 1.
        assert_eq!(h[3].to_f32(), 1.0);
        assert!(h[7].to_f32().is_infinite());
    }
}
