//! scx_softpart's fast-path event counters, in `enum sp_stat` order, with
//! what each counts: made at build time from the fast path's own list
//! (bpf/include/softpart_events.h). `scx_softpart --monitor` prints them;
//! the bench reads them back by name.

include!(concat!(env!("OUT_DIR"), "/events.rs"));

/// The events' names alone, in order.
pub const EVENT_NAMES: [&str; EVENTS.len()] = {
    let mut names = [""; EVENTS.len()];
    let mut i = 0;
    while i < EVENTS.len() {
        names[i] = EVENTS[i].0;
        i += 1;
    }
    names
};

/// Counted only with `scx_softpart --diag`.
pub fn is_diag(name: &str) -> bool {
    EVENTS
        .iter()
        .any(|(n, desc)| *n == name && desc.starts_with("diag:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_lower_case_and_described() {
        let mut seen = std::collections::BTreeSet::new();
        for (name, desc) in EVENTS {
            assert!(seen.insert(name), "{name} twice");
            assert_eq!(name, name.to_lowercase());
            assert!(!desc.is_empty(), "{name}");
        }
        assert!(EVENT_NAMES.contains(&"xnode_other"));
        assert!(is_diag("passed_crossed"));
        assert!(!is_diag("dispatch_steal"));
    }
}
