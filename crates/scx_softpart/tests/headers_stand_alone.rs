//! Every BPF header compiles on its own: each includes what it uses, so
//! one can be read, and moved, without knowing the order main.bpf.c
//! includes them in. Checked with the clang that builds the object
//! (`-fsyntax-only`, the scx and libbpf headers the build used).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The scx headers the build script unpacked beside the object.
fn scx_headers() -> PathBuf {
    Path::new(env!("OUT_DIR")).join("scx_utils-bpf_h")
}

/// libbpf's headers (bpf/bpf_helpers.h), from the libbpf-sys build
/// beside this package's in the same target directory.
fn libbpf_headers() -> PathBuf {
    let build = Path::new(env!("OUT_DIR"))
        .ancestors()
        .nth(2)
        .expect("OUT_DIR is target/<profile>/build/<package>/out")
        .to_path_buf();
    std::fs::read_dir(&build)
        .unwrap_or_else(|e| panic!("{}: {e}", build.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libbpf-sys-"))
        })
        .map(|p| p.join("out/include"))
        .find(|p| p.join("bpf/bpf_helpers.h").exists())
        .expect("no libbpf-sys build with bpf/bpf_helpers.h beside this package's")
}

/// clang's verdict on a file that includes `header` alone: None if it
/// compiles, else the errors.
fn compile_alone(header: &Path, dir: &Path, tmp: &Path) -> Option<String> {
    let name = header.file_name().unwrap().to_string_lossy();
    let src = tmp.join(format!("alone-{name}.c"));
    std::fs::write(&src, format!("#include \"{name}\"\n")).expect("write the probe");
    let scx = scx_headers();
    let extra = std::env::var("BPF_EXTRA_CFLAGS_PRE_INCL").unwrap_or_default();
    let out = Command::new("clang")
        .args([
            "--target=bpf",
            "-mcpu=v3",
            "-fsyntax-only",
            "-D__TARGET_ARCH_x86",
        ])
        .args(extra.split_whitespace())
        .arg("-I")
        .arg(&scx)
        .arg("-I")
        .arg(scx.join("arch/x86"))
        .arg("-I")
        .arg(scx.join("bpf-compat"))
        .arg("-I")
        .arg(libbpf_headers())
        .arg("-I")
        .arg(dir)
        .arg(&src)
        .output()
        .expect("run clang (scripts/env.sh puts the project's on PATH)");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

fn headers(dir: &Path) -> Vec<PathBuf> {
    let mut hs: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read src/bpf")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".bpf.h"))
        .collect();
    hs.sort();
    hs
}

#[test]
fn every_bpf_header_compiles_on_its_own() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bpf");
    let tmp = std::env::temp_dir().join(format!("softpart-headers-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("a scratch directory");
    let hs = headers(&dir);
    assert!(hs.len() > 10, "{} headers in {}", hs.len(), dir.display());
    let failed: Vec<String> = hs
        .iter()
        .filter_map(|h| {
            compile_alone(h, &dir, &tmp).map(|e| {
                let first = e.lines().find(|l| l.contains("error:")).unwrap_or("");
                format!("{}: {first}", h.file_name().unwrap().to_string_lossy())
            })
        })
        .collect();
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        failed.is_empty(),
        "headers that do not compile on their own (include what they use):\n{}",
        failed.join("\n")
    );
}

#[test]
fn a_header_missing_an_include_is_caught() {
    // The check can fail: a header that uses config.bpf.h's nr_cpus
    // without including it does not compile alone.
    let tmp = std::env::temp_dir().join(format!("softpart-headers-neg-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("a scratch directory");
    let bad = tmp.join("missing.bpf.h");
    std::fs::write(
        &bad,
        "static inline unsigned int cpus(void) { return nr_cpus; }\n",
    )
    .expect("write the header");
    let verdict = compile_alone(&bad, &tmp, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        verdict.is_some_and(|e| e.contains("nr_cpus")),
        "a header using nr_cpus without its include compiled alone"
    );
}
