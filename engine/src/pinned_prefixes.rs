//! Prompt prefixes kept resident: the blocks of a database's schema prompt, held by the engine
//! itself so that no burst of other prompts evicts them before the next question over it.
//!
//! A pin is a list of blocks under a tag (one per database and prompt kind), holding one
//! reference to each. The pins together hold at most `max_blocks` blocks: a new pin pushes out
//! the oldest ones, and a pool that runs short takes pins back oldest first before it preempts
//! anyone, since a released pin's blocks stay in the prefix cache as evictable blocks and cost
//! nothing but the guarantee. This type only does the bookkeeping; [`crate::kv_cache::KvCache`]
//! takes and returns the references.

use std::collections::VecDeque;

use crate::ids::BlockId;

#[derive(Debug, Clone)]
struct Pin {
    tag: String,
    blocks: Vec<BlockId>,
}

/// The pins, oldest first, and the bound on the blocks they hold.
#[derive(Debug, Clone)]
pub struct PinnedPrefixes {
    pins: VecDeque<Pin>,
    max_blocks: usize,
    held: usize,
}

impl PinnedPrefixes {
    pub fn new(max_blocks: usize) -> Self {
        Self {
            pins: VecDeque::new(),
            max_blocks,
            held: 0,
        }
    }

    /// Blocks held by all pins together.
    pub fn held_blocks(&self) -> usize {
        self.held
    }

    pub fn len(&self) -> usize {
        self.pins.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pins.is_empty()
    }

    /// Every block held, once per pin holding it.
    pub fn blocks(&self) -> impl Iterator<Item = BlockId> + '_ {
        self.pins.iter().flat_map(|p| p.blocks.iter().copied())
    }

    /// Whether a pin is held under `tag`.
    pub fn holds(&self, tag: &str) -> bool {
        self.pins.iter().any(|p| p.tag == tag)
    }

    /// Adds `blocks` under `tag` (the caller has taken a reference to each). Returns the blocks
    /// whose references must now be returned: those of an earlier pin under the same tag and
    /// of the oldest pins beyond the bound, or `blocks` themselves when they alone exceed it.
    pub fn add(&mut self, tag: &str, blocks: Vec<BlockId>) -> Vec<BlockId> {
        let mut released = self.remove(tag);
        // An empty pin would hold nothing yet stop `pop_oldest`'s callers as if none were left.
        if blocks.is_empty() {
            return released;
        }
        if blocks.len() > self.max_blocks {
            released.extend(blocks);
            return released;
        }
        self.held += blocks.len();
        self.pins.push_back(Pin {
            tag: tag.to_owned(),
            blocks,
        });
        while self.held > self.max_blocks {
            released.extend(self.pop_oldest());
        }
        released
    }

    /// Takes the pin under `tag` away; its blocks, whose references must be returned.
    pub fn remove(&mut self, tag: &str) -> Vec<BlockId> {
        match self.pins.iter().position(|p| p.tag == tag) {
            Some(at) => {
                let pin = self.pins.remove(at).expect("position is in range");
                self.held -= pin.blocks.len();
                pin.blocks
            }
            None => Vec::new(),
        }
    }

    /// Takes the oldest pin away; its blocks (empty when there is none).
    pub fn pop_oldest(&mut self) -> Vec<BlockId> {
        match self.pins.pop_front() {
            Some(pin) => {
                self.held -= pin.blocks.len();
                pin.blocks
            }
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(ids: &[u32]) -> Vec<BlockId> {
        ids.iter().copied().map(BlockId).collect()
    }

    #[test]
    fn a_tag_holds_one_pin_and_the_bound_pushes_out_the_oldest() {
        let mut pins = PinnedPrefixes::new(5);
        assert!(pins.add("a", blocks(&[0, 1])).is_empty());
        assert!(pins.add("b", blocks(&[2, 3])).is_empty());
        // The same tag again replaces its pin.
        assert_eq!(pins.add("a", blocks(&[4])), blocks(&[0, 1]));
        assert_eq!((pins.len(), pins.held_blocks()), (2, 3));
        // Three more blocks exceed the bound of five: the oldest pin ("b") goes.
        assert_eq!(pins.add("c", blocks(&[5, 6, 7])), blocks(&[2, 3]));
        assert_eq!((pins.len(), pins.held_blocks()), (2, 4));
        assert_eq!(pins.pop_oldest(), blocks(&[4]));
        assert_eq!(pins.remove("c"), blocks(&[5, 6, 7]));
        assert!(pins.is_empty() && pins.held_blocks() == 0);
        assert!(pins.pop_oldest().is_empty());
    }

    #[test]
    fn a_prefix_larger_than_the_bound_is_not_pinned() {
        let mut pins = PinnedPrefixes::new(2);
        assert!(pins.add("a", blocks(&[0])).is_empty());
        assert_eq!(pins.add("big", blocks(&[1, 2, 3])), blocks(&[1, 2, 3]));
        assert!(pins.holds("a") && !pins.holds("big"));
        assert_eq!((pins.len(), pins.held_blocks()), (1, 1));
        assert!(pins.add("empty", Vec::new()).is_empty());
        assert!(!pins.holds("empty"));
        let mut none = PinnedPrefixes::new(0);
        assert_eq!(none.add("a", blocks(&[0])), blocks(&[0]));
        assert!(none.is_empty());
    }
}
