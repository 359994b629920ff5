//! Automatic prefix caching.
//!
//! Text-to-SQL prompts start with the same instruction and schema for many questions, and
//! voting sends one prompt several times, so most prompt tokens have been computed before. A
//! *full* block of KV is identified by a hash that chains its parent block's hash, its token
//! ids and (through the root of the chain) a [`CacheKey`] naming the model and adapter: the
//! same tokens give different KV under a different adapter. Because the hash covers the whole
//! chain, equal hashes mean equal prefixes, and a prompt's cached prefix is found by walking
//! its block hashes until the first miss.
//!
//! Only full blocks are cached: a partial block is still being written. A block whose last
//! reference goes away keeps its hash (the pool keeps it as evictable) until the pool reuses
//! it for something else; then its owner calls [`PrefixCache::forget`].

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::ids::BlockId;

/// The chained hash of a full block (or, for [`CacheKey::root`], of the empty prefix).
///
/// 64 bits from SipHash: hashes live only in this process, so a fixed-key hasher is enough,
/// and the cache compares a candidate's tokens and parent before trusting a hash, so a
/// collision costs a miss, never wrong KV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockHash(pub u64);

/// What, besides the tokens, determines a block's KV: the model and the LoRA adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey(BlockHash);

impl CacheKey {
    pub fn new(model: &str, adapter: Option<&str>) -> Self {
        let mut h = DefaultHasher::new();
        "quorum-kv-v1".hash(&mut h);
        model.hash(&mut h);
        adapter.hash(&mut h);
        Self(BlockHash(h.finish()))
    }

    /// The parent hash of a chain's first block.
    pub fn root(self) -> BlockHash {
        self.0
    }
}

/// The hash of a block with these tokens following the prefix hashed as `parent`.
pub fn hash_block(parent: BlockHash, tokens: &[u32]) -> BlockHash {
    let mut h = DefaultHasher::new();
    parent.0.hash(&mut h);
    tokens.hash(&mut h);
    BlockHash(h.finish())
}

/// Counters, in the form Prometheus wants (monotonic; rates are computed by the reader).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefixCacheStats {
    pub lookups: u64,
    pub queried_tokens: u64,
    pub queried_blocks: u64,
    pub hit_tokens: u64,
    pub hit_blocks: u64,
}

/// The cached prefix of a token sequence: its leading full blocks and their hashes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrefixHit {
    pub blocks: Vec<BlockId>,
    pub hashes: Vec<BlockHash>,
}

impl PrefixHit {
    pub fn num_tokens(&self, block_size: usize) -> usize {
        self.blocks.len() * block_size
    }
}

/// The outcome of registering a full block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inserted {
    /// The block's chained hash, the parent of the sequence's next block.
    pub hash: BlockHash,
    /// False when another block already holds this prefix (two sequences computed it in the
    /// same step); that block stays the cached copy and this one is freed as usual.
    pub registered: bool,
}

/// Errors of the prefix cache; all are caller bugs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixCacheError {
    #[error("only full blocks are cached: got {num_tokens} tokens for blocks of {block_size}")]
    PartialBlock {
        num_tokens: usize,
        block_size: usize,
    },
}

impl PrefixCacheError {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::PartialBlock { .. } => "partial_block",
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    hash: BlockHash,
    parent: BlockHash,
    tokens: Box<[u32]>,
}

/// Maps chained block hashes to the blocks holding that KV.
#[derive(Debug, Clone)]
pub struct PrefixCache {
    block_size: usize,
    by_hash: HashMap<BlockHash, BlockId>,
    by_block: HashMap<BlockId, Entry>,
    stats: PrefixCacheStats,
}

impl PrefixCache {
    pub fn new(block_size: usize) -> Self {
        Self {
            block_size,
            by_hash: HashMap::new(),
            by_block: HashMap::new(),
            stats: PrefixCacheStats::default(),
        }
    }

    pub fn stats(&self) -> PrefixCacheStats {
        self.stats
    }

    /// Number of blocks registered.
    pub fn len(&self) -> usize {
        self.by_block.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_block.is_empty()
    }

    /// The hash under which `block` is registered, if it is.
    pub fn hash_of(&self, block: BlockId) -> Option<BlockHash> {
        self.by_block.get(&block).map(|e| e.hash)
    }

    /// The longest cached prefix of `tokens`, in full blocks, counted in the stats.
    ///
    /// Never the whole sequence: the model must compute at least the last token to produce
    /// the logits of the next one, so a block-aligned sequence gives up its last block.
    pub fn lookup(&mut self, key: CacheKey, tokens: &[u32]) -> PrefixHit {
        let max_blocks = tokens.len().saturating_sub(1) / self.block_size;
        let mut hit = PrefixHit::default();
        let mut parent = key.root();
        for chunk in tokens.chunks_exact(self.block_size).take(max_blocks) {
            let hash = hash_block(parent, chunk);
            let Some(&block) = self.by_hash.get(&hash) else {
                break;
            };
            let verified = self
                .by_block
                .get(&block)
                .is_some_and(|e| e.parent == parent && *e.tokens == *chunk);
            if !verified {
                break;
            }
            hit.blocks.push(block);
            hit.hashes.push(hash);
            parent = hash;
        }
        let hit_blocks = hit.blocks.len() as u64;
        self.stats.lookups += 1;
        self.stats.queried_tokens += tokens.len() as u64;
        self.stats.queried_blocks += (tokens.len() / self.block_size) as u64;
        self.stats.hit_blocks += hit_blocks;
        self.stats.hit_tokens += hit_blocks * self.block_size as u64;
        hit
    }

    /// Registers a full block whose KV has been computed.
    pub fn insert(
        &mut self,
        block: BlockId,
        parent: BlockHash,
        tokens: &[u32],
    ) -> Result<Inserted, PrefixCacheError> {
        if tokens.len() != self.block_size {
            return Err(PrefixCacheError::PartialBlock {
                num_tokens: tokens.len(),
                block_size: self.block_size,
            });
        }
        let hash = hash_block(parent, tokens);
        if let Some(&holder) = self.by_hash.get(&hash) {
            return Ok(Inserted {
                hash,
                registered: holder == block,
            });
        }
        // A block is registered under one hash; a stale entry would point a future hit at
        // KV that has been overwritten.
        self.forget(block);
        self.by_hash.insert(hash, block);
        self.by_block.insert(
            block,
            Entry {
                hash,
                parent,
                tokens: tokens.into(),
            },
        );
        Ok(Inserted {
            hash,
            registered: true,
        })
    }

    /// Drops a block's registration, because the pool is reusing it for other tokens.
    pub fn forget(&mut self, block: BlockId) {
        if let Some(entry) = self.by_block.remove(&block) {
            self.by_hash.remove(&entry.hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const BS: usize = 4;

    fn key() -> CacheKey {
        CacheKey::new("qwen2.5-coder-1.5b", None)
    }

    /// Registers the full blocks of `tokens` as blocks `first..`, like a finished sequence.
    fn register(cache: &mut PrefixCache, key: CacheKey, tokens: &[u32], first: u32) {
        let mut parent = key.root();
        for (i, chunk) in tokens.chunks_exact(BS).enumerate() {
            let ins = cache
                .insert(BlockId(first + i as u32), parent, chunk)
                .expect("insert");
            parent = ins.hash;
        }
    }

    #[test]
    fn hash_chains_parent_tokens_and_key() {
        let a = hash_block(key().root(), &[1, 2, 3, 4]);
        assert_eq!(a, hash_block(key().root(), &[1, 2, 3, 4]));
        assert_ne!(a, hash_block(key().root(), &[1, 2, 3, 5]));
        assert_ne!(
            a,
            hash_block(
                CacheKey::new("qwen2.5-coder-1.5b", Some("gen")).root(),
                &[1, 2, 3, 4]
            )
        );
        assert_ne!(
            a,
            hash_block(CacheKey::new("other", None).root(), &[1, 2, 3, 4])
        );
        assert_ne!(
            hash_block(a, &[5, 6, 7, 8]),
            hash_block(key().root(), &[5, 6, 7, 8])
        );
    }

    #[test]
    fn lookup_finds_longest_full_block_prefix() {
        let mut cache = PrefixCache::new(BS);
        let prompt: Vec<u32> = (0..10).collect();
        register(&mut cache, key(), &prompt, 0);
        assert_eq!(cache.len(), 2);
        // Same first block, different second block.
        let hit = cache.lookup(key(), &[0, 1, 2, 3, 4, 5, 9, 9, 9, 9, 9]);
        assert_eq!(hit.blocks, vec![BlockId(0)]);
        let hit = cache.lookup(key(), &prompt);
        assert_eq!(hit.blocks, vec![BlockId(0), BlockId(1)]);
        assert_eq!(hit.num_tokens(BS), 8);
        let stats = cache.stats();
        assert_eq!(stats.lookups, 2);
        assert_eq!(stats.queried_tokens, 21);
        assert_eq!(stats.queried_blocks, 4);
        assert_eq!((stats.hit_blocks, stats.hit_tokens), (3, 12));
    }

    #[test]
    fn lookup_leaves_the_last_token_to_compute() {
        let mut cache = PrefixCache::new(BS);
        let prompt: Vec<u32> = (0..8).collect();
        register(&mut cache, key(), &prompt, 0);
        // Eight tokens, two cached blocks: only the first may be reused.
        assert_eq!(cache.lookup(key(), &prompt).blocks, vec![BlockId(0)]);
        assert_eq!(
            cache.lookup(key(), &prompt[..4]).blocks,
            Vec::<BlockId>::new()
        );
        assert_eq!(cache.lookup(key(), &[]).blocks, Vec::<BlockId>::new());
    }

    #[test]
    fn adapters_do_not_share_kv() {
        let mut cache = PrefixCache::new(BS);
        let prompt: Vec<u32> = (0..9).collect();
        register(&mut cache, key(), &prompt, 0);
        let lora = CacheKey::new("qwen2.5-coder-1.5b", Some("selector"));
        assert!(cache.lookup(lora, &prompt).blocks.is_empty());
    }

    #[test]
    fn forgotten_blocks_miss_and_duplicates_are_not_registered() {
        let mut cache = PrefixCache::new(BS);
        let prompt: Vec<u32> = (0..9).collect();
        register(&mut cache, key(), &prompt, 0);
        let dup = cache
            .insert(BlockId(7), key().root(), &prompt[..4])
            .expect("insert");
        assert!(!dup.registered);
        assert_eq!(cache.hash_of(BlockId(0)), Some(dup.hash));
        cache.forget(BlockId(0));
        assert!(cache.lookup(key(), &prompt).blocks.is_empty());
        // With the first block gone the chain is broken, even though block 1 is still there.
        assert_eq!(cache.len(), 1);
        assert_eq!(
            cache.insert(BlockId(3), key().root(), &[1, 2]),
            Err(PrefixCacheError::PartialBlock {
                num_tokens: 2,
                block_size: BS
            })
        );
    }

    #[test]
    fn reinserting_a_block_replaces_its_old_hash() {
        let mut cache = PrefixCache::new(BS);
        cache
            .insert(BlockId(0), key().root(), &[1, 2, 3, 4])
            .expect("insert");
        cache
            .insert(BlockId(0), key().root(), &[5, 6, 7, 8])
            .expect("insert");
        assert_eq!(cache.len(), 1);
        assert!(cache.lookup(key(), &[1, 2, 3, 4, 0]).blocks.is_empty());
        assert_eq!(
            cache.lookup(key(), &[5, 6, 7, 8, 0]).blocks,
            vec![BlockId(0)]
        );
    }

    proptest! {
        /// A lookup returns exactly the full blocks shared with a registered sequence, capped
        /// so that the last token is recomputed.
        #[test]
        fn hit_is_exactly_the_common_full_blocks(
            cached in proptest::collection::vec(0u32..3, 0..24),
            query in proptest::collection::vec(0u32..3, 0..24),
        ) {
            let mut cache = PrefixCache::new(BS);
            register(&mut cache, key(), &cached, 0);
            let common = cached.iter().zip(&query).take_while(|(a, b)| a == b).count();
            let expected = (common / BS).min(query.len().saturating_sub(1) / BS);
            let hit = cache.lookup(key(), &query);
            prop_assert_eq!(hit.blocks.len(), expected);
            for (i, b) in hit.blocks.iter().enumerate() {
                prop_assert_eq!(*b, BlockId(i as u32));
            }
        }
    }
}
