//! Dropout on an adapter's input (PEFT's `lora_dropout`): each value is dropped with
//! probability `p` and the kept ones are scaled by `1 / (1 - p)`. [`crate::LoraProjection`]
//! applies the mask made here.
//!
//! The mask is as large as the input of every adapted projection, tens of millions of values per
//! sequence, so where it is made matters:
//! - On the CPU each row draws from its own seeded generator, rows in parallel, and the mask
//!   still does not depend on the number of threads. One generator drawing a float per value
//!   made a training step about 1.2x slower (docs/history/2026-11-27.md).
//! - On a GPU the device's generator draws it, seeded once per sequence ([`seed_device`]). A
//!   mask made on the host would be copied to the device in every projection, and each copy
//!   waits for the GPU to finish the work queued before it.

use candle_core::{D, Device, Tensor};
use rand::rngs::{SmallRng, StdRng};
use rand::{Rng, RngCore, SeedableRng};
use rayon::prelude::*;

use crate::error::TrainResult;
use crate::seed::mix;

/// The dropout mask for `x` (same shape, values 0 and `1 / (1 - p)`). On the CPU its seed is
/// the next draw of `rng`; on a GPU the device's generator draws it, which [`seed_device`]
/// seeded from `rng`.
pub(crate) fn mask(x: &Tensor, p: f32, rng: &mut StdRng) -> TrainResult<Tensor> {
    Ok(if x.device().is_cpu() {
        let cols = x.dim(D::Minus1)?;
        let mask = host_mask(x.elem_count() / cols, cols, p, rng.random());
        Tensor::from_vec(mask, x.shape(), x.device())?
    } else {
        device_mask(x, p)?
    })
}

/// Seeds the generator of a GPU from `rng` before a sequence's forward pass, so that a run's
/// masks depend only on its seed and the step (a resumed run draws the same ones). Nothing to do
/// on the CPU, whose masks are seeded one by one.
pub(crate) fn seed_device(device: &Device, rng: &mut StdRng) -> TrainResult<()> {
    if !device.is_cpu() {
        device.set_seed(rng.random())?;
    }
    Ok(())
}

/// A `[rows, cols]` mask of zeros and `1 / (1 - p)`. Each row's generator is seeded by `seed`
/// and the row's index, and each 64-bit draw decides four values by 16 bits each: `p` is
/// rounded to a multiple of 1/65,536.
fn host_mask(rows: usize, cols: usize, p: f32, seed: u64) -> Vec<f32> {
    let threshold = (f64::from(p) * 65_536.0).round() as u32;
    let keep = 1.0 / (1.0 - p);
    let mut mask = vec![0f32; rows * cols];
    mask.par_chunks_mut(cols.max(1))
        .enumerate()
        .for_each(|(row, out)| {
            let mut rng = SmallRng::seed_from_u64(mix(seed, row as u64));
            for four in out.chunks_mut(4) {
                let bits = rng.next_u64();
                for (i, value) in four.iter_mut().enumerate() {
                    let draw = u32::from((bits >> (16 * i)) as u16);
                    *value = if draw < threshold { 0.0 } else { keep };
                }
            }
        });
    mask
}

/// The same mask drawn by `x`'s device from uniform values `u` in (0, 1]: `floor(u + 1 - p)`
/// is 1 where `u ≥ p` and 0 below it. Comparing with `p` would send `p` to the device as a
/// tensor, a copy from the host in every projection.
fn device_mask(x: &Tensor, p: f32) -> candle_core::Result<Tensor> {
    let keep = 1.0 / (1.0 - p);
    Tensor::rand(0f32, 1f32, x.shape(), x.device())?
        .affine(1.0, 1.0 - f64::from(p))?
        .floor()?
        .affine(f64::from(keep), 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dropped values in `mask`, after checking every value is 0 or the scale.
    fn dropped(mask: &[f32], p: f32) -> usize {
        let keep = 1.0 / (1.0 - p);
        assert!(
            mask.iter().all(|&v| v == 0.0 || v == keep),
            "values other than 0 and {keep}"
        );
        mask.iter().filter(|&&v| v == 0.0).count()
    }

    /// Within six standard deviations of `n · p` (a fixed seed, so the check is deterministic
    /// for the host mask).
    fn assert_rate(count: usize, n: usize, p: f32) {
        let (n, p) = (n as f64, f64::from(p));
        let sigma = (n * p * (1.0 - p)).sqrt();
        assert!(
            (count as f64 - n * p).abs() < 6.0 * sigma,
            "{count} dropped of {n}, expected about {}",
            n * p
        );
    }

    #[test]
    fn host_mask_drops_at_the_rate_asked_and_repeats_with_its_seed() {
        let (rows, cols, p) = (500, 1_001, 0.05);
        let mask = host_mask(rows, cols, p, 7);
        assert_rate(dropped(&mask, p), rows * cols, p);
        assert_eq!(mask, host_mask(rows, cols, p, 7));
        assert_ne!(mask, host_mask(rows, cols, p, 8));
        assert_ne!(
            mask[..cols],
            mask[cols..2 * cols],
            "two rows drew the same values"
        );
        assert_eq!(dropped(&host_mask(3, 10, 0.0, 1), 0.0), 0);
    }

    #[test]
    fn host_mask_does_not_depend_on_the_thread_count() {
        let one_thread = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let single = one_thread.install(|| host_mask(64, 37, 0.3, 11));
        assert_eq!(single, host_mask(64, 37, 0.3, 11));
    }

    /// The device's formula, run on the CPU's generator: the same rate and values as the
    /// host mask.
    #[test]
    fn device_mask_drops_at_the_rate_asked() -> candle_core::Result<()> {
        let p = 0.1;
        let x = Tensor::zeros((400, 1_000), candle_core::DType::F32, &Device::Cpu)?;
        let mask = device_mask(&x, p)?.flatten_all()?.to_vec1::<f32>()?;
        assert_rate(dropped(&mask, p), mask.len(), p);
        Ok(())
    }

    #[test]
    fn mask_takes_the_input_shape_and_the_scale() -> TrainResult<()> {
        let x = Tensor::ones((8, 16), candle_core::DType::F32, &Device::Cpu)?;
        let mut rng = StdRng::seed_from_u64(3);
        let m = mask(&x, 0.5, &mut rng)?;
        assert_eq!(m.dims(), x.dims());
        let m = m.flatten_all()?.to_vec1::<f32>()?;
        let kept = m.iter().filter(|&&v| v != 0.0).count();
        assert!(m.iter().all(|&v| v == 0.0 || v == 2.0));
        assert!(kept > 0 && kept < m.len());
        Ok(())
    }
}
