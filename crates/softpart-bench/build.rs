//! Lists the guest-test scenarios (guest-tests/*.toml) for checks/mod.rs,
//! so that a scenario added there is run without a hand-kept list; and
//! generates the CRI's messages (proto/cri-0.32.3/api.proto) for the CRI
//! client (src/cri.rs), without protoc. The generated file opens with
//! inner attributes and inner doc comments, which `include!` does not
//! take: they are dropped, and src/cri.rs allows what they allowed.

use std::fmt::Write;

fn main() {
    let dir =
        std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("guest-tests");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("reading guest-tests/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out = String::from("const SCENARIOS: &[(&str, &str)] = &[\n");
    for f in &files {
        let name = f.file_stem().unwrap().to_str().unwrap();
        writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            f.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out_dir.join("guest_scenarios.rs"), out).unwrap();

    let proto = "proto/cri-0.32.3/api.proto";
    println!("cargo:rerun-if-changed={proto}");
    let cri = out_dir.join("cri");
    std::fs::create_dir_all(&cri).unwrap();
    protobuf_codegen::Codegen::new()
        .pure()
        .out_dir(&cri)
        .include("proto/cri-0.32.3")
        .input(proto)
        .run()
        .expect("generating the CRI's messages");
    let api = cri.join("api.rs");
    let text = std::fs::read_to_string(&api).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("#![") && !l.trim_start().starts_with("//!"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&api, kept).unwrap();
}
