//! Per-sequence block tables.
//!
//! A sequence's KV is scattered over pool blocks; its block table lists them in order, so
//! token position `p` lives in block `blocks[p / block_size]` at offset `p % block_size`. The
//! table grows a block at a time as tokens are appended. Blocks may be shared with other
//! sequences (forked samples, prefix-cache hits); a shared block is never written: before a
//! write lands in one, the sequence takes a private copy (copy-on-write), and the runner copies
//! the KV already in it.

use crate::block_pool::{BlockPool, BlockPoolError};
use crate::ids::BlockId;

/// Where one token's KV goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot {
    pub block: BlockId,
    pub offset: u32,
}

impl Slot {
    /// The slot's index in a cache laid out as `[num_blocks * block_size, ...]`, the form
    /// paged-attention kernels take as their slot mapping.
    pub fn flat(self, block_size: usize) -> u64 {
        u64::from(self.block.0) * block_size as u64 + u64::from(self.offset)
    }
}

/// A copy the runner must make before the step's forward pass: the first `num_tokens` slots of
/// `src` into `dst`, because this sequence is about to write into a block it shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCopy {
    pub src: BlockId,
    pub dst: BlockId,
    pub num_tokens: usize,
}

/// What making room for a write did to the pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Growth {
    /// Copy-on-write copies to perform before the write.
    pub copies: Vec<BlockCopy>,
    /// Blocks that were taken from the prefix cache's evictable set; their hashes must go.
    pub evicted: Vec<BlockId>,
}

/// The ordered blocks of one sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockTable {
    block_size: usize,
    blocks: Vec<BlockId>,
}

impl BlockTable {
    pub fn new(block_size: usize) -> Self {
        Self {
            block_size,
            blocks: Vec::new(),
        }
    }

    /// A table starting with blocks the caller already holds references to (a prefix hit).
    pub fn with_blocks(block_size: usize, blocks: Vec<BlockId>) -> Self {
        Self { block_size, blocks }
    }

    pub fn blocks(&self) -> &[BlockId] {
        &self.blocks
    }

    /// Token positions that have a slot.
    pub fn capacity(&self) -> usize {
        self.blocks.len() * self.block_size
    }

    /// Where position `position` lives, or `None` beyond the table.
    pub fn slot_for(&self, position: usize) -> Option<Slot> {
        let block = *self.blocks.get(position / self.block_size)?;
        let offset = u32::try_from(position % self.block_size).ok()?;
        Some(Slot { block, offset })
    }

    /// Blocks to add so that positions `0..num_tokens` all have a slot.
    pub fn blocks_needed(&self, num_tokens: usize) -> usize {
        num_tokens
            .div_ceil(self.block_size)
            .saturating_sub(self.blocks.len())
    }

    /// Indices of blocks overlapping `start..end` that are shared and so need a private copy.
    fn shared_in(&self, pool: &BlockPool, start: usize, end: usize) -> Vec<usize> {
        let first = start / self.block_size;
        let last = end.div_ceil(self.block_size).min(self.blocks.len());
        (first..last)
            .filter(|&i| pool.refcount(self.blocks[i]).is_ok_and(|rc| rc > 1))
            .collect()
    }

    /// Makes positions `start..end` writable by this sequence alone: copies shared blocks in
    /// that range and appends new blocks. All or nothing: when the pool cannot supply every
    /// block, nothing changes and the error says how many were missing.
    pub fn prepare_write(
        &mut self,
        pool: &mut BlockPool,
        start: usize,
        end: usize,
    ) -> Result<Growth, BlockPoolError> {
        let shared = self.shared_in(pool, start, end);
        let fresh = self.blocks_needed(end);
        let needed = shared.len() + fresh;
        let allocated = pool.allocate_many(needed)?;
        let mut growth = Growth {
            copies: Vec::with_capacity(shared.len()),
            evicted: allocated
                .iter()
                .filter(|a| a.evicted)
                .map(|a| a.block)
                .collect(),
        };
        let (for_copies, for_growth) = allocated.split_at(shared.len());
        for (&i, dst) in shared.iter().zip(for_copies) {
            let src = self.blocks[i];
            let block_start = i * self.block_size;
            // Slots before the write start hold KV this sequence still needs.
            let num_tokens = start.saturating_sub(block_start).min(self.block_size);
            if num_tokens > 0 {
                growth.copies.push(BlockCopy {
                    src,
                    dst: dst.block,
                    num_tokens,
                });
            }
            self.blocks[i] = dst.block;
            // The other holders keep the original; only this reference goes.
            pool.release(src)?;
        }
        self.blocks.extend(for_growth.iter().map(|a| a.block));
        Ok(growth)
    }

    /// A second table over the same blocks, for another sample of the same prompt. Writes by
    /// either will copy first, since every block is now shared.
    pub fn fork(&self, pool: &mut BlockPool) -> Result<Self, BlockPoolError> {
        for (i, &block) in self.blocks.iter().enumerate() {
            if let Err(e) = pool.share(block) {
                for &shared in &self.blocks[..i] {
                    pool.release(shared)?;
                }
                return Err(e);
            }
        }
        Ok(self.clone())
    }

    /// Gives every block reference back to the pool and empties the table.
    pub fn release_all(&mut self, pool: &mut BlockPool) -> Result<(), BlockPoolError> {
        let mut first_error = None;
        for block in self.blocks.drain(..) {
            if let Err(e) = pool.release(block) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_blocks_and_offsets() {
        let mut pool = BlockPool::new(8, 4).expect("pool");
        let mut table = BlockTable::new(4);
        assert_eq!(table.slot_for(0), None);
        let growth = table.prepare_write(&mut pool, 0, 6).expect("grow");
        assert_eq!(growth, Growth::default());
        assert_eq!(table.blocks(), &[BlockId(0), BlockId(1)]);
        assert_eq!(table.capacity(), 8);
        assert_eq!(
            table.slot_for(5),
            Some(Slot {
                block: BlockId(1),
                offset: 1
            })
        );
        assert_eq!(table.slot_for(5).map(|s| s.flat(4)), Some(5));
        assert_eq!(table.slot_for(8), None);
        // Appending within the last block's capacity takes no block.
        table.prepare_write(&mut pool, 6, 8).expect("fill");
        assert_eq!(pool.num_used(), 2);
        table.prepare_write(&mut pool, 8, 9).expect("next block");
        assert_eq!(pool.num_used(), 3);
    }

    #[test]
    fn growth_is_all_or_nothing() {
        let mut pool = BlockPool::new(2, 4).expect("pool");
        let mut table = BlockTable::new(4);
        assert_eq!(
            table.prepare_write(&mut pool, 0, 12),
            Err(BlockPoolError::Exhausted { needed: 3, free: 2 })
        );
        assert!(table.blocks().is_empty());
        assert_eq!(pool.num_used(), 0);
    }

    #[test]
    fn forked_sequence_copies_the_shared_partial_block_on_write() {
        let mut pool = BlockPool::new(8, 4).expect("pool");
        let mut parent = BlockTable::new(4);
        // A six-token prompt: one full block and a partial one.
        parent.prepare_write(&mut pool, 0, 6).expect("prompt");
        let mut child = parent.fork(&mut pool).expect("fork");
        assert_eq!(pool.refcount(BlockId(1)), Ok(2));

        let growth = child.prepare_write(&mut pool, 6, 7).expect("child appends");
        assert_eq!(
            growth.copies,
            vec![BlockCopy {
                src: BlockId(1),
                dst: BlockId(2),
                num_tokens: 2
            }]
        );
        assert_eq!(child.blocks(), &[BlockId(0), BlockId(2)]);
        assert_eq!(pool.refcount(BlockId(1)), Ok(1));
        // The full first block stays shared.
        assert_eq!(pool.refcount(BlockId(0)), Ok(2));

        // The parent is now the only holder of block 1 and writes in place.
        let growth = parent
            .prepare_write(&mut pool, 6, 7)
            .expect("parent appends");
        assert!(growth.copies.is_empty());
        assert_eq!(parent.blocks(), &[BlockId(0), BlockId(1)]);

        parent.release_all(&mut pool).expect("release parent");
        child.release_all(&mut pool).expect("release child");
        assert_eq!(pool.num_used(), 0);
    }

    #[test]
    fn copy_on_write_needs_a_free_block() {
        let mut pool = BlockPool::new(1, 4).expect("pool");
        let mut parent = BlockTable::new(4);
        parent.prepare_write(&mut pool, 0, 2).expect("prompt");
        let mut child = parent.fork(&mut pool).expect("fork");
        assert_eq!(
            child.prepare_write(&mut pool, 2, 3),
            Err(BlockPoolError::Exhausted { needed: 1, free: 0 })
        );
        assert_eq!(child.blocks(), parent.blocks());
        assert_eq!(pool.refcount(BlockId(0)), Ok(2));
    }

    #[test]
    fn eviction_is_reported() {
        let mut pool = BlockPool::new(1, 4).expect("pool");
        let mut first = BlockTable::new(4);
        first.prepare_write(&mut pool, 0, 4).expect("write");
        pool.mark_cached(BlockId(0)).expect("cache");
        first.release_all(&mut pool).expect("release");
        let mut second = BlockTable::new(4);
        let growth = second.prepare_write(&mut pool, 0, 1).expect("write");
        assert_eq!(growth.evicted, vec![BlockId(0)]);
    }
}
