//! Compiles `proto/` with protox (pure Rust: no protoc to install) into
//! prost messages and tonic clients and servers, writes the descriptor
//! set the server's reflection serves, and the table of each `meson.v1`
//! method's API operation (its `(meson.v1.operation)` option).

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
    let mut compiler = protox::Compiler::new([&root])?;
    compiler.include_imports(true).open_files(&protos)?;
    let fds = compiler.file_descriptor_set();
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("operations.rs"),
        operations(&compiler.descriptor_pool())?,
    )?;
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

/// `SERVICES`, the `meson.v1` services by their full names, and
/// `OPERATIONS`: each of their methods' paths and the operation its
/// `(meson.v1.operation)` option names, sorted by path. A method without
/// one fails the build.
fn operations(pool: &prost_reflect::DescriptorPool) -> Result<String, Box<dyn std::error::Error>> {
    let option = pool
        .get_extension_by_name("meson.v1.operation")
        .ok_or("proto/meson/v1/options.proto does not define meson.v1.operation")?;
    let mut rows = Vec::new();
    let mut services = Vec::new();
    for service in pool.services().filter(|s| s.package_name() == "meson.v1") {
        services.push(format!("    {:?},\n", service.full_name()));
        for method in service.methods() {
            let path = format!("/{}/{}", service.full_name(), method.name());
            let options = method.options();
            let op = match options.get_extension(&option).as_str() {
                Some(op) if !op.is_empty() => op.to_owned(),
                _ => return Err(format!("{path} has no (meson.v1.operation) option").into()),
            };
            rows.push(format!("    ({path:?}, {op:?}),\n"));
        }
    }
    rows.sort();
    services.sort();
    Ok(format!(
        "/// The `meson.v1` services by their full names.\n\
         pub const SERVICES: &[&str] = &[\n{}];\n\n\
         /// Each `meson.v1` method's path and the API operation it is.\n\
         pub const OPERATIONS: &[(&str, &str)] = &[\n{}];\n",
        services.concat(),
        rows.concat()
    ))
}
