//! Independent seeds derived from one: what keeps a run's data order, dropout masks and resumed
//! steps the same on every machine and thread count.

/// A seed for stream `index` of a run seeded with `seed` (SplitMix64's finalizer).
pub(crate) fn mix(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
