//! Every path against the scalar reference bit for bit, rows independent of the batch, and
//! the arithmetic close to candle's dequantized weights.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use super::{KQ_BLOCK, KQuant, KQuantGemmError, PackedKQuant};
use crate::CpuPath;
use crate::test_rng::Rng;

const FORMATS: [GgmlDType; 2] = [GgmlDType::Q4K, GgmlDType::Q6K];

fn quantized(rng: &mut Rng, n: usize, k: usize, dtype: GgmlDType) -> QTensor {
    let w = Tensor::from_vec(rng.mixed(n * k), (n, k), &Device::Cpu).expect("weight");
    QTensor::quantize(&w, dtype).expect("quantize")
}

#[test]
fn every_path_equals_the_reference_bit_for_bit() {
    let paths = CpuPath::int8_paths();
    let mut rng = Rng(0x4B51);
    for dtype in FORMATS {
        // Odd row counts and columns exercise the partial row blocks; 300 rows the row tiles.
        for &(m, k, n) in &[
            (1, 256, 1),
            (3, 512, 37),
            (5, 1536, 20),
            (9, 768, 64),
            (300, 256, 40),
        ] {
            let q = quantized(&mut rng, n, k, dtype);
            let x = rng.mixed(m * k);
            for &path in &paths {
                let w = PackedKQuant::from_qtensor(&q, path).expect("pack");
                let want = w.reference(&x, m).expect("reference");
                let got = w.matmul(&x, m).expect("matmul");
                let differ = want
                    .iter()
                    .zip(&got)
                    .filter(|(a, b)| a.to_bits() != b.to_bits())
                    .count();
                assert_eq!(differ, 0, "{dtype:?} {path} m={m} k={k} n={n}");
            }
        }
    }
}

#[test]
fn every_path_computes_the_same_numbers() {
    let paths = CpuPath::int8_paths();
    let mut rng = Rng(0xA11);
    for dtype in FORMATS {
        let (m, k, n) = (6, 1024, 33);
        let q = quantized(&mut rng, n, k, dtype);
        let x = rng.mixed(m * k);
        let results: Vec<Vec<u32>> = paths
            .iter()
            .map(|&p| {
                let w = PackedKQuant::from_qtensor(&q, p).expect("pack");
                w.matmul(&x, m)
                    .expect("matmul")
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            })
            .collect();
        for (p, r) in paths.iter().zip(&results) {
            assert_eq!(r, &results[0], "{dtype:?}: {p} against {}", paths[0]);
        }
    }
}

#[test]
fn a_rows_result_does_not_depend_on_the_rows_beside_it() {
    let mut rng = Rng(0xBA7C4);
    for dtype in FORMATS {
        let (m, k, n) = (11, 512, 24);
        let q = quantized(&mut rng, n, k, dtype);
        let x = rng.mixed(m * k);
        for path in CpuPath::int8_paths() {
            let w = PackedKQuant::from_qtensor(&q, path).expect("pack");
            let all = w.matmul(&x, m).expect("batch");
            for r in 0..m {
                let one = w.matmul(&x[r * k..(r + 1) * k], 1).expect("row");
                assert_eq!(
                    &all[r * n..(r + 1) * n],
                    &one[..],
                    "{dtype:?} {path} row {r}"
                );
            }
        }
    }
}

#[test]
fn the_arithmetic_is_close_to_the_dequantized_weights() {
    let mut rng = Rng(0xC10C);
    for dtype in FORMATS {
        let (m, k, n) = (4, 1024, 48);
        let q = quantized(&mut rng, n, k, dtype);
        let dense = q
            .dequantize(&Device::Cpu)
            .expect("dequantize")
            .to_vec2::<f32>()
            .expect("rows");
        // Smooth activations (no outliers), as a model's normalized hidden states are.
        let x: Vec<f32> = (0..m * k).map(|_| rng.unit()).collect();
        for path in CpuPath::int8_paths() {
            let w = PackedKQuant::from_qtensor(&q, path).expect("pack");
            let got = w.matmul(&x, m).expect("matmul");
            for r in 0..m {
                for (c, wrow) in dense.iter().enumerate() {
                    let xr = &x[r * k..(r + 1) * k];
                    let exact: f64 = wrow
                        .iter()
                        .zip(xr)
                        .map(|(&a, &b)| a as f64 * b as f64)
                        .sum();
                    // Rounding an activation to 8 bits moves it by at most half a step,
                    // `amax / 254` with `amax <= 1`; f32 sums add far less.
                    let bound: f64 =
                        wrow.iter().map(|&a| a.abs() as f64).sum::<f64>() / 254.0 * 1.01;
                    let err = (got[r * n + c] as f64 - exact).abs();
                    assert!(
                        err <= bound,
                        "{dtype:?} {path} ({r}, {c}): {err} over {bound}"
                    );
                }
            }
        }
    }
}

#[test]
fn superblocks_decode_to_candles_weights() {
    let mut rng = Rng(0xDEC0);
    for dtype in FORMATS {
        let (n, k) = (5, 512);
        let q = quantized(&mut rng, n, k, dtype);
        let dense = q
            .dequantize(&Device::Cpu)
            .expect("dequantize")
            .to_vec2::<f32>()
            .expect("rows");
        for path in CpuPath::int8_paths() {
            let w = PackedKQuant::from_qtensor(&q, path).expect("pack");
            for (col, wrow) in dense.iter().enumerate() {
                for sb in 0..k / KQ_BLOCK {
                    let b = w.superblock(col, sb);
                    let sub_len = KQ_BLOCK / w.kind().sub_blocks();
                    for v in 0..KQ_BLOCK {
                        let g = v / sub_len;
                        let ours = b.d * (b.scales[g] * b.values[v] as i32) as f32
                            - b.dmin * b.mins[g] as f32;
                        let theirs = wrow[sb * KQ_BLOCK + v];
                        assert!(
                            (ours - theirs).abs() <= 1e-5 * theirs.abs().max(1e-3),
                            "{dtype:?} {path} row {col} value {}: {ours} against {theirs}",
                            sb * KQ_BLOCK + v
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn bad_shapes_and_paths_are_errors() {
    let mut rng = Rng(3);
    let path = *CpuPath::int8_paths()
        .first()
        .expect("an x86_64 host with AVX2 (every CI host has it)");
    let q = quantized(&mut rng, 4, 256, GgmlDType::Q4K);
    let raw = q.data().expect("bytes");
    assert!(matches!(
        PackedKQuant::from_blocks(&raw, KQuant::Q4K, 4, 255, path),
        Err(KQuantGemmError::KNotBlockMultiple { .. })
    ));
    assert!(matches!(
        PackedKQuant::from_blocks(&raw[1..], KQuant::Q4K, 4, 256, path),
        Err(KQuantGemmError::WeightBytes { .. })
    ));
    assert!(matches!(
        PackedKQuant::from_blocks(&raw, KQuant::Q4K, 4, 256, CpuPath::Candle),
        Err(KQuantGemmError::Path { .. })
    ));
    let q8 = quantized(&mut rng, 4, 256, GgmlDType::Q8_0);
    assert!(matches!(
        PackedKQuant::from_qtensor(&q8, path),
        Err(KQuantGemmError::NotKQuant { .. })
    ));
    let w = PackedKQuant::from_qtensor(&q, path).expect("pack");
    assert!(matches!(
        w.matmul(&[0.0; 100], 1),
        Err(KQuantGemmError::ActivationLen { .. })
    ));
}

/// Raw file superblocks of `n` columns by 256 whose every value is the format's largest
/// (Q4_K 15, Q6_K 63 after the shift), with the largest scales: the integer sums of the
/// kernels reach their bounds (see `avx256::sub_block_dot_avx2`).
fn saturated_blocks(kind: KQuant, n: usize) -> Vec<u8> {
    let one = half::f16::from_f32(1.0).to_le_bytes();
    let block: Vec<u8> = match kind {
        KQuant::Q4K => [&one[..], &one[..], &[0xFF; 12][..], &[0xFF; 128][..]].concat(),
        KQuant::Q6K => [&[0xFF; 192][..], &[0x7F; 16][..], &one[..]].concat(),
    };
    block.repeat(n)
}

#[test]
fn the_largest_values_and_activations_sum_exactly() {
    for kind in [KQuant::Q4K, KQuant::Q6K] {
        let (n, k) = (24, KQ_BLOCK);
        let raw = saturated_blocks(kind, n);
        // Every activation at +amax or -amax (quantized to ±127), in runs that fill whole
        // sub-blocks with one sign and in an alternation.
        let rows: [Vec<f32>; 4] = [
            vec![1.0; k],
            vec![-1.0; k],
            (0..k)
                .map(|i| if (i / 16) % 2 == 0 { 1.0 } else { -1.0 })
                .collect(),
            (0..k)
                .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
                .collect(),
        ];
        let x = rows.concat();
        for path in CpuPath::int8_paths() {
            let w = PackedKQuant::from_blocks(&raw, kind, n, k, path).expect("pack");
            let want = w.reference(&x, 4).expect("reference");
            let got = w.matmul(&x, 4).expect("matmul");
            assert_eq!(
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{kind:?} {path}"
            );
            // Every weight is positive, so the all-positive row's outputs are positive and the
            // all-negative row's negative.
            assert!(
                got[0] > 0.0 && got[n] < 0.0,
                "{kind:?} {path}: {} {}",
                got[0],
                got[n]
            );
        }
    }
}
