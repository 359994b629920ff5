//! Builds the CUDA kernels of `cuda/`: always for the CPU, through `cuda/cpu_emulation.h`, into
//! a static library the crate's tests run them from; and under the `cuda` feature for the
//! device, each `.cu` file to PTX with nvcc, embedded in the crate and loaded by the driver.
//!
//! The PTX targets `compute_80`, so one build runs on A100 (sm_80) and H100/H200 (sm_90): the
//! driver compiles it for the GPU it finds. A driver reads PTX only up to its own CUDA version,
//! so build with a toolkit no newer than the driver (docs/GPU.md).

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// The kernel files, each one PTX module.
const MODULES: [&str; 10] = [
    "norm",
    "activation",
    "rotary",
    "paged_attention",
    "prefill_attention",
    "causal_softmax",
    "fixed_order_matmul",
    "skinny_matmul",
    "lora",
    "sampling",
];

fn main() {
    println!("cargo:rerun-if-changed=cuda");
    cc::Build::new()
        .cpp(true)
        .std("c++20")
        .file("cuda/emulated.cpp")
        .warnings(true)
        .extra_warnings(true)
        .compile("quorum_cuda_emulated");
    if env::var_os("CARGO_FEATURE_CUDA").is_some() {
        compile_ptx();
    }
}

fn compile_ptx() {
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let nvcc = env::var_os("CUDA_HOME")
        .map(|home| PathBuf::from(home).join("bin").join("nvcc"))
        .filter(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from("nvcc"));
    for module in MODULES {
        let ptx = out.join(format!("{module}.ptx"));
        let result = Command::new(&nvcc)
            .args(["--ptx", "-O3", "-arch=compute_80", "-std=c++17", "-o"])
            .arg(&ptx)
            .arg(format!("cuda/{module}.cu"))
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} to compile the CUDA kernels ({e}); source ../shared/scripts/cuda-toolkit.sh or set CUDA_HOME",
                    nvcc.display()
                )
            });
        if !result.status.success() {
            panic!(
                "nvcc failed on cuda/{module}.cu:\n{}",
                String::from_utf8_lossy(&result.stderr)
            );
        }
    }
}
