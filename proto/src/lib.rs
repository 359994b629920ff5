//! quorum-proto
