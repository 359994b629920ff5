//! Choosing the CPU kernel path for a process, and keeping candle's own kernels in step with it.
//!
//! The int8 GEMM reproduces candle's Q8_0 arithmetic bit for bit, and candle picks its
//! arithmetic from the CPU's best extension (once per process). When an operator forces a slower
//! path than the CPU's best (to test or benchmark the AVX2 path on an AVX-512 machine), candle
//! must be told too, through the variables candle 0.11 reads for this
//! (`MISTRALRS_FORCE_AVX2`, `MISTRALRS_FORCE_AVXVNNI`); otherwise a row computed by candle and
//! the same row computed by the int8 GEMM would differ.

use quorum_kernels::CpuPath;

use crate::ModelError;

/// candle 0.11's switch to its AVX2 kernels on a CPU with VNNI.
pub const CANDLE_FORCE_AVX2_VAR: &str = "MISTRALRS_FORCE_AVX2";
/// candle 0.11's switch to its AVX-VNNI kernels on a CPU with AVX-512 VNNI.
pub const CANDLE_FORCE_AVXVNNI_VAR: &str = "MISTRALRS_FORCE_AVXVNNI";

/// `requested` if this CPU can run it, else an error naming what it lacks; `None` detects the
/// fastest path.
pub fn resolve_cpu_path(requested: Option<CpuPath>) -> Result<CpuPath, ModelError> {
    match requested {
        None => Ok(CpuPath::detect()),
        Some(p) if p.supported() => Ok(p),
        Some(p) => Err(ModelError::Device {
            spec: format!("cpu, kernel path {p}"),
            detail: format!(
                "this CPU cannot run the `{p}` kernels (it supports: {})",
                CpuPath::supported_paths()
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// Makes candle's quantized kernels compute as on a CPU whose best extension is `path`'s.
/// `Candle` leaves candle alone (nothing then needs to match it).
///
/// # Safety
/// It changes the process environment: call it in `main` before any other thread starts and
/// before candle's first quantized matmul (see [`std::env::set_var`]).
pub unsafe fn align_candle_with(path: CpuPath) {
    let var = match path {
        CpuPath::Avx2 if CpuPath::AvxVnni.supported() || CpuPath::Avx512Vnni.supported() => {
            CANDLE_FORCE_AVX2_VAR
        }
        CpuPath::AvxVnni if CpuPath::Avx512Vnni.supported() => CANDLE_FORCE_AVXVNNI_VAR,
        _ => return,
    };
    // SAFETY: the caller guarantees that no other thread reads or writes the environment.
    unsafe { std::env::set_var(var, "1") };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_and_unsupported_requests() {
        assert_eq!(resolve_cpu_path(None).ok(), Some(CpuPath::detect()));
        assert_eq!(
            resolve_cpu_path(Some(CpuPath::Candle)).ok(),
            Some(CpuPath::Candle)
        );
        for p in CpuPath::ALL {
            let got = resolve_cpu_path(Some(p));
            assert_eq!(got.is_ok(), p.supported(), "{p}: {got:?}");
            if let Err(e) = got {
                assert!(e.to_string().contains(p.name()), "{e}");
            }
        }
    }
}
