//! quorum-engine

pub mod block_pool;
pub mod block_table;
pub mod ids;
pub mod kv_cache;
pub mod prefix_cache;
pub mod scheduler;
pub mod step;

pub use block_pool::{Allocated, BlockPool, BlockPoolError, blocks_for_budget};
pub use block_table::{BlockCopy, BlockTable, Growth, Slot};
pub use ids::{BlockId, RequestId, SeqId};
pub use kv_cache::{KvCache, KvCacheError};
pub use prefix_cache::{
    BlockHash, CacheKey, PrefixCache, PrefixCacheError, PrefixCacheStats, PrefixHit,
};
pub use scheduler::{NewRequest, Scheduler, SchedulerConfig, SchedulerError, SchedulerStats};
pub use step::{FinishReason, Finished, ScheduledSeq, StepPlan, StepResult};
