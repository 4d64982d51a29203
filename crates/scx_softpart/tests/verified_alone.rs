//! The functions the BPF source marks `__verified_alone` (verify.bpf.h)
//! are, in the object the scheduler loads, global functions of default
//! visibility: what the verifier needs to check each of them once, on its
//! own, instead of again at every call in the fast path's loops. libbpf
//! turns a global function of hidden visibility into a static one at load,
//! and the compiler copies an inlined one into its callers; either way the
//! verifier's work at load would again grow with the loops' states.
//!
//! The object is read as ELF64 (little-endian, as clang writes BPF for
//! x86): its symbol table gives each function's binding, type and
//! visibility.

use std::path::Path;

const STB_GLOBAL: u8 = 1;
const STT_FUNC: u8 = 2;
const STV_DEFAULT: u8 = 0;
const SHT_SYMTAB: u32 = 2;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> usize {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
}

/// A function symbol: (binding, type, visibility).
#[derive(Debug, PartialEq)]
struct Sym {
    bind: u8,
    kind: u8,
    vis: u8,
}

/// The object's symbols by name.
fn symbols(elf: &[u8]) -> Vec<(String, Sym)> {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not ELF64");
    assert_eq!(elf[5], 1, "not little-endian");
    let shoff = u64_at(elf, 0x28);
    let shentsize = usize::from(u16_at(elf, 0x3a));
    let shnum = usize::from(u16_at(elf, 0x3c));
    let section = |i: usize| &elf[shoff + i * shentsize..shoff + (i + 1) * shentsize];
    let symtab = (0..shnum)
        .map(section)
        .find(|s| u32_at(s, 4) == SHT_SYMTAB)
        .expect("a symbol table");
    let strtab = section(u32_at(symtab, 0x28) as usize);
    let (str_off, str_size) = (u64_at(strtab, 0x18), u64_at(strtab, 0x20));
    let strings = &elf[str_off..str_off + str_size];
    let (off, size, entsize) = (
        u64_at(symtab, 0x18),
        u64_at(symtab, 0x20),
        u64_at(symtab, 0x38),
    );
    (0..size / entsize)
        .map(|i| {
            let s = &elf[off + i * entsize..off + (i + 1) * entsize];
            let name_at = u32_at(s, 0) as usize;
            let end = strings[name_at..]
                .iter()
                .position(|&c| c == 0)
                .map_or(strings.len(), |n| name_at + n);
            let name = String::from_utf8_lossy(&strings[name_at..end]).into_owned();
            let sym = Sym {
                bind: s[4] >> 4,
                kind: s[4] & 0xf,
                vis: s[5] & 0x3,
            };
            (name, sym)
        })
        .collect()
}

/// The names the source defines with `__verified_alone`.
fn marked() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bpf");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/bpf") {
        let path = entry.expect("entry").path();
        if path.file_name().and_then(|n| n.to_str()) == Some("verify.bpf.h") {
            continue;
        }
        let src = std::fs::read_to_string(&path).expect("read");
        for line in src.lines() {
            let Some(rest) = line.strip_prefix("__verified_alone ") else {
                continue;
            };
            let name = rest
                .split('(')
                .next()
                .and_then(|head| head.split_whitespace().last())
                .expect("a function definition");
            names.push(name.trim_start_matches('*').to_string());
        }
    }
    names.sort();
    names
}

#[test]
fn marked_functions_are_global_in_the_object() {
    let obj = Path::new(env!("OUT_DIR")).join("bpf.bpf.o");
    let elf = std::fs::read(&obj).unwrap_or_else(|e| panic!("{}: {e}", obj.display()));
    let syms = symbols(&elf);
    let names = marked();
    assert!(
        names.len() >= 5,
        "expected the walks' functions to be marked, found {names:?}"
    );
    let wrong: Vec<String> = names
        .iter()
        .filter_map(|name| {
            let found = syms.iter().find(|(n, _)| n == name).map(|(_, s)| s);
            let want = Sym {
                bind: STB_GLOBAL,
                kind: STT_FUNC,
                vis: STV_DEFAULT,
            };
            match found {
                Some(s) if *s == want => None,
                Some(s) => Some(format!(
                    "{name}: binding {}, type {}, visibility {} (want global function of default visibility)",
                    s.bind, s.kind, s.vis
                )),
                None => Some(format!("{name}: not in the object (inlined?)")),
            }
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_reader_tells_static_from_global() {
    // The same reading names the object's static functions (binding local)
    // and its struct_ops programs (global): it can tell them apart.
    let obj = Path::new(env!("OUT_DIR")).join("bpf.bpf.o");
    let syms = symbols(&std::fs::read(obj).expect("read the object"));
    let get = |name: &str| {
        syms.iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s)
            .unwrap_or_else(|| panic!("{name} not in the object"))
    };
    assert_eq!(get("softpart_dispatch").bind, STB_GLOBAL);
    assert_eq!(get("softpart_dispatch").kind, STT_FUNC);
    assert_eq!(
        get("set_idle_since").bind,
        0,
        "a static __noinline function"
    );
}
