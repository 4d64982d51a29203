//! Lists the guest-test scenarios (guest-tests/*.toml) for checks/mod.rs,
//! so that a scenario added there is run without a hand-kept list.

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
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("guest_scenarios.rs");
    std::fs::write(dest, out).unwrap();
}
