//! Compiles `proto/` with the pure-Rust `protox` compiler, so a build needs nothing but cargo.
//!
//! Two outputs come from one parse: prost/tonic code for the gRPC binding, and the encoded
//! descriptor set (which keeps custom options such as `google.api.http`) for server reflection
//! and the descriptor-driven ProtoJSON of `src/protojson.rs`; from that set pbjson-build then
//! generates the serde code `src/protojson.rs` writes v1.0 JSON with (and reads it with,
//! first). The A2A v0.3 proto (package `a2a.v1`, for v0.3 clients) is compiled the same way,
//! into its own descriptor set.
use std::{env, path::Path, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out = PathBuf::from(env::var("OUT_DIR")?);
    let v1 = compile(&out, "lf/a2a/v1/a2a.proto", "a2a_descriptor.bin")?;
    compile(&out, "a2a/v1/a2a.proto", "a2a_v03_descriptor.bin")?;
    // Generated serde code for the v1.0 types: the canonical ProtoJSON the server writes.
    pbjson_build::Builder::new()
        .register_descriptors(&v1)?
        .out_dir(&out)
        .extern_path(".google.protobuf", "::pbjson_types")
        // ProtoJSON readers ignore unknown fields; `protojson::decode` reads with this code
        // first and must not send such a request to the slower descriptor reader.
        .ignore_unknown_fields()
        .build(&[".lf.a2a.v1"])?;
    let fields = timestamp_fields(&std::fs::read_to_string(out.join("lf.a2a.v1.rs"))?)?;
    rfc3339_timestamps(&out.join("lf.a2a.v1.serde.rs"), &fields)?;
    Ok(())
}

/// pbjson-types writes a Timestamp with a `+00:00` offset; ProtoJSON's form ends in `Z` (and
/// prost-reflect, which reads and writes the rest, writes that). It also reads a lower-case
/// `t` or `z`, which the descriptors refuse. So every Timestamp field is written through
/// `protojson::Rfc3339` and read through `protojson::ReadTimestamp` instead; the build fails
/// if the generated code moved.
fn rfc3339_timestamps(file: &Path, fields: &[(String, String)]) -> Result<(), Box<dyn std::error::Error>> {
    let mut code = std::fs::read_to_string(file)?;
    for (field, variable) in fields {
        let write = format!("struct_ser.serialize_field(\"{field}\", v)?;");
        let read = format!(" {variable}__ = map_.next_value()?;");
        let replacements = [
            (write, format!("struct_ser.serialize_field(\"{field}\", &crate::protojson::Rfc3339(v))?;")),
            (
                read,
                format!(
                    " {variable}__ = map_.next_value::<::std::option::Option<crate::protojson::ReadTimestamp>>()?.map(|t| t.0);"
                ),
            ),
        ];
        for (generated, ours) in replacements {
            if code.matches(&generated).count() != 1 {
                return Err(format!("pbjson-build's code for {field} no longer holds `{generated}`").into());
            }
            code = code.replace(&generated, &ours);
        }
    }
    std::fs::write(file, code)?;
    Ok(())
}

/// The Timestamp fields of the v1.0 types as (JSON name, Rust name), read from the generated
/// prost code, so a field added to the proto is routed too. A Timestamp in any other shape (a
/// list, a map) fails the build rather than slip past the routing.
fn timestamp_fields(prost_code: &str) -> Result<Vec<(String, String)>, Box<dyn std::error::Error>> {
    let mut fields = Vec::new();
    for line in prost_code.lines().map(str::trim).filter(|line| line.contains("pbjson_types::Timestamp")) {
        let name = line
            .strip_prefix("pub ")
            .and_then(|rest| rest.strip_suffix(": ::core::option::Option<::pbjson_types::Timestamp>,"));
        let Some(name) = name else {
            return Err(format!("a Timestamp field build.rs cannot route to protojson: `{line}`").into());
        };
        let mut words = name.split('_');
        let mut json: String = words.next().unwrap_or_default().to_owned();
        for word in words {
            let mut chars = word.chars();
            json.extend(chars.next().map(|c| c.to_ascii_uppercase()));
            json.push_str(chars.as_str());
        }
        fields.push((json, name.to_owned()));
    }
    if fields.is_empty() {
        return Err("no Timestamp field found in the generated prost code: has it moved?".into());
    }
    Ok(fields)
}

/// Compiles one proto file; returns its encoded descriptor set.
fn compile(out: &Path, file: &str, descriptor: &str) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
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
    Ok(descriptor_bytes)
}
