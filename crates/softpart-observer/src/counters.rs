//! Raw counters as the BPF side keeps them, and windows between two reads.
//! Pure data: every figure a report shows is derived here or in report.rs.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupCounters {
    /// CPU time on each CPU, ns.
    pub cpu_ns: Vec<u64>,
    /// Migrations by distance: SMT sibling, same LLC, same node, cross-node.
    pub migrations: [u64; 4],
    /// Run-delay histogram (layout: softpart_core::hist).
    pub delay_hist: Vec<u64>,
    pub delay_ns: u64,
    pub nr_delays: u64,
    /// Longest single run delay since the group appeared (not a window's:
    /// a maximum cannot be subtracted).
    #[serde(default)]
    pub max_delay_ns: u64,
    /// Runs begun on a CPU outside the thread's allowed set, and their CPU
    /// time: a scheduler must keep both at zero.
    #[serde(default)]
    pub nr_outside: u64,
    #[serde(default)]
    pub outside_ns: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuCounters {
    pub idle_ns: u64,
    /// Idle while at least one task (anywhere) waited to run.
    pub idle_waiting_ns: u64,
}

/// Everything the observer counted up to `at_ns` (CLOCK_MONOTONIC), with the
/// intervals still running at that instant included.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub at_ns: u64,
    /// Keyed by cgroup v2 id.
    pub groups: BTreeMap<u64, GroupCounters>,
    pub cpus: Vec<CpuCounters>,
    /// Events lost because the group table was full.
    pub groups_full: u64,
}

fn sub_vec(a: &[u64], b: &[u64]) -> Vec<u64> {
    a.iter()
        .enumerate()
        .map(|(i, &x)| x.saturating_sub(b.get(i).copied().unwrap_or(0)))
        .collect()
}

impl GroupCounters {
    pub fn minus(&self, earlier: &GroupCounters) -> GroupCounters {
        let mut migrations = [0; 4];
        for (i, m) in migrations.iter_mut().enumerate() {
            *m = self.migrations[i].saturating_sub(earlier.migrations[i]);
        }
        GroupCounters {
            cpu_ns: sub_vec(&self.cpu_ns, &earlier.cpu_ns),
            migrations,
            delay_hist: sub_vec(&self.delay_hist, &earlier.delay_hist),
            delay_ns: self.delay_ns.saturating_sub(earlier.delay_ns),
            nr_delays: self.nr_delays.saturating_sub(earlier.nr_delays),
            max_delay_ns: self.max_delay_ns,
            nr_outside: self.nr_outside.saturating_sub(earlier.nr_outside),
            outside_ns: self.outside_ns.saturating_sub(earlier.outside_ns),
        }
    }

    pub fn total_cpu_ns(&self) -> u64 {
        self.cpu_ns.iter().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.total_cpu_ns() == 0 && self.nr_delays == 0 && self.migrations == [0; 4]
    }
}

impl Snapshot {
    /// The counts between `earlier` and `self`. Groups that did nothing in
    /// the window are left out.
    pub fn since(&self, earlier: &Snapshot) -> Window {
        let empty = GroupCounters::default();
        let groups = self
            .groups
            .iter()
            .map(|(id, g)| (*id, g.minus(earlier.groups.get(id).unwrap_or(&empty))))
            .filter(|(_, g)| !g.is_empty())
            .collect();
        let cpus = self
            .cpus
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let e = earlier.cpus.get(i).copied().unwrap_or_default();
                CpuCounters {
                    idle_ns: c.idle_ns.saturating_sub(e.idle_ns),
                    idle_waiting_ns: c.idle_waiting_ns.saturating_sub(e.idle_waiting_ns),
                }
            })
            .collect();
        Window {
            wall_ns: self.at_ns.saturating_sub(earlier.at_ns),
            groups,
            cpus,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub wall_ns: u64,
    pub groups: BTreeMap<u64, GroupCounters>,
    pub cpus: Vec<CpuCounters>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(cpu: &[u64], delays: u64) -> GroupCounters {
        GroupCounters {
            cpu_ns: cpu.to_vec(),
            migrations: [1, 2, 3, 4],
            delay_hist: vec![delays, 0],
            delay_ns: delays * 10,
            nr_delays: delays,
            ..Default::default()
        }
    }

    #[test]
    fn window_subtracts_and_drops_idle_groups() {
        let mut a = Snapshot {
            at_ns: 1_000,
            ..Default::default()
        };
        a.groups.insert(1, group(&[10, 20], 1));
        a.groups.insert(2, group(&[5, 5], 1));
        let mut b = a.clone();
        b.at_ns = 3_000;
        b.groups.insert(1, group(&[110, 20], 4));
        b.groups.insert(3, group(&[0, 7], 0));
        let w = b.since(&a);
        assert_eq!(w.wall_ns, 2_000);
        assert_eq!(w.groups[&1].cpu_ns, vec![100, 0]);
        assert_eq!(w.groups[&1].nr_delays, 3);
        assert!(!w.groups.contains_key(&2), "group 2 did nothing");
        assert_eq!(
            w.groups[&3].total_cpu_ns(),
            7,
            "a new group counts from zero"
        );
    }
}
