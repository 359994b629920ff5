//! The paged KV block pool.
//!
//! The KV cache is carved into `num_blocks` blocks of `block_size` token slots each. The pool
//! only does the bookkeeping: which blocks are in use (and by how many sequences), which are
//! free, and which are free but still hold KV that the prefix cache can hand out again. The
//! tensors themselves live with the model runner, indexed by [`BlockId`].
//!
//! A block is in exactly one of three states:
//! - *in use*: refcount > 0 (several samples of one prompt, or several requests hitting the
//!   same cached prefix, share a block by raising its refcount);
//! - *free*: refcount 0 and holding nothing worth keeping;
//! - *evictable*: refcount 0 but registered in the prefix cache. Such blocks count as free
//!   capacity, yet are reused only when no plain free block is left, least recently released
//!   first, so that a prefix that was in use a moment ago survives the longest.

use std::collections::BTreeMap;

use crate::ids::BlockId;

/// Errors of the block pool. Exhaustion is an ordinary outcome the scheduler reacts to
/// (preemption); the others are caller bugs reported instead of corrupting the counts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockPoolError {
    #[error(
        "a KV pool needs at least one block of at least one token ({num_blocks} blocks of {block_size} tokens)"
    )]
    EmptyPool { num_blocks: u32, block_size: usize },
    #[error(
        "cannot size a KV pool with bytes_per_token {bytes_per_token} and block_size {block_size}"
    )]
    InvalidBudget {
        bytes_per_token: u64,
        block_size: usize,
    },
    #[error("{block} is outside the pool of {num_blocks} blocks")]
    UnknownBlock { block: BlockId, num_blocks: u32 },
    #[error("{block} is not in use")]
    NotInUse { block: BlockId },
    #[error("{block} is free and holds no cached KV to share")]
    NotShareable { block: BlockId },
    #[error("out of KV blocks: {needed} needed, {free} free")]
    Exhausted { needed: usize, free: usize },
}

impl BlockPoolError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::EmptyPool { .. } => "empty_pool",
            Self::InvalidBudget { .. } => "invalid_budget",
            Self::UnknownBlock { .. } => "unknown_block",
            Self::NotInUse { .. } => "not_in_use",
            Self::NotShareable { .. } => "not_shareable",
            Self::Exhausted { .. } => "exhausted",
        }
    }
}

/// How many blocks fit in a memory budget. `bytes_per_token` is the KV size of one token across
/// all layers (2 × layers × kv_heads × head_dim × dtype bytes); rounding down keeps the pool
/// inside the budget. Saturates at `u32::MAX` blocks.
pub fn blocks_for_budget(
    bytes: u64,
    bytes_per_token: u64,
    block_size: usize,
) -> Result<u32, BlockPoolError> {
    let invalid = BlockPoolError::InvalidBudget {
        bytes_per_token,
        block_size,
    };
    let block_size_u64 = u64::try_from(block_size).map_err(|_| invalid.clone())?;
    let bytes_per_block = bytes_per_token
        .checked_mul(block_size_u64)
        .ok_or(invalid.clone())?;
    if bytes_per_block == 0 {
        return Err(invalid);
    }
    Ok(u32::try_from(bytes / bytes_per_block).unwrap_or(u32::MAX))
}

/// A freshly allocated block. `evicted` says the block held cached KV that is now gone, so the
/// owner of the prefix cache must forget its hash before the block is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocated {
    pub block: BlockId,
    pub evicted: bool,
}

/// Reference-counted allocator of KV blocks with LRU reuse of cached free blocks.
#[derive(Debug, Clone)]
pub struct BlockPool {
    block_size: usize,
    refcounts: Vec<u32>,
    /// Whether the block is registered in the prefix cache (its KV is worth keeping).
    cached: Vec<bool>,
    /// The LRU tick of an evictable block, the key into `evictable`.
    evictable_tick: Vec<Option<u64>>,
    /// Free blocks holding nothing; a stack so that low ids are handed out first, which keeps
    /// small workloads on a compact, predictable set of blocks.
    free: Vec<BlockId>,
    /// Evictable blocks by release time; the smallest tick is the least recently used.
    evictable: BTreeMap<u64, BlockId>,
    next_tick: u64,
}

impl BlockPool {
    pub fn new(num_blocks: u32, block_size: usize) -> Result<Self, BlockPoolError> {
        if num_blocks == 0 || block_size == 0 {
            return Err(BlockPoolError::EmptyPool {
                num_blocks,
                block_size,
            });
        }
        let n = num_blocks as usize;
        Ok(Self {
            block_size,
            refcounts: vec![0; n],
            cached: vec![false; n],
            evictable_tick: vec![None; n],
            free: (0..num_blocks).rev().map(BlockId).collect(),
            evictable: BTreeMap::new(),
            next_tick: 0,
        })
    }

    /// Token slots per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    pub fn num_total(&self) -> u32 {
        // `new` built the tables from a u32 count, so the length fits.
        u32::try_from(self.refcounts.len()).unwrap_or(u32::MAX)
    }

    /// Blocks that an allocation can obtain: plain free ones plus evictable cached ones.
    pub fn num_free(&self) -> usize {
        self.free.len() + self.evictable.len()
    }

    /// Blocks referenced by at least one sequence.
    pub fn num_used(&self) -> usize {
        self.refcounts.len() - self.num_free()
    }

    /// Free blocks that still hold cached KV.
    pub fn num_evictable(&self) -> usize {
        self.evictable.len()
    }

    pub fn refcount(&self, block: BlockId) -> Result<u32, BlockPoolError> {
        self.check(block)?;
        Ok(self.refcounts[block.index()])
    }

    pub fn is_cached(&self, block: BlockId) -> bool {
        self.cached.get(block.index()).copied().unwrap_or(false)
    }

    /// Takes one block with refcount 1: a plain free block if there is one, else the least
    /// recently released cached block.
    pub fn allocate(&mut self) -> Result<Allocated, BlockPoolError> {
        let allocated = if let Some(block) = self.free.pop() {
            Allocated {
                block,
                evicted: false,
            }
        } else if let Some((_, block)) = self.evictable.pop_first() {
            self.evictable_tick[block.index()] = None;
            self.cached[block.index()] = false;
            Allocated {
                block,
                evicted: true,
            }
        } else {
            return Err(BlockPoolError::Exhausted { needed: 1, free: 0 });
        };
        self.refcounts[allocated.block.index()] = 1;
        Ok(allocated)
    }

    /// Takes `n` blocks or none: a sequence that gets only part of what it needs cannot run, so
    /// a partial grab would only hold memory that others could use.
    pub fn allocate_many(&mut self, n: usize) -> Result<Vec<Allocated>, BlockPoolError> {
        if n > self.num_free() {
            return Err(BlockPoolError::Exhausted {
                needed: n,
                free: self.num_free(),
            });
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.allocate()?);
        }
        Ok(out)
    }

    /// Adds a reference to a block: forking a sequence (several samples of one prompt), or a
    /// prefix-cache hit. A hit may land on an evictable block, which this takes back out of the
    /// LRU; a plain free block holds nothing and cannot be shared.
    pub fn share(&mut self, block: BlockId) -> Result<(), BlockPoolError> {
        self.check(block)?;
        let i = block.index();
        if self.refcounts[i] == 0 {
            let tick = self.evictable_tick[i]
                .take()
                .ok_or(BlockPoolError::NotShareable { block })?;
            self.evictable.remove(&tick);
        }
        self.refcounts[i] += 1;
        Ok(())
    }

    /// Drops one reference. At zero, a cached block becomes evictable (most recently used) and
    /// any other block becomes plain free.
    pub fn release(&mut self, block: BlockId) -> Result<(), BlockPoolError> {
        self.check(block)?;
        let i = block.index();
        if self.refcounts[i] == 0 {
            return Err(BlockPoolError::NotInUse { block });
        }
        self.refcounts[i] -= 1;
        if self.refcounts[i] == 0 {
            if self.cached[i] {
                let tick = self.next_tick;
                self.next_tick += 1;
                self.evictable_tick[i] = Some(tick);
                self.evictable.insert(tick, block);
            } else {
                self.free.push(block);
            }
        }
        Ok(())
    }

    /// Records that a block in use now holds a full, hashed block of KV, so it is kept for
    /// reuse after its last release instead of being wiped.
    pub fn mark_cached(&mut self, block: BlockId) -> Result<(), BlockPoolError> {
        self.check(block)?;
        if self.refcounts[block.index()] == 0 {
            return Err(BlockPoolError::NotInUse { block });
        }
        self.cached[block.index()] = true;
        Ok(())
    }

    fn check(&self, block: BlockId) -> Result<(), BlockPoolError> {
        if block.index() < self.refcounts.len() {
            Ok(())
        } else {
            Err(BlockPoolError::UnknownBlock {
                block,
                num_blocks: self.num_total(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn budget_rounds_down_and_rejects_zero_sizes() {
        // 1 MiB at 1 KiB per token and 16 tokens per block: 64 blocks.
        assert_eq!(blocks_for_budget(1 << 20, 1024, 16), Ok(64));
        assert_eq!(blocks_for_budget((1 << 20) + 1000, 1024, 16), Ok(64));
        assert_eq!(blocks_for_budget(100, 1024, 16), Ok(0));
        assert_eq!(blocks_for_budget(u64::MAX, 1, 1), Ok(u32::MAX));
        assert!(matches!(
            blocks_for_budget(1 << 20, 0, 16),
            Err(BlockPoolError::InvalidBudget {
                bytes_per_token: 0,
                block_size: 16
            })
        ));
        assert!(blocks_for_budget(1 << 20, 1024, 0).is_err());
        assert!(blocks_for_budget(1 << 20, u64::MAX, 16).is_err());
    }

    #[test]
    fn empty_pool_is_rejected() {
        assert_eq!(
            BlockPool::new(0, 16).err(),
            Some(BlockPoolError::EmptyPool {
                num_blocks: 0,
                block_size: 16
            })
        );
        assert!(BlockPool::new(4, 0).is_err());
    }

    #[test]
    fn allocation_fails_cleanly_when_exhausted() {
        let mut pool = BlockPool::new(2, 16).expect("pool");
        let a = pool.allocate().expect("first");
        let b = pool.allocate().expect("second");
        assert_eq!((a.block, b.block), (BlockId(0), BlockId(1)));
        assert_eq!(
            pool.allocate(),
            Err(BlockPoolError::Exhausted { needed: 1, free: 0 })
        );
        assert_eq!(pool.num_used(), 2);
        pool.release(a.block).expect("release");
        assert_eq!(pool.allocate().expect("again").block, BlockId(0));
    }

    #[test]
    fn allocate_many_is_all_or_nothing() {
        let mut pool = BlockPool::new(3, 4).expect("pool");
        assert_eq!(
            pool.allocate_many(4).err(),
            Some(BlockPoolError::Exhausted { needed: 4, free: 3 })
        );
        assert_eq!(pool.num_free(), 3);
        assert_eq!(pool.allocate_many(3).expect("three").len(), 3);
    }

    #[test]
    fn shared_block_is_freed_by_its_last_release() {
        let mut pool = BlockPool::new(2, 16).expect("pool");
        let a = pool.allocate().expect("alloc").block;
        pool.share(a).expect("fork");
        assert_eq!(pool.refcount(a), Ok(2));
        pool.release(a).expect("first");
        assert_eq!(pool.num_used(), 1);
        pool.release(a).expect("second");
        assert_eq!(pool.num_used(), 0);
        assert_eq!(pool.release(a), Err(BlockPoolError::NotInUse { block: a }));
        assert_eq!(
            pool.share(a),
            Err(BlockPoolError::NotShareable { block: a })
        );
        assert!(matches!(
            pool.share(BlockId(9)),
            Err(BlockPoolError::UnknownBlock { .. })
        ));
    }

    #[test]
    fn cached_blocks_are_reused_last_and_in_lru_order() {
        let mut pool = BlockPool::new(3, 16).expect("pool");
        let blocks: Vec<BlockId> = (0..3)
            .map(|_| pool.allocate().expect("alloc").block)
            .collect();
        pool.mark_cached(blocks[0]).expect("cache");
        pool.mark_cached(blocks[1]).expect("cache");
        // Release 1 before 0: block 1 is the least recently used cached block.
        pool.release(blocks[1]).expect("release");
        pool.release(blocks[0]).expect("release");
        pool.release(blocks[2]).expect("release");
        assert_eq!(pool.num_free(), 3);
        assert_eq!(pool.num_evictable(), 2);
        // The plain free block goes first, then the LRU cached one.
        assert_eq!(
            pool.allocate(),
            Ok(Allocated {
                block: blocks[2],
                evicted: false
            })
        );
        assert_eq!(
            pool.allocate(),
            Ok(Allocated {
                block: blocks[1],
                evicted: true
            })
        );
        assert!(!pool.is_cached(blocks[1]));
        // A cache hit takes the remaining evictable block back out of the LRU.
        pool.share(blocks[0]).expect("revive");
        assert_eq!(pool.refcount(blocks[0]), Ok(1));
        assert_eq!(pool.num_free(), 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Allocate,
        Share(usize),
        Release(usize),
        MarkCached(usize),
        ShareAny(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Allocate),
            2 => any::<usize>().prop_map(Op::Share),
            3 => any::<usize>().prop_map(Op::Release),
            1 => any::<usize>().prop_map(Op::MarkCached),
            1 => (0u32..12).prop_map(Op::ShareAny),
        ]
    }

    /// Every block is in exactly one state, and refcounts match the references held.
    fn check_invariants(pool: &BlockPool, held: &[BlockId]) {
        let mut seen = HashSet::new();
        for block in pool.free.iter().chain(pool.evictable.values()) {
            assert!(seen.insert(*block), "{block} listed twice as free");
            assert_eq!(pool.refcounts[block.index()], 0);
        }
        for (i, &rc) in pool.refcounts.iter().enumerate() {
            let held_count = held.iter().filter(|b| b.index() == i).count();
            assert_eq!(rc as usize, held_count, "refcount of block {i}");
            assert_eq!(rc == 0, seen.contains(&BlockId(i as u32)));
        }
        assert_eq!(pool.num_used() + pool.num_free(), pool.refcounts.len());
    }

    proptest! {
        #[test]
        fn pool_never_leaks_or_double_assigns(ops in proptest::collection::vec(op(), 1..200)) {
            let mut pool = BlockPool::new(12, 4).expect("pool");
            // One entry per reference held by a simulated sequence.
            let mut held: Vec<BlockId> = Vec::new();
            for op in ops {
                match op {
                    Op::Allocate => match pool.allocate() {
                        Ok(a) => {
                            prop_assert!(!held.contains(&a.block), "{} handed out twice", a.block);
                            held.push(a.block);
                        }
                        Err(e) => prop_assert_eq!(pool.num_free(), 0, "{}", e),
                    },
                    Op::Share(i) if !held.is_empty() => {
                        let b = held[i % held.len()];
                        pool.share(b).expect("share a held block");
                        held.push(b);
                    }
                    Op::Release(i) if !held.is_empty() => {
                        let b = held.swap_remove(i % held.len());
                        pool.release(b).expect("release a held block");
                    }
                    Op::MarkCached(i) if !held.is_empty() => {
                        pool.mark_cached(held[i % held.len()]).expect("mark");
                    }
                    Op::ShareAny(b) => {
                        let b = BlockId(b);
                        if pool.share(b).is_ok() {
                            held.push(b);
                        }
                    }
                    _ => {}
                }
                check_invariants(&pool, &held);
            }
            for b in held.drain(..) {
                pool.release(b).expect("final release");
            }
            check_invariants(&pool, &held);
            prop_assert!(pool.refcounts.iter().all(|&rc| rc == 0));
            prop_assert_eq!(pool.num_free(), 12);
        }
    }
}
