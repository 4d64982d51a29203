//! From raw runs to the seed-style tables: one table per figure, rows = load
//! levels, columns = policies, each cell the median over repetitions with
//! its range.

use crate::plan::RunResult;
use crate::scenario::Scenario;
use anyhow::Result;
use serde::Serialize;
use softpart_core::hist;
use softpart_core::memstat;
use softpart_core::stats::Summary;
use softpart_core::topo::GuestTopo;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The figures of one run, summed over the scenario's groups.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFigures {
    /// Share of the homed groups' CPU time spent on their home CPUs.
    pub locality: Option<f64>,
    /// CPU time granted to all groups, CPU-seconds per second.
    pub granted: f64,
    /// The same from cpuacct (cross-check).
    pub granted_cpuacct: f64,
    pub run_delay_p50_us: Option<f64>,
    pub run_delay_p99_us: Option<f64>,
    /// Waits (runnable to running) per second. A percentile over waits
    /// depends on how many short ones a policy makes: EEVDF's yield
    /// hand-offs between two tasks on a CPU are thousands per s of tens of
    /// us each, which pull its p99 down without shortening anyone's wait.
    pub waits_per_s: f64,
    /// Run delay summed over all waits, per second of the window: the mean
    /// number of the groups' tasks that were waiting (schedstat's
    /// run_delay, summed), which counts each waiting moment once whatever
    /// the number of waits.
    pub run_delay_sum: f64,
    /// p99 of the waits that ended by taking a running task's turn
    /// (queueing: what the scheduler's ordering and slices decide).
    pub run_delay_queued_p99_us: Option<f64>,
    /// Share of the waits that ended on a CPU leaving idle, and their p99:
    /// under TCG mostly the host getting round to a halted vCPU's thread.
    pub idle_end_share: Option<f64>,
    pub run_delay_idle_end_p99_us: Option<f64>,
    /// Of the waits, those that began with the task switched out while
    /// still runnable (a slice end, a yield, a preemption) rather than at
    /// a wakeup: their share, p50 and p99, and their run delay summed
    /// (task-s per s), part of `run_delay_sum`.
    pub preempted_share: Option<f64>,
    pub run_delay_preempted_p50_us: Option<f64>,
    pub run_delay_preempted_p99_us: Option<f64>,
    pub run_delay_preempted_sum: f64,
    /// Migrations of the groups' tasks at any distance, per second.
    pub migrations_per_s: f64,
    /// Cross-node migrations of the groups' tasks, per second.
    pub xnode_migrations_per_s: f64,
    /// CPU-seconds per second that some CPU sat idle while a task waited.
    pub idle_while_waiting: f64,
    /// The scheduler's select_cpu, ns per call (sched_ext policies).
    pub select_cpu_ns: Option<f64>,
    /// Scenarios with `callback_costs`: `granted` less the time all of the
    /// scheduler's BPF callbacks took (callback_costs.rs). The kernel
    /// charges most of that time to the task on the CPU, so it is inside
    /// `granted`; taking all of it off, and none of EEVDF's own
    /// scheduling code (which cannot be timed the same way), gives a
    /// lower bound of the CPU the workload's own code got, against EEVDF.
    pub granted_less_callbacks: Option<f64>,
    /// For scenarios whose groups have no home (the balancer's): each
    /// group's share of its CPU time in the NUMA node it used most, the
    /// mean over groups.
    pub exclusivity: Option<f64>,
    /// The same share for the least exclusive group (the figure asked of
    /// every group).
    pub exclusivity_worst: Option<f64>,
    /// Each group's CPU time, CPU-s per s, in the scenario's order, then
    /// the parent groups' (their children's summed); shown for scenarios
    /// whose groups set a contract or nest.
    pub group_cpu: Vec<(String, f64)>,
    /// Each leaf group's own figures, in the scenario's order.
    pub leaves: Vec<LeafFigures>,
    /// The longer observer read as a share of the window: the window's CPU
    /// time is exact to within this share of the machine (None in results
    /// written before reads were timed).
    pub read_share: Option<f64>,
    /// Share of the homed groups' resident memory (anonymous and shared)
    /// on their homes' nodes at the window's end.
    pub memory_on_home: Option<f64>,
    /// The groups' local access (softpart_core::memstat::local_access),
    /// weighted by their CPU time.
    pub local_access: Option<f64>,
    /// The kernel's NUMA hint faults and pages NUMA balancing migrated,
    /// host-wide, per second of the window (/proc/vmstat).
    pub numa_hint_faults_per_s: Option<f64>,
    pub numa_pages_migrated_per_s: Option<f64>,
    /// NUMA hint faults the groups' memory took from their start to the
    /// window's end (their memory.stat), summed.
    pub group_numa_hint_faults: Option<f64>,
}

/// One leaf group's figures in a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeafFigures {
    pub name: String,
    /// Run delay p50, µs.
    pub delay_p50_us: Option<f64>,
    /// Run delay summed, task-s per s.
    pub delay_sum: f64,
    /// Its tasks' cross-node migrations, per s.
    pub xnode_per_s: f64,
    /// Its share of its CPU time on its home's CPUs (homed groups).
    pub locality: Option<f64>,
    /// Its share of its resident memory on its home's nodes (homed groups
    /// with the memory controller).
    pub memory_on_home: Option<f64>,
    /// Its local access (softpart_core::memstat::local_access).
    pub local_access: Option<f64>,
    /// NUMA hint faults its memory took from its start to the window's
    /// end (its memory.stat).
    pub numa_hint_faults: Option<f64>,
}

/// The nodes holding any of `cpus`.
fn nodes_of(cpus: &std::collections::BTreeSet<usize>, topo: &GuestTopo) -> Vec<usize> {
    (0..topo.nodes)
        .filter(|&n| topo.node_cpus(n).any(|c| cpus.contains(&(c as usize))))
        .map(|n| n as usize)
        .collect()
}

/// A group's CPU time per node, ns.
pub(crate) fn cpu_per_node(cpu_ns: &[u64], topo: &GuestTopo) -> Vec<u64> {
    (0..topo.nodes)
        .map(|n| {
            topo.node_cpus(n)
                .filter_map(|c| cpu_ns.get(c as usize))
                .sum()
        })
        .collect()
}

pub fn figures(run: &RunResult, sc: &Scenario, topo: &GuestTopo) -> Result<RunFigures> {
    let wall = run.wall_ns.max(1) as f64 / 1e9;
    let (mut home_ns, mut homed_ns, mut total_ns, mut acct_ns) = (0u64, 0u64, 0u64, 0u64);
    let (mut moves, mut xnode) = (0u64, 0u64);
    let (mut nr_waits, mut waited_ns) = (0u64, 0u64);
    let mut merged = vec![0u64; hist::NR_BUCKETS];
    let mut idle_end = vec![0u64; hist::NR_BUCKETS];
    let mut preempted = vec![0u64; hist::NR_BUCKETS];
    let mut preempted_ns = 0u64;
    let mut group_cpu = Vec::new();
    let mut leaves = Vec::new();
    let (mut mem_home, mut mem_homed) = (0u64, 0u64);
    let (mut local_weighted, mut local_cpu) = (0.0f64, 0u64);
    for g in &sc.groups {
        let Some(r) = run.groups.get(&g.name) else {
            continue;
        };
        let c = &r.counters;
        group_cpu.push((g.name.clone(), c.total_cpu_ns() as f64 / 1e9 / wall));
        let home = sc.home_cpus(g, topo)?;
        let on_home = home.as_ref().map(|home| {
            c.cpu_ns
                .iter()
                .enumerate()
                .filter(|(cpu, _)| home.contains(cpu))
                .map(|(_, ns)| ns)
                .sum::<u64>()
        });
        let mem = r.memory.as_ref();
        let home_nodes = home.as_ref().map(|h| nodes_of(h, topo));
        let memory_on_home = mem
            .zip(home_nodes.as_ref())
            .and_then(|(m, nodes)| memstat::share_on(&m.resident_per_node, nodes));
        if let (Some(m), Some(nodes)) = (mem, &home_nodes) {
            let on: u64 = nodes
                .iter()
                .filter_map(|&n| m.resident_per_node.get(n))
                .sum();
            mem_home += on;
            mem_homed += m.resident_per_node.iter().sum::<u64>();
        }
        let local = mem.and_then(|m| {
            memstat::local_access(&cpu_per_node(&c.cpu_ns, topo), &m.resident_per_node)
        });
        if let Some(x) = local {
            local_weighted += x * c.total_cpu_ns() as f64;
            local_cpu += c.total_cpu_ns();
        }
        leaves.push(LeafFigures {
            name: g.name.clone(),
            delay_p50_us: hist::quantile(&c.delay_hist, 0.5).map(|v| v as f64 / 1e3),
            delay_sum: c.delay_ns as f64 / 1e9 / wall,
            xnode_per_s: c.migrations[3] as f64 / wall,
            locality: on_home
                .filter(|_| c.total_cpu_ns() > 0)
                .map(|ns| ns as f64 / c.total_cpu_ns() as f64),
            memory_on_home,
            local_access: local,
            numa_hint_faults: mem.and_then(|m| m.numa_hint_faults).map(|n| n as f64),
        });
        total_ns += c.total_cpu_ns();
        acct_ns += r.cpuacct_ns.iter().sum::<u64>();
        moves += c.migrations.iter().sum::<u64>();
        xnode += c.migrations[3];
        nr_waits += c.nr_delays;
        waited_ns += c.delay_ns;
        for (i, n) in c.delay_hist.iter().enumerate() {
            if i < merged.len() {
                merged[i] += n;
            }
        }
        for (i, n) in c.idle_end_hist.iter().enumerate() {
            if i < idle_end.len() {
                idle_end[i] += n;
            }
        }
        for (i, n) in c.preempted_hist.iter().enumerate() {
            if i < preempted.len() {
                preempted[i] += n;
            }
        }
        preempted_ns += c.preempted_delay_ns;
        if let Some(ns) = on_home {
            homed_ns += c.total_cpu_ns();
            home_ns += ns;
        }
    }
    // A parent group's CPU time: its leaves' (it holds no tasks itself).
    for g in sc.groups.iter().filter(|g| sc.is_parent(g)) {
        let inside = format!("{}/", sc.cgroup_path(g));
        let sum = sc
            .leaves()
            .filter(|l| sc.cgroup_path(l).starts_with(&inside))
            .filter_map(|l| group_cpu.iter().find(|(n, _)| *n == l.name).map(|x| x.1))
            .sum::<f64>();
        group_cpu.push((g.name.clone(), sum));
    }
    let homed = sc.groups.iter().any(|g| g.home.is_some());
    let mut shares = Vec::new();
    if !homed && topo.nodes > 1 {
        for g in &sc.groups {
            let Some(r) = run.groups.get(&g.name) else {
                continue;
            };
            let total = r.counters.total_cpu_ns();
            let best = (0..topo.nodes)
                .map(|n| {
                    topo.node_cpus(n)
                        .filter_map(|c| r.counters.cpu_ns.get(c as usize))
                        .sum::<u64>()
                })
                .max()
                .unwrap_or(0);
            if total > 0 {
                shares.push(best as f64 / total as f64);
            }
        }
    }
    let queued: Vec<u64> = merged
        .iter()
        .zip(&idle_end)
        .map(|(all, idle)| all.saturating_sub(*idle))
        .collect();
    let (nr_all, nr_idle_end) = (merged.iter().sum::<u64>(), idle_end.iter().sum::<u64>());
    let nr_preempted = preempted.iter().sum::<u64>();
    Ok(RunFigures {
        group_cpu,
        leaves,
        locality: (homed && homed_ns > 0).then(|| home_ns as f64 / homed_ns as f64),
        granted: total_ns as f64 / 1e9 / wall,
        granted_cpuacct: acct_ns as f64 / 1e9 / run.cpuacct_wall_s(),
        run_delay_p50_us: hist::quantile(&merged, 0.5).map(|v| v as f64 / 1e3),
        run_delay_p99_us: hist::quantile(&merged, 0.99).map(|v| v as f64 / 1e3),
        waits_per_s: nr_waits as f64 / wall,
        run_delay_sum: waited_ns as f64 / 1e9 / wall,
        run_delay_queued_p99_us: hist::quantile(&queued, 0.99).map(|v| v as f64 / 1e3),
        idle_end_share: (nr_all > 0).then(|| nr_idle_end as f64 / nr_all as f64),
        run_delay_idle_end_p99_us: hist::quantile(&idle_end, 0.99).map(|v| v as f64 / 1e3),
        preempted_share: (nr_all > 0).then(|| nr_preempted as f64 / nr_all as f64),
        run_delay_preempted_p50_us: hist::quantile(&preempted, 0.5).map(|v| v as f64 / 1e3),
        run_delay_preempted_p99_us: hist::quantile(&preempted, 0.99).map(|v| v as f64 / 1e3),
        run_delay_preempted_sum: preempted_ns as f64 / 1e9 / wall,
        migrations_per_s: moves as f64 / wall,
        xnode_migrations_per_s: xnode as f64 / wall,
        idle_while_waiting: run.cpus.iter().map(|c| c.idle_waiting_ns).sum::<u64>() as f64
            / 1e9
            / wall,
        granted_less_callbacks: sc.callback_costs.then(|| {
            total_ns as f64 / 1e9 / wall
                - probe_figures(run)
                    .get("cb_all_cpu_s_per_s")
                    .copied()
                    .unwrap_or(0.0)
        }),
        select_cpu_ns: run
            .select_cpu
            .filter(|c| c.calls > 0)
            .map(|c| c.run_ns as f64 / c.calls as f64),
        exclusivity: (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64),
        exclusivity_worst: shares.iter().copied().reduce(f64::min),
        read_share: (run.snapshot_read_ns > 0)
            .then(|| run.snapshot_read_ns as f64 / run.wall_ns.max(1) as f64),
        memory_on_home: (mem_homed > 0).then(|| mem_home as f64 / mem_homed as f64),
        local_access: (local_cpu > 0).then(|| local_weighted / local_cpu as f64),
        numa_hint_faults_per_s: run.vmstat.get("numa_hint_faults").map(|&n| n as f64 / wall),
        numa_pages_migrated_per_s: run
            .vmstat
            .get("numa_pages_migrated")
            .map(|&n| n as f64 / wall),
        group_numa_hint_faults: run
            .groups
            .values()
            .filter_map(|g| g.memory.as_ref()?.numa_hint_faults)
            .map(|n| n as f64)
            .reduce(|a, b| a + b),
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub load: u32,
    pub policy: String,
    pub runs: Vec<RunFigures>,
    /// Per run, the `figure NAME VALUE` lines its probes printed.
    pub probe_figures: Vec<BTreeMap<String, f64>>,
}

/// `figure NAME VALUE` lines in a run's probe outputs (workloads that
/// measure something themselves report it this way).
pub fn probe_figures(run: &RunResult) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (_, _, text) in &run.probes {
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            if let ["figure", name, value] = w[..]
                && let Ok(v) = value.parse::<f64>()
            {
                out.insert(name.to_string(), v);
            }
        }
    }
    out
}

impl Cell {
    pub fn summary(&self, f: impl Fn(&RunFigures) -> Option<f64>) -> Option<Summary> {
        let v: Vec<f64> = self.runs.iter().filter_map(f).collect();
        Summary::of(&v)
    }
}

/// Groups runs into cells, in the scenario's load order and the given
/// policy order.
pub fn cells(
    runs: &[&RunResult],
    sc: &Scenario,
    topo: &GuestTopo,
    policies: &[String],
) -> Result<Vec<Cell>> {
    let mut map: BTreeMap<(usize, usize), Cell> = BTreeMap::new();
    for r in runs {
        let Some(li) = sc.loads.iter().position(|&l| l == r.load) else {
            continue;
        };
        let Some(pi) = policies.iter().position(|p| *p == r.policy) else {
            continue;
        };
        let cell = map.entry((li, pi)).or_insert_with(|| Cell {
            load: r.load,
            policy: r.policy.clone(),
            runs: vec![],
            probe_figures: vec![],
        });
        cell.runs.push(figures(r, sc, topo)?);
        cell.probe_figures.push(probe_figures(r));
    }
    Ok(map.into_values().collect())
}

type Metric = (
    &'static str,
    fn(&RunFigures) -> Option<f64>,
    fn(f64) -> String,
);

pub const METRICS: &[Metric] = &[
    (
        "exclusivity: % of each group's CPU time in the node it used most (mean over groups)",
        |f| f.exclusivity.map(|x| 100.0 * x),
        |x| format!("{x:.1}"),
    ),
    (
        "exclusivity of the least exclusive group (%)",
        |f| f.exclusivity_worst.map(|x| 100.0 * x),
        |x| format!("{x:.1}"),
    ),
    (
        "locality: % of the groups' CPU time on their home CPUs",
        |f| f.locality.map(|x| 100.0 * x),
        |x| format!("{x:.1}"),
    ),
    (
        "memory on home: % of the homed groups' resident memory on their homes' nodes",
        |f| f.memory_on_home.map(|x| 100.0 * x),
        |x| format!("{x:.1}"),
    ),
    (
        "local access: % of accesses local if each CPU-s touches the group's memory evenly (CPU-time weighted)",
        |f| f.local_access.map(|x| 100.0 * x),
        |x| format!("{x:.1}"),
    ),
    (
        "NUMA hint faults per s (host-wide, the kernel's NUMA balancing)",
        |f| f.numa_hint_faults_per_s,
        |x| format!("{x:.1}"),
    ),
    (
        "NUMA hint faults of the groups, from their start (their memory.stat)",
        |f| f.group_numa_hint_faults,
        |x| format!("{x:.0}"),
    ),
    (
        "pages migrated by NUMA balancing per s (host-wide)",
        |f| f.numa_pages_migrated_per_s,
        |x| format!("{x:.1}"),
    ),
    (
        "CPU time granted to the groups (CPU-s per s)",
        |f| Some(f.granted),
        |x| format!("{x:.2}"),
    ),
    (
        "CPU time granted less the scheduler's BPF callbacks (CPU-s per s)",
        |f| f.granted_less_callbacks,
        |x| format!("{x:.2}"),
    ),
    (
        "run delay p50 (us)",
        |f| f.run_delay_p50_us,
        |x| format!("{x:.0}"),
    ),
    (
        "run delay p99 (us)",
        |f| f.run_delay_p99_us,
        |x| format!("{x:.0}"),
    ),
    (
        "waits per s (runnable to running)",
        |f| Some(f.waits_per_s),
        |x| format!("{x:.0}"),
    ),
    (
        "run delay summed over the waits (task-s per s: tasks waiting, on average)",
        |f| Some(f.run_delay_sum),
        |x| format!("{x:.2}"),
    ),
    (
        "run delay p99 of the waits that took a running task's turn (us)",
        |f| f.run_delay_queued_p99_us,
        |x| format!("{x:.0}"),
    ),
    (
        "% of waits that ended on a CPU leaving idle",
        |f| f.idle_end_share.map(|x| 100.0 * x),
        |x| format!("{x:.1}"),
    ),
    (
        "run delay p99 of the waits that ended on a CPU leaving idle (us)",
        |f| f.run_delay_idle_end_p99_us,
        |x| format!("{x:.0}"),
    ),
    (
        "% of waits that began with the task switched out still runnable (slice end, yield, preemption)",
        |f| f.preempted_share.map(|x| 100.0 * x),
        |x| format!("{x:.1}"),
    ),
    (
        "run delay p50 of the waits that began switched out runnable (us)",
        |f| f.run_delay_preempted_p50_us,
        |x| format!("{x:.0}"),
    ),
    (
        "run delay p99 of the waits that began switched out runnable (us)",
        |f| f.run_delay_preempted_p99_us,
        |x| format!("{x:.0}"),
    ),
    (
        "run delay summed over the waits that began switched out runnable (task-s per s)",
        |f| Some(f.run_delay_preempted_sum),
        |x| format!("{x:.2}"),
    ),
    (
        "migrations per s (any distance)",
        |f| Some(f.migrations_per_s),
        |x| format!("{x:.0}"),
    ),
    (
        "cross-node migrations per s",
        |f| Some(f.xnode_migrations_per_s),
        |x| format!("{x:.1}"),
    ),
    (
        "idle while a task waited (CPU-s per s)",
        |f| Some(f.idle_while_waiting),
        |x| format!("{x:.3}"),
    ),
    (
        "select_cpu cost (ns per call, kernel BPF stats)",
        |f| f.select_cpu_ns,
        |x| format!("{x:.0}"),
    ),
];

/// Rows of `metric`'s median under each policy divided by `base`'s.
fn relative_rows(
    sc: &Scenario,
    policies: &[String],
    cells: &[Cell],
    base: &str,
    metric: fn(&RunFigures) -> Option<f64>,
) -> Vec<(u32, Vec<String>)> {
    let find = |load: u32, p: &str| cells.iter().find(|c| c.load == load && c.policy == p);
    sc.loads
        .iter()
        .map(|&load| {
            let b = find(load, base).and_then(|c| c.summary(metric));
            let texts = policies
                .iter()
                .map(
                    |p| match (find(load, p).and_then(|c| c.summary(metric)), b) {
                        (Some(v), Some(b)) if b.median > 0.0 => {
                            format!("{:.2}", v.median / b.median)
                        }
                        _ => "-".into(),
                    },
                )
                .collect();
            (load, texts)
        })
        .collect()
}

fn cell_text(s: Option<Summary>, fmt: fn(f64) -> String) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n == 1 => fmt(s.median),
        Some(s) => format!("{} [{}-{}]", fmt(s.median), fmt(s.min), fmt(s.max)),
    }
}

/// Writes one aligned table: a header row and one row per load level.
fn write_table(
    out: &mut String,
    title: &str,
    label: &str,
    policies: &[String],
    rows: &[(u32, Vec<String>)],
) {
    let first = 14usize.max(label.len() + 2);
    let width = policies
        .iter()
        .map(String::len)
        .chain(
            rows.iter()
                .flat_map(|(_, cells)| cells.iter().map(String::len)),
        )
        .max()
        .unwrap_or(0)
        + 3;
    let _ = writeln!(out, "\n{title}");
    let _ = write!(out, "{label:<first$}");
    for p in policies {
        let _ = write!(out, "{p:>width$}");
    }
    let _ = writeln!(out);
    for (load, cells) in rows {
        let _ = write!(out, "{load:<first$}");
        for c in cells {
            let _ = write!(out, "{c:>width$}");
        }
        let _ = writeln!(out);
    }
}

/// One row per load level, with one cell per policy as `cell` gives it.
fn rows_of(
    sc: &Scenario,
    policies: &[String],
    cell: impl Fn(u32, &str) -> String,
) -> Vec<(u32, Vec<String>)> {
    sc.loads
        .iter()
        .map(|&load| (load, policies.iter().map(|p| cell(load, p)).collect()))
        .collect()
}

pub fn render(sc: &Scenario, policies: &[String], cells: &[Cell], header: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{header}");
    let find = |load: u32, p: &str| cells.iter().find(|c| c.load == load && c.policy == p);
    for (title, f, fmt) in METRICS {
        if !cells.iter().any(|c| c.summary(f).is_some()) {
            continue;
        }
        let rows = rows_of(sc, policies, |load, p| {
            cell_text(find(load, p).and_then(|c| c.summary(f)), *fmt)
        });
        write_table(&mut out, title, &sc.load_label, policies, &rows);
    }
    // Per group, wherever groups can take from each other.
    if sc.sets_contract() || sc.groups.len() > 1 {
        for g in &sc.groups {
            let contract = format!(
                "weight {}, cpu.max {}{}",
                g.weight.unwrap_or(100),
                g.max.as_deref().unwrap_or("max"),
                if g.idle { ", cpu.idle 1" } else { "" }
            );
            let of_group =
                |f: &RunFigures| f.group_cpu.iter().find(|(n, _)| *n == g.name).map(|x| x.1);
            let rows = rows_of(sc, policies, |load, p| {
                cell_text(find(load, p).and_then(|c| c.summary(of_group)), |x| {
                    format!("{x:.2}")
                })
            });
            let title = format!("CPU time of group {} ({contract}; CPU-s per s)", g.name);
            write_table(&mut out, &title, &sc.load_label, policies, &rows);
            if sc.is_parent(g) {
                continue;
            }
            let leaf = |f: &RunFigures| f.leaves.iter().find(|l| l.name == g.name).cloned();
            type Of = fn(&LeafFigures) -> Option<f64>;
            let mut leaf_table = |title: String, of: Of, fmt: fn(f64) -> String| {
                let rows = rows_of(sc, policies, |load, p| {
                    cell_text(
                        find(load, p).and_then(|c| c.summary(|f| leaf(f).and_then(|l| of(&l)))),
                        fmt,
                    )
                });
                write_table(&mut out, &title, &sc.load_label, policies, &rows);
            };
            let name = &g.name;
            leaf_table(
                format!("run delay p50 of group {name} (us)"),
                |l| l.delay_p50_us,
                |x| format!("{x:.0}"),
            );
            leaf_table(
                format!("run delay summed of group {name} (task-s per s)"),
                |l| Some(l.delay_sum),
                |x| format!("{x:.2}"),
            );
            leaf_table(
                format!("cross-node migrations per s of group {name}"),
                |l| Some(l.xnode_per_s),
                |x| format!("{x:.1}"),
            );
            if g.home.is_some() {
                leaf_table(
                    format!("locality of group {name} (% of its CPU time on its home CPUs)"),
                    |l| l.locality.map(|x| x * 100.0),
                    |x| format!("{x:.1}"),
                );
            }
            if cells.iter().any(|c| {
                c.summary(|f| leaf(f).and_then(|l| l.local_access))
                    .is_some()
            }) {
                if g.home.is_some() {
                    leaf_table(
                        format!("memory on home of group {name} (% of its resident memory)"),
                        |l| l.memory_on_home.map(|x| x * 100.0),
                        |x| format!("{x:.1}"),
                    );
                }
                leaf_table(
                    format!("local access of group {name} (%)"),
                    |l| l.local_access.map(|x| x * 100.0),
                    |x| format!("{x:.1}"),
                );
                leaf_table(
                    format!("NUMA hint faults of group {name} (from its start)"),
                    |l| l.numa_hint_faults,
                    |x| format!("{x:.0}"),
                );
            }
        }
    }
    let names: std::collections::BTreeSet<&String> = cells
        .iter()
        .flat_map(|c| c.probe_figures.iter().flat_map(|m| m.keys()))
        .collect();
    for name in names {
        let rows = rows_of(sc, policies, |load, p| {
            let v: Vec<f64> = find(load, p)
                .map(|c| {
                    c.probe_figures
                        .iter()
                        .filter_map(|m| m.get(name))
                        .copied()
                        .collect()
                })
                .unwrap_or_default();
            cell_text(Summary::of(&v), |x| format!("{x:.1}"))
        });
        write_table(
            &mut out,
            &format!("{name} (reported by the workload)"),
            &sc.load_label,
            policies,
            &rows,
        );
    }
    if policies.iter().any(|p| p == "eevdf") {
        let rows = relative_rows(sc, policies, cells, "eevdf", |f| Some(f.granted));
        write_table(
            &mut out,
            "CPU time granted relative to eevdf (median / eevdf median)",
            &sc.load_label,
            policies,
            &rows,
        );
        if sc.callback_costs {
            let rows = relative_rows(sc, policies, cells, "eevdf", |f| f.granted_less_callbacks);
            write_table(
                &mut out,
                "CPU time granted less the scheduler's BPF callbacks, relative to eevdf's granted (a lower bound: eevdf's own scheduling code stays in its figure)",
                &sc.load_label,
                policies,
                &rows,
            );
        }
        let rows = relative_rows(sc, policies, cells, "eevdf", |f| Some(f.run_delay_sum));
        write_table(
            &mut out,
            "run delay summed, relative to eevdf (median / eevdf median)",
            &sc.load_label,
            policies,
            &rows,
        );
    }
    if let Some(base) = policies.iter().find(|p| p.starts_with("softpart-nohome")) {
        let rows = relative_rows(sc, policies, cells, base, |f| f.select_cpu_ns);
        write_table(
            &mut out,
            &format!("select_cpu cost relative to {base} (the foundation scheduler's path)"),
            &sc.load_label,
            policies,
            &rows,
        );
    }
    if let Some(worst) = cells
        .iter()
        .flat_map(|c| c.runs.iter().filter_map(|f| f.read_share))
        .reduce(f64::max)
    {
        let _ = writeln!(
            out,
            "observer reads: the longest took {:.1}% of its window (each window's CPU time is exact to within that share of the machine)",
            worst * 100.0
        );
    }
    out
}

/// Runs and a scenario for the tests of the modules that read runs.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::plan::GroupResult;
    use softpart_observer::counters::{CpuCounters, GroupCounters};

    pub(crate) fn scenario() -> Scenario {
        let sc: Scenario = toml::from_str(
            r#"
name = "t"
topology = "2n2c2t"
duration_s = 2
loads = [1]
[[group]]
name = "a"
command = "x"
home = { node = 0 }
[[group]]
name = "b"
command = "y"
"#,
        )
        .unwrap();
        sc.validate().unwrap();
        sc
    }

    /// A run of scenario()'s: group a (homed on node 0) with this CPU
    /// time per CPU and cross-node migrations, group b busy on CPU 7.
    pub(crate) fn run(policy: &str, a_cpu: [u64; 8], xnode: u64) -> RunResult {
        let mut groups = BTreeMap::new();
        let mut hist = vec![0; hist::NR_BUCKETS];
        hist[hist::bucket(10_000)] = 100;
        groups.insert(
            "a".to_string(),
            GroupResult {
                counters: GroupCounters {
                    cpu_ns: a_cpu.to_vec(),
                    migrations: [6, 0, 2, xnode],
                    delay_hist: hist,
                    delay_ns: 1_000_000,
                    nr_delays: 100,
                    ..Default::default()
                },
                cpuacct_ns: a_cpu.to_vec(),
                schedstat_delay_ns: 0,
                threads: 0,
                threads_at_start: 0,
                stalled_threads: vec![],
                memory: None,
            },
        );
        groups.insert(
            "b".to_string(),
            GroupResult {
                counters: GroupCounters {
                    cpu_ns: vec![0, 0, 0, 0, 0, 0, 0, 2_000_000_000],
                    ..Default::default()
                },
                cpuacct_ns: vec![0; 8],
                schedstat_delay_ns: 0,
                threads: 0,
                threads_at_start: 0,
                stalled_threads: vec![],
                memory: None,
            },
        );
        RunResult {
            scenario: "t".into(),
            policy: policy.into(),
            load: 1,
            rep: 0,
            wall_ns: 2_000_000_000,
            cpuacct_wall_ns: 0,
            snapshot_read_ns: 0,
            snapshot_read_on_cpu_ns: 0,
            snapshot_read_runnable_ns: 0,
            groups,
            cpus: vec![
                CpuCounters {
                    idle_ns: 1_000_000_000,
                    idle_waiting_ns: 500_000_000
                };
                8
            ],
            sched_ext_state: "disabled".into(),
            sched_ext_ops: String::new(),
            early_exits: vec![],
            probes: vec![],
            select_cpu: None,
            vmstat: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{run, scenario};
    use super::*;

    /// Group a's run delay: `waits` of (length in ns, how many, of which
    /// ended on a CPU leaving idle), replacing run()'s.
    fn set_waits(r: &mut RunResult, waits: &[(u64, u64, u64)]) {
        let a = &mut r.groups.get_mut("a").unwrap().counters;
        a.delay_hist = vec![0; hist::NR_BUCKETS];
        a.idle_end_hist = vec![0; hist::NR_BUCKETS];
        (a.nr_delays, a.delay_ns) = (0, 0);
        for &(ns, n, idle_end) in waits {
            a.delay_hist[hist::bucket(ns)] += n;
            a.idle_end_hist[hist::bucket(ns)] += idle_end;
            a.nr_delays += n;
            a.delay_ns += ns * n;
        }
    }

    #[test]
    fn memory_figures_of_a_run() {
        let sc = scenario();
        let topo = sc.topo().unwrap();
        let s = 1_000_000_000;
        let mut r = run("eevdf", [s, s, s, 0, s, 0, 0, 0], 0);
        // a (home node 0): 3 MB on node 0, 1 on node 1; b: all on node 0.
        r.groups.get_mut("a").unwrap().memory = Some(crate::plan::GroupMemory {
            resident_per_node: vec![3 << 20, 1 << 20],
            numa_hint_faults: Some(40),
            ..Default::default()
        });
        r.groups.get_mut("b").unwrap().memory = Some(crate::plan::GroupMemory {
            resident_per_node: vec![1 << 20, 0],
            ..Default::default()
        });
        r.vmstat.insert("numa_hint_faults".into(), 100);
        let f = figures(&r, &sc, &topo).unwrap();
        assert_eq!(f.memory_on_home, Some(0.75), "only a has a home");
        // a: CPU 3/4 on node 0, memory 3/4: 9/16 + 1/16; b: CPU all on
        // node 1, memory all on node 0: 0. Weighted by CPU time, 4 and 2.
        let a_local = 10.0 / 16.0;
        assert!((f.local_access.unwrap() - a_local * 4.0 / 6.0).abs() < 1e-9);
        assert_eq!(f.leaves[0].local_access, Some(a_local));
        assert_eq!(f.leaves[1].local_access, Some(0.0));
        assert_eq!(f.leaves[0].numa_hint_faults, Some(40.0));
        assert_eq!(f.numa_hint_faults_per_s, Some(50.0));
        assert_eq!(f.numa_pages_migrated_per_s, None, "not read");
        assert_eq!(f.group_numa_hint_faults, Some(40.0), "b's not counted");
        // Without the memory controller, none of them.
        let g = figures(&run("eevdf", [s, s, s, 0, s, 0, 0, 0], 0), &sc, &topo).unwrap();
        assert_eq!((g.memory_on_home, g.local_access), (None, None));
    }

    #[test]
    fn figures_of_a_run() {
        let sc = scenario();
        let topo = sc.topo().unwrap();
        let s = 1_000_000_000;
        let f = figures(&run("eevdf", [s, s, s, 0, s, 0, 0, 0], 4), &sc, &topo).unwrap();
        assert_eq!(
            f.locality,
            Some(0.75),
            "3 of a's 4 CPU-s on node 0; b has no home"
        );
        assert_eq!(f.granted, 3.0, "(4 + 2) CPU-s over 2 s");
        assert_eq!(
            f.group_cpu,
            vec![("a".to_string(), 2.0), ("b".to_string(), 1.0)],
            "each group's CPU-s per s"
        );
        assert_eq!(f.granted_cpuacct, 2.0);
        assert_eq!(f.xnode_migrations_per_s, 2.0);
        assert_eq!(f.migrations_per_s, 6.0, "6 + 2 + 4 moves over 2 s");
        assert_eq!(f.idle_while_waiting, 2.0, "8 CPUs x 0.5 s over 2 s");
        let (a, b) = (&f.leaves[0], &f.leaves[1]);
        assert_eq!((a.name.as_str(), b.name.as_str()), ("a", "b"));
        assert_eq!(
            (a.xnode_per_s, a.locality),
            (2.0, Some(0.75)),
            "a's own moves and home share"
        );
        assert_eq!(
            (b.xnode_per_s, b.locality),
            (0.0, None),
            "b has no home to measure against"
        );
        let p99 = f.run_delay_p99_us.unwrap();
        assert!((10.0..=11.5).contains(&p99), "{p99}");
        assert_eq!(f.waits_per_s, 50.0, "a's 100 waits over 2 s");
        assert_eq!(f.run_delay_sum, 0.0005, "a's 1 ms of waiting over 2 s");
    }

    #[test]
    fn many_short_waits_lower_the_p99_but_not_the_sum() {
        let sc = scenario();
        let topo = sc.topo().unwrap();
        let s = 1_000_000_000;
        // Ten waits of 5 ms, alone and then among 2000 waits of 10 us: the
        // p99 falls to 10 us, the time spent waiting grows by 20 ms.
        let mut few = run("softpart", [s, 0, 0, 0, 0, 0, 0, 0], 0);
        let mut many = few.clone();
        set_waits(&mut few, &[(5_000_000, 10, 0)]);
        set_waits(&mut many, &[(5_000_000, 10, 0), (10_000, 2000, 0)]);
        let (f, m) = (
            figures(&few, &sc, &topo).unwrap(),
            figures(&many, &sc, &topo).unwrap(),
        );
        assert!(f.run_delay_p99_us.unwrap() > 4_000.0);
        assert!(m.run_delay_p99_us.unwrap() < 12.0);
        assert_eq!((f.waits_per_s, m.waits_per_s), (5.0, 1005.0));
        assert!((f.run_delay_sum - 0.025).abs() < 1e-12);
        assert!((m.run_delay_sum - 0.035).abs() < 1e-12);
    }

    #[test]
    fn waits_that_ended_on_an_idle_cpu_are_split_out() {
        let sc = scenario();
        let topo = sc.topo().unwrap();
        let s = 1_000_000_000;
        let mut r = run("softpart", [s, 0, 0, 0, 0, 0, 0, 0], 0);
        // 90 waits of 10 us behind running tasks, 10 of 5 ms for an idle
        // CPU to wake.
        set_waits(&mut r, &[(10_000, 90, 0), (5_000_000, 10, 10)]);
        let f = figures(&r, &sc, &topo).unwrap();
        let all = f.run_delay_p99_us.unwrap();
        let queued = f.run_delay_queued_p99_us.unwrap();
        let idle = f.run_delay_idle_end_p99_us.unwrap();
        assert!((4_500.0..=5_800.0).contains(&all), "{all}");
        assert!((10.0..=11.5).contains(&queued), "{queued}");
        assert!((4_500.0..=5_800.0).contains(&idle), "{idle}");
        assert_eq!(f.idle_end_share, Some(0.1));
    }

    #[test]
    fn waits_that_began_switched_out_runnable_are_split_out() {
        let sc = scenario();
        let topo = sc.topo().unwrap();
        let s = 1_000_000_000;
        let mut r = run("softpart", [s, 0, 0, 0, 0, 0, 0, 0], 0);
        // 80 wakeups waiting 10 us, 20 slice ends waiting 4 ms.
        set_waits(&mut r, &[(10_000, 80, 0), (4_000_000, 20, 0)]);
        let a = &mut r.groups.get_mut("a").unwrap().counters;
        a.preempted_hist = vec![0; hist::NR_BUCKETS];
        a.preempted_hist[hist::bucket(4_000_000)] = 20;
        a.preempted_delay_ns = 20 * 4_000_000;
        let f = figures(&r, &sc, &topo).unwrap();
        assert_eq!(f.preempted_share, Some(0.2));
        let p50 = f.run_delay_preempted_p50_us.unwrap();
        assert!((3_900.0..=4_700.0).contains(&p50), "{p50}");
        assert!(f.run_delay_p50_us.unwrap() < 12.0, "the wakeups' waits");
        assert!(
            (f.run_delay_preempted_sum - 0.04).abs() < 1e-12,
            "80 ms over 2 s"
        );
    }

    #[test]
    fn table_has_medians_ranges_and_ratios() {
        let sc = scenario();
        let topo = sc.topo().unwrap();
        let s = 1_000_000_000;
        let runs = [
            run("eevdf", [s, s, 0, 0, s, s, 0, 0], 0),
            run("eevdf", [s, 0, 0, 0, s, s, s, 0], 0),
            run("eevdf", [s, s, s, 0, s, 0, 0, 0], 0),
            run("pinned", [s, s, s, s, 0, 0, 0, 0], 0),
        ];
        let refs: Vec<&RunResult> = runs.iter().collect();
        let policies = vec!["eevdf".to_string(), "pinned".to_string()];
        let cells = cells(&refs, &sc, &topo, &policies).unwrap();
        assert_eq!(cells.len(), 2);
        let text = render(&sc, &policies, &cells, "header");
        assert!(text.contains("50.0 [25.0-75.0]"), "{text}");
        assert!(text.contains("100.0"), "{text}");
        assert!(text.contains("1.00"), "{text}");
        assert!(
            !text.contains("observer reads"),
            "no read times in these results: {text}"
        );
    }

    #[test]
    fn callbacks_come_off_the_cpu_time_granted() {
        let mut sc = scenario();
        let topo = sc.topo().unwrap();
        let s = 1_000_000_000;
        let eevdf = run("eevdf", [s, s, s, 0, s, 0, 0, 0], 0);
        let mut ext = run("softpart", [s, s, s, 0, s, 0, 0, 0], 0);
        ext.probes.push((
            "callback costs".into(),
            0,
            "figure cb_all_cpu_s_per_s 0.75\nfigure other_bpf_ms_per_s 10\n".into(),
        ));
        // Without the key, no such figure.
        assert_eq!(
            figures(&ext, &sc, &topo).unwrap().granted_less_callbacks,
            None
        );
        sc.callback_costs = true;
        let e = figures(&eevdf, &sc, &topo).unwrap();
        let x = figures(&ext, &sc, &topo).unwrap();
        assert_eq!(
            e.granted_less_callbacks,
            Some(3.0),
            "no callbacks to take off"
        );
        assert_eq!(
            x.granted_less_callbacks,
            Some(2.25),
            "3 CPU-s per s less 0.75"
        );
        let refs = vec![&eevdf, &ext];
        let policies = vec!["eevdf".to_string(), "softpart".to_string()];
        let cells = cells(&refs, &sc, &topo, &policies).unwrap();
        let text = render(&sc, &policies, &cells, "header");
        let ratio = text
            .split("relative to eevdf's granted")
            .nth(1)
            .and_then(|t| t.lines().nth(2))
            .unwrap_or_default()
            .to_string();
        assert!(ratio.ends_with("0.75"), "2.25 over 3.00: {text}");
    }

    #[test]
    fn the_longest_read_is_reported_as_a_share_of_its_window() {
        let sc = scenario();
        let topo = sc.topo().unwrap();
        let s = 1_000_000_000;
        let mut runs = [
            run("eevdf", [s, s, 0, 0, s, s, 0, 0], 0),
            run("eevdf", [s, 0, 0, 0, s, s, s, 0], 0),
        ];
        runs[0].snapshot_read_ns = 10_000_000;
        runs[1].snapshot_read_ns = 50_000_000;
        let refs: Vec<&RunResult> = runs.iter().collect();
        let policies = vec!["eevdf".to_string()];
        let cells = cells(&refs, &sc, &topo, &policies).unwrap();
        let text = render(&sc, &policies, &cells, "header");
        // 50 ms of a 2 s window.
        assert!(
            text.contains("the longest took 2.5% of its window"),
            "{text}"
        );
    }
}
