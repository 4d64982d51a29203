//! Memory follows the home: once a second, for each home, where its
//! tenant's memory lies (a cgroup's memory.numa_stat, a process's
//! numa_maps) and whether to bring it to the home's nodes
//! (softpart_core::memory_follow::decide); a move goes to the mover's
//! thread (mover.rs), one tenant at a time. What it saw and did is kept
//! per home for the statistics.

use crate::mover::{Job, Mover, Outcome};
use softpart_core::config;
use softpart_core::control::{MemoryTenantView, MemoryView};
use softpart_core::memory_follow::{Follow, NodeRoom, Tenant, Wait, backoff_after, decide};
use softpart_core::{memstat, numa_maps};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The share of its CPU time a tenant runs at home, over the last second,
/// for its memory to follow: below it, it keeps leaving home, and its
/// memory would chase a place it does not live in (docs/decisions.md,
/// "Memory follows the home").
const MIN_LOCALITY: f64 = 0.8;
/// Less than this off home is left where it is: a move's batches and a
/// pass over the mappings cost more than the remote accesses they save.
const MIN_BYTES: u64 = 4 << 20;
/// When a home is looked at again after a pass found it waiting, by why:
/// memory lies away again only after its tenant ran or allocated away, so
/// a tenant at home with its memory there is read every 10 s, not each
/// second (at 1,024 homes, about 100 a second).
fn recheck_after(waiting: Option<&str>) -> std::time::Duration {
    std::time::Duration::from_secs(match waiting {
        Some("nothing_away") | Some("unreadable") | Some("refused") => 10,
        Some("reserve") => 5,
        _ => 1,
    })
}

/// A home's CPUs told apart cheaply: how many, the first, the last.
pub fn fingerprint(cpus: &BTreeSet<usize>) -> (usize, usize, usize) {
    (
        cpus.len(),
        cpus.first().copied().unwrap_or(0),
        cpus.last().copied().unwrap_or(0),
    )
}

/// One home as the pass is given it.
pub struct HomeIn {
    /// A cgroup path, or "pid N".
    pub label: String,
    /// Its CPUs (`due`'s fingerprint), and the nodes they are on.
    pub cpus: (usize, usize, usize),
    pub nodes: Vec<usize>,
    /// Its run at home and away so far (group_stats).
    pub run_home_ns: u64,
    pub run_away_ns: u64,
}

/// What the pass knows of one home's memory.
#[derive(Debug, Default)]
struct TenantMemory {
    nodes: Vec<usize>,
    home_bytes: u64,
    away_bytes: u64,
    moved_bytes: u64,
    refused_bytes: BTreeMap<&'static str, u64>,
    last_move: Option<Instant>,
    /// Why nothing moves now, if nothing does.
    waiting: Option<&'static str>,
    /// Run at home and away at the last pass.
    run: (u64, u64),
    /// Its home's CPUs at the last pass (`fingerprint`).
    cpus: (usize, usize, usize),
    /// When the next pass looks at it.
    next: Option<Instant>,
    /// The move in hand moved something / had pages refused for a cause
    /// other than the rate.
    job_moved: bool,
    job_refused: bool,
    /// Its back-off (memory_follow::backoff_after), and until when.
    backoff_s: u64,
    backoff_until: Option<Instant>,
}

pub struct MemoryPass {
    cfg: config::Memory,
    mover: Option<Mover>,
    tenants: BTreeMap<String, TenantMemory>,
    /// The job in hand: its tenant, its home's nodes, its cancel flag.
    in_hand: Option<(String, Vec<usize>, Arc<AtomicBool>)>,
    moved_bytes: u64,
    mover_cpu_ns: u64,
}

fn wait_name(w: Wait) -> &'static str {
    match w {
        Wait::NoHomeNode => "no_home_node",
        Wait::NotAtHome => "not_at_home",
        Wait::NothingAway => "nothing_away",
        Wait::Reserve => "reserve",
    }
}

/// The nodes' free memory against what must stay free: the kernel's high
/// watermark (kswapd reclaims under it) plus the reserve.
fn node_rooms(nr_nodes: usize, reserve: Option<u64>) -> Vec<NodeRoom> {
    let zone = std::fs::read_to_string("/proc/zoneinfo").unwrap_or_default();
    let high = memstat::high_watermarks(&zone);
    (0..nr_nodes)
        .map(|n| {
            let info = std::fs::read_to_string(format!("/sys/devices/system/node/node{n}/meminfo"))
                .unwrap_or_default();
            let free = memstat::node_free_bytes(&info).unwrap_or(0);
            let total = memstat::node_total_bytes(&info).unwrap_or(0);
            let reserve = high.get(&n).copied().unwrap_or(0) * 4096
                + reserve.unwrap_or_else(|| config::default_reserve(total));
            NodeRoom { free, reserve }
        })
        .collect()
}

/// Every process in `cg` and below it.
fn pids_below(cg: &Path, out: &mut Vec<i32>) {
    if let Ok(text) = std::fs::read_to_string(cg.join("cgroup.procs")) {
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    if let Ok(entries) = std::fs::read_dir(cg) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                pids_below(&e.path(), out);
            }
        }
    }
}

/// The processes of a "pid N,M,..." home (threads given a home together;
/// a thread's id reads its process's memory).
fn pids_of(label: &str) -> Option<Vec<i32>> {
    label
        .strip_prefix("pid ")?
        .split(',')
        .map(|p| p.trim().parse().ok())
        .collect()
}

fn cgroup_dir(label: &str) -> PathBuf {
    Path::new(config::CGROUP_ROOT).join(label.trim_start_matches('/'))
}

/// What a tenant holds that can move, per node: a cgroup's anonymous and
/// shared memory (memory.numa_stat), a process's anonymous pages
/// (numa_maps). None where neither can be read (a cgroup without the
/// memory controller, a process gone).
fn resident(label: &str) -> Option<Vec<u64>> {
    if let Some(pids) = pids_of(label) {
        let mut per_node: Vec<u64> = Vec::new();
        let mut read = false;
        for pid in pids {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/numa_maps")) else {
                continue;
            };
            read = true;
            for m in numa_maps::parse(&text).iter().filter(|m| !m.file) {
                for (n, b) in m.bytes_per_node().into_iter().enumerate() {
                    if per_node.len() <= n {
                        per_node.resize(n + 1, 0);
                    }
                    per_node[n] += b;
                }
            }
        }
        return read.then_some(per_node);
    }
    let text = std::fs::read_to_string(cgroup_dir(label).join("memory.numa_stat")).ok()?;
    Some(memstat::resident_per_node(&memstat::parse_numa_stat(&text)))
}

impl MemoryPass {
    pub fn new(cfg: config::Memory) -> MemoryPass {
        let mover = if cfg.follow {
            match Mover::spawn(cfg.rate_bytes_per_s) {
                Ok(m) => Some(m),
                Err(e) => {
                    log::warn!("memory follows the home: no thread for the moves ({e}); off");
                    None
                }
            }
        } else {
            None
        };
        MemoryPass {
            cfg,
            mover,
            tenants: BTreeMap::new(),
            in_hand: None,
            moved_bytes: 0,
            mover_cpu_ns: 0,
        }
    }

    /// A reload's `[memory]`: a new rate starts a new mover (the old one
    /// ends within a batch); what was counted stays.
    pub fn configure(&mut self, cfg: config::Memory) {
        if cfg == self.cfg {
            return;
        }
        let counted = (
            std::mem::take(&mut self.tenants),
            self.moved_bytes,
            self.mover_cpu_ns,
        );
        *self = MemoryPass::new(cfg);
        (self.tenants, self.moved_bytes, self.mover_cpu_ns) = counted;
    }

    /// Whether memory follows the homes.
    pub fn on(&self) -> bool {
        self.mover.is_some()
    }

    /// Whether the pass at `now` looks at `label`'s home, whose CPUs are
    /// `cpus`: when its time comes, at once when its home changed (the
    /// balancer moved it, a reload or `softpart prefer` changed it), and
    /// while its memory is being moved. A home's CPUs are told apart by
    /// their number, first and last, not read whole: at a thousand homes
    /// of hundreds of CPUs each, reading them every second would be the
    /// pass's largest cost.
    pub fn due(&self, label: &str, cpus: &BTreeSet<usize>, now: Instant) -> bool {
        let Some(t) = self.tenants.get(label) else {
            return true;
        };
        t.next.is_none_or(|at| at <= now)
            || t.cpus != fingerprint(cpus)
            || self.in_hand.as_ref().is_some_and(|j| j.0 == label)
    }

    /// Forgets the homes not in `labels` (gone, or cleared), and cancels
    /// the move in hand if its home went.
    pub fn forget_others(&mut self, labels: &BTreeSet<&str>) {
        self.tenants.retain(|l, _| labels.contains(l.as_str()));
        if let Some((label, _, cancel)) = &self.in_hand
            && !labels.contains(label.as_str())
        {
            cancel.store(true, Ordering::Relaxed);
        }
    }

    /// One pass over the homes that are due: what each holds where, and
    /// at most one move handed to the mover while none is in hand.
    pub fn pass(&mut self, homes: &[HomeIn], nr_nodes: usize, now: Instant) {
        let done = self.mover.as_mut().map(|m| m.take()).unwrap_or_default();
        for (label, o, ended) in done {
            self.note(&label, o);
            if ended {
                self.in_hand = None;
                self.end_job(&label, now);
                if let Some(t) = self.tenants.get(&label) {
                    log::info!(
                        "memory of {label}: {} MB moved so far, {} MB on node(s) {:?}, {} MB elsewhere",
                        t.moved_bytes >> 20,
                        t.home_bytes >> 20,
                        t.nodes,
                        t.away_bytes >> 20
                    );
                }
            }
        }
        // A move whose home now lies on other nodes ends at its next batch.
        if let Some((label, nodes, cancel)) = &self.in_hand
            && homes.iter().any(|h| &h.label == label && &h.nodes != nodes)
        {
            cancel.store(true, Ordering::Relaxed);
        }
        let mut rooms = None;
        for h in homes {
            let t = self.tenants.entry(h.label.clone()).or_default();
            let (h0, a0) = std::mem::replace(&mut t.run, (h.run_home_ns, h.run_away_ns));
            let (dh, da) = (
                h.run_home_ns.saturating_sub(h0),
                h.run_away_ns.saturating_sub(a0),
            );
            if t.nodes != h.nodes {
                t.nodes = h.nodes.clone();
                // A new home: what was refused may move now.
                (t.backoff_s, t.backoff_until) = (0, None);
            }
            t.cpus = h.cpus;
            // A tenant that did not run is not read: its memory is where
            // the last pass saw it.
            if dh + da == 0 {
                continue;
            }
            let Some(per_node) = resident(&h.label) else {
                t.waiting = Some("unreadable");
                continue;
            };
            t.home_bytes = per_node
                .iter()
                .enumerate()
                .filter(|(n, _)| h.nodes.contains(n))
                .map(|(_, b)| b)
                .sum();
            t.away_bytes = per_node.iter().sum::<u64>() - t.home_bytes;
            let Some(mover) = self.mover.as_mut() else {
                t.waiting = Some("off");
                continue;
            };
            if t.backoff_until.is_some_and(|at| at > now) {
                t.waiting = Some("refused");
                continue;
            }
            if self.in_hand.is_some() {
                if self.in_hand.as_ref().is_some_and(|j| j.0 == h.label) {
                    t.waiting = None;
                }
                continue;
            }
            let tenant = Tenant {
                home_nodes: &h.nodes,
                locality: dh as f64 / (dh + da) as f64,
                resident_per_node: &per_node,
            };
            let rooms = rooms.get_or_insert_with(|| node_rooms(nr_nodes, self.cfg.reserve_bytes));
            let follow = Follow {
                min_locality: MIN_LOCALITY,
                min_bytes: MIN_BYTES,
            };
            match decide(&tenant, rooms, &follow) {
                Ok((target, bytes)) => {
                    if bytes < t.away_bytes {
                        *t.refused_bytes.entry("reserve").or_default() += t.away_bytes - bytes;
                    }
                    let pids = pids_of(&h.label).unwrap_or_else(|| {
                        let mut pids = Vec::new();
                        pids_below(&cgroup_dir(&h.label), &mut pids);
                        pids
                    });
                    let cancel = Arc::new(AtomicBool::new(false));
                    log::debug!(
                        "memory of {}: moving up to {} MB to node {target} ({} processes)",
                        h.label,
                        bytes >> 20,
                        pids.len()
                    );
                    if mover.submit(Job {
                        label: h.label.clone(),
                        pids,
                        home_nodes: h.nodes.clone(),
                        target,
                        max_bytes: bytes,
                        target_floor: rooms.get(target).map_or(u64::MAX, |r| r.reserve),
                        cancel: cancel.clone(),
                    }) {
                        t.waiting = None;
                        (t.job_moved, t.job_refused) = (false, false);
                        self.in_hand = Some((h.label.clone(), h.nodes.clone(), cancel));
                    }
                }
                Err(w) => {
                    if w == Wait::Reserve {
                        *t.refused_bytes.entry("reserve").or_default() += t.away_bytes;
                    }
                    t.waiting = Some(wait_name(w));
                }
            }
        }
        self.schedule(homes, now);
    }

    /// Sets each looked-at home's next look from why it waits.
    fn schedule(&mut self, homes: &[HomeIn], now: Instant) {
        for h in homes {
            if let Some(t) = self.tenants.get_mut(&h.label) {
                t.next = Some(now + recheck_after(t.waiting));
            }
        }
    }

    fn note(&mut self, label: &str, o: Outcome) {
        self.moved_bytes += o.moved_bytes;
        self.mover_cpu_ns += o.cpu_ns;
        let Some(t) = self.tenants.get_mut(label) else {
            return;
        };
        t.moved_bytes += o.moved_bytes;
        t.job_moved |= o.moved_bytes > 0;
        t.job_refused |= o
            .refused_pages
            .iter()
            .any(|(why, n)| *n > 0 && *why != crate::mover::Refusal::Rate);
        for (why, pages) in o.refused_pages {
            *t.refused_bytes.entry(why.name()).or_default() += pages * 4096;
        }
        if o.moved_bytes > 0 {
            t.last_move = Some(Instant::now());
            // What moved is home now, until the next pass reads it again.
            let m = o.moved_bytes.min(t.away_bytes);
            t.away_bytes -= m;
            t.home_bytes += m;
        }
    }

    /// A tenant's move ended: a move that moved nothing while pages were
    /// refused makes it wait before the next (memory_follow::backoff_after).
    fn end_job(&mut self, label: &str, now: Instant) {
        let Some(t) = self.tenants.get_mut(label) else {
            return;
        };
        t.backoff_s = backoff_after(t.backoff_s, t.job_moved, t.job_refused);
        t.backoff_until =
            (t.backoff_s > 0).then(|| now + std::time::Duration::from_secs(t.backoff_s));
    }

    /// For `softpart stat` and the metrics.
    pub fn view(&self) -> MemoryView {
        let now = Instant::now();
        MemoryView {
            follow: self.mover.is_some(),
            rate_bytes_per_s: self.cfg.rate_bytes_per_s,
            reserve_bytes: self.cfg.reserve_bytes,
            peak_bytes_per_s: self.mover.as_ref().map_or(0, |m| m.peak_bytes_per_s()),
            moved_bytes: self.moved_bytes,
            mover_cpu_s: self.mover_cpu_ns as f64 / 1e9,
            tenants: self
                .tenants
                .iter()
                .map(|(label, t)| MemoryTenantView {
                    label: label.clone(),
                    nodes: t.nodes.clone(),
                    home_bytes: t.home_bytes,
                    away_bytes: t.away_bytes,
                    moved_bytes: t.moved_bytes,
                    refused_bytes: t
                        .refused_bytes
                        .iter()
                        .map(|(k, v)| (k.to_string(), *v))
                        .collect(),
                    last_move_s_ago: t.last_move.map(|at| now.duration_since(at).as_secs_f64()),
                    waiting: t.waiting.map(str::to_string),
                })
                .collect(),
        }
    }
}

impl crate::Scheduler<'_> {
    /// Memory follows the home: each home's nodes and its run at home and
    /// away so far, to the memory pass (memory.rs).
    pub(crate) fn follow_memory(&mut self) {
        if !self.memory.on() {
            return;
        }
        let now = std::time::Instant::now();
        let labels: BTreeSet<&str> = self.homes.iter().map(|(_, h)| h.label.as_str()).collect();
        self.memory.forget_others(&labels);
        let homes: Vec<HomeIn> = self
            .homes
            .iter()
            .filter_map(|(id, h)| {
                if !self.memory.due(&h.label, &h.cpus, now) {
                    return None;
                }
                let nodes: BTreeSet<usize> = h
                    .cpus
                    .iter()
                    .filter_map(|&c| self.machine.node_of(c))
                    .collect();
                let (run_home_ns, run_away_ns) = self.group_stats.home_and_away(id);
                Some(HomeIn {
                    label: h.label.clone(),
                    cpus: fingerprint(&h.cpus),
                    nodes: nodes.into_iter().collect(),
                    run_home_ns,
                    run_away_ns,
                })
            })
            .collect();
        // Two counters of each CPU's line.
        self.traffic
            .read::<[u64; 2]>(homes.len() * self.group_stats.nr_cpus());
        self.memory.pass(&homes, self.machine.nodes.len(), now);
    }

    /// Where each balanced group's memory is, per partition, from its
    /// memory.numa_stat: at once for a group not placed yet, else every
    /// 10 s (memory moves at a bounded rate; a read per group per period
    /// would be thousands of reads a second on a container host).
    pub(crate) fn read_balanced_memory(&mut self, now: std::time::Instant) {
        const EVERY: std::time::Duration = std::time::Duration::from_secs(10);
        let part_nodes: Vec<BTreeSet<usize>> = self
            .parts
            .iter()
            .map(|cpus| {
                cpus.iter()
                    .filter_map(|&c| self.machine.node_of(c))
                    .collect()
            })
            .collect();
        for g in self.balancer.groups.values_mut() {
            if g.part.is_some() && g.memory_at.is_some_and(|t| now.duration_since(t) < EVERY) {
                continue;
            }
            g.memory_at = Some(now);
            let path = Path::new(config::CGROUP_ROOT)
                .join(g.label.trim_start_matches('/'))
                .join("memory.numa_stat");
            let Ok(text) = std::fs::read_to_string(path) else {
                g.memory.clear();
                continue;
            };
            let per_node = softpart_core::memstat::resident_per_node(
                &softpart_core::memstat::parse_numa_stat(&text),
            );
            g.memory = softpart_core::memstat::share_per_part(&per_node, &part_nodes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_homes_label_names_its_processes() {
        assert_eq!(pids_of("pid 12"), Some(vec![12]));
        assert_eq!(pids_of("pid 12,13"), Some(vec![12, 13]));
        assert_eq!(pids_of("/bench/mem"), None);
        assert_eq!(pids_of("pid x"), None);
    }

    /// Off, the pass starts no thread and reads nothing.
    #[test]
    fn off_means_no_thread_and_no_reads() {
        let off = MemoryPass::new(config::Memory {
            follow: false,
            ..Default::default()
        });
        assert!(!off.on());
        assert_eq!(off.view().tenants.len(), 0);
        assert!(MemoryPass::new(config::Memory::default()).on());
    }

    /// A home looked at is not looked at again before its next time; a
    /// home gone is forgotten.
    #[test]
    fn homes_are_read_when_due_and_forgotten_when_gone() {
        let mut p = MemoryPass::new(config::Memory::default());
        let now = Instant::now();
        let me = format!("pid {}", std::process::id());
        let all: BTreeSet<usize> = (0..8).collect();
        let home = HomeIn {
            label: me.clone(),
            cpus: fingerprint(&all),
            nodes: (0..64).collect(),
            run_home_ns: 1_000_000,
            run_away_ns: 0,
        };
        assert!(p.due(&me, &all, now));
        p.pass(std::slice::from_ref(&home), 1, now);
        let v = p.view();
        assert_eq!(v.tenants.len(), 1);
        assert_eq!(v.tenants[0].away_bytes, 0, "{v:?}");
        assert_eq!(v.tenants[0].waiting.as_deref(), Some("nothing_away"));
        let later = now + std::time::Duration::from_secs(1);
        assert!(!p.due(&me, &all, later));
        assert!(p.due(&me, &(0..4).collect(), later), "its home moved");
        assert!(p.due(&me, &all, now + std::time::Duration::from_secs(10)));
        p.forget_others(&BTreeSet::new());
        assert_eq!(p.view().tenants.len(), 0);
    }
}
