//! Parity with candle's `QMatMul::forward`, bit for bit.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

use super::{PackedQ8_0, Path, Q8GemmError};

/// A small deterministic generator (xorshift64*), so the tests need no `rand`.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// Values of mixed magnitudes: per 32-value block a scale from 1e-4 to 1e2, some blocks
    /// all zero, some values exactly zero, some large outliers.
    fn mixed(&mut self, len: usize) -> Vec<f32> {
        let mut v = Vec::with_capacity(len);
        while v.len() < len {
            let scale = 10f32.powf(self.unit() * 3.0 - 1.0);
            let kind = self.next_u64() % 16;
            for _ in 0..32.min(len - v.len()) {
                let x = match kind {
                    0 => 0.0,
                    1 => (self.next_u64() % 9) as f32 - 4.0,
                    _ if self.next_u64().is_multiple_of(50) => self.unit() * scale * 300.0,
                    _ if self.next_u64().is_multiple_of(20) => 0.0,
                    _ => self.unit() * scale,
                };
                v.push(x);
            }
        }
        v
    }
}

struct Case {
    x: Vec<f32>,
    q: QTensor,
    m: usize,
    k: usize,
}

fn case(rng: &mut Rng, m: usize, k: usize, n: usize) -> Case {
    let w = Tensor::from_vec(rng.mixed(n * k), (n, k), &Device::Cpu).expect("weight");
    let q = QTensor::quantize(&w, GgmlDType::Q8_0).expect("quantize");
    Case {
        x: rng.mixed(m * k),
        q,
        m,
        k,
    }
}

fn candle(c: &Case) -> Vec<f32> {
    let x = Tensor::from_slice(&c.x, (c.m, c.k), &Device::Cpu).expect("x");
    let q = QTensor::quantize(&c.q.dequantize(&Device::Cpu).expect("deq"), GgmlDType::Q8_0)
        .expect("requantize");
    let y = QMatMul::from_qtensor(q)
        .expect("qmatmul")
        .forward(&x)
        .expect("forward");
    y.flatten_all()
        .expect("flat")
        .to_vec1::<f32>()
        .expect("vec")
}

fn assert_bits_eq(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "{what}: element {i}: {g} vs {w}");
    }
}

const MS: [usize; 5] = [1, 3, 17, 64, 130];
const KS: [usize; 3] = [32, 96, 896];
const NS: [usize; 4] = [16, 33, 128, 896];
/// Shapes candle repacks (on CPUs with VNNI): `k` a multiple of 256, `n` of 16.
const REPACKED_KS: [usize; 2] = [256, 768];
const REPACKED_NS: [usize; 3] = [16, 48, 896];

#[test]
fn requantizing_a_q8_0_weight_is_lossless() {
    // `candle` above rebuilds the QTensor from its dequantized values; that only compares the
    // same weights if Q8_0 quantization is idempotent, which this checks.
    let mut rng = Rng(7);
    let c = case(&mut rng, 1, 896, 33);
    let again = QTensor::quantize(&c.q.dequantize(&Device::Cpu).expect("deq"), GgmlDType::Q8_0)
        .expect("quantize");
    assert_eq!(c.q.data().expect("a"), again.data().expect("b"));
}

#[test]
fn matmul_is_bit_identical_to_candle() {
    let mut rng = Rng(0x5EED);
    for &k in &KS {
        for &n in &NS {
            let c = case(&mut rng, 130, k, n);
            let packed = PackedQ8_0::from_qtensor(&c.q).expect("pack");
            for &m in &MS {
                let sub = Case {
                    x: c.x[..m * k].to_vec(),
                    q: QTensor::quantize(
                        &c.q.dequantize(&Device::Cpu).expect("d"),
                        GgmlDType::Q8_0,
                    )
                    .expect("q"),
                    m,
                    k,
                };
                let got = packed.matmul(&sub.x, m).expect("matmul");
                assert_bits_eq(&got, &candle(&sub), &format!("m={m} k={k} n={n}"));
            }
        }
    }
}

#[test]
fn every_path_matches_its_candle_arithmetic() {
    // The lane path is what candle runs on any x86 CPU with AVX2 and FMA; the fast path must
    // agree with it wherever it runs.
    let mut rng = Rng(42);
    for (m, k, n) in [(17, 96, 33), (5, 896, 16), (64, 32, 128)] {
        let c = case(&mut rng, m, k, n);
        let packed = PackedQ8_0::from_qtensor(&c.q).expect("pack");
        let lanes = packed.matmul_on(Path::Lanes, &c.x, m);
        let fast = packed.matmul_on(Path::detect(), &c.x, m);
        assert_bits_eq(&fast, &lanes, "detected vs lanes");
        if Path::detect() != Path::Scalar {
            assert_bits_eq(&lanes, &candle(&c), "lanes vs candle");
        }
        // The scalar fallback sums differently; it agrees to rounding.
        let scalar = packed.matmul_on(Path::Scalar, &c.x, m);
        for (s, l) in scalar.iter().zip(&lanes) {
            assert!((s - l).abs() <= 1e-3 * l.abs().max(1.0), "{s} vs {l}");
        }
    }
}

#[test]
fn batched_input_keeps_leading_dims() {
    let mut rng = Rng(3);
    let c = case(&mut rng, 6, 64, 16);
    let packed = PackedQ8_0::from_qtensor(&c.q).expect("pack");
    let x = Tensor::from_slice(&c.x, (2, 3, 64), &Device::Cpu).expect("x");
    let y = packed.forward(&x).expect("forward");
    assert_eq!(y.dims(), &[2, 3, 16]);
    let flat = y.flatten_all().expect("f").to_vec1::<f32>().expect("v");
    assert_bits_eq(&flat, &candle(&c), "forward");
}

#[test]
fn bad_shapes_are_errors() {
    assert!(matches!(
        PackedQ8_0::from_blocks(&[0; 34], 1, 48),
        Err(Q8GemmError::KNotBlockMultiple { k: 48 })
    ));
    assert!(matches!(
        PackedQ8_0::from_blocks(&[0; 34], 2, 32),
        Err(Q8GemmError::WeightBytes {
            n: 2,
            k: 32,
            expected: 68,
            got: 34
        })
    ));
    let packed = PackedQ8_0::from_blocks(&[0; 34], 1, 32).expect("pack");
    assert!(matches!(
        packed.matmul(&[0.0; 31], 1),
        Err(Q8GemmError::ActivationLen {
            m: 1,
            k: 32,
            expected: 32,
            got: 31
        })
    ));
    let f32_weight = QTensor::quantize(
        &Tensor::zeros((2, 32), candle_core::DType::F32, &Device::Cpu).expect("z"),
        GgmlDType::F32,
    )
    .expect("q");
    assert_eq!(
        PackedQ8_0::from_qtensor(&f32_weight)
            .map(|_| ())
            .map_err(|e| e.kind()),
        Err("not_q8_0")
    );
}

#[test]
fn repacked_shapes_are_bit_identical_to_candle() {
    let mut rng = Rng(0xBEEF);
    for &k in &REPACKED_KS {
        for &n in &REPACKED_NS {
            for &m in &MS {
                let c = case(&mut rng, m, k, n);
                let packed = PackedQ8_0::from_qtensor(&c.q).expect("pack");
                let got = packed.matmul(&c.x, m).expect("matmul");
                let want = candle(&c);
                assert_bits_eq(&got, &want, &format!("m={m} k={k} n={n}"));
                // The fast path agrees with the scalar reference of the same arithmetic.
                let emulated = packed.matmul_on(Path::Lanes, &c.x, m);
                assert_bits_eq(&emulated, &want, &format!("emulated m={m} k={k} n={n}"));
            }
        }
    }
}

#[test]
fn candle_repacks_k_multiple_of_256_with_n_multiple_of_16() {
    assert!(!PackedQ8_0::candle_repacks(4864, 896));
    assert!(!PackedQ8_0::candle_repacks(900, 4864 + 32));
    assert!(!PackedQ8_0::candle_repacks(33, 4864));
    assert!(!PackedQ8_0::candle_repacks(16, 0));
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        PackedQ8_0::candle_repacks(896, 4864),
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni")
            || is_x86_feature_detected!("avxvnni") && is_x86_feature_detected!("avx2")
    );
}
