//! The dtypes a decoder computes in: f32 everywhere; bf16 and f16 only off the CPU, whose row
//! kernels are f32.

use candle_core::DType;

use crate::error::{ModelError, ModelResult};

/// Parses `f32`, `bf16` or `f16` (a config value or a flag).
pub fn parse_dtype(spec: &str) -> ModelResult<DType> {
    match spec.trim() {
        "f32" => Ok(DType::F32),
        "bf16" => Ok(DType::BF16),
        "f16" => Ok(DType::F16),
        other => Err(ModelError::Config {
            detail: format!("unknown dtype `{other}` (expected f32, bf16 or f16)"),
        }),
    }
}

/// Whether a decoder can compute in `dtype`, on the CPU or on a GPU.
pub fn check_dtype(on_cpu: bool, dtype: DType) -> ModelResult<()> {
    match dtype {
        DType::F32 => Ok(()),
        DType::BF16 | DType::F16 if !on_cpu => Ok(()),
        DType::BF16 | DType::F16 => Err(ModelError::Config {
            detail: format!(
                "{} weights need a GPU; on the CPU the decoder computes in f32",
                dtype.as_str()
            ),
        }),
        other => Err(ModelError::Config {
            detail: format!(
                "a decoder cannot compute in {} (f32, bf16 or f16)",
                other.as_str()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_is_refused_on_the_cpu_and_unknown_names_everywhere() {
        assert_eq!(parse_dtype("bf16").unwrap(), DType::BF16);
        assert_eq!(parse_dtype(" f32").unwrap(), DType::F32);
        let err = parse_dtype("fp8").unwrap_err().to_string();
        assert!(err.contains("unknown dtype `fp8`"), "{err}");
        check_dtype(true, DType::F32).unwrap();
        let err = check_dtype(true, DType::BF16).unwrap_err().to_string();
        assert!(err.contains("bf16 weights need a GPU"), "{err}");
        assert!(check_dtype(true, DType::U8).is_err());
    }
}
