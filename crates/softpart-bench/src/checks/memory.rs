//! Memory and the NUMA node it is on: what the kernel's NUMA balancing does
//! under each scheduler.

use super::*;
use crate::plan::GroupMemory;
use softpart_core::memstat;
use softpart_core::topo::GuestTopo;

pub(super) const TESTS: &[(&str, Check)] = &[(
    "numa_balancing_scans_nothing_under_sched_ext",
    numa_balancing_stops,
)];

/// What NUMA balancing did to a group: (pages its scan marked, hint
/// faults) from the group's start, from its memory.stat; or the host's
/// over the window where the kernel does not count them per cgroup.
fn numa_events(run: &RunResult, g: &str) -> Result<((u64, u64), &'static str)> {
    let memory = group(run, g)?.memory.as_ref();
    if let Some(m) = memory
        && let (Some(pte), Some(faults)) = (m.numa_pte_updates, m.numa_hint_faults)
    {
        return Ok(((pte, faults), "its memory.stat"));
    }
    let get = |k: &str| {
        run.vmstat
            .get(k)
            .copied()
            .with_context(|| format!("no {k} in /proc/vmstat: a kernel without NUMA balancing"))
    };
    Ok((
        (get("numa_pte_updates")?, get("numa_hint_faults")?),
        "host-wide",
    ))
}

/// The group's memory share on node 0 and its local access, for the line.
fn placement(run: &RunResult, g: &str, topo: &GuestTopo) -> Result<String> {
    let gr = group(run, g)?;
    let m: &GroupMemory = gr
        .memory
        .as_ref()
        .context("no memory.numa_stat: the memory controller is off")?;
    let cpu_nodes = crate::table::cpu_per_node(&gr.counters.cpu_ns, topo);
    let pct = |x: Option<f64>| x.map_or("-".into(), |x| format!("{:.0}%", 100.0 * x));
    Ok(format!(
        "{} MB, {} on node 0, CPU time {} on node 0, local access {}",
        m.resident_per_node.iter().sum::<u64>() >> 20,
        pct(memstat::share_on(&m.resident_per_node, &[0])),
        pct(memstat::share_on(&cpu_nodes, &[0])),
        pct(memstat::local_access(&cpu_nodes, &m.resident_per_node)),
    ))
}

/// Only the fair class's tick starts a task's NUMA scan: a memory-bound
/// tenant takes hint faults under eevdf and none under scx_softpart
/// (numa-balancing.toml).
fn numa_balancing_stops(r: &Results) -> Result<String> {
    let topo = scenario("numa-balancing")?.topo()?;
    let ev = r.run_of("numa-balancing", "eevdf")?;
    let sp = r.run_of("numa-balancing", "softpart")?;
    let ((ev_pte, ev_faults), whose) = numa_events(ev, "mem")?;
    let ((sp_pte, sp_faults), _) = numa_events(sp, "mem")?;
    // Under eevdf the scan marks the tenant's memory (160 MB: about 41,000
    // pages a pass) a second of CPU time after its start and again at a
    // period that grows while its accesses stay local; each marked huge
    // page then faults once. Under sched_ext no scan starts. A tenth of
    // eevdf's figures is far above what a tenant with no scan shows
    // (nothing) and far below what one pass brings.
    if ev_pte < 10_000 || ev_faults < 5 {
        bail!(
            "eevdf: {ev_pte} pages marked and {ev_faults} NUMA hint faults ({whose}): NUMA \
             balancing did not scan the tenant, so this guest cannot show what sched_ext stops"
        );
    }
    if sp_pte * 10 > ev_pte || sp_faults * 10 > ev_faults {
        bail!(
            "scx_softpart: {sp_pte} pages marked and {sp_faults} NUMA hint faults ({whose}) \
             against eevdf's {ev_pte} and {ev_faults}: a scan ran under sched_ext"
        );
    }
    Ok(format!(
        "NUMA balancing ({whose}): eevdf marked {ev_pte} pages and took {ev_faults} hint faults, \
         scx_softpart {sp_pte} and {sp_faults}; eevdf: {}; scx_softpart: {}",
        placement(ev, "mem", &topo)?,
        placement(sp, "mem", &topo)?
    ))
}
