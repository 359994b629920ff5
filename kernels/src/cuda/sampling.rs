//! What each row of a `sample` launch draws with: its temperature, top-k, top-p, the uniform
//! number the host drew for it, and which allowed-token bitset applies. One definition for the
//! device launch, the CPU emulation and the engine that fills it from its samplers; checked
//! here once, before any launch.

use thiserror::Error;

/// The per-row policies of one launch, `rows` entries each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingRows {
    /// `0.0`: greedy over the allowed tokens.
    pub temperatures: Vec<f32>,
    /// `0`: no top-k.
    pub top_ks: Vec<u32>,
    /// In `(0, 1]`; `1.0`: no top-p.
    pub top_ps: Vec<f32>,
    /// The row's draw in `[0, 1)`, from the sequence's own seeded generator.
    pub uniforms: Vec<f64>,
    /// Allowed-token bitsets, `[n, mask_words(vocab)]`: bit `i % 32` of word `i / 32` allows
    /// token `i`.
    pub masks: Vec<u32>,
    /// Which bitset a row uses; negative: none (every finite logit is allowed).
    pub mask_of_row: Vec<i32>,
}

/// Words of one allowed-token bitset over `vocab` tokens.
pub fn mask_words(vocab: usize) -> usize {
    vocab.div_ceil(32)
}

#[derive(Debug, Error, PartialEq)]
pub enum SamplingRowsError {
    #[error("{what} has {got} entries for {rows} rows")]
    Length {
        what: &'static str,
        got: usize,
        rows: usize,
    },
    #[error("row {row}: temperature {value} is not a finite number >= 0")]
    Temperature { row: usize, value: f32 },
    #[error("row {row}: top-p {value} is not in (0, 1]")]
    TopP { row: usize, value: f32 },
    #[error("row {row}: the uniform draw {value} is not in [0, 1)")]
    Uniform { row: usize, value: f64 },
    #[error("the masks hold {words} words, not a whole number of {per_mask}-word bitsets")]
    Masks { words: usize, per_mask: usize },
    #[error("row {row} uses mask {mask} of {count}")]
    MaskIndex { row: usize, mask: i32, count: usize },
}

impl SamplingRows {
    pub fn rows(&self) -> usize {
        self.temperatures.len()
    }

    /// Every row's policy within what the kernel handles, for logits of `vocab` columns.
    pub fn validate(&self, vocab: usize) -> Result<(), SamplingRowsError> {
        let rows = self.rows();
        for (what, got) in [
            ("top_ks", self.top_ks.len()),
            ("top_ps", self.top_ps.len()),
            ("uniforms", self.uniforms.len()),
            ("mask_of_row", self.mask_of_row.len()),
        ] {
            if got != rows {
                return Err(SamplingRowsError::Length { what, got, rows });
            }
        }
        let per_mask = mask_words(vocab);
        if per_mask == 0 || !self.masks.len().is_multiple_of(per_mask) {
            return Err(SamplingRowsError::Masks {
                words: self.masks.len(),
                per_mask,
            });
        }
        let count = self.masks.len() / per_mask;
        for row in 0..rows {
            let t = self.temperatures[row];
            if !(t.is_finite() && t >= 0.0) {
                return Err(SamplingRowsError::Temperature { row, value: t });
            }
            let p = self.top_ps[row];
            if !(p > 0.0 && p <= 1.0) {
                return Err(SamplingRowsError::TopP { row, value: p });
            }
            let u = self.uniforms[row];
            if !(0.0..1.0).contains(&u) {
                return Err(SamplingRowsError::Uniform { row, value: u });
            }
            let mask = self.mask_of_row[row];
            if mask >= 0 && mask as usize >= count {
                return Err(SamplingRowsError::MaskIndex { row, mask, count });
            }
        }
        Ok(())
    }

    /// Whether token `id` passes row `row`'s bitset (true without one).
    pub fn allows(&self, row: usize, id: usize, vocab: usize) -> bool {
        let Ok(mask) = usize::try_from(self.mask_of_row[row]) else {
            return true;
        };
        let word = self.masks[mask * mask_words(vocab) + id / 32];
        (word >> (id % 32)) & 1 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_row() -> SamplingRows {
        SamplingRows {
            temperatures: vec![0.7],
            top_ks: vec![0],
            top_ps: vec![1.0],
            uniforms: vec![0.5],
            masks: vec![0b1010, 0],
            mask_of_row: vec![0],
        }
    }

    #[test]
    fn policies_outside_the_kernels_range_are_refused_before_a_launch() {
        assert_eq!(one_row().validate(40), Ok(()));
        assert!(one_row().allows(0, 1, 40) && !one_row().allows(0, 2, 40));
        let mut r = one_row();
        r.top_ps[0] = 0.0;
        assert_eq!(
            r.validate(40),
            Err(SamplingRowsError::TopP { row: 0, value: 0.0 })
        );
        let mut r = one_row();
        r.uniforms[0] = 1.0;
        assert!(matches!(
            r.validate(40),
            Err(SamplingRowsError::Uniform { .. })
        ));
        let mut r = one_row();
        r.temperatures[0] = f32::NAN;
        assert!(matches!(
            r.validate(40),
            Err(SamplingRowsError::Temperature { .. })
        ));
        assert!(matches!(
            one_row().validate(70),
            Err(SamplingRowsError::Masks { .. })
        ));
        let mut r = one_row();
        r.mask_of_row[0] = 1;
        assert!(matches!(
            r.validate(40),
            Err(SamplingRowsError::MaskIndex { .. })
        ));
        let mut r = one_row();
        r.top_ks.push(3);
        assert!(matches!(
            r.validate(40),
            Err(SamplingRowsError::Length { what: "top_ks", .. })
        ));
    }
}
