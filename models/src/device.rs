use candle_core::Device;

use crate::error::{ModelError, ModelResult};

/// Parses `cpu`, `cuda` or `cuda:N`. Asking for CUDA where there is none (a build without the
/// `cuda` feature, or no driver/GPU) is an error naming the reason, never a crash.
pub fn parse_device(spec: &str) -> ModelResult<Device> {
    let err = |detail: String| ModelError::Device {
        spec: spec.to_string(),
        detail,
    };
    match spec.trim() {
        "cpu" => Ok(Device::Cpu),
        s if s == "cuda" || s.starts_with("cuda:") => {
            let ordinal = match s.strip_prefix("cuda:") {
                Some(n) => n
                    .parse::<usize>()
                    .map_err(|_| err(format!("`{n}` is not a device ordinal")))?,
                None => 0,
            };
            if !candle_core::utils::cuda_is_available() {
                return Err(err(
                    "this binary was built without the `cuda` feature".to_string()
                ));
            }
            // The driver call can fail (no GPU, stub libcuda, bad ordinal): report it.
            Device::new_cuda(ordinal).map_err(|e| err(format!("cannot open CUDA device: {e}")))
        }
        other => Err(err(format!(
            "unknown device `{other}` (expected cpu, cuda or cuda:N)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_and_rejects_garbage() {
        assert!(parse_device("cpu").unwrap().is_cpu());
        assert_eq!(parse_device("tpu").unwrap_err().kind(), "device");
        assert_eq!(parse_device("cuda:x").unwrap_err().kind(), "device");
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_is_a_clear_error() {
        let err = parse_device("cuda:0").unwrap_err();
        assert!(
            err.to_string().contains("without the `cuda` feature"),
            "{err}"
        );
    }
}
