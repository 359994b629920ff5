//! quorum-weights
