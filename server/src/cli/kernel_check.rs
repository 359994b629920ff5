//! `quorum kernel-check`: runs Quorum's CUDA kernels on a GPU against their host references
//! (the checks of `quorum_kernels::cuda::check`, every kernel in f32 and bf16) and says which
//! pass. For a new GPU, driver or build before serving on it; the device check script runs it.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use quorum_models::DeviceSpec;

#[derive(Args, Debug)]
pub struct KernelCheckArgs {
    /// Also write the results as JSON here: each check and `passed`/`total`.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn kernel_check(device: DeviceSpec, args: &KernelCheckArgs) -> Result<()> {
    if !matches!(device, DeviceSpec::Cuda(_)) {
        bail!("kernel-check runs the CUDA kernels: give --device cuda or cuda:N, not {device}");
    }
    let device = device.open()?;
    run(device, args)
}

#[cfg(feature = "cuda")]
fn run(device: candle_core::Device, args: &KernelCheckArgs) -> Result<()> {
    use anyhow::Context;
    use quorum_kernels::cuda::{DeviceRunner, KernelRunner, check};

    let runner = DeviceRunner::new(device)?;
    let reports = check::check_all(&runner);
    for r in &reports {
        println!("{r}");
    }
    let passed = reports.iter().filter(|r| r.failure.is_none()).count();
    println!(
        "kernel_tests: {passed}/{} on {}",
        reports.len(),
        runner.name()
    );
    if let Some(path) = &args.json {
        let checks: Vec<serde_json::Value> = reports
            .iter()
            .map(|r| {
                serde_json::json!({
                    "kernel": r.kernel,
                    "case": r.case,
                    "dtype": format!("{:?}", r.dtype),
                    "tolerance": check::tolerance(r.dtype),
                    "failure": r.failure,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "device": runner.name(),
            "passed": passed,
            "total": reports.len(),
            "checks": checks,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if passed != reports.len() {
        bail!(
            "{} of {} kernel checks failed",
            reports.len() - passed,
            reports.len()
        );
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn run(_device: candle_core::Device, _args: &KernelCheckArgs) -> Result<()> {
    // `DeviceSpec::open` already refuses CUDA in a build without it; this is never reached.
    bail!("this binary was built without the `cuda` feature")
}
