//! quorum-training
