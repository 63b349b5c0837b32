//! Compiles `proto/` (the plugin protocol's messages this provider uses, and
//! go-plugin's controller) with protox: pure Rust, nothing to install.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    println!("cargo:rerun-if-changed={}", root.display());
    let fds = protox::compile(["tfplugin6.proto", "plugin.proto"], [&root])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
