//! The NRI API's Rust types and ttrpc services, generated from the
//! vendored proto (no protoc needed). The generated files open with inner
//! attributes and inner doc comments, which `include!` does not take: they
//! are dropped here, and the module that includes them (src/proto.rs)
//! allows what they allowed.

use std::path::Path;

fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let proto = "proto/nri-0.6.1/api.proto";
    println!("cargo:rerun-if-changed={proto}");
    ttrpc_codegen::Codegen::new()
        .out_dir(&out)
        .include("proto/nri-0.6.1")
        .input(proto)
        .rust_protobuf()
        .customize(ttrpc_codegen::Customize {
            async_all: true,
            ..Default::default()
        })
        .run()
        .expect("generating the NRI API from its proto");
    for f in ["api.rs", "api_ttrpc.rs"] {
        strip_inner_attributes(&out.join(f));
    }
}

fn strip_inner_attributes(path: &Path) {
    let text = std::fs::read_to_string(path).expect("reading generated code");
    let kept: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("#![") && !l.trim_start().starts_with("//!"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(path, kept).expect("writing generated code");
}
