//! Property tests: random workloads driven to completion.
