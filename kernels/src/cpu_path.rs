//! Which instruction set the CPU int8 kernels run with, chosen once when a model loads.
//!
//! The int8 GEMM ([`crate::PackedQ8_0`]) has one implementation per x86 vector extension that
//! can compute its integer dot products exactly; every other CPU (aarch64, x86 without AVX2)
//! leaves quantized matmuls to candle's own kernels, which have NEON code there, rather than
//! emulating the x86 arithmetic one byte at a time. The binaries detect the path, name it at
//! start-up and let an operator force a slower one (for tests and benchmarks); this library only
//! takes it as a value and never reads the environment.

use std::fmt;
use std::str::FromStr;

/// A CPU kernel path, fastest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CpuPath {
    /// AVX-512 with VNNI (`vpdpbusd` on 512-bit vectors).
    Avx512Vnni,
    /// AVX-VNNI: `vpdpbusd` on 256-bit vectors (Intel client cores from Alder Lake, AMD Zen 5).
    AvxVnni,
    /// AVX2 and FMA: the dot products via `vpmaddubsw`/`vpmaddwd` (AMD Zen 2/3, older Intel).
    Avx2,
    /// No int8 GEMM: candle's quantized kernels do every matmul (aarch64 NEON, old x86).
    Candle,
}

impl CpuPath {
    /// Every path, fastest first.
    pub const ALL: [Self; 4] = [Self::Avx512Vnni, Self::AvxVnni, Self::Avx2, Self::Candle];

    /// The fastest path this CPU supports.
    pub fn detect() -> Self {
        Self::ALL
            .into_iter()
            .find(|p| p.supported())
            .unwrap_or(Self::Candle)
    }

    /// Whether this CPU can run the path.
    pub fn supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma");
            match self {
                Self::Avx512Vnni => {
                    avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vnni")
                }
                Self::AvxVnni => avx2 && has!("avxvnni"),
                Self::Avx2 => avx2,
                Self::Candle => true,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Self::Candle
        }
    }

    /// The paths this CPU supports, fastest first.
    pub fn supported_paths() -> Vec<Self> {
        Self::ALL.into_iter().filter(|p| p.supported()).collect()
    }

    /// The paths this CPU supports that have the int8 GEMMs, fastest first.
    pub fn int8_paths() -> Vec<Self> {
        Self::supported_paths()
            .into_iter()
            .filter(|p| p.has_int8_gemm())
            .collect()
    }

    /// Whether the int8 GEMM runs on this path (else candle's kernels do).
    pub fn has_int8_gemm(self) -> bool {
        self != Self::Candle
    }

    /// Whether candle 0.11, running on a CPU whose best extension is this path's, repacks a
    /// `[n, k]` Q8_0 weight into 16-column tiles (and then quantizes activations to Q8_K): `k` a
    /// multiple of 256, `n` of 16, with VNNI of either width. The int8 GEMM reproduces whichever
    /// arithmetic candle uses, so that its results equal candle's bit for bit.
    pub fn candle_repacks_q8_0(self, n: usize, k: usize) -> bool {
        matches!(self, Self::Avx512Vnni | Self::AvxVnni)
            && k > 0
            && k.is_multiple_of(256)
            && n.is_multiple_of(16)
    }

    /// The name used in flags, logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::Avx512Vnni => "avx512vnni",
            Self::AvxVnni => "avxvnni",
            Self::Avx2 => "avx2",
            Self::Candle => "candle",
        }
    }
}

impl fmt::Display for CpuPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A path name that is not one of [`CpuPath::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown CPU kernel path `{0}` (expected avx512vnni, avxvnni, avx2 or candle)")]
pub struct UnknownCpuPath(pub String);

impl FromStr for CpuPath {
    type Err = UnknownCpuPath;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownCpuPath(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        for p in CpuPath::ALL {
            assert_eq!(p.name().parse::<CpuPath>(), Ok(p));
        }
        assert_eq!("AVX2".parse::<CpuPath>(), Ok(CpuPath::Avx2));
        assert!("sse4".parse::<CpuPath>().is_err());
    }

    #[test]
    fn detection_picks_a_supported_path_and_candle_is_always_there() {
        let detected = CpuPath::detect();
        assert!(detected.supported());
        assert!(CpuPath::Candle.supported());
        let supported = CpuPath::supported_paths();
        assert_eq!(supported.first(), Some(&detected));
        assert_eq!(supported.last(), Some(&CpuPath::Candle));
    }

    #[test]
    fn candle_repacks_only_vnni_shapes() {
        assert!(CpuPath::Avx512Vnni.candle_repacks_q8_0(896, 4864));
        assert!(CpuPath::AvxVnni.candle_repacks_q8_0(4864, 1024));
        assert!(!CpuPath::Avx2.candle_repacks_q8_0(896, 4864));
        assert!(!CpuPath::Avx512Vnni.candle_repacks_q8_0(4864, 896));
        assert!(!CpuPath::Avx512Vnni.candle_repacks_q8_0(33, 4864));
        assert!(!CpuPath::AvxVnni.candle_repacks_q8_0(16, 0));
    }
}
