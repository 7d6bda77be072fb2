//! Compiles KEDA's external scaler protocol with a pure-Rust protobuf compiler (protox), so a
//! fresh machine needs no system `protoc`; the descriptor set also feeds gRPC reflection.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/externalscaler.proto");
    let fds = protox::compile(["proto/externalscaler.proto"], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let bytes = prost::Message::encode_to_vec(&fds);
    std::fs::write(out.join("externalscaler_descriptor.bin"), bytes)?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
