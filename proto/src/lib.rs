//! quorum-proto: the gRPC API of Quorum (`quorum.v1`), generated from `quorum/v1/*.proto`.
//!
//! Only the server, the tests and the benches depend on this crate: the library crates keep
//! their own domain types, and the server converts between the two in one module.

/// The `quorum.v1` package: messages, enums, clients and servers; every message and enum also
/// (de)serializes as JSON in the proto3 JSON mapping (field names in lowerCamelCase, the
/// proto names accepted too; enums by name; 64-bit integers as strings; every field written,
/// defaults included), except result cells and rows, which are plain JSON ([`plain_json`]).
pub mod v1 {
    tonic::include_proto!("quorum.v1");
    include!(concat!(env!("OUT_DIR"), "/quorum.v1.serde.rs"));
}

pub mod plain_json;

/// The encoded `FileDescriptorSet` of every `quorum.v1` file, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("quorum_v1_descriptor");
