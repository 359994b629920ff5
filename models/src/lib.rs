//! quorum-models
