//! Generates the tonic/prost code for `quorum.v1` and a file descriptor set that the server's
//! reflection service publishes (so that `grpcurl` works without the .proto files), and from
//! that descriptor set, serde implementations in the proto3 JSON mapping (pbjson) for the HTTP
//! face, which sends and takes the same messages as JSON.

use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "quorum/v1/common.proto",
    "quorum/v1/databases.proto",
    "quorum/v1/inference.proto",
    "quorum/v1/text2sql.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    // The vendored protoc keeps the build free of a system protoc install.
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    let descriptor_path = out_dir.join("quorum_v1_descriptor.bin");
    tonic_prost_build::configure()
        .file_descriptor_set_path(&descriptor_path)
        .compile_with_config(config, PROTOS, &["."])?;
    let descriptors = std::fs::read(&descriptor_path)?;
    pbjson_build::Builder::new()
        .register_descriptors(&descriptors)?
        // Every field is written, defaults included, so a program never meets a missing `id`.
        .emit_fields()
        // Cells and rows are written as plain JSON by hand (`src/plain_json.rs`).
        .exclude([".quorum.v1.Value", ".quorum.v1.Row"])
        .build(&[".quorum.v1"])?;
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    Ok(())
}
