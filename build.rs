//! Compiles `proto/` with the pure-Rust `protox` compiler, so a build needs nothing but cargo.
//!
//! Two outputs come from one parse: prost/tonic code for the gRPC binding, and the encoded
//! descriptor set (which keeps custom options such as `google.api.http`) for server reflection
//! and the descriptor-driven ProtoJSON of `src/protojson.rs`. The A2A v0.3 proto (package
//! `a2a.v1`, for v0.3 clients) is compiled the same way, into its own descriptor set.
use std::{env, path::Path, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out = PathBuf::from(env::var("OUT_DIR")?);
    compile(&out, "lf/a2a/v1/a2a.proto", "a2a_descriptor.bin")?;
    compile(&out, "a2a/v1/a2a.proto", "a2a_v03_descriptor.bin")?;
    Ok(())
}

fn compile(out: &Path, file: &str, descriptor: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files([file])?;

    // `encode_file_descriptor_set` keeps extension options; `file_descriptor_set` drops them.
    let descriptor_bytes = compiler.encode_file_descriptor_set();
    std::fs::write(out.join(descriptor), &descriptor_bytes)?;

    let mut config = prost_build::Config::new();
    config.enable_type_names();
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        .compile_fds_with_config(compiler.file_descriptor_set(), config)?;
    Ok(())
}
