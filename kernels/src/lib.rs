//! quorum-kernels
