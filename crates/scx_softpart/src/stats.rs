//! `--stats` / `--monitor`: what the fast path decided, per group (home)
//! and per partition, through scx_stats. The scheduler answers each request
//! with a raw snapshot of its counters; the figures are the difference
//! between a client's previous snapshot and this one, so any number of
//! monitors can watch at their own pace.

use scx_stats::prelude::*;
use scx_stats_derive::Stats;
use serde::{Deserialize, Serialize};
use softpart_core::hist;
use std::collections::BTreeMap;
use std::io::Write;

/// Cumulative counters of one group or partition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawCounters {
    pub run_home_ns: u64,
    pub run_away_ns: u64,
    /// Of run_away_ns, charged while the home had an idle CPU.
    pub run_away_room_ns: u64,
    pub spills: u64,
    pub returns: u64,
    pub delay_ns: u64,
    pub nr_delays: u64,
    /// By distance, in `enum sp_dist` order: SMT, LLC, node, cross-node.
    pub migrations: [u64; 4],
    /// Cross-node moves of homed tasks by the decision that made them,
    /// in `enum sp_via` order (see `XNODE_CAUSE_BY_VIA`).
    pub xnode: Vec<u64>,
    pub steals: u64,
    pub foreign_ns: u64,
    pub busy_ns: u64,
    pub delay_hist: Vec<u64>,
}

/// Why a homed task crossed nodes, for each `enum sp_via` (intf.h) in
/// order: the name `--stats`, `softpart stat` and the metrics give it.
/// A wakeup onto an idle home CPU and a send home at a wakeup are both
/// returns at a wakeup; a wait in its home's queue, taken there, and a
/// wait in another partition's queue, taken by a CPU of its home, returns
/// through a queue.
pub const XNODE_CAUSE_BY_VIA: [&str; 11] = [
    "return_wakeup",
    "spill_wakeup",
    "evict",
    "return_wakeup",
    "return_slice_end",
    "return_queued",
    "return_queued",
    "steal",
    "return_queued",
    "balancer",
    "other",
];

/// The causes, each once, in the order they are reported.
pub fn xnode_causes() -> Vec<&'static str> {
    let mut v: Vec<&str> = XNODE_CAUSE_BY_VIA.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// Cross-node moves by cause from per-`sp_via` counts (`now - before`).
pub fn xnode_by_cause(now: &[u64], before: &[u64]) -> BTreeMap<String, u64> {
    let mut m: BTreeMap<String, u64> = xnode_causes()
        .into_iter()
        .map(|c| (c.to_string(), 0))
        .collect();
    for (via, n) in now.iter().enumerate() {
        let d = n.saturating_sub(before.get(via).copied().unwrap_or(0));
        let cause = XNODE_CAUSE_BY_VIA.get(via).copied().unwrap_or("other");
        *m.entry(cause.to_string()).or_default() += d;
    }
    m
}

/// One cgroup's contract and cumulative counters (the cgroup CPU contract).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawTenant {
    pub weight: u32,
    /// cpu.max in CPUs; `None` for "max".
    pub cap: Option<f64>,
    /// Its entitlement in CPUs at the snapshot.
    pub entitled: f64,
    /// CPU time its own tasks ran.
    pub run_ns: u64,
    /// Time out of cpu.max budget, and how many times it ran out.
    pub throttled_ns: u64,
    pub throttles: u64,
}

/// The service's own state, for the metrics.
#[derive(Debug, Clone, Default)]
pub struct ServiceState {
    /// Whether a BPF scheduler is attached: false only in the answer the
    /// metrics thread gives itself while the control plane attaches again.
    pub attached: bool,
    /// Attachments after the first (the kernel detaches for a CPU hotplug).
    pub restarts: u32,
    pub reloads: Option<crate::reload::Reloads>,
    /// The control plane's own cost since the attachment.
    pub cost: softpart_core::control::ControlCost,
}

/// Everything a report is computed from, taken at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub at_ns: u64,
    pub service: ServiceState,
    /// The fast path's event counters (enum sp_stat order), by name.
    pub events: Vec<(&'static str, u64)>,
    /// Every limit (limits.rs) and the times it turned something away.
    pub limits: Vec<(&'static str, u64)>,
    /// By group label: (home CPUs, softness, counters). The tasks without
    /// a home are the group "-".
    pub groups: BTreeMap<String, (String, String, RawCounters)>,
    /// By partition id: (CPUs, number of CPUs, counters).
    pub parts: BTreeMap<u32, (String, usize, RawCounters)>,
    /// Groups the balancer places, by label: (partition, moves so far).
    pub balanced: BTreeMap<String, (Option<usize>, u64)>,
    /// cgroups of the cpu controller, by path, with a contract set (a
    /// weight other than 100, or a cap) or CPU time run.
    pub tenants: BTreeMap<String, RawTenant>,
    /// Memory following the homes (memory.rs).
    pub memory: softpart_core::control::MemoryView,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(desc = "one cgroup of the cpu controller: its contract and what it got")]
pub struct TenantMetrics {
    #[stat(desc = "cpu.weight")]
    pub weight: u32,
    #[stat(desc = "cpu.max in CPUs (0: no cap)")]
    pub cap_cpus: f64,
    #[stat(desc = "CPUs its contract entitles it to against everyone's load now")]
    pub entitled_cpus: f64,
    #[stat(desc = "CPUs' worth of time its own tasks ran (CPU-s per s)")]
    pub cpus_used: f64,
    #[stat(desc = "cpus_used over entitled_cpus, % (0 when entitled to none)")]
    pub share_pct: f64,
    #[stat(desc = "time spent out of cpu.max budget, ms per s")]
    pub throttled_ms_per_s: f64,
    #[stat(desc = "times it ran out of cpu.max budget")]
    pub throttles: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(desc = "one group: a cgroup or process set with a home")]
pub struct GroupMetrics {
    #[stat(desc = "preferred CPUs")]
    pub home: String,
    #[stat(desc = "softness in effect")]
    pub softness: String,
    #[stat(desc = "CPUs' worth of time run (CPU-s per s)")]
    pub cpus_used: f64,
    #[stat(desc = "share of run time spent at home, % (0 for the no-home group \"-\")")]
    pub locality_pct: f64,
    #[stat(desc = "tasks that began running away after running at home")]
    pub spills: u64,
    #[stat(desc = "tasks that began running at home after running away")]
    pub returns: u64,
    #[stat(desc = "spills per s (tasks that began running away after running at home)")]
    pub spills_per_s: f64,
    #[stat(desc = "returns per s (tasks that began running at home after running away)")]
    pub returns_per_s: f64,
    #[stat(
        desc = "cross-node moves per s by cause: spill_wakeup, return_wakeup, return_slice_end, return_queued (waited in its home's queue), steal (taken by an idle CPU elsewhere), evict, balancer (its home moved), other"
    )]
    pub xnode_per_s: BTreeMap<String, f64>,
    #[stat(desc = "waits (runnable to running) that ended")]
    pub waits: u64,
    #[stat(desc = "mean run delay, us")]
    pub delay_mean_us: f64,
    #[stat(desc = "median run delay (bucket upper bound), us")]
    pub delay_p50_us: f64,
    #[stat(desc = "99th percentile run delay (bucket upper bound), us")]
    pub delay_p99_us: f64,
    #[stat(desc = "migrations per s to the other thread of the core")]
    pub migr_smt: f64,
    #[stat(desc = "migrations per s within the LLC")]
    pub migr_llc: f64,
    #[stat(desc = "migrations per s within the NUMA node")]
    pub migr_node: f64,
    #[stat(desc = "migrations per s across NUMA nodes")]
    pub migr_xnode: f64,
    #[stat(desc = "balanced group: its partition (-1: not balanced or not placed yet)")]
    pub partition: i64,
    #[stat(desc = "balanced group: moves in the interval")]
    pub moves: u64,
    #[stat(desc = "its movable memory on its home's nodes, MB (as last read)")]
    pub mem_home_mb: f64,
    #[stat(desc = "its movable memory on other nodes, MB (as last read)")]
    pub mem_away_mb: f64,
    #[stat(desc = "its memory moved to its home's nodes in the interval, MB")]
    pub mem_moved_mb: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(desc = "one CPU partition")]
pub struct PartMetrics {
    #[stat(desc = "its CPUs")]
    pub cpus: String,
    #[stat(desc = "busy share of its CPUs, %")]
    pub util_pct: f64,
    #[stat(desc = "share of its CPUs' time given to tasks homed elsewhere, %")]
    pub foreign_pct: f64,
    #[stat(desc = "tasks its idle CPUs took from other partitions, per s")]
    pub steals: f64,
    #[stat(desc = "waits that ended on its CPUs")]
    pub waits: u64,
    #[stat(desc = "median run delay of those, us")]
    pub delay_p50_us: f64,
    #[stat(desc = "99th percentile run delay of those, us")]
    pub delay_p99_us: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(top, desc = "scx_softpart: placement decisions over the interval")]
pub struct Metrics {
    #[stat(desc = "interval covered, s")]
    pub interval_s: f64,
    #[stat(desc = "fast-path events in the interval (wakeup picks, queueing, steals)")]
    pub events: BTreeMap<String, u64>,
    #[stat(desc = "per group")]
    pub groups: BTreeMap<String, GroupMetrics>,
    #[stat(desc = "per partition")]
    pub parts: BTreeMap<String, PartMetrics>,
    #[stat(desc = "per cgroup of the cpu controller with a contract set or CPU time run")]
    pub tenants: BTreeMap<String, TenantMetrics>,
}

fn sub_hist(a: &[u64], b: &[u64]) -> Vec<u64> {
    a.iter()
        .enumerate()
        .map(|(i, &x)| x.saturating_sub(b.get(i).copied().unwrap_or(0)))
        .collect()
}

fn us(ns: Option<u64>) -> f64 {
    ns.map_or(0.0, |v| v as f64 / 1000.0)
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

impl Metrics {
    /// What happened between two snapshots. A group whose label or home
    /// changed in between counts from zero.
    pub fn between(prev: &Snapshot, cur: &Snapshot) -> Metrics {
        let secs = cur.at_ns.saturating_sub(prev.at_ns) as f64 / 1e9;
        let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let zero = RawCounters::default();
        let mut m = Metrics {
            interval_s: secs,
            ..Default::default()
        };
        for (i, (name, v)) in cur.events.iter().enumerate() {
            let before = prev.events.get(i).map_or(0, |e| e.1);
            m.events.insert(name.to_string(), v.saturating_sub(before));
        }
        let mb = |b: u64| b as f64 / 1048576.0;
        let by_label = |s: &Snapshot| -> BTreeMap<String, (u64, u64, u64)> {
            s.memory
                .tenants
                .iter()
                .map(|t| (t.label.clone(), (t.home_bytes, t.away_bytes, t.moved_bytes)))
                .collect()
        };
        let (mem_now, mem_before) = (by_label(cur), by_label(prev));
        for (label, (home, softness, c)) in &cur.groups {
            let now = mem_now.get(label).copied().unwrap_or_default();
            let before = mem_before.get(label).copied().unwrap_or_default();
            let p = match prev.groups.get(label) {
                Some((h, _, p)) if h == home => p,
                _ => &zero,
            };
            let at_home = c.run_home_ns.saturating_sub(p.run_home_ns) as f64;
            let away = c.run_away_ns.saturating_sub(p.run_away_ns) as f64;
            let waits = c.nr_delays.saturating_sub(p.nr_delays);
            let hist = sub_hist(&c.delay_hist, &p.delay_hist);
            let migr = |d: usize| per_s(c.migrations[d].saturating_sub(p.migrations[d]));
            m.groups.insert(
                label.clone(),
                GroupMetrics {
                    home: home.clone(),
                    softness: softness.clone(),
                    cpus_used: if secs > 0.0 {
                        (at_home + away) / 1e9 / secs
                    } else {
                        0.0
                    },
                    locality_pct: if home.is_empty() {
                        0.0
                    } else {
                        pct(at_home, at_home + away)
                    },
                    spills: c.spills.saturating_sub(p.spills),
                    returns: c.returns.saturating_sub(p.returns),
                    spills_per_s: per_s(c.spills.saturating_sub(p.spills)),
                    returns_per_s: per_s(c.returns.saturating_sub(p.returns)),
                    xnode_per_s: if home.is_empty() {
                        BTreeMap::new()
                    } else {
                        xnode_by_cause(&c.xnode, &p.xnode)
                            .into_iter()
                            .map(|(k, n)| (k, per_s(n)))
                            .collect()
                    },
                    waits,
                    delay_mean_us: if waits > 0 {
                        c.delay_ns.saturating_sub(p.delay_ns) as f64 / waits as f64 / 1000.0
                    } else {
                        0.0
                    },
                    delay_p50_us: us(hist::quantile(&hist, 0.5)),
                    delay_p99_us: us(hist::quantile(&hist, 0.99)),
                    migr_smt: migr(0),
                    migr_llc: migr(1),
                    migr_node: migr(2),
                    migr_xnode: migr(3),
                    partition: cur
                        .balanced
                        .get(label)
                        .and_then(|b| b.0)
                        .map_or(-1, |p| p as i64),
                    moves: cur
                        .balanced
                        .get(label)
                        .map_or(0, |b| b.1)
                        .saturating_sub(prev.balanced.get(label).map_or(0, |b| b.1)),
                    mem_home_mb: mb(now.0),
                    mem_away_mb: mb(now.1),
                    mem_moved_mb: mb(now.2.saturating_sub(before.2)),
                },
            );
        }
        for (path, t) in &cur.tenants {
            let zero = RawTenant::default();
            let p = prev.tenants.get(path).unwrap_or(&zero);
            let used = if secs > 0.0 {
                t.run_ns.saturating_sub(p.run_ns) as f64 / 1e9 / secs
            } else {
                0.0
            };
            m.tenants.insert(
                path.clone(),
                TenantMetrics {
                    weight: t.weight,
                    cap_cpus: t.cap.unwrap_or(0.0),
                    entitled_cpus: t.entitled,
                    cpus_used: used,
                    share_pct: pct(used, t.entitled),
                    throttled_ms_per_s: per_s(t.throttled_ns.saturating_sub(p.throttled_ns)) / 1e6,
                    throttles: t.throttles.saturating_sub(p.throttles),
                },
            );
        }
        for (id, (cpus, nr, c)) in &cur.parts {
            let p = prev.parts.get(id).map_or(&zero, |x| &x.2);
            let capacity = secs * 1e9 * *nr as f64;
            let hist = sub_hist(&c.delay_hist, &p.delay_hist);
            m.parts.insert(
                id.to_string(),
                PartMetrics {
                    cpus: cpus.clone(),
                    util_pct: pct(c.busy_ns.saturating_sub(p.busy_ns) as f64, capacity),
                    foreign_pct: pct(c.foreign_ns.saturating_sub(p.foreign_ns) as f64, capacity),
                    steals: per_s(c.steals.saturating_sub(p.steals)),
                    waits: c.nr_delays.saturating_sub(p.nr_delays),
                    delay_p50_us: us(hist::quantile(&hist, 0.5)),
                    delay_p99_us: us(hist::quantile(&hist, 0.99)),
                },
            );
        }
        m
    }

    /// The human-readable report `--stats` and `--monitor` print.
    pub fn format<W: Write>(&self, w: &mut W) -> std::io::Result<()> {
        let ev = |k: &str| self.events.get(k).copied().unwrap_or(0);
        let home = ev("pick_prev")
            + ev("pick_core_home")
            + ev("pick_sibling")
            + ev("pick_cpu_home")
            + ev("pick_room_lasted");
        let away = ev("pick_prev_away")
            + ev("pick_stay_away")
            + ev("pick_near")
            + ev("pick_core_any")
            + ev("pick_cpu_any");
        writeln!(
            w,
            "[softpart] {:.2}s  wakeups: home {home} away {away} queued {}  evict {} return {} steal {}",
            self.interval_s,
            ev("pick_none"),
            ev("evict"),
            ev("return_idle"),
            ev("dispatch_steal")
        )?;
        // Every event that happened, for what the summary above folds.
        let seen: Vec<String> = self
            .events
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if !seen.is_empty() {
            writeln!(w, "  events: {}", seen.join(", "))?;
        }
        for (label, g) in &self.groups {
            // Tasks with no home have no locality to speak of.
            let local = if g.home.is_empty() {
                "    -".to_string()
            } else {
                format!("{:5.1}%", g.locality_pct)
            };
            writeln!(
                w,
                "  group {label:<24} home {:<9} {:<10} cpus {:5.2} local {local} spill {} return {} \
                 wait p50 {:.0}us p99 {:.0}us migr/s smt {:.0} llc {:.0} node {:.0} xnode {:.0}",
                if g.home.is_empty() { "-" } else { &g.home },
                g.softness,
                g.cpus_used,
                g.spills,
                g.returns,
                g.delay_p50_us,
                g.delay_p99_us,
                g.migr_smt,
                g.migr_llc,
                g.migr_node,
                g.migr_xnode
            )?;
            let causes = softpart_core::control::nonzero_rates(&g.xnode_per_s);
            if !causes.is_empty() {
                writeln!(
                    w,
                    "    spills/s {:.1} returns/s {:.1} xnode/s by cause: {causes}",
                    g.spills_per_s, g.returns_per_s,
                )?;
            }
            if g.partition >= 0 {
                writeln!(w, "    balanced: PART-{} moves {}", g.partition, g.moves)?;
            }
            if g.mem_home_mb + g.mem_away_mb > 0.0 {
                writeln!(
                    w,
                    "    memory: home {:.1} MB, elsewhere {:.1} MB, moved {:.1} MB",
                    g.mem_home_mb, g.mem_away_mb, g.mem_moved_mb
                )?;
            }
        }
        for (path, t) in &self.tenants {
            let cap = if t.cap_cpus > 0.0 {
                format!(
                    "cap {:.2} throttled {:.0}ms/s ({}x)",
                    t.cap_cpus, t.throttled_ms_per_s, t.throttles
                )
            } else {
                String::new()
            };
            writeln!(
                w,
                "  cgroup {path:<30} weight {:<5} cpus {:5.2} entitled {:5.2} ({:.0}%) {cap}",
                t.weight, t.cpus_used, t.entitled_cpus, t.share_pct
            )?;
        }
        for (id, p) in &self.parts {
            writeln!(
                w,
                "  part {id:<3} cpus {:<9} util {:5.1}% foreign {:5.1}% steal/s {:.0} wait p50 {:.0}us p99 {:.0}us",
                p.cpus, p.util_pct, p.foreign_pct, p.steals, p.delay_p50_us, p.delay_p99_us
            )?;
        }
        Ok(())
    }
}

/// The server's side: every client gets the difference since its own
/// previous request. `snapshot` is asked through the channels, answered by
/// the scheduler's main loop.
pub fn server_data() -> StatsServerData<(), Snapshot> {
    let open: Box<dyn StatsOpener<(), Snapshot>> = Box::new(move |(req_ch, res_ch)| {
        req_ch.send(())?;
        let mut prev = res_ch.recv()?;
        let read: Box<dyn StatsReader<(), Snapshot>> = Box::new(move |_args, (req_ch, res_ch)| {
            req_ch.send(())?;
            let cur = res_ch.recv()?;
            let m = Metrics::between(&prev, &cur);
            prev = cur;
            m.to_json()
        });
        Ok(read)
    });
    StatsServerData::new()
        .add_meta(Metrics::meta())
        .add_meta(GroupMetrics::meta())
        .add_meta(PartMetrics::meta())
        .add_meta(TenantMetrics::meta())
        .add_ops("top", StatsOps { open, close: None })
}

/// `--monitor`: print a running scheduler's figures every `intv`.
pub fn monitor(intv: std::time::Duration, shutdown: impl Fn() -> bool) -> anyhow::Result<()> {
    scx_utils::monitor_stats::<Metrics>(&[], intv, shutdown, |m| {
        m.format(&mut std::io::stdout())?;
        std::io::stdout().flush()?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(home_ms: u64, away_ms: u64, delays: &[u64]) -> RawCounters {
        let mut h = vec![0; hist::NR_BUCKETS];
        for &d in delays {
            h[hist::bucket(d)] += 1;
        }
        RawCounters {
            run_home_ns: home_ms * 1_000_000,
            run_away_ns: away_ms * 1_000_000,
            nr_delays: delays.len() as u64,
            delay_ns: delays.iter().sum(),
            migrations: [4, 0, 0, 2],
            delay_hist: h,
            ..Default::default()
        }
    }

    fn snap(at_s: u64, groups: Vec<(&str, &str, RawCounters)>) -> Snapshot {
        Snapshot {
            at_ns: at_s * 1_000_000_000,
            service: Default::default(),
            events: vec![("pick_prev", at_s * 10)],
            limits: vec![],
            groups: groups
                .into_iter()
                .map(|(l, h, c)| (l.to_string(), (h.to_string(), "home-first".into(), c)))
                .collect(),
            parts: BTreeMap::new(),
            balanced: BTreeMap::new(),
            tenants: BTreeMap::new(),
            memory: Default::default(),
        }
    }

    #[test]
    fn tenants_report_their_share_and_throttled_time() {
        let tenant = |run_s: u64, throttled_ms: u64, throttles| RawTenant {
            weight: 100,
            cap: Some(1.0),
            entitled: 1.0,
            run_ns: run_s * 1_000_000_000,
            throttled_ns: throttled_ms * 1_000_000,
            throttles,
        };
        let mut a = snap(10, Vec::new());
        let mut b = snap(12, Vec::new());
        a.tenants.insert("/t/capped".into(), tenant(5, 100, 3));
        b.tenants.insert("/t/capped".into(), tenant(7, 1100, 23));
        // New since a: counts from zero.
        b.tenants.insert("/t/new".into(), tenant(1, 0, 0));
        let m = Metrics::between(&a, &b);
        let t = &m.tenants["/t/capped"];
        assert!((t.cpus_used - 1.0).abs() < 1e-9 && (t.share_pct - 100.0).abs() < 1e-6);
        assert!((t.throttled_ms_per_s - 500.0).abs() < 1e-6);
        assert_eq!(t.throttles, 20);
        assert!((m.tenants["/t/new"].cpus_used - 0.5).abs() < 1e-9);
        let mut out = Vec::new();
        m.format(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("cgroup /t/capped") && text.contains("throttled 500ms/s (20x)"),
            "{text}"
        );
    }

    #[test]
    fn differences_between_snapshots() {
        let a = snap(1, vec![("/db", "0-3", counters(1000, 0, &[1000; 10]))]);
        let mut later = counters(1000 + 1980, 20, &[1000; 10]);
        // 90 more short waits and 10 long ones in the interval.
        for d in std::iter::repeat_n(2_000, 90).chain(std::iter::repeat_n(5_000_000, 10)) {
            later.delay_hist[hist::bucket(d)] += 1;
            later.nr_delays += 1;
            later.delay_ns += d;
        }
        later.migrations = [10, 0, 0, 2];
        let b = snap(3, vec![("/db", "0-3", later)]);
        let m = Metrics::between(&a, &b);
        assert_eq!(m.interval_s, 2.0);
        assert_eq!(m.events["pick_prev"], 20);
        let g = &m.groups["/db"];
        assert!((g.cpus_used - 1.0).abs() < 1e-9, "{}", g.cpus_used);
        assert!((g.locality_pct - 99.0).abs() < 1e-9);
        assert_eq!(g.waits, 100);
        // p50 within the 2 us bucket, p99 within the 5 ms one (12.5%).
        assert!(
            g.delay_p50_us >= 2.0 && g.delay_p50_us <= 2.25,
            "{}",
            g.delay_p50_us
        );
        assert!(g.delay_p99_us >= 5000.0 && g.delay_p99_us <= 5625.0);
        assert_eq!((g.migr_smt, g.migr_xnode), (3.0, 0.0));
    }

    #[test]
    fn a_group_that_changed_home_counts_from_zero() {
        let a = snap(1, vec![("/db", "0-3", counters(500, 500, &[]))]);
        let b = snap(2, vec![("/db", "4-7", counters(1500, 500, &[]))]);
        let g = &Metrics::between(&a, &b).groups["/db"];
        assert!((g.cpus_used - 2.0).abs() < 1e-9);
        assert!((g.locality_pct - 75.0).abs() < 1e-9);
    }

    #[test]
    fn report_names_groups_and_partitions() {
        let mut s = snap(2, vec![("/db", "0-3", counters(1000, 0, &[1000]))]);
        s.parts.insert(
            0,
            (
                "0-3".into(),
                4,
                RawCounters {
                    busy_ns: 4_000_000_000,
                    ..Default::default()
                },
            ),
        );
        s.events = vec![("kick", 3), ("evict", 0), ("dispatch_idle", 7)];
        let m = Metrics::between(&Snapshot::default(), &s);
        let mut out = Vec::new();
        m.format(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        // Events that happened are listed; those that did not, not.
        assert!(text.contains("events: dispatch_idle 7, kick 3\n"), "{text}");
        assert!(text.contains("group /db"), "{text}");
        assert!(text.contains("local 100.0%"), "{text}");
        assert!(text.contains("part 0   cpus 0-3"), "{text}");
        assert!(text.contains("util  50.0%"), "{text}");
    }

    #[test]
    fn cross_node_moves_add_up_by_cause() {
        let mut before = vec![0u64; XNODE_CAUSE_BY_VIA.len()];
        before[7] = 10;
        let mut now = before.clone();
        now[0] = 2; // wakeup onto an idle home CPU
        now[3] = 3; // sent home at a wakeup
        now[7] = 14; // steals
        let m = xnode_by_cause(&now, &before);
        assert_eq!(m["return_wakeup"], 5);
        assert_eq!(m["steal"], 4);
        assert_eq!(m["balancer"], 0);
        assert_eq!(m.len(), xnode_causes().len());
        // A counter older than the scheduler's (shorter) counts from zero.
        assert_eq!(xnode_by_cause(&now, &[])["steal"], 14);
    }
}
