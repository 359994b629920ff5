//! How close the 256-bit lanes kernels run to the arithmetic they must execute: on one thread,
//! the rate (GMAC/s) of candle's lane arithmetic alone, in registers with no loads, next to the
//! int8 GEMM's rate on a cache-resident prefill shape (896 → 4,864, 512 rows), for each path
//! this CPU has. `cargo run --release -p quorum-kernels --example lanes_ceiling [runs]`.
//!
//! Per 32 multiply-adds (one lane group of eight outputs) the AVX2 arithmetic is `vpsignb`,
//! `vpmaddubsw`, `vpmaddwd`, `vcvtdq2ps` and `vfmadd231ps`; the AVX-VNNI one is `vpdpbusd`,
//! `vcvtdq2ps` and `vfmadd231ps`. Eight independent accumulators, as in the kernels, so the
//! loop is bound by throughput, not latency. The figure is the ceiling for any kernel that
//! reproduces candle's arithmetic bit for bit with these instructions on this CPU.

#[cfg(target_arch = "x86_64")]
mod ceiling {
    use std::arch::x86_64::*;
    use std::time::Instant;

    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};
    use quorum_kernels::{CpuPath, PackedQ8_0};

    /// Lane groups per timed call (each 32 multiply-adds).
    const GROUPS: usize = 8 * 20_000_000;

    /// Keeps the compiler from hoisting a register's value out of the loop.
    #[target_feature(enable = "avx")]
    #[inline]
    fn opaque(mut v: __m256i) -> __m256i {
        // SAFETY: an empty instruction that claims to change the register.
        unsafe { std::arch::asm!("/* {0} */", inout(ymm_reg) v, options(nomem, nostack)) };
        v
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_mix(seed: i8) -> f32 {
        let ones = _mm256_set1_epi16(1);
        let d = _mm256_set1_ps(1e-9);
        let a = _mm256_set1_epi8(seed.wrapping_mul(3) | 1);
        let abs_a = _mm256_abs_epi8(a);
        let w: [__m256i; 8] = std::array::from_fn(|g| _mm256_set1_epi8(seed.wrapping_add(g as i8)));
        let mut acc = [_mm256_setzero_ps(); 8];
        for _ in 0..GROUPS / 8 {
            for (g, lane) in acc.iter_mut().enumerate() {
                let pairs = _mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(opaque(w[g]), a));
                let sums = _mm256_madd_epi16(pairs, ones);
                *lane = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), *lane);
            }
        }
        total(&acc)
    }

    /// # Safety
    /// The CPU must support AVX2, FMA and AVX-VNNI.
    #[target_feature(enable = "avx2,fma,avxvnni")]
    unsafe fn vnni_mix(seed: i8) -> f32 {
        let d = _mm256_set1_ps(1e-9);
        let a = _mm256_set1_epi8(seed.wrapping_mul(3) | 1);
        let init = _mm256_set1_epi32(-128);
        let w: [__m256i; 8] = std::array::from_fn(|g| _mm256_set1_epi8(seed.wrapping_add(g as i8)));
        let mut acc = [_mm256_setzero_ps(); 8];
        for _ in 0..GROUPS / 8 {
            for (g, lane) in acc.iter_mut().enumerate() {
                let sums = _mm256_dpbusd_avx_epi32(init, opaque(w[g]), a);
                *lane = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), *lane);
            }
        }
        total(&acc)
    }

    #[target_feature(enable = "avx")]
    fn total(acc: &[__m256; 8]) -> f32 {
        let mut out = [0f32; 8];
        let sum = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, &v| _mm256_add_ps(s, v));
        // SAFETY: 8 f32.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), sum) };
        out.iter().sum()
    }

    /// The best of `runs` timings of `f`, as GMAC/s for `macs` multiply-adds.
    fn best_rate(runs: usize, macs: f64, mut f: impl FnMut(usize)) -> f64 {
        let mut best = f64::INFINITY;
        for i in 0..runs {
            let t = Instant::now();
            f(i);
            best = best.min(t.elapsed().as_secs_f64());
        }
        macs / best / 1e9
    }

    pub fn main() -> anyhow::Result<()> {
        let runs: usize = std::env::args()
            .nth(1)
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(5);
        let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
        let (m, k, n) = (512, 896, 4864);
        let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu)?;
        let q = QTensor::quantize(&w, GgmlDType::Q8_0)?;
        let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        for path in [CpuPath::Avx2, CpuPath::AvxVnni] {
            if !path.supported() {
                println!("{path}: not on this CPU");
                continue;
            }
            let mut sink = 0f32;
            let ceiling = best_rate(runs, (GROUPS * 32) as f64, |i| {
                // SAFETY: `path.supported()` checked the features each mix needs.
                sink += unsafe {
                    match path {
                        CpuPath::Avx2 => avx2_mix(i as i8),
                        _ => vnni_mix(i as i8),
                    }
                }
            });
            let packed = PackedQ8_0::from_qtensor(&q, path)?;
            let kernel = one_thread.install(|| {
                best_rate(runs, (m * k * n) as f64, |_| {
                    packed.matmul(&x, m).expect("matmul");
                })
            });
            println!(
                "{path}: arithmetic alone {ceiling:.1} GMAC/s, GEMM {m}x{k}->{n} {kernel:.1} \
                 GMAC/s ({:.0}% of it), one thread [{sink:.1e}]",
                100.0 * kernel / ceiling
            );
        }
        Ok(())
    }
}

#[cfg(target_arch = "x86_64")]
fn main() -> anyhow::Result<()> {
    ceiling::main()
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("the 256-bit lanes kernels exist on x86_64 only");
}
