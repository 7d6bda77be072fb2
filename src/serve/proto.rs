//! KEDA's `externalscaler` protocol, generated at build time from `proto/externalscaler.proto`.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("externalscaler");

/// The encoded descriptor set, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/externalscaler_descriptor.bin"));
