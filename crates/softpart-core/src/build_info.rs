//! For the binaries' build scripts: the commit they are built from, so that
//! `--version` names it.

use std::path::Path;

/// Sets `SOFTPART_GIT_REV` for the crate being built (the short commit id;
/// "unknown" outside a git checkout, e.g. from a source tarball) and reruns
/// the build script when the checkout moves to another commit.
/// `manifest_dir`: the crate's CARGO_MANIFEST_DIR.
pub fn emit_git_rev(manifest_dir: &str) {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(manifest_dir)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let rev = git(&["rev-parse", "--short=12", "HEAD"])
        .filter(|rev| !rev.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SOFTPART_GIT_REV={rev}");
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let logs = Path::new(&dir).join("logs/HEAD");
        println!("cargo:rerun-if-changed={}", logs.display());
    }
}
