//! Large hosts: the control plane's cost at thousands of cgroups.

use super::{Check, Results, probe_of};
use anyhow::{Context, Result, bail};
use softpart_core::control::StatView;

pub(super) const TESTS: &[(&str, Check)] = &[(
    "control_plane_reads_little_at_2000_cgroups",
    control_plane_at_2000_cgroups,
)];

/// Map traffic the control plane may cost at steady state, bytes per s.
const MAX_TRAFFIC: f64 = 1e6;

fn control_plane_at_2000_cgroups(r: &Results) -> Result<String> {
    control_plane_cost(r, "cgroups-2000", CGROUPS_2000_POLICY)
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

/// cgroups-2000's policy (--diag counts the work per call).
const CGROUPS_2000_POLICY: &str =
    "softpart:--diag --config /etc/softpart.toml --balance /bench/tree/p*";
