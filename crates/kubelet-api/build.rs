//! Compiles the kubelet protos in `<workspace>/proto` with protox (a pure-Rust
//! protobuf compiler), so no system `protoc` is needed. The generated code is
//! written to `OUT_DIR` and never checked in.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = [
        "deviceplugin/v1beta1/api.proto",
        "pluginregistration/v1/api.proto",
        "dra/v1/api.proto",
        "dra/v1beta1/api.proto",
        "dra-health/v1/api.proto",
        "dra-health/v1alpha1/api.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={}", proto_root.join(file).display());
    }
    let descriptors = protox::compile(files, [&proto_root])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    // PodResources is proto package `v1` too (as is DRA health v1): its
    // code goes to a folder of its own so the two `v1.rs` stay apart.
    let pod_resources = "podresources/v1/api.proto";
    println!(
        "cargo:rerun-if-changed={}",
        proto_root.join(pod_resources).display()
    );
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?).join("podresources");
    std::fs::create_dir_all(&out_dir)?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .out_dir(out_dir)
        .compile_fds(protox::compile([pod_resources], [&proto_root])?)?;
    Ok(())
}
