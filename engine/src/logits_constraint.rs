//! A per-request hook that restricts which tokens may come next.
//!
//! The engine knows nothing about SQL; a request that must follow a grammar (or pick one of a
//! few answers) brings a constraint object and the sampler consults it before every choice.
//! Grammar-constrained decoding will implement this trait with llguidance.

/// Restricts the next token of one sequence by masking logits.
///
/// The sampler calls `mask` before any other logits processing and `commit` with the token it
/// chose, so a stateful constraint (a grammar parser) advances exactly once per generated token.
/// `Send` because a sequence's state moves between the request handler and the engine thread.
pub trait LogitsConstraint: Send {
    /// Sets the logit of every token that is not allowed after `generated` to negative infinity.
    /// Allowed tokens keep their logits unchanged, so the model's preferences among them stand.
    fn mask(&mut self, generated: &[u32], logits: &mut [f32]);

    /// Advances the constraint's state past `token`, which the sampler has just chosen.
    fn commit(&mut self, token: u32);

    /// The tokens `mask` allows after `generated`, as a bitset over `vocab` ids (bit `i % 32`
    /// of word `i / 32`), for a choice made where the logits are (a GPU). Built from `mask`
    /// on a row of zeros, so every constraint has it at the cost of one mask.
    fn allowed_bits(&mut self, generated: &[u32], vocab: usize) -> Vec<u32> {
        let mut row = vec![0.0f32; vocab];
        self.mask(generated, &mut row);
        let mut bits = vec![0u32; vocab.div_ceil(32)];
        for (i, l) in row.iter().enumerate() {
            if l.is_finite() {
                bits[i / 32] |= 1 << (i % 32);
            }
        }
        bits
    }

    /// Why the constraint stopped restricting the sequence, if it gave up part way (the
    /// sequence then went on unconstrained).
    fn failure(&self) -> Option<&str> {
        None
    }
}

/// Allows only a fixed set of token ids, at every step.
///
/// Used for one-token choices (the selector answering "A" or "B", a yes/no verdict): with
/// `max_new_tokens = 1` the model is forced to answer with one of the listed tokens. It has no
/// state, so `commit` does nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedTokens {
    /// Sorted and deduplicated, so `mask` can walk it alongside the vocabulary.
    allowed: Vec<u32>,
}

impl AllowedTokens {
    /// Builds the constraint. Ids outside the vocabulary are ignored at mask time; an empty set
    /// (or one with no id inside the vocabulary) masks every token, which the sampler reports
    /// as an error instead of inventing a token.
    pub fn new(allowed: impl IntoIterator<Item = u32>) -> Self {
        let mut allowed: Vec<u32> = allowed.into_iter().collect();
        allowed.sort_unstable();
        allowed.dedup();
        AllowedTokens { allowed }
    }

    /// The allowed ids, sorted ascending.
    pub fn allowed(&self) -> &[u32] {
        &self.allowed
    }
}

impl LogitsConstraint for AllowedTokens {
    fn mask(&mut self, _generated: &[u32], logits: &mut [f32]) {
        // Walk the vocabulary once, filling the gaps between consecutive allowed ids; this
        // touches each logit once and needs no scratch buffer.
        let mut start = 0usize;
        for &id in &self.allowed {
            let Ok(id) = usize::try_from(id) else { break };
            if id >= logits.len() {
                break;
            }
            logits[start..id].fill(f32::NEG_INFINITY);
            start = id + 1;
        }
        logits[start..].fill(f32::NEG_INFINITY);
    }

    fn commit(&mut self, _token: u32) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowed_bits_are_the_tokens_the_mask_keeps() {
        let mut c = AllowedTokens::new([0, 31, 32, 69, 500]);
        let bits = c.allowed_bits(&[], 70);
        assert_eq!(bits, vec![1 | 1 << 31, 1, 1 << 5]);
    }

    #[test]
    fn only_allowed_tokens_keep_their_logits() {
        let mut c = AllowedTokens::new([5, 1, 3, 3]);
        assert_eq!(c.allowed(), &[1, 3, 5]);
        let mut logits: Vec<f32> = (0..8).map(|i| i as f32).collect();
        c.mask(&[], &mut logits);
        let ninf = f32::NEG_INFINITY;
        assert_eq!(logits, vec![ninf, 1.0, ninf, 3.0, ninf, 5.0, ninf, ninf]);
    }

    #[test]
    fn ids_outside_the_vocabulary_are_ignored() {
        let mut c = AllowedTokens::new([0, 2, 100]);
        let mut logits = vec![1.0f32; 4];
        c.mask(&[7], &mut logits);
        assert_eq!(logits, vec![1.0, f32::NEG_INFINITY, 1.0, f32::NEG_INFINITY]);
    }

    #[test]
    fn empty_set_masks_everything_and_commit_is_stateless() {
        let mut c = AllowedTokens::new([]);
        let mut logits = vec![0.5f32; 3];
        c.mask(&[], &mut logits);
        assert!(logits.iter().all(|l| *l == f32::NEG_INFINITY));

        let mut c = AllowedTokens::new([1]);
        c.commit(1);
        let mut logits = vec![0.0f32; 3];
        c.mask(&[1], &mut logits);
        assert_eq!(logits[1], 0.0);
    }

    #[test]
    fn works_as_a_boxed_trait_object() {
        let mut c: Box<dyn LogitsConstraint> = Box::new(AllowedTokens::new([2]));
        let mut logits = vec![3.0f32, 2.0, 1.0];
        c.mask(&[], &mut logits);
        assert_eq!(logits, vec![f32::NEG_INFINITY, f32::NEG_INFINITY, 1.0]);
    }
}
