//! The fast path's loops, read from the BPF source: no loop over every
//! CPU (or CPU-mask word) or every partition is reachable from the
//! callbacks that run at every scheduling event. What those loops looked
//! for comes from masks (the kernel's idle masks, the visitor masks, the
//! partitions with tasks queued) and is walked a bounded number of times.
//!
//! The reading is deliberately plain: comments and strings are dropped,
//! functions are found at brace depth 0, a call is a defined function's
//! name followed by `(`, and a loop is `for`, `while`, `bpf_for` or
//! `bpf_repeat` whose header names a bound that grows with the host.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// Callbacks called at every wakeup, queueing, dispatch, slice start and
/// end, and tick.
const PER_EVENT: [&str; 6] = [
    "softpart_select_cpu",
    "softpart_enqueue",
    "softpart_dispatch",
    "softpart_running",
    "softpart_stopping",
    "softpart_tick",
];

/// Loop bounds that grow with the number of CPUs.
const CPU_BOUNDS: [&str; 3] = ["nr_cpus", "SP_MAX_CPUS", "SP_CPU_WORDS"];
/// Loop bounds that grow with the number of partitions.
const PART_BOUNDS: [&str; 2] = ["nr_parts", "SP_MAX_PARTS"];

fn bpf_source() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bpf");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("src/bpf")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".bpf.h") || n.ends_with(".bpf.c"))
        })
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("read"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The source without comments, string and character literals, or
/// preprocessor lines.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if line_start && c == b'#' {
            // A directive, with its continuation lines.
            while i < b.len() && !(b[i] == b'\n' && (i == 0 || b[i - 1] != b'\\')) {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
            out.push(' ');
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        line_start = c == b'\n' || (line_start && c.is_ascii_whitespace());
        out.push(c as char);
        i += 1;
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The identifier that ends just before byte @end (whitespace skipped).
fn ident_before(s: &[u8], end: usize) -> Option<(usize, String)> {
    let mut e = end;
    while e > 0 && s[e - 1].is_ascii_whitespace() {
        e -= 1;
    }
    let mut st = e;
    while st > 0 && is_ident(s[st - 1]) {
        st -= 1;
    }
    (st < e).then(|| (st, String::from_utf8_lossy(&s[st..e]).into_owned()))
}

/// Index of the bracket closing the one at @open.
fn closing(s: &[u8], open: usize, o: u8, c: u8) -> usize {
    let mut depth = 0;
    for (i, &ch) in s.iter().enumerate().skip(open) {
        if ch == o {
            depth += 1;
        } else if ch == c {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    s.len()
}

/// Function name -> body, for every function defined at depth 0.
/// `BPF_STRUCT_OPS(name, ...)` and its sleepable form are named by their
/// first argument.
fn functions(src: &str) -> BTreeMap<String, String> {
    let s = src.as_bytes();
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'{' => {
                let end = closing(s, i, b'{', b'}');
                // The parameter list just before the body, if any.
                let mut e = i;
                while e > 0 && s[e - 1].is_ascii_whitespace() {
                    e -= 1;
                }
                if e > 0 && s[e - 1] == b')' {
                    let mut depth = 0;
                    let mut open = e - 1;
                    loop {
                        match s[open] {
                            b')' => depth += 1,
                            b'(' => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        if open == 0 {
                            break;
                        }
                        open -= 1;
                    }
                    if let Some((_, name)) = ident_before(s, open) {
                        let name = if name.starts_with("BPF_STRUCT_OPS") {
                            let args = &src[open + 1..e - 1];
                            args.split(',').next().unwrap_or("").trim().to_string()
                        } else {
                            name
                        };
                        out.insert(name, src[i..=end.min(s.len() - 1)].to_string());
                    }
                }
                i = end + 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// The names of defined functions that @body calls.
fn calls(body: &str, defined: &BTreeMap<String, String>) -> BTreeSet<String> {
    let s = body.as_bytes();
    let mut out = BTreeSet::new();
    for (i, &c) in s.iter().enumerate() {
        if c == b'('
            && let Some((_, name)) = ident_before(s, i)
            && defined.contains_key(&name)
        {
            out.insert(name);
        }
    }
    out
}

/// The headers of the loops in @body whose bound names one of @bounds.
fn loops_over(body: &str, bounds: &[&str]) -> Vec<String> {
    let s = body.as_bytes();
    let mut out = Vec::new();
    for (i, &c) in s.iter().enumerate() {
        if c != b'(' {
            continue;
        }
        let Some((_, kw)) = ident_before(s, i) else {
            continue;
        };
        if !["for", "while", "bpf_for", "bpf_repeat"].contains(&kw.as_str()) {
            continue;
        }
        let end = closing(s, i, b'(', b')');
        let header = &body[i..=end.min(s.len() - 1)];
        let names_bound = header
            .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
            .any(|w| bounds.contains(&w));
        if names_bound {
            out.push(format!("{kw}{header}"));
        }
    }
    out
}

/// Every function reachable from @roots, with the path that reaches it.
fn reachable(roots: &[&str], defined: &BTreeMap<String, String>) -> BTreeMap<String, Vec<String>> {
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut queue = VecDeque::new();
    for r in roots {
        assert!(
            defined.contains_key(*r),
            "callback {r} not found in the BPF source"
        );
        seen.insert(r.to_string(), vec![r.to_string()]);
        queue.push_back(r.to_string());
    }
    while let Some(f) = queue.pop_front() {
        let path = seen[&f].clone();
        for callee in calls(&defined[&f], defined) {
            if !seen.contains_key(&callee) {
                let mut p = path.clone();
                p.push(callee.clone());
                seen.insert(callee.clone(), p);
                queue.push_back(callee);
            }
        }
    }
    seen
}

/// Functions among @reach whose body loops over one of @bounds, with the
/// path to each and the loop's header.
fn offenders(
    reach: &BTreeMap<String, Vec<String>>,
    defined: &BTreeMap<String, String>,
    bounds: &[&str],
) -> BTreeMap<String, String> {
    reach
        .iter()
        .filter_map(|(f, path)| {
            let found = loops_over(&defined[f], bounds);
            (!found.is_empty()).then(|| {
                (
                    f.clone(),
                    format!("{}: {}", path.join(" -> "), found.join("; ")),
                )
            })
        })
        .collect()
}

#[test]
fn the_reader_finds_the_loops_that_are_there() {
    // init walks every CPU and partition: a reader that missed those
    // would pass anything.
    let defined = functions(&strip(&bpf_source()));
    assert!(
        defined.len() > 100,
        "only {} functions found",
        defined.len()
    );
    let init = reachable(&["softpart_init"], &defined);
    assert!(
        !offenders(&init, &defined, &CPU_BOUNDS).is_empty(),
        "no loop over CPUs found under init"
    );
    assert!(
        !offenders(&init, &defined, &PART_BOUNDS).is_empty(),
        "no loop over partitions found under init"
    );
    // And the call graph reaches through helpers.
    let events = reachable(&PER_EVENT, &defined);
    for f in [
        "pick_idle_cpu",
        "claim_visitor_cpu",
        "account_run",
        "queue_head",
    ] {
        assert!(events.contains_key(f), "{f} not reached from the callbacks");
    }
}

#[test]
fn no_loop_over_every_cpu_per_scheduling_event() {
    let defined = functions(&strip(&bpf_source()));
    let events = reachable(&PER_EVENT, &defined);
    let found = offenders(&events, &defined, &CPU_BOUNDS);
    assert!(
        found.is_empty(),
        "loops over every CPU reachable from the per-event callbacks:\n{}",
        found.values().cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn no_loop_over_every_partition_per_scheduling_event() {
    let defined = functions(&strip(&bpf_source()));
    let events = reachable(&PER_EVENT, &defined);
    let found = offenders(&events, &defined, &PART_BOUNDS);
    assert!(
        found.is_empty(),
        "loops over every partition reachable from the per-event callbacks:\n{}",
        found.values().cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn strip_drops_comments_strings_and_directives() {
    let s = strip(
        "#define A(x) \\\n  for (x)\n/* for (nr_cpus) */ int f(void) { return \"for (\"; }\n",
    );
    assert!(!s.contains("nr_cpus"));
    assert!(!s.contains("for"));
    assert!(s.contains("int f(void)"));
}
