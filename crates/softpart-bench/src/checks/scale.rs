//! Large hosts: the control plane's cost at thousands of cgroups, and the
//! fast path's work per call at 64 vCPUs against 8.

use super::{Check, Results, exit_of, probe_of, softpart_counters};
use anyhow::{Context, Result, bail};
use softpart_core::control::StatView;

pub(super) const TESTS: &[(&str, Check)] = &[
    (
        "control_plane_reads_little_at_2000_cgroups",
        control_plane_at_2000_cgroups,
    ),
    (
        "work_per_call_does_not_grow_from_8_to_64_cpus",
        work_per_call_at_64_cpus,
    ),
];

/// Map traffic the control plane may cost at steady state, bytes per s.
const MAX_TRAFFIC: f64 = 1e6;

fn control_plane_at_2000_cgroups(r: &Results) -> Result<String> {
    control_plane_cost(r, "cgroups-2000", LARGE_POLICY)
}

/// The control plane's cost in @scenario's run under @policy, read from
/// its own account twice 10 s apart; an error past MAX_TRAFFIC.
fn control_plane_cost(r: &Results, scenario: &str, policy: &str) -> Result<String> {
    let run = r.run_of(scenario, policy)?;
    let (_, _, log) = probe_of(run, "i=0; until grep")?;
    let made: usize = log
        .lines()
        .find_map(|l| l.strip_prefix("made "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("tree log: {log}"))?;
    if made < 2000 || log.contains("failed") {
        bail!("the tree was not made: {log}");
    }
    let (_, code, out) = probe_of(run, "softpart stat --json; sleep 10")?;
    if *code != 0 {
        bail!("softpart stat --json: exit {code}: {out}");
    }
    let views: Vec<StatView> = serde_json::Deserializer::from_str(out)
        .into_iter::<StatView>()
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing softpart stat --json: {out}"))?;
    let [a, b] = &views[..] else {
        bail!("expected two softpart stat documents, got {}", views.len());
    };
    if b.held.cgroup_slots < made {
        bail!(
            "{} cgroup slots in use for the {made} cgroups made",
            b.held.cgroup_slots
        );
    }
    if let Some(l) = b.limits.iter().find(|l| l.limit == "cgroup_slots") {
        bail!("the cgroup table was full: {l:?}");
    }
    let secs = b.cost.secs - a.cost.secs;
    if secs < 5.0 {
        bail!("the two readings are {secs:.1} s apart");
    }
    let read = (b.cost.map_read_bytes - a.cost.map_read_bytes) as f64 / secs;
    let written = (b.cost.map_written_bytes - a.cost.map_written_bytes) as f64 / secs;
    let cpu = (b.cost.cpu_s - a.cost.cpu_s) / secs;
    let phases: Vec<String> = b
        .cost
        .cpu_s_by_phase
        .iter()
        .map(|(phase, &s)| {
            let was = a.cost.cpu_s_by_phase.get(phase).copied().unwrap_or(0.0);
            format!("{phase} {:.2}%", (s - was) / secs * 100.0)
        })
        .collect();
    let said = format!(
        "{} cgroup slots; over {secs:.1} s the control plane read {:.1} KB/s and wrote {:.2} KB/s of BPF maps, and its main loop took {:.2}% of a CPU under TCG ({})",
        b.held.cgroup_slots,
        read / 1e3,
        written / 1e3,
        cpu * 100.0,
        phases.join(", ")
    );
    let runs: Vec<String> = b
        .cost
        .runs
        .iter()
        .map(|(what, &n)| {
            let was = a.cost.runs.get(what).copied().unwrap_or(0);
            format!("{what} {:.1}/s", (n - was) as f64 / secs)
        })
        .collect();
    let said = format!("{said}; {}", runs.join(", "));
    let said = match crate::table::probe_figures(run).get("scheduler_cpu_ticks_in_10s") {
        Some(ticks) => format!("{said}; the whole process {:.1}% by /proc", ticks / 10.0),
        None => said,
    };
    if read + written > MAX_TRAFFIC {
        bail!("{said}: more than {:.0} KB/s", MAX_TRAFFIC / 1e3);
    }
    Ok(said)
}

/// The policy of cgroups-2000 and large-host (the same on 64 vCPUs):
/// --diag counts the work per call.
const LARGE_POLICY: &str = "softpart:--diag --config /etc/softpart.toml --balance /bench/tree/p*";

/// What a run's scheduler did per call, from its exit counters.
struct PerCall {
    /// Other CPUs' lines read per select_cpu call.
    lines: f64,
    /// Other partitions' queue heads looked at per enqueue and dispatch.
    heads: f64,
    max_wait_rounds: f64,
    said: String,
}

fn per_call(r: &Results, scenario: &str) -> Result<PerCall> {
    let c = softpart_counters(exit_of(r, scenario, LARGE_POLICY)?)?;
    let n = |k: &str| {
        c[k].as_f64()
            .with_context(|| format!("{scenario}: no counter {k} in {c}"))
    };
    let select = n("calls_select_cpu")?;
    let queue_calls = n("calls_enqueue")? + n("calls_dispatch")?;
    if select < 1000.0 || queue_calls < 1000.0 {
        bail!("{scenario}: only {select} select_cpu and {queue_calls} enqueue+dispatch calls");
    }
    let lines = n("cpu_lines_read")? / select;
    let heads = n("part_heads_read")? / queue_calls;
    let run = r.run_of(scenario, LARGE_POLICY)?;
    let f = crate::table::probe_figures(run);
    let fig = |k: &str| f.get(k).map_or("-".to_string(), |v| format!("{v:.1}"));
    let insns: u64 = f
        .iter()
        .filter(|(k, _)| k.starts_with("cb_") && k.ends_with("_verified_insns"))
        .map(|(_, v)| *v as u64)
        .sum();
    let said = format!(
        "{lines:.2} lines/select_cpu, {heads:.3} heads/(enqueue+dispatch), select_cpu {} us/call, dispatch {} us/call, BPF maps {} KB, {insns} verified insns over the callbacks",
        fig("cb_select_cpu_us_per_call"),
        fig("cb_dispatch_us_per_call"),
        fig("bpf_map_memlock_kb"),
    );
    Ok(PerCall {
        lines,
        heads,
        max_wait_rounds: n("max_wait_rounds")?,
        said,
    })
}

/// At 64 vCPUs (4 nodes of 16) the fast path reads per call what it reads
/// at 8 (2 nodes of 4): a scan over every CPU or partition would read 8x
/// and 2x as much. Less than double, or under one line a call, passes: the
/// lookups' bounds (4 candidates, 8 partitions) are constants, and the
/// mix of calls differs between the two guests. The wait bound holds at
/// 16 CPUs a partition, and the control plane's map traffic at 64 vCPUs
/// stays under 1 MB/s.
fn work_per_call_at_64_cpus(r: &Results) -> Result<String> {
    let small = per_call(r, "cgroups-2000")?;
    let large = per_call(r, "large-host")?;
    let cost = control_plane_cost(r, "large-host", LARGE_POLICY)?;
    let said = format!(
        "64 vCPUs: {}; 8 vCPUs: {}; most rounds waited {:.0} (bound {:.0}); {cost}",
        large.said,
        small.said,
        large.max_wait_rounds,
        super::waits::bound_rounds(16)
    );
    let grew = |a: f64, b: f64| b > (2.0 * a).max(1.0);
    if grew(small.lines, large.lines) || grew(small.heads, large.heads) {
        bail!("{said}: the work per call grew with the host");
    }
    if large.max_wait_rounds > super::waits::bound_rounds(16) {
        bail!("{said}: a task waited past the bound");
    }
    Ok(said)
}
