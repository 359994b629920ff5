//! Where a model runs, as a typed value parsed once from `cpu`, `cuda` or `cuda:N` (flags and
//! config files alike), and opened only when a model is loaded.

use std::fmt;
use std::str::FromStr;

use candle_core::Device;
use serde::{Deserialize, Serialize};

use crate::error::{ModelError, ModelResult};

/// A device by name: the CPU or a CUDA device by ordinal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum DeviceSpec {
    #[default]
    Cpu,
    Cuda(usize),
}

impl DeviceSpec {
    pub fn is_cpu(self) -> bool {
        self == Self::Cpu
    }

    /// Opens the device. Asking for CUDA where there is none (a build without the `cuda`
    /// feature, or no driver or GPU) is an error naming the reason, never a crash.
    pub fn open(self) -> ModelResult<Device> {
        let err = |detail: String| ModelError::Device {
            spec: self.to_string(),
            detail,
        };
        match self {
            Self::Cpu => Ok(Device::Cpu),
            Self::Cuda(ordinal) => {
                if !candle_core::utils::cuda_is_available() {
                    return Err(err(
                        "this binary was built without the `cuda` feature".to_string()
                    ));
                }
                // The driver call can fail (no GPU, stub libcuda, bad ordinal): report it.
                Device::new_cuda(ordinal).map_err(|e| err(format!("cannot open CUDA device: {e}")))
            }
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = ModelError;
    fn from_str(spec: &str) -> ModelResult<Self> {
        let err = |detail: String| ModelError::Device {
            spec: spec.to_string(),
            detail,
        };
        match spec.trim() {
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            s => match s.strip_prefix("cuda:") {
                Some(n) => n
                    .parse::<usize>()
                    .map(Self::Cuda)
                    .map_err(|_| err(format!("`{n}` is not a device ordinal"))),
                None => Err(err(format!(
                    "unknown device `{s}` (expected cpu, cuda or cuda:N)"
                ))),
            },
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl From<DeviceSpec> for String {
    fn from(spec: DeviceSpec) -> Self {
        spec.to_string()
    }
}

impl TryFrom<String> for DeviceSpec {
    type Error = ModelError;
    fn try_from(spec: String) -> ModelResult<Self> {
        spec.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_once_and_prints_back() {
        assert_eq!("cpu".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cpu);
        assert_eq!(" cuda ".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(0));
        assert_eq!("cuda:3".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(3));
        assert_eq!(DeviceSpec::Cuda(3).to_string(), "cuda:3");
        assert!(DeviceSpec::Cpu.open().unwrap().is_cpu());
        assert_eq!("tpu".parse::<DeviceSpec>().unwrap_err().kind(), "device");
        assert_eq!("cuda:x".parse::<DeviceSpec>().unwrap_err().kind(), "device");
        let from_toml: DeviceSpec = serde_json::from_str("\"cuda:1\"").unwrap();
        assert_eq!(from_toml, DeviceSpec::Cuda(1));
        assert!(serde_json::from_str::<DeviceSpec>("\"gpu\"").is_err());
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_is_a_clear_error() {
        let err = DeviceSpec::Cuda(0).open().unwrap_err();
        assert!(
            err.to_string().contains("without the `cuda` feature"),
            "{err}"
        );
    }
}
