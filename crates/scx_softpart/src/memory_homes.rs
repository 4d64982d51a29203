//! Homes from memory for the tenants nobody gave one (no rule, no
//! `softpart prefer`, no balancer, on itself or above it): under sched_ext
//! the kernel's NUMA balancing no longer brings a task and its memory
//! together, so the control plane does it here
//! (softpart_core::memory_home decides; memory.rs then brings the memory).
//!
//! A tenant is a leaf cgroup (where processes are) holding at least
//! MIN_TENANT_BYTES that can move. Its memory per node comes from its
//! memory.numa_stat, and where its threads last ran from their
//! /proc/TID/stat (only while its memory is spread). Each is looked at
//! every LOOK_EVERY, and at most READS_PER_PASS a pass: at thousands of
//! cgroups a look comes around less often, never a pass longer.

use crate::Scheduler;
use log::info;
use softpart_core::memory_home::{self, Reason};
use softpart_core::{config, memstat};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// How often a tenant is looked at: its memory moves at a bounded rate,
/// and a look reads a file the kernel builds from per-node counters.
const LOOK_EVERY: Duration = Duration::from_secs(5);
/// A cgroup under MIN_TENANT_BYTES: a tenant starting up reaches it within
/// seconds, and its first home should not wait for a full LOOK_EVERY.
const LOOK_SMALL: Duration = Duration::from_secs(2);
/// While its memory is spread: its threads' CPU time is measured from one
/// look to the next, so the next comes at the next pass (a second of run
/// time, as long as the shortest period of NUMA balancing's scan).
const LOOK_SPREAD: Duration = Duration::from_secs(1);
/// A cgroup without the memory controller: looked at again after this.
const LOOK_UNREADABLE: Duration = Duration::from_secs(30);
/// The most tenants looked at in one pass.
const READS_PER_PASS: usize = 32;
/// Homes from memory hold at most 1/MAX_SHARE_OF_TABLE of the home ids.
const MAX_SHARE_OF_TABLE: usize = 4;
/// The most threads of one tenant whose last CPU is read in a look.
const THREADS_SAMPLED: usize = 64;

#[derive(Debug, Default)]
struct Look {
    next: Option<Instant>,
    /// Each sampled thread's CPU time at the last look.
    thread_run: std::collections::HashMap<u32, u64>,
}

/// A home given from memory: its node and why.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Given {
    pub node: usize,
    pub reason: Reason,
}

#[derive(Debug, Default)]
pub(crate) struct MemoryHomes {
    pub given: BTreeMap<u64, Given>,
    looks: BTreeMap<u64, Look>,
    /// Where the last pass stopped in cgroup id order.
    cursor: u64,
    /// The leaf cgroups by id, from the last walk of the tree; None: the
    /// tree changed since.
    leaves: Option<Vec<(u64, String)>>,
    /// Cgroups whose home an operator cleared (`softpart prefer --clear`):
    /// none from memory for them while they live.
    declined: HashSet<u64>,
}

impl MemoryHomes {
    /// The cgroup tree changed: the leaves are found again at the next
    /// pass, and looks at cgroups that are gone are forgotten.
    pub fn tree_changed(&mut self, live: &std::collections::HashMap<u64, String>) {
        self.leaves = None;
        self.looks.retain(|id, _| live.contains_key(id));
        self.declined.retain(|id| live.contains_key(id));
    }

    /// An operator cleared the cgroup's home: a home from its memory
    /// would undo that within seconds, so it gets none.
    pub fn decline(&mut self, cgid: u64) {
        self.declined.insert(cgid);
    }

    /// Someone else set or cleared the cgroup's home: it is theirs now.
    pub fn forget(&mut self, cgid: u64) {
        self.given.remove(&cgid);
    }

    /// Words for `softpart list`.
    pub fn source(&self, cgid: u64) -> Option<String> {
        let g = self.given.get(&cgid)?;
        Some(match g.reason {
            Reason::Memory(share) => {
                format!("memory: {:.0}% of it on node {}", 100.0 * share, g.node)
            }
            Reason::Threads => format!("memory: spread, its threads settled on node {}", g.node),
        })
    }
}

/// Up to THREADS_SAMPLED threads of the cgroup: each one's id, the node
/// it last ran on (/proc/TID/stat's 39th field) and its CPU time so far
/// (/proc/TID/schedstat's first).
fn thread_runs(dir: &Path, node_of: impl Fn(usize) -> Option<usize>) -> Vec<(u32, usize, u64)> {
    let Ok(text) = std::fs::read_to_string(dir.join("cgroup.threads")) else {
        return Vec::new();
    };
    text.split_whitespace()
        .take(THREADS_SAMPLED)
        .filter_map(|tid| {
            let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
            let cpu = softpart_core::pending::last_cpu_of(&stat)?;
            let sched = std::fs::read_to_string(format!("/proc/{tid}/schedstat")).ok()?;
            let run: u64 = sched.split_whitespace().next()?.parse().ok()?;
            Some((tid.parse().ok()?, node_of(cpu)?, run))
        })
        .collect()
}

/// The cgroups no other cgroup is below (where processes are), root
/// excluded, sorted by id.
fn leaves(paths: &std::collections::HashMap<u64, String>) -> Vec<(u64, String)> {
    let parents: HashSet<&str> = paths
        .values()
        .filter_map(|l| l.rfind('/').map(|i| if i == 0 { "/" } else { &l[..i] }))
        .collect();
    let mut out: Vec<(u64, String)> = paths
        .iter()
        .filter(|(_, l)| l.as_str() != "/" && !parents.contains(l.as_str()))
        .map(|(id, l)| (*id, l.clone()))
        .collect();
    out.sort_unstable();
    out
}

/// Whether `label` or a cgroup above it is in `homed`.
fn homed_at_or_above(label: &str, homed: &HashSet<&str>) -> bool {
    let mut at = label;
    loop {
        if homed.contains(at) {
            return true;
        }
        match at.rfind('/') {
            Some(0) | None => return homed.contains("/"),
            Some(i) => at = &at[..i],
        }
    }
}

impl Scheduler<'_> {
    /// One pass: the tenants due are looked at, and each gets, keeps,
    /// changes or loses its home from memory.
    pub(crate) fn home_by_memory(&mut self, now: Instant) {
        if !self.memory.on() || self.machine.nodes.len() < 2 {
            return;
        }
        // Homes given by anyone but this rule, by label.
        let homed: HashSet<&str> = self
            .cgroup_groups
            .iter()
            .filter(|(id, _)| !self.memory_homes.given.contains_key(id))
            .map(|(_, l)| l.as_str())
            .collect();
        if self.memory_homes.leaves.is_none() {
            self.memory_homes.leaves = Some(leaves(&self.cgroup_paths));
        }
        let leaves = self.memory_homes.leaves.as_deref().unwrap_or_default();
        // Homes from memory below a home someone gave now would override
        // it (the nearest home above a task wins): they go; so do those
        // of cgroups that are gone or no longer leaves.
        let stale: Vec<u64> = self
            .memory_homes
            .given
            .keys()
            .filter(|id| {
                leaves
                    .binary_search_by_key(id, |(i, _)| i)
                    .map_or(true, |at| homed_at_or_above(&leaves[at].1, &homed))
            })
            .copied()
            .collect();
        // The leaves due, in id order from where the last pass stopped.
        let start = leaves.partition_point(|(id, _)| *id <= self.memory_homes.cursor);
        let mut due: Vec<(u64, String)> = Vec::new();
        for (id, label) in leaves[start..].iter().chain(&leaves[..start]) {
            if due.len() >= READS_PER_PASS {
                break;
            }
            let next = self.memory_homes.looks.get(id).and_then(|l| l.next);
            if next.is_some_and(|at| at > now)
                || self.memory_homes.declined.contains(id)
                || homed_at_or_above(label, &homed)
            {
                continue;
            }
            due.push((*id, label.clone()));
        }
        drop(homed);
        for cgid in stale {
            self.memory_homes.forget(cgid);
            if self.cgroup_groups.contains_key(&cgid) {
                self.clear_cgroup_home(cgid);
            }
        }
        if let Some((last, _)) = due.last() {
            self.memory_homes.cursor = *last;
        }
        for (cgid, label) in due {
            self.look_at_memory(cgid, &label, now);
        }
    }

    fn look_at_memory(&mut self, cgid: u64, label: &str, now: Instant) {
        let dir = Path::new(config::CGROUP_ROOT).join(label.trim_start_matches('/'));
        // memory.current (one counter; it counts page cache and kernel
        // memory too, so it is never below what can move) first: most
        // cgroups of a host are small, and memory.numa_stat is built from
        // every node's counters.
        let charged: Option<u64> = std::fs::read_to_string(dir.join("memory.current"))
            .ok()
            .and_then(|t| t.trim().parse().ok());
        let per_node = match charged {
            Some(c) if c < memory_home::MIN_TENANT_BYTES => Some(Vec::new()),
            _ => std::fs::read_to_string(dir.join("memory.numa_stat"))
                .ok()
                .map(|t| memstat::resident_per_node(&memstat::parse_numa_stat(&t))),
        };
        let current = self.memory_homes.given.get(&cgid).map(|g| g.node);
        let unreadable = per_node.is_none();
        let Some(per_node) =
            per_node.filter(|p| p.iter().sum::<u64>() >= memory_home::MIN_TENANT_BYTES)
        else {
            // A cgroup too small now may be a tenant starting up.
            let after = if unreadable {
                LOOK_UNREADABLE
            } else {
                LOOK_SMALL
            };
            self.memory_homes.looks.entry(cgid).or_default().next = Some(now + after);
            if current.is_some() {
                self.drop_memory_home(cgid, label, "it holds too little memory now");
            }
            return;
        };
        let total: u64 = per_node.iter().sum();
        let spread = per_node
            .iter()
            .all(|&b| (b as f64) < memory_home::MOSTLY * total as f64);
        let settled = if spread {
            let runs = thread_runs(&dir, |c| self.machine.node_of(c));
            let look = self.memory_homes.looks.entry(cgid).or_default();
            let ran: Vec<(usize, u64)> = runs
                .iter()
                .filter_map(|(tid, node, ns)| {
                    Some((*node, ns.saturating_sub(*look.thread_run.get(tid)?)))
                })
                .collect();
            look.thread_run = runs.iter().map(|(tid, _, ns)| (*tid, *ns)).collect();
            memory_home::settled_on(&ran)
        } else {
            None
        };
        self.memory_homes.looks.entry(cgid).or_default().next =
            Some(now + if spread { LOOK_SPREAD } else { LOOK_EVERY });
        match memory_home::choose(&per_node, current, settled) {
            Some((node, reason)) if Some(node) != current => {
                let Some(cpus) = self.machine.nodes.get(node).cloned() else {
                    return;
                };
                // Homes from memory take at most a quarter of the home
                // table: the rest stays for the homes operators give.
                if current.is_none()
                    && self.memory_homes.given.len() >= self.homes.capacity() / MAX_SHARE_OF_TABLE
                {
                    log::debug!(
                        "memory: cgroup {label}: no home from memory, a quarter of the home table has one"
                    );
                    return;
                }
                match self.set_cgroup_home(cgid, label.to_string(), &cpus, None) {
                    Ok(()) => {
                        self.memory_homes.given.insert(cgid, Given { node, reason });
                        info!(
                            "memory: cgroup {label} prefers node {node} ({})",
                            self.memory_homes.source(cgid).unwrap_or_default()
                        );
                    }
                    Err(e) => log::debug!("memory: cgroup {label}: no home from memory: {e:#}"),
                }
            }
            Some((node, reason)) => {
                self.memory_homes.given.insert(cgid, Given { node, reason });
            }
            None if current.is_some() => {
                self.drop_memory_home(cgid, label, "its memory is spread and its threads too")
            }
            None => {}
        }
    }

    fn drop_memory_home(&mut self, cgid: u64, label: &str, why: &str) {
        self.memory_homes.forget(cgid);
        self.clear_cgroup_home(cgid);
        info!("memory: cgroup {label} has no home from memory any more: {why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cgroup an operator cleared is declined until it is gone.
    #[test]
    fn a_cleared_cgroup_is_declined_while_it_lives() {
        let mut m = MemoryHomes::default();
        m.decline(7);
        let live: std::collections::HashMap<u64, String> =
            [(7, "/a".to_string())].into_iter().collect();
        m.tree_changed(&live);
        assert!(m.declined.contains(&7));
        m.tree_changed(&Default::default());
        assert!(!m.declined.contains(&7));
    }

    #[test]
    fn leaves_are_where_no_cgroup_is_below() {
        let paths: std::collections::HashMap<u64, String> =
            [(1, "/"), (2, "/a"), (3, "/a/b"), (4, "/a-c"), (5, "/d")]
                .into_iter()
                .map(|(i, l)| (i, l.to_string()))
                .collect();
        let got: Vec<u64> = leaves(&paths).into_iter().map(|(i, _)| i).collect();
        assert_eq!(got, vec![3, 4, 5]);
    }

    #[test]
    fn a_home_above_or_at_counts() {
        let homed: HashSet<&str> = ["/a/b"].into_iter().collect();
        assert!(homed_at_or_above("/a/b", &homed));
        assert!(homed_at_or_above("/a/b/c", &homed));
        assert!(!homed_at_or_above("/a", &homed));
        assert!(!homed_at_or_above("/a/bc", &homed));
        let root: HashSet<&str> = ["/"].into_iter().collect();
        assert!(homed_at_or_above("/x/y", &root));
    }

    #[test]
    fn this_processs_threads_are_on_a_node() {
        // The test's own cgroup: each thread's last CPU read and mapped.
        let Some(cg) = crate::control::task_cgroup(std::process::id()) else {
            return;
        };
        let dir = Path::new(config::CGROUP_ROOT).join(cg.trim_start_matches('/'));
        if std::fs::read_to_string(dir.join("cgroup.threads")).is_err() {
            return;
        }
        let runs = thread_runs(&dir, |_| Some(0));
        assert!(!runs.is_empty(), "no thread of {} read", dir.display());
        assert!(runs.len() <= THREADS_SAMPLED);
        assert!(runs.iter().any(|r| r.2 > 0), "no CPU time: {runs:?}");
    }
}
