//! Makes the event counters' names and descriptions from the fast path's
//! own list (bpf/include/softpart_events.h), so that the BPF enum and the
//! names the control plane and the bench read by cannot drift apart.

use std::fmt::Write;

fn main() {
    let header = "../../bpf/include/softpart_events.h";
    println!("cargo:rerun-if-changed={header}");
    let text = std::fs::read_to_string(header).expect("reading softpart_events.h");
    let mut out = String::new();
    let mut n = 0;
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("SP_EVENT(") else {
            continue;
        };
        let (name, rest) = rest.split_once(',').expect("SP_EVENT(NAME, \"desc\")");
        let desc = rest
            .trim()
            .strip_prefix('"')
            .and_then(|d| d.rsplit_once('"'))
            .map(|(d, _)| d)
            .expect("SP_EVENT's description is a string");
        writeln!(
            out,
            "    (\"{}\", \"{}\"),",
            name.trim().to_lowercase(),
            desc
        )
        .unwrap();
        n += 1;
    }
    assert!(n > 0, "no SP_EVENT lines in {header}");
    let code = format!("pub const EVENTS: [(&str, &str); {n}] = [\n{out}];\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("events.rs");
    std::fs::write(dest, code).unwrap();
}
