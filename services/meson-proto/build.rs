//! Compiles `proto/` with protox (pure Rust: no protoc to install) into
//! prost messages and tonic clients and servers, and writes the descriptor
//! set the server's reflection serves.

use prost::Message;

/// The cluster-autoscaler's protocol and what it imports, beside meson's
/// own `meson/v1/*.proto` (found by listing: a new resource's file needs
/// no registration here).
const OTHERS: &[&str] = &["externalgrpc/externalgrpc.proto", "k8s/core.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut protos: Vec<String> = std::fs::read_dir(root.join("meson/v1"))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".proto"))
        .map(|n| format!("meson/v1/{n}"))
        .collect();
    protos.sort();
    protos.extend(OTHERS.iter().map(|s| s.to_string()));
    let fds = protox::compile(&protos, [&root])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // One descriptor set per server: each reflects only what it serves
    // (and the well-known types those files import).
    let subset = |packages: &[&str]| {
        let mut set = fds.clone();
        set.file.retain(|f| {
            let p = f.package();
            p.starts_with("google.protobuf") || packages.contains(&p)
        });
        set.encode_to_vec()
    };
    std::fs::write(out.join("meson.bin"), subset(&["meson.v1"]))?;
    std::fs::write(
        out.join("externalgrpc.bin"),
        subset(&[
            "clusterautoscaler.cloudprovider.v1.externalgrpc",
            "k8s.io.api.core.v1",
        ]),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
