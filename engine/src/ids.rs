//! Newtype identifiers.
//!
//! Requests, sequences and KV blocks are all counted with plain integers; wrapping each in its
//! own type makes it a compile error to index the block pool with a request id or to look up a
//! sequence by a block number.

use std::fmt;

/// A client request, unique for the lifetime of an engine. The engine assigns it; the scheduler
/// only uses it as a key and never interprets its value (priority is the arrival order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// One generated sequence. A request with one sample has one sequence; keeping the two ids
/// apart lets several samples of one prompt share the prompt's KV blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeqId(pub u64);

/// A block of the paged KV cache: an index into the cache tensors, so `u32` is ample (four
/// billion blocks of 16 tokens is far beyond any memory budget) and halves the block tables
/// that are copied to the device every step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockId(pub u32);

impl BlockId {
    /// The block's index into per-block tables.
    pub fn index(self) -> usize {
        // A u32 always fits in usize on the 32- and 64-bit targets Quorum builds for.
        self.0 as usize
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "req-{}", self.0)
    }
}

impl fmt::Display for SeqId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq-{}", self.0)
    }
}

impl fmt::Display for BlockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block-{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_display_with_their_kind() {
        assert_eq!(RequestId(7).to_string(), "req-7");
        assert_eq!(SeqId(3).to_string(), "seq-3");
        assert_eq!(BlockId(12).to_string(), "block-12");
        assert_eq!(BlockId(12).index(), 12);
    }
}
