//! A step's logits as sampling receives them: each row whole on the host, or only its chosen
//! token when the choice can be made where the logits are. On a CUDA device with Quorum's
//! kernels a sequence without a repetition penalty, log-probabilities or candidate ids is
//! chosen there (the arg-max, or its constraint's allowed tokens as a bitset, temperature,
//! top-k and top-p with the host's uniform draw) and only its id crosses to the host; only the
//! other rows are copied whole, so one such sequence does not make a step copy every row's
//! vocabulary. Elsewhere plain greedy rows take the host's arg-max.

use candle_core::Tensor;

#[cfg(any(feature = "cuda", test))]
use quorum_kernels::cuda::sampling::SamplingRows;

use crate::sampler::DevicePolicy;

/// One row of a step's logits as sampling receives it.
#[derive(Debug, PartialEq)]
pub(crate) enum LogitRow {
    /// The row itself, on the host.
    Values(Vec<f32>),
    /// Its token, chosen where the logits are by the row's policy (`None`: nothing could be
    /// chosen, no finite logit); `vocab` for the error message.
    Chosen { token: Option<u32>, vocab: usize },
}

/// Whether the rows of `logits` that have a policy are chosen where they are: a CUDA device
/// running Quorum's kernels. Elsewhere only plain greedy policies may be given.
pub(crate) fn draws_on_device(logits: &Tensor) -> bool {
    logits.device().is_cuda() && quorum_kernels::cuda::enabled()
}

/// The step's logits `[rows, vocab]` for sampling; `draws[i]` is row `i`'s policy when it is
/// chosen where the logits are, `None` when the sampler needs it whole.
pub(crate) fn logit_rows(
    logits: Tensor,
    draws: &[Option<DevicePolicy>],
) -> candle_core::Result<Vec<LogitRow>> {
    let (rows, vocab) = logits.dims2()?;
    if draws.len() != rows {
        candle_core::bail!("{rows} logit rows for {} sampling rows", draws.len());
    }
    #[cfg(feature = "cuda")]
    if draws_on_device(&logits) && draws.iter().any(Option::is_some) {
        return device_rows(&logits, draws);
    }
    logits
        .to_vec2::<f32>()?
        .into_iter()
        .zip(draws)
        .map(|(row, draw)| match draw {
            None => Ok(LogitRow::Values(row)),
            Some(p) if p.is_plain_greedy() => Ok(LogitRow::Chosen {
                token: crate::sampler::argmax(&row),
                vocab,
            }),
            Some(_) => {
                candle_core::bail!("a sampled or masked row's policy was asked for off the device")
            }
        })
        .collect()
}

/// The rows with a policy chosen on the device (the arg-max kernel when all of them are plain
/// greedy, the sampling kernel otherwise), the others copied whole.
#[cfg(feature = "cuda")]
fn device_rows(
    logits: &Tensor,
    draws: &[Option<DevicePolicy>],
) -> candle_core::Result<Vec<LogitRow>> {
    use quorum_kernels::cuda::device;

    let vocab = logits.dim(1)?;
    let ids = if draws.iter().flatten().all(DevicePolicy::is_plain_greedy) {
        device::argmax_rows(logits)?
    } else {
        device::sample_rows(logits, &sampling_rows(draws))?
    }
    .to_vec1::<u32>()?;
    let whole: Vec<u32> = (0..draws.len() as u32)
        .filter(|&i| draws[i as usize].is_none())
        .collect();
    let mut copied = if whole.is_empty() {
        Vec::new()
    } else {
        let index = Tensor::new(whole.as_slice(), logits.device())?;
        logits.index_select(&index, 0)?.to_vec2::<f32>()?
    }
    .into_iter();
    let none = quorum_kernels::cuda::reference::NO_TOKEN;
    ids.into_iter()
        .zip(draws)
        .map(|(id, draw)| match draw {
            Some(_) => Ok(LogitRow::Chosen {
                token: (id != none).then_some(id),
                vocab,
            }),
            None => copied
                .next()
                .map(LogitRow::Values)
                .ok_or_else(|| candle_core::Error::Msg("a copied logit row is missing".into())),
        })
        .collect()
}

/// The sampling kernel's per-row policies for `draws`, each row's bitset (when it has one)
/// stored once. Rows copied whole are drawn greedily too; their ids are not read.
#[cfg(any(feature = "cuda", test))]
fn sampling_rows(draws: &[Option<DevicePolicy>]) -> SamplingRows {
    let mut rows = SamplingRows::default();
    let mut masks = 0;
    for draw in draws {
        let p = draw.as_ref().unwrap_or(&DevicePolicy::GREEDY);
        rows.temperatures.push(p.temperature);
        rows.top_ks.push(p.top_k);
        rows.top_ps.push(p.top_p);
        rows.uniforms.push(p.uniform);
        rows.mask_of_row.push(match &p.allowed {
            Some(bits) => {
                rows.masks.extend_from_slice(bits);
                masks += 1;
                masks - 1
            }
            None => -1,
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::{LogitRow, logit_rows, sampling_rows};
    use crate::sampler::DevicePolicy;

    const GREEDY: Option<DevicePolicy> = Some(DevicePolicy::GREEDY);

    fn logits() -> Tensor {
        let rows: [[f32; 4]; 3] = [
            [0.5, 2.0, -1.0, 2.0],
            [f32::NAN, f32::NEG_INFINITY, f32::NAN, f32::NEG_INFINITY],
            [1.0, -3.0, 4.0, 0.0],
        ];
        Tensor::new(&rows, &Device::Cpu).unwrap()
    }

    #[test]
    fn a_mixed_step_hands_over_only_the_rows_that_are_not_plain_greedy() {
        let rows = logit_rows(logits(), &[GREEDY, GREEDY, None]).unwrap();
        assert_eq!(
            rows,
            vec![
                // Ties go to the lowest id, as the sampler's own rule has it.
                LogitRow::Chosen {
                    token: Some(1),
                    vocab: 4
                },
                LogitRow::Chosen {
                    token: None,
                    vocab: 4
                },
                LogitRow::Values(vec![1.0, -3.0, 4.0, 0.0]),
            ]
        );
        let rows = logit_rows(logits(), &[None, None, GREEDY]).unwrap();
        assert!(matches!(&rows[0], LogitRow::Values(v) if v[1] == 2.0));
        assert!(matches!(&rows[1], LogitRow::Values(v) if v[0].is_nan()));
        assert_eq!(
            rows[2],
            LogitRow::Chosen {
                token: Some(2),
                vocab: 4
            }
        );
    }

    #[test]
    fn policies_that_do_not_match_the_rows_are_an_error() {
        let err = logit_rows(logits(), &[GREEDY, None]).unwrap_err();
        assert!(
            err.to_string().contains("3 logit rows for 2 sampling rows"),
            "{err}"
        );
        // The host draws its own sampled and masked rows from the whole row.
        let sampled = Some(DevicePolicy {
            temperature: 0.8,
            uniform: 0.5,
            ..DevicePolicy::GREEDY
        });
        assert!(logit_rows(logits(), &[sampled, None, None]).is_err());
        let masked = Some(DevicePolicy {
            allowed: Some(vec![1]),
            ..DevicePolicy::GREEDY
        });
        assert!(logit_rows(logits(), &[masked, None, None]).is_err());
    }

    #[test]
    fn each_bitset_is_stored_for_the_row_that_has_it() {
        let sampled = DevicePolicy {
            temperature: 0.7,
            top_k: 40,
            top_p: 0.9,
            uniform: 0.25,
            allowed: Some(vec![0b110, 0]),
        };
        let masked_greedy = DevicePolicy {
            allowed: Some(vec![0b1, 1]),
            ..DevicePolicy::GREEDY
        };
        let rows = sampling_rows(&[Some(sampled), None, GREEDY, Some(masked_greedy)]);
        assert_eq!(rows.temperatures, vec![0.7, 0.0, 0.0, 0.0]);
        assert_eq!(rows.top_ks, vec![40, 0, 0, 0]);
        assert_eq!(rows.top_ps, vec![0.9, 1.0, 1.0, 1.0]);
        assert_eq!(rows.uniforms, vec![0.25, 0.0, 0.0, 0.0]);
        assert_eq!(rows.mask_of_row, vec![0, -1, -1, 1]);
        assert_eq!(rows.masks, vec![0b110, 0, 0b1, 1]);
        assert_eq!(rows.validate(40), Ok(()));
        assert!(rows.allows(0, 1, 40) && !rows.allows(0, 0, 40) && rows.allows(3, 32, 40));
    }
}
