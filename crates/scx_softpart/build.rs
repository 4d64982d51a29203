fn main() {
    softpart_core::build_info::emit_git_rev(env!("CARGO_MANIFEST_DIR"));
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_intf("src/bpf/intf.h", "bpf_intf.rs")
        .enable_skel("src/bpf/main.bpf.c", "bpf")
        .build()
        .unwrap();
}
