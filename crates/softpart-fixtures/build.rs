fn main() {
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_skel("src/bpf/abort.bpf.c", "bpf")
        .build()
        .unwrap();
}
