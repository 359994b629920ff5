//! quorum-engine

pub mod block_pool;
pub mod ids;

pub use block_pool::{Allocated, BlockPool, BlockPoolError, blocks_for_budget};
pub use ids::{BlockId, RequestId, SeqId};
