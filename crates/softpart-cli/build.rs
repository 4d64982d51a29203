fn main() {
    softpart_core::build_info::emit_git_rev(env!("CARGO_MANIFEST_DIR"));
}
