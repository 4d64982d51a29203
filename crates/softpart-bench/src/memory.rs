//! What the bench reads of memory in the guest: the kernel's NUMA-balancing
//! counters (`/proc/vmstat`), and each group's memory per node and NUMA
//! balancing events from its memory controller.

use crate::plan::GroupMemory;
use softpart_core::memstat;
use std::collections::BTreeMap;
use std::path::Path;

/// The NUMA-balancing counters of `/proc/vmstat` a run reports.
pub const NUMA_VMSTAT: &[&str] = &[
    "numa_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
];

/// The NUMA-balancing counters now (empty on a kernel without NUMA
/// balancing).
pub fn numa_vmstat() -> BTreeMap<String, u64> {
    let all = memstat::parse_flat(&std::fs::read_to_string("/proc/vmstat").unwrap_or_default());
    all.into_iter()
        .filter(|(k, _)| NUMA_VMSTAT.contains(&k.as_str()))
        .collect()
}

/// Each counter's growth from `before` to `after` (those read both times).
pub fn growth(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.saturating_sub(*before.get(k)?))))
        .collect()
}

/// A group's `memory.stat`; None where its memory controller is off.
fn group_stat(cg: &Path) -> Option<BTreeMap<String, u64>> {
    let text = std::fs::read_to_string(cg.join("memory.stat")).ok()?;
    Some(memstat::parse_flat(&text))
}

/// A group's memory now, and its NUMA-balancing events since its cgroup
/// was made.
pub fn group_memory(cg: &Path) -> Option<GroupMemory> {
    let numa = std::fs::read_to_string(cg.join("memory.numa_stat")).ok()?;
    let stat = group_stat(cg);
    let events = |key: &str| stat.as_ref()?.get(key).copied();
    Some(GroupMemory {
        resident_per_node: memstat::resident_per_node(&memstat::parse_numa_stat(&numa)),
        numa_pte_updates: events("numa_pte_updates"),
        numa_hint_faults: events("numa_hint_faults"),
        numa_pages_migrated: events("numa_pages_migrated"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_covers_the_counters_read_both_times() {
        let a = BTreeMap::from([("numa_hint_faults".to_string(), 10), ("x".to_string(), 1)]);
        let b = BTreeMap::from([
            ("numa_hint_faults".to_string(), 25),
            ("numa_pages_migrated".to_string(), 4),
        ]);
        assert_eq!(
            growth(&a, &b),
            BTreeMap::from([("numa_hint_faults".to_string(), 15)])
        );
    }
}
