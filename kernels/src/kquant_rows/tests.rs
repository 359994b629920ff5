//! Parity with the scalar reference and with candle's `QMatMul::forward`, bit for bit.

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

use super::{KQuantRows, QK_K};
use crate::CpuPath;
use crate::test_rng::Rng;

const FORMATS: [GgmlDType; 2] = [GgmlDType::Q4K, GgmlDType::Q6K];
/// `(n, k)`: one group, several groups over several blocks, the 1.5B model's k/v shape.
const SHAPES: [(usize, usize); 3] = [(16, 256), (48, 768), (256, 1536)];

fn weight(rng: &mut Rng, dtype: GgmlDType, n: usize, k: usize) -> Arc<QTensor> {
    let w = Tensor::from_vec(rng.mixed(n * k), (n, k), &Device::Cpu).expect("weight");
    Arc::new(QTensor::quantize(&w, dtype).expect("quantize"))
}

fn kernel(q: &Arc<QTensor>) -> KQuantRows {
    let path = CpuPath::detect();
    assert!(
        path.has_int8_gemm(),
        "these tests need an x86 CPU with AVX2 and FMA"
    );
    KQuantRows::new(q, path).expect("a Q4_K/Q6_K weight of a shape candle repacks")
}

/// candle's product of `m` rows (its repacked tiles for two rows or more).
fn candle(q: &Arc<QTensor>, x: &[f32], m: usize, k: usize) -> Vec<f32> {
    let x = Tensor::from_slice(x, (m, k), &Device::Cpu).expect("x");
    QMatMul::from_arc(q.clone())
        .expect("qmatmul")
        .forward(&x)
        .expect("forward")
        .flatten_all()
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

#[test]
fn the_kernel_equals_the_reference_for_every_row_count() {
    let mut rng = Rng(0x4B51);
    for dtype in FORMATS {
        for (n, k) in SHAPES {
            let q = weight(&mut rng, dtype, n, k);
            let kq = kernel(&q);
            for m in 1..=9 {
                let x = rng.mixed(m * k);
                let what = format!("{dtype:?} n={n} k={k} m={m}");
                let got = kq.matmul(&x, m).expect("kernel");
                assert_bits_eq(&got, &kq.reference(&x, m).expect("reference"), &what);
            }
        }
    }
}

#[test]
fn the_reference_is_candles_repacked_arithmetic() {
    // candle repacks for two rows or more; its one-row Q6_K product is another arithmetic.
    let mut rng = Rng(0x6B51);
    for dtype in FORMATS {
        for (n, k) in SHAPES {
            let q = weight(&mut rng, dtype, n, k);
            let kq = kernel(&q);
            for m in [2, 3, 5] {
                let x = rng.mixed(m * k);
                let what = format!("{dtype:?} n={n} k={k} m={m}");
                let want = candle(&q, &x, m, k);
                assert_bits_eq(&kq.reference(&x, m).expect("reference"), &want, &what);
            }
        }
    }
}

#[test]
fn one_row_is_the_first_of_a_batch_of_candles() {
    // What the engine relies on: a decode row through this kernel gets the bits that row gets
    // in a prefill batch through candle's tiles.
    let mut rng = Rng(0x1);
    for dtype in FORMATS {
        let (n, k) = (48, 768);
        let q = weight(&mut rng, dtype, n, k);
        let row = rng.mixed(k);
        let mut two = row.clone();
        two.extend(rng.mixed(k));
        let batch = candle(&q, &two, 2, k);
        let alone = kernel(&q).matmul(&row, 1).expect("kernel");
        assert_bits_eq(&alone, &batch[..n], &format!("{dtype:?}"));
    }
}

#[test]
fn zero_rows_and_wrong_lengths() {
    let q = weight(&mut Rng(5), GgmlDType::Q4K, 16, QK_K);
    let kq = kernel(&q);
    assert!(kq.matmul(&[], 0).expect("no rows").is_empty());
    let err = kq.matmul(&[0.0; 10], 1).expect_err("short row");
    assert!(err.to_string().contains("expected 256"), "{err}");
}

#[test]
fn only_shapes_and_formats_candle_repacks_are_taken() {
    let path = CpuPath::detect();
    let mut rng = Rng(11);
    assert!(KQuantRows::new(&weight(&mut rng, GgmlDType::Q8_0, 16, QK_K), path).is_none());
    assert!(KQuantRows::new(&weight(&mut rng, GgmlDType::Q4K, 24, QK_K), path).is_none());
    assert!(
        KQuantRows::new(
            &weight(&mut rng, GgmlDType::Q6K, 16, 2 * QK_K),
            CpuPath::Candle
        )
        .is_none()
    );
    assert!(KQuantRows::new(&weight(&mut rng, GgmlDType::Q6K, 16, 2 * QK_K), path).is_some());
}
