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
    /// The part of `delay_hist` whose waits ended on a CPU leaving idle:
    /// a CPU sat idle (waking up, or left idle) while the task waited.
    /// The rest ended by taking a running task's turn: queueing.
    #[serde(default)]
    pub idle_end_hist: Vec<u64>,
    /// The part of `delay_hist` whose waits began with the task switched
    /// out still runnable (a slice end, a yield, a preemption), and their
    /// sum, ns. The rest began at a wakeup.
    #[serde(default)]
    pub preempted_hist: Vec<u64>,
    #[serde(default)]
    pub preempted_delay_ns: u64,
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
    /// How long the read took after `at_ns`: runs that ended in that time
    /// may be in the counters although they ended after `at_ns`, so a
    /// window's CPU time can be off by up to this much per CPU.
    #[serde(default)]
    pub read_ns: u64,
    /// Of the read (give or take a tick): the reading thread's time on a
    /// CPU, and runnable but not running. The rest of `read_ns` it slept.
    #[serde(default)]
    pub read_on_cpu_ns: u64,
    #[serde(default)]
    pub read_runnable_ns: u64,
}

/// The first two fields of a /proc/*/schedstat line: time on a CPU and
/// time waiting on a run queue (ns).
pub fn parse_schedstat(line: &str) -> Option<(u64, u64)> {
    let mut f = line.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((f.next()??, f.next()??))
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
            idle_end_hist: sub_vec(&self.idle_end_hist, &earlier.idle_end_hist),
            preempted_hist: sub_vec(&self.preempted_hist, &earlier.preempted_hist),
            preempted_delay_ns: self
                .preempted_delay_ns
                .saturating_sub(earlier.preempted_delay_ns),
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
        let longer = if self.read_ns >= earlier.read_ns {
            self
        } else {
            earlier
        };
        Window {
            wall_ns: self.at_ns.saturating_sub(earlier.at_ns),
            read_ns: longer.read_ns,
            read_on_cpu_ns: longer.read_on_cpu_ns,
            read_runnable_ns: longer.read_runnable_ns,
            groups,
            cpus,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub wall_ns: u64,
    /// The longer of the two snapshots' read times (Snapshot::read_ns).
    #[serde(default)]
    pub read_ns: u64,
    /// That read's split (Snapshot::read_on_cpu_ns, read_runnable_ns).
    #[serde(default)]
    pub read_on_cpu_ns: u64,
    #[serde(default)]
    pub read_runnable_ns: u64,
    pub groups: BTreeMap<u64, GroupCounters>,
    pub cpus: Vec<CpuCounters>,
}

/// The run a CPU is in at a read: since when, and whose. `start_ns` is 0
/// while the CPU is idle.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Running {
    pub start_ns: u64,
    pub cgid: u64,
}

/// Groups whose run ended on some CPU while the map was being read (the
/// CPU's current run differs between the reads before and after): their
/// entries must be read again, after `after`.
pub fn switched_during_read(before: &[Running], after: &[Running]) -> Vec<u64> {
    let mut ids: Vec<u64> = before
        .iter()
        .zip(after)
        .filter(|(b, a)| b.start_ns != 0 && b.start_ns != a.start_ns)
        .map(|(b, _)| b.cgid)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Adds to `groups` each CPU's run in progress up to `at_ns`, for the CPUs
/// whose run did not change while the map was read: for the others the
/// map, read again, already holds the whole run.
pub fn add_running(
    groups: &mut BTreeMap<u64, GroupCounters>,
    before: &[Running],
    after: &[Running],
    at_ns: u64,
    nr_buckets: usize,
) {
    let nr = before.len();
    for (cpu, (b, a)) in before.iter().zip(after).enumerate() {
        if b.start_ns == 0 || b.start_ns != a.start_ns || at_ns <= b.start_ns {
            continue;
        }
        let g = groups.entry(b.cgid).or_insert_with(|| GroupCounters {
            cpu_ns: vec![0; nr],
            delay_hist: vec![0; nr_buckets],
            ..Default::default()
        });
        if let Some(ns) = g.cpu_ns.get_mut(cpu) {
            *ns += at_ns - b.start_ns;
        }
    }
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

    /// A model of the BPF side: one CPU running one group's task from
    /// `start`; at `switch_at` the run ends and is charged to the map.
    /// Reads at any moment around the switch count the run exactly once.
    #[test]
    fn a_run_is_counted_once_whichever_way_the_reads_fall() {
        let (start, switch_at, next) = (1_000u64, 5_000u64, 5_000u64);
        let run = |t: u64| Running {
            start_ns: if t < switch_at { start } else { next },
            cgid: 7,
        };
        let charged = |t: u64| if t < switch_at { 0 } else { switch_at - start };
        // (first read of the CPU, map read, second read of the CPU, re-read)
        for (t_before, t_map, t_after) in [
            (2_000, 3_000, 4_000), // no switch while reading
            (2_000, 3_000, 6_000), // switch after the map was read
            (2_000, 6_000, 7_000), // switch before the map was read
        ] {
            let (b, a) = ([run(t_before)], [run(t_after)]);
            let mut groups = BTreeMap::new();
            groups.insert(7, group(&[charged(t_map)], 0));
            for id in switched_during_read(&b, &a) {
                groups.insert(id, group(&[charged(t_after)], 0));
            }
            let at = t_before;
            add_running(&mut groups, &b, &a, at, 2);
            let counted = groups[&7].cpu_ns[0];
            let truth = at.min(switch_at) - start;
            let slack = t_after - t_before;
            assert!(
                counted >= truth && counted <= truth + slack,
                "reads at {t_before}/{t_map}/{t_after}: counted {counted}, truth {truth}"
            );
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

    #[test]
    fn window_keeps_the_split_of_its_longer_read() {
        let a = Snapshot {
            read_ns: 900,
            read_on_cpu_ns: 100,
            read_runnable_ns: 700,
            ..Default::default()
        };
        let b = Snapshot {
            at_ns: 5_000,
            read_ns: 300,
            read_on_cpu_ns: 250,
            read_runnable_ns: 0,
            ..Default::default()
        };
        let w = b.since(&a);
        assert_eq!(
            (w.read_ns, w.read_on_cpu_ns, w.read_runnable_ns),
            (900, 100, 700)
        );
        let w = b.since(&Snapshot::default());
        assert_eq!(
            (w.read_ns, w.read_on_cpu_ns, w.read_runnable_ns),
            (300, 250, 0)
        );
    }

    #[test]
    fn schedstat_lines_parse_or_say_none() {
        assert_eq!(parse_schedstat("123456 7890 42\n"), Some((123456, 7890)));
        assert_eq!(parse_schedstat("123456\n"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        assert_eq!(parse_schedstat(""), None);
    }
}
