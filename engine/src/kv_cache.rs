//! The KV cache manager: the block pool, the prefix cache and the block table of every live
//! sequence, kept consistent with one another.
//!
//! The three pieces are separate so that each can be tested alone, but their invariants
//! cross: a block the pool evicts must leave the prefix cache before it is rewritten, a block
//! registered in the prefix cache must be marked in the pool so that it outlives its last
//! reference, and a prefix hit must take its blocks out of the pool's LRU before any
//! allocation could evict them. This type is the one place that keeps those promises; the
//! scheduler talks only to it.

use std::collections::HashMap;

use crate::block_pool::{BlockPool, BlockPoolError};
use crate::block_table::{BlockCopy, BlockTable, Slot};
use crate::ids::{BlockId, SeqId};
use crate::pinned_prefixes::PinnedPrefixes;
use crate::prefix_cache::{
    BlockHash, CacheKey, PrefixCache, PrefixCacheError, PrefixCacheStats, PrefixHit,
};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvCacheError {
    #[error(transparent)]
    Pool(#[from] BlockPoolError),
    #[error(transparent)]
    PrefixCache(#[from] PrefixCacheError),
    #[error("{seq} has no KV blocks")]
    UnknownSeq { seq: SeqId },
    #[error("{seq} already has KV blocks")]
    DuplicateSeq { seq: SeqId },
    #[error("{seq} has slots for {capacity} positions, not up to {end}")]
    BeyondTable {
        seq: SeqId,
        end: usize,
        capacity: usize,
    },
    #[error("{seq} has {num_tokens} tokens but {num_computed} are said to be computed")]
    ComputedBeyondTokens {
        seq: SeqId,
        num_computed: usize,
        num_tokens: usize,
    },
}

impl KvCacheError {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Pool(e) => e.kind(),
            Self::PrefixCache(e) => e.kind(),
            Self::UnknownSeq { .. } => "unknown_seq",
            Self::DuplicateSeq { .. } => "duplicate_seq",
            Self::BeyondTable { .. } => "beyond_table",
            Self::ComputedBeyondTokens { .. } => "computed_beyond_tokens",
        }
    }

    /// Whether this is the pool running out, which callers answer by preempting.
    pub fn is_exhausted(&self) -> bool {
        matches!(self, Self::Pool(BlockPoolError::Exhausted { .. }))
    }
}

#[derive(Debug, Clone)]
struct SeqKv {
    key: CacheKey,
    table: BlockTable,
    /// Hashes of the leading full blocks already offered to the prefix cache.
    hashes: Vec<BlockHash>,
}

/// Owner of all KV block bookkeeping.
#[derive(Debug, Clone)]
pub struct KvCache {
    pool: BlockPool,
    prefix: PrefixCache,
    prefix_caching: bool,
    seqs: HashMap<SeqId, SeqKv>,
    pins: PinnedPrefixes,
}

impl KvCache {
    /// A cache of `num_blocks` blocks, of which pinned prefixes may hold `max_pinned_blocks`.
    pub fn new(
        num_blocks: u32,
        block_size: usize,
        prefix_caching: bool,
        max_pinned_blocks: usize,
    ) -> Result<Self, KvCacheError> {
        Ok(Self {
            pool: BlockPool::new(num_blocks, block_size)?,
            prefix: PrefixCache::new(block_size),
            prefix_caching,
            seqs: HashMap::new(),
            pins: PinnedPrefixes::new(max_pinned_blocks),
        })
    }

    /// Blocks held by pinned prefixes.
    pub fn pinned_blocks(&self) -> usize {
        self.pins.held_blocks()
    }

    /// Every block a pin holds (a block pinned under two tags appears twice).
    pub fn pinned_block_ids(&self) -> impl Iterator<Item = BlockId> + '_ {
        self.pins.blocks()
    }

    /// Keeps the cached full blocks of the first `num_tokens` tokens of `seq` resident under
    /// `tag`, replacing the tag's earlier pin ([`PinnedPrefixes`]). Returns how many blocks
    /// the pin holds: none without prefix caching, or when the prefix exceeds the bound.
    pub fn pin(&mut self, seq: SeqId, tag: &str, num_tokens: usize) -> Result<usize, KvCacheError> {
        if !self.prefix_caching {
            return Ok(0);
        }
        let kv = self
            .seqs
            .get(&seq)
            .ok_or(KvCacheError::UnknownSeq { seq })?;
        let full = (num_tokens / self.block_size()).min(kv.hashes.len());
        // Only blocks the prefix cache can hand out are worth holding; a block that lost the
        // race to register its prefix ends the pin there.
        let blocks: Vec<BlockId> = kv.table.blocks()[..full]
            .iter()
            .copied()
            .take_while(|b| self.pool.is_cached(*b))
            .collect();
        for &block in &blocks {
            self.pool.share(block)?;
        }
        let count = blocks.len();
        let released = self.pins.add(tag, blocks);
        for &block in &released {
            self.pool.release(block)?;
        }
        Ok(if self.pins.holds(tag) { count } else { 0 })
    }

    /// Returns the oldest pin's blocks to the pool (they stay cached, now evictable). False
    /// when nothing is pinned.
    pub fn unpin_oldest(&mut self) -> Result<bool, KvCacheError> {
        let blocks = self.pins.pop_oldest();
        for &block in &blocks {
            self.pool.release(block)?;
        }
        Ok(!blocks.is_empty())
    }

    pub fn block_size(&self) -> usize {
        self.pool.block_size()
    }

    pub fn pool(&self) -> &BlockPool {
        &self.pool
    }

    pub fn prefix_stats(&self) -> PrefixCacheStats {
        self.prefix.stats()
    }

    pub fn contains(&self, seq: SeqId) -> bool {
        self.seqs.contains_key(&seq)
    }

    /// The cached prefix of `tokens` (empty when prefix caching is off).
    pub fn lookup_prefix(&mut self, key: CacheKey, tokens: &[u32]) -> PrefixHit {
        if !self.prefix_caching {
            return PrefixHit::default();
        }
        let mut hit = self.prefix.lookup(key, tokens);
        // The pool clears a block's cached mark when it evicts it; a hash still pointing there
        // would be a bookkeeping bug, and trusting it would serve another prompt's KV.
        let valid = hit
            .blocks
            .iter()
            .take_while(|b| self.pool.is_cached(**b))
            .count();
        hit.blocks.truncate(valid);
        hit.hashes.truncate(valid);
        hit
    }

    /// Starts a sequence's table with the blocks of a prefix hit (possibly none), taking a
    /// reference to each so that nothing can evict them.
    pub fn admit(&mut self, seq: SeqId, key: CacheKey, hit: PrefixHit) -> Result<(), KvCacheError> {
        if self.seqs.contains_key(&seq) {
            return Err(KvCacheError::DuplicateSeq { seq });
        }
        for (i, &block) in hit.blocks.iter().enumerate() {
            if let Err(e) = self.pool.share(block) {
                for &taken in &hit.blocks[..i] {
                    self.pool.release(taken)?;
                }
                return Err(e.into());
            }
        }
        let table = BlockTable::with_blocks(self.block_size(), hit.blocks);
        self.seqs.insert(
            seq,
            SeqKv {
                key,
                table,
                hashes: hit.hashes,
            },
        );
        Ok(())
    }

    /// Makes positions `start..end` of a sequence writable, allocating (and copying shared
    /// blocks) as needed. All or nothing; an exhausted pool is reported with
    /// [`KvCacheError::is_exhausted`].
    pub fn grow(
        &mut self,
        seq: SeqId,
        start: usize,
        end: usize,
    ) -> Result<Vec<BlockCopy>, KvCacheError> {
        let kv = self
            .seqs
            .get_mut(&seq)
            .ok_or(KvCacheError::UnknownSeq { seq })?;
        let growth = kv.table.prepare_write(&mut self.pool, start, end)?;
        for block in growth.evicted {
            self.prefix.forget(block);
        }
        Ok(growth.copies)
    }

    /// A new sequence sharing every block of `parent`, for another sample of one prompt.
    pub fn fork(&mut self, parent: SeqId, child: SeqId) -> Result<(), KvCacheError> {
        if self.seqs.contains_key(&child) {
            return Err(KvCacheError::DuplicateSeq { seq: child });
        }
        let kv = self
            .seqs
            .get(&parent)
            .ok_or(KvCacheError::UnknownSeq { seq: parent })?;
        let table = kv.table.fork(&mut self.pool)?;
        let forked = SeqKv {
            key: kv.key,
            table,
            hashes: kv.hashes.clone(),
        };
        self.seqs.insert(child, forked);
        Ok(())
    }

    /// Releases all of a sequence's blocks. Registered full blocks stay in the prefix cache
    /// as evictable blocks; the rest become plain free blocks.
    pub fn free(&mut self, seq: SeqId) -> Result<(), KvCacheError> {
        let mut kv = self
            .seqs
            .remove(&seq)
            .ok_or(KvCacheError::UnknownSeq { seq })?;
        kv.table.release_all(&mut self.pool)?;
        Ok(())
    }

    /// Offers the sequence's newly completed full blocks to the prefix cache, once their KV
    /// has been computed. `tokens` is the whole sequence (prompt then output) and the first
    /// `num_computed` of them have KV.
    pub fn cache_full_blocks(
        &mut self,
        seq: SeqId,
        tokens: &[u32],
        num_computed: usize,
    ) -> Result<(), KvCacheError> {
        if !self.prefix_caching {
            return Ok(());
        }
        if num_computed > tokens.len() {
            return Err(KvCacheError::ComputedBeyondTokens {
                seq,
                num_computed,
                num_tokens: tokens.len(),
            });
        }
        let block_size = self.block_size();
        let kv = self
            .seqs
            .get_mut(&seq)
            .ok_or(KvCacheError::UnknownSeq { seq })?;
        let num_full = (num_computed / block_size).min(kv.table.blocks().len());
        for i in kv.hashes.len()..num_full {
            let parent = kv.hashes.last().copied().unwrap_or(kv.key.root());
            let block = kv.table.blocks()[i];
            let inserted =
                self.prefix
                    .insert(block, parent, &tokens[i * block_size..(i + 1) * block_size])?;
            if inserted.registered {
                self.pool.mark_cached(block)?;
            }
            kv.hashes.push(inserted.hash);
        }
        Ok(())
    }

    /// The slots of positions `start..end` of a sequence.
    pub fn slots(&self, seq: SeqId, start: usize, end: usize) -> Result<Vec<Slot>, KvCacheError> {
        let kv = self
            .seqs
            .get(&seq)
            .ok_or(KvCacheError::UnknownSeq { seq })?;
        let capacity = kv.table.capacity();
        (start..end)
            .map(|p| {
                kv.table
                    .slot_for(p)
                    .ok_or(KvCacheError::BeyondTable { seq, end, capacity })
            })
            .collect()
    }

    /// The sequence's block table, as the attention kernel reads it.
    pub fn blocks(&self, seq: SeqId) -> Result<&[BlockId], KvCacheError> {
        Ok(self
            .seqs
            .get(&seq)
            .ok_or(KvCacheError::UnknownSeq { seq })?
            .table
            .blocks())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: usize = 4;

    fn key() -> CacheKey {
        CacheKey::new("m", None)
    }

    /// Runs a sequence through: admit with its prefix hit, compute everything, cache, free.
    fn run_seq(kv: &mut KvCache, seq: SeqId, tokens: &[u32]) -> usize {
        let hit = kv.lookup_prefix(key(), tokens);
        let cached = hit.num_tokens(BS);
        kv.admit(seq, key(), hit).expect("admit");
        kv.grow(seq, cached, tokens.len()).expect("grow");
        kv.cache_full_blocks(seq, tokens, tokens.len())
            .expect("cache");
        kv.free(seq).expect("free");
        cached
    }

    #[test]
    fn freed_blocks_serve_later_prefix_hits() {
        let mut kv = KvCache::new(8, BS, true, 0).expect("kv");
        let prompt: Vec<u32> = (0..10).collect();
        assert_eq!(run_seq(&mut kv, SeqId(0), &prompt), 0);
        assert_eq!(kv.pool().num_used(), 0);
        assert_eq!(kv.pool().num_evictable(), 2);
        assert_eq!(run_seq(&mut kv, SeqId(1), &prompt), 8);
        let stats = kv.prefix_stats();
        assert_eq!((stats.lookups, stats.hit_blocks), (2, 2));
    }

    #[test]
    fn evicted_blocks_leave_the_prefix_cache() {
        let mut kv = KvCache::new(3, BS, true, 0).expect("kv");
        let prompt: Vec<u32> = (0..9).collect();
        run_seq(&mut kv, SeqId(0), &prompt);
        // Another prompt needs all three blocks, evicting both cached ones.
        let other: Vec<u32> = (100..112).collect();
        run_seq(&mut kv, SeqId(1), &other);
        assert_eq!(kv.lookup_prefix(key(), &prompt), PrefixHit::default());
    }

    #[test]
    fn a_pinned_prefix_survives_what_evicts_others_until_it_is_released() {
        let mut kv = KvCache::new(4, BS, true, 2).expect("kv");
        let schema: Vec<u32> = (0..9).collect();
        kv.admit(SeqId(0), key(), PrefixHit::default())
            .expect("admit");
        kv.grow(SeqId(0), 0, schema.len()).expect("grow");
        kv.cache_full_blocks(SeqId(0), &schema, schema.len())
            .expect("cache");
        // Both full blocks of the prompt; the partial third is not cacheable.
        assert_eq!(kv.pin(SeqId(0), "db", schema.len()).expect("pin"), 2);
        kv.free(SeqId(0)).expect("free");
        assert_eq!((kv.pool().num_used(), kv.pinned_blocks()), (2, 2));
        // A prompt that wants every block no longer fits beside the pin...
        let other: Vec<u32> = (100..116).collect();
        kv.admit(SeqId(1), key(), PrefixHit::default())
            .expect("admit");
        assert!(kv.grow(SeqId(1), 0, 16).expect_err("pinned").is_exhausted());
        // ...and the pinned prefix is still served whole.
        assert_eq!(kv.lookup_prefix(key(), &schema).blocks.len(), 2);
        // Released, the pin's blocks stay cached until an allocation needs them.
        assert!(kv.unpin_oldest().expect("unpin"));
        assert!(!kv.unpin_oldest().expect("nothing left"));
        assert_eq!(kv.pool().num_evictable(), 2);
        kv.grow(SeqId(1), 0, 16).expect("room now");
        kv.cache_full_blocks(SeqId(1), &other, 16).expect("cache");
        kv.free(SeqId(1)).expect("free");
        assert_eq!(kv.lookup_prefix(key(), &schema), PrefixHit::default());
    }

    #[test]
    fn a_pin_over_the_bound_or_without_prefix_caching_holds_nothing() {
        for (caching, bound) in [(true, 1), (false, 8)] {
            let mut kv = KvCache::new(8, BS, caching, bound).expect("kv");
            let prompt: Vec<u32> = (0..12).collect();
            kv.admit(SeqId(0), key(), PrefixHit::default())
                .expect("admit");
            kv.grow(SeqId(0), 0, prompt.len()).expect("grow");
            kv.cache_full_blocks(SeqId(0), &prompt, prompt.len())
                .expect("cache");
            assert_eq!(kv.pin(SeqId(0), "db", prompt.len()).expect("pin"), 0);
            kv.free(SeqId(0)).expect("free");
            assert_eq!((kv.pool().num_used(), kv.pinned_blocks()), (0, 0));
            assert!(!kv.unpin_oldest().expect("nothing pinned"));
        }
    }

    #[test]
    fn disabled_prefix_caching_never_hits() {
        let mut kv = KvCache::new(8, BS, false, 0).expect("kv");
        let prompt: Vec<u32> = (0..10).collect();
        run_seq(&mut kv, SeqId(0), &prompt);
        assert_eq!(run_seq(&mut kv, SeqId(1), &prompt), 0);
        assert_eq!(kv.pool().num_evictable(), 0);
    }

    #[test]
    fn forked_samples_share_until_they_write() {
        let mut kv = KvCache::new(8, BS, true, 0).expect("kv");
        let prompt: Vec<u32> = (0..6).collect();
        kv.admit(SeqId(0), key(), PrefixHit::default())
            .expect("admit");
        kv.grow(SeqId(0), 0, 6).expect("grow");
        kv.fork(SeqId(0), SeqId(1)).expect("fork");
        assert_eq!(kv.pool().num_used(), 2);
        let copies = kv.grow(SeqId(1), 6, 7).expect("child");
        assert_eq!(copies.len(), 1);
        assert_eq!(
            kv.slots(SeqId(1), 6, 7).expect("slots")[0].block,
            copies[0].dst
        );
        assert!(kv.grow(SeqId(0), 6, 7).expect("parent").is_empty());
        kv.cache_full_blocks(SeqId(0), &prompt, 6).expect("cache");
        kv.free(SeqId(0)).expect("free");
        kv.free(SeqId(1)).expect("free");
        assert_eq!(kv.pool().num_used(), 0);
        assert_eq!(
            kv.free(SeqId(1)),
            Err(KvCacheError::UnknownSeq { seq: SeqId(1) })
        );
    }

    #[test]
    fn errors_are_structured() {
        let mut kv = KvCache::new(1, BS, true, 0).expect("kv");
        kv.admit(SeqId(0), key(), PrefixHit::default())
            .expect("admit");
        let err = kv
            .grow(SeqId(0), 0, 5)
            .expect_err("two blocks from a pool of one");
        assert!(err.is_exhausted());
        assert_eq!(err.kind(), "exhausted");
        assert_eq!(
            kv.slots(SeqId(0), 0, 1),
            Err(KvCacheError::BeyondTable {
                seq: SeqId(0),
                end: 1,
                capacity: 0
            })
        );
        assert_eq!(
            kv.admit(SeqId(0), key(), PrefixHit::default()),
            Err(KvCacheError::DuplicateSeq { seq: SeqId(0) })
        );
    }
}
