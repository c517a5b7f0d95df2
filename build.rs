//! Build script: compiles the minimal protobuf definitions in `proto/` with
//! prost-build, using the `protoc` binary vendored by `protoc-bin-vendored`
//! so that a fresh machine needs no system protoc.

use std::io::Result;

fn main() -> Result<()> {
    const PROTOS: [&str; 3] = [
        "proto/xla_data.proto",
        "proto/hlo.proto",
        "proto/tuning.proto",
    ];
    for p in PROTOS {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    let protoc = protoc_bin_vendored::protoc_bin_path().map_err(std::io::Error::other)?;
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc);
    // Deterministic iteration order for maps (frontend_attributes).
    config.btree_map(["."]);
    // Box the large, rarely present sub-messages of an instruction: the
    // instruction struct shrinks from ~2.8 KB to a few hundred bytes, which
    // makes decoding a module several times faster.
    for field in [
        "literal",
        "window",
        "convolution_dimension_numbers",
        "padding_config",
        "outfeed_shape",
        "dot_dimension_numbers",
        "gather_dimension_numbers",
        "scatter_dimension_numbers",
        "precision_config",
        "collective_device_list",
        "ragged_dot_dimension_numbers",
        "iota_collective_device_list",
    ] {
        config.boxed(format!(".xla.HloInstructionProto.{field}"));
    }
    config.compile_protos(&PROTOS, &["proto/"])?;
    Ok(())
}
