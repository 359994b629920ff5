//! quorum-engine
