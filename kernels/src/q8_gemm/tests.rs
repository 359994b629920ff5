//! Parity with candle's `QMatMul::forward`, bit for bit.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

use super::{PackedQ8_0, Q8_0_BLOCK, Q8GemmError};
use crate::CpuPath;
use crate::test_rng::Rng;

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
/// 1,056 is 33 blocks: more than one run of the 256-bit lanes kernels.
const KS: [usize; 4] = [32, 96, 896, 1056];
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

/// Every (m, k, n) the tests run: odd row counts, `k` and `n` that candle repacks on VNNI CPUs
/// and ones it does not, odd `n`.
fn shapes() -> Vec<(usize, usize, usize)> {
    let mut v = Vec::new();
    for &k in KS.iter().chain(&REPACKED_KS) {
        for &n in NS.iter().chain(&REPACKED_NS) {
            v.push((k, n));
        }
    }
    v.into_iter()
        .flat_map(|(k, n)| MS.iter().map(move |&m| (m, k, n)))
        .collect()
}

#[test]
fn every_supported_path_equals_the_scalar_reference_bit_for_bit() {
    let paths = CpuPath::int8_paths();
    eprintln!("int8 paths on this CPU: {paths:?}");
    let mut rng = Rng(0x5EED);
    let mut cases = 0;
    for (m, k, n) in shapes() {
        let c = case(&mut rng, m, k, n);
        for &path in &paths {
            let packed = PackedQ8_0::from_qtensor(&c.q, path).expect("pack");
            let got = packed.matmul(&c.x, m).expect("matmul");
            let want = packed.reference(&c.x, m).expect("reference");
            assert_bits_eq(&got, &want, &format!("{path} m={m} k={k} n={n}"));
            cases += 1;
        }
    }
    assert_eq!(cases, shapes().len() * paths.len());
}

#[test]
fn every_supported_path_is_bit_identical_to_candle_where_candle_computes_alike() {
    // candle in this process computes as on a CPU of the detected path; a slower path that
    // reproduces the same arithmetic for a shape (all of them do for shapes candle does not
    // repack) must give candle's numbers exactly.
    let detected = CpuPath::detect();
    let paths = CpuPath::int8_paths();
    let mut rng = Rng(42);
    let mut compared = 0;
    for (m, k, n) in shapes() {
        let c = case(&mut rng, m, k, n);
        let want = candle(&c);
        for &path in &paths {
            if path.candle_repacks_q8_0(n, k) != detected.candle_repacks_q8_0(n, k) {
                continue;
            }
            let packed = PackedQ8_0::from_qtensor(&c.q, path).expect("pack");
            let got = packed.matmul(&c.x, m).expect("matmul");
            assert_bits_eq(&got, &want, &format!("{path} m={m} k={k} n={n}"));
            compared += 1;
        }
    }
    // On an x86 CPU with AVX2 every path has shapes in common with candle; off x86 there is
    // no int8 path to compare.
    assert_eq!(compared > 0, !paths.is_empty());
}

#[test]
fn the_reference_is_candle_on_the_detected_path() {
    // The scalar reference itself against candle, so the kernels' target is right.
    let detected = CpuPath::detect();
    if !detected.has_int8_gemm() {
        let c = case(&mut Rng(1), 1, 32, 16);
        assert!(PackedQ8_0::from_qtensor(&c.q, detected).is_err());
        return;
    }
    let mut rng = Rng(9);
    for (m, k, n) in [(3, 96, 33), (17, 896, 16), (5, 256, 48), (2, 768, 896)] {
        let c = case(&mut rng, m, k, n);
        let packed = PackedQ8_0::from_qtensor(&c.q, detected).expect("pack");
        let got = packed.reference(&c.x, m).expect("reference");
        assert_bits_eq(&got, &candle(&c), &format!("reference m={m} k={k} n={n}"));
    }
}

#[test]
fn batched_input_keeps_leading_dims() {
    let path = *CpuPath::int8_paths()
        .first()
        .expect("an x86_64 host with AVX2 (every CI host has it)");
    let mut rng = Rng(3);
    let c = case(&mut rng, 6, 64, 16);
    let packed = PackedQ8_0::from_qtensor(&c.q, path).expect("pack");
    let x = Tensor::from_slice(&c.x, (2, 3, 64), &Device::Cpu).expect("x");
    let y = packed.forward(&x).expect("forward");
    assert_eq!(y.dims(), &[2, 3, 16]);
    let flat = y.flatten_all().expect("f").to_vec1::<f32>().expect("v");
    assert_bits_eq(&flat, &packed.reference(&c.x, 6).expect("ref"), "forward");
}

#[test]
fn bad_shapes_and_paths_are_errors() {
    let path = CpuPath::detect();
    // Paths without a GEMM, or that this CPU cannot run, are refused before any kernel runs.
    for p in CpuPath::ALL {
        let packed = PackedQ8_0::from_blocks(&[0; 34], 1, 32, p);
        assert_eq!(
            packed.is_ok(),
            p.has_int8_gemm() && p.supported(),
            "{p}: {packed:?}"
        );
    }
    if !path.has_int8_gemm() {
        return;
    }
    assert!(matches!(
        PackedQ8_0::from_blocks(&[0; 34], 1, 48, path),
        Err(Q8GemmError::KNotBlockMultiple { k: 48 })
    ));
    assert!(matches!(
        PackedQ8_0::from_blocks(&[0; 34], 2, 32, path),
        Err(Q8GemmError::WeightBytes {
            n: 2,
            k: 32,
            expected: 68,
            got: 34
        })
    ));
    let packed = PackedQ8_0::from_blocks(&[0; 34], 1, 32, path).expect("pack");
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
        PackedQ8_0::from_qtensor(&f32_weight, path)
            .map(|_| ())
            .map_err(|e| e.kind()),
        Err("not_q8_0")
    );
}

#[test]
fn weights_with_minus_128_are_exact_on_every_path() {
    // Q8_0 files written by other tools may hold -128; the AVX2 path takes |w| as unsigned
    // bytes exactly so that it stays exact there.
    let (m, k, n) = (5, 64, 6);
    let mut raw = Vec::new();
    let mut rng = Rng(77);
    for _ in 0..n * k / Q8_0_BLOCK {
        raw.extend_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
        for i in 0..Q8_0_BLOCK {
            let q = if i % 3 == 0 {
                -128i8
            } else {
                (rng.next_u64() % 255) as i8
            };
            raw.push(q as u8);
        }
    }
    let x = rng.mixed(m * k);
    for path in CpuPath::int8_paths() {
        let packed = PackedQ8_0::from_blocks(&raw, n, k, path).expect("pack");
        let got = packed.matmul(&x, m).expect("matmul");
        assert_bits_eq(
            &got,
            &packed.reference(&x, m).expect("ref"),
            &format!("{path}"),
        );
    }
}
