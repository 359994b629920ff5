//! The shape of one forward pass: a packed run of tokens cut into chunks, one chunk per sequence.

use crate::error::{ModelError, ModelResult};

/// One sequence's slice of a packed batch: `len` new tokens at positions
/// `start_position..start_position + len`, stored at `offset..offset + len` of the packed tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkLayout {
    /// The attention backend's handle for the sequence's KV storage.
    pub seq_slot: usize,
    pub offset: usize,
    pub start_position: usize,
    pub len: usize,
    /// Whether the caller wants logits for the chunk's last token.
    pub wants_logits: bool,
    /// Draft tokens at the end of the chunk (speculative decoding): when logits are wanted,
    /// they are wanted for each draft token and for the token before the drafts, so one pass
    /// checks every draft.
    pub drafts: usize,
    /// The model's LoRA adapter (its index in [`crate::DecoderModel::adapters`]) applied to
    /// this chunk's rows, if any.
    pub adapter: Option<usize>,
}

impl ChunkLayout {
    /// Total context the chunk's last token attends to (cached tokens plus this chunk).
    pub fn context_len(&self) -> usize {
        self.start_position + self.len
    }
}

/// A packed batch. Chunks are contiguous and in order: chunk i starts where chunk i-1 ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchLayout {
    pub chunks: Vec<ChunkLayout>,
}

impl BatchLayout {
    /// Builds a layout from `(seq_slot, start_position, len, wants_logits)` tuples in order.
    pub fn from_chunks(chunks: impl IntoIterator<Item = (usize, usize, usize, bool)>) -> Self {
        let mut offset = 0;
        let chunks = chunks
            .into_iter()
            .map(|(seq_slot, start_position, len, wants_logits)| {
                let c = ChunkLayout {
                    seq_slot,
                    offset,
                    start_position,
                    len,
                    wants_logits,
                    drafts: 0,
                    adapter: None,
                };
                offset += len;
                c
            })
            .collect();
        Self { chunks }
    }

    /// Sets each chunk's adapter, in chunk order.
    pub fn with_adapters(mut self, adapters: impl IntoIterator<Item = Option<usize>>) -> Self {
        for (c, a) in self.chunks.iter_mut().zip(adapters) {
            c.adapter = a;
        }
        self
    }

    /// Sets each chunk's number of trailing draft tokens, in chunk order.
    pub fn with_drafts(mut self, drafts: impl IntoIterator<Item = usize>) -> Self {
        for (c, d) in self.chunks.iter_mut().zip(drafts) {
            c.drafts = d;
        }
        self
    }

    pub fn n_tokens(&self) -> usize {
        self.chunks.iter().map(|c| c.len).sum()
    }

    /// Position of every packed token, for the rotary embedding.
    pub fn positions(&self) -> Vec<u32> {
        self.chunks
            .iter()
            .flat_map(|c| (c.start_position..c.start_position + c.len).map(|p| p as u32))
            .collect()
    }

    /// Packed indices of the tokens whose logits are wanted, in chunk order: a chunk's last
    /// token, preceded by one row per draft token.
    pub fn logit_rows(&self) -> Vec<u32> {
        self.chunks
            .iter()
            .filter(|c| c.wants_logits)
            .flat_map(|c| (c.offset + c.len - 1 - c.drafts..c.offset + c.len).map(|r| r as u32))
            .collect()
    }

    pub fn validate(&self, n_tokens: usize) -> ModelResult<()> {
        let mut expected = 0;
        for c in &self.chunks {
            if c.offset != expected || c.len == 0 {
                return Err(ModelError::Batch {
                    detail: format!("chunk {c:?} is empty or not contiguous with the previous one"),
                });
            }
            if c.drafts >= c.len {
                return Err(ModelError::Batch {
                    detail: format!("chunk {c:?} has no token before its drafts"),
                });
            }
            expected += c.len;
        }
        if expected != n_tokens {
            return Err(ModelError::Batch {
                detail: format!("chunks cover {expected} tokens but {n_tokens} were given"),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_logit_rows() {
        let b = BatchLayout::from_chunks([(0, 0, 3, true), (1, 5, 1, true), (2, 2, 2, false)]);
        assert_eq!(b.positions(), vec![0, 1, 2, 5, 2, 3]);
        assert_eq!(b.logit_rows(), vec![2, 3]);
        assert!(b.validate(6).is_ok());
        assert!(b.validate(7).is_err());
    }

    #[test]
    fn drafts_ask_for_a_row_per_draft_and_one_before() {
        let b = BatchLayout::from_chunks([(0, 0, 3, true), (1, 9, 4, true), (2, 2, 2, false)])
            .with_drafts([0, 3, 1]);
        assert_eq!(b.logit_rows(), vec![2, 3, 4, 5, 6]);
        assert!(b.validate(9).is_ok());
        let all_drafts = BatchLayout::from_chunks([(0, 4, 2, true)]).with_drafts([2]);
        assert!(all_drafts.validate(2).is_err());
    }
}
