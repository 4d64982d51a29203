//! The cgroup CPU contract: cgroups share contended CPUs by cpu.weight,
//! and stay within cpu.max.

use super::*;
use softpart_core::stats::Summary;

pub(super) const TESTS: &[(&str, Check)] = &[
    ("weights_split_contended_cpus", weights_split),
    ("weights_hold_across_homes", weights_across_homes),
    ("cpu_bound_thread_gets_its_cpu", cpu_bound_gets_its_cpu),
    ("cpu_max_caps_hold", cpu_max_caps),
    ("a_capped_group_alone_gets_its_quota", capped_alone),
    (
        "throttled_tasks_moved_or_killed_go_on",
        throttled_tasks_go_on,
    ),
    ("idle_cgroups_get_what_is_left", idle_cgroup_share),
    (
        "contracts_written_under_load_hold_at_once",
        written_under_load,
    ),
    ("unenforced_settings_are_named", unenforced_named),
];

/// A group's CPU time per second of the run.
fn cpus_of(run: &RunResult, name: &str) -> Result<f64> {
    let g = group(run, name)?;
    Ok(g.counters.total_cpu_ns() as f64 / run.wall_ns.max(1) as f64)
}

fn weights_split(r: &Results) -> Result<String> {
    let sp = r.run_of("weights", "softpart")?;
    let ev = r.run_of("weights", "eevdf")?;
    let (light, heavy) = (cpus_of(sp, "light")?, cpus_of(sp, "heavy")?);
    let (ev_light, ev_heavy) = (cpus_of(ev, "light")?, cpus_of(ev, "heavy")?);
    // Entitled 2 and 6 CPUs: 1:3. Shared by task it would be 3:1; a
    // third either side of 1:3 tells the two apart without flaking.
    let ratio = heavy / light.max(1e-9);
    if !(2.0..=4.0).contains(&ratio) {
        bail!(
            "heavy (weight 300) got {heavy:.2} CPUs against light's (weight 100) {light:.2}: \
             {ratio:.2}x, expected about 3x (eevdf: {ev_heavy:.2} against {ev_light:.2})"
        );
    }
    if heavy < 0.75 * 6.0 {
        bail!("heavy got {heavy:.2} CPUs of its entitled 6 (eevdf: {ev_heavy:.2})");
    }
    Ok(format!(
        "heavy {heavy:.2}, light {light:.2} CPUs ({ratio:.2}x; entitled 6 and 2; eevdf {ev_heavy:.2} and {ev_light:.2})"
    ))
}

/// Tenants homed on different nodes with different weights, and a capped
/// one without a home: each within 10% of its entitlement and of eevdf's
/// figure (where eevdf is itself within 10% of the entitlement); the light
/// owner keeps its node (all it is entitled to fits there) and the heavy
/// tenant runs at home for most of what fits (4 of its 5.25 CPUs; 64-70%
/// against 76% in guests, the homeless capped tenant's CPU moving with
/// it): at least 3/4 of it. Medians of the scenario's runs: a run gave
/// the heavy tenant about 4.7 or about 5.1 CPUs, in the builds from
/// before memory following too.
fn weights_across_homes(r: &Results) -> Result<String> {
    let sp = r.runs_of("homes-contract", "softpart")?;
    let ev = r.runs_of("homes-contract", "eevdf")?;
    let median_of = |runs: &[&RunResult], f: &dyn Fn(&RunResult) -> Result<f64>| -> Result<f64> {
        let v = runs
            .iter()
            .map(|run| f(run))
            .collect::<Result<Vec<f64>>>()?;
        Ok(Summary::of(&v).map_or(0.0, |s| s.median))
    };
    let mut out = Vec::new();
    for (name, entitled) in [("light", 1.75), ("heavy", 5.25), ("capped", 1.0)] {
        let got = median_of(&sp, &|run| cpus_of(run, name))?;
        let ev_got = median_of(&ev, &|run| cpus_of(run, name))?;
        let each = sp
            .iter()
            .map(|run| cpus_of(run, name))
            .collect::<Result<Vec<f64>>>()?;
        // eevdf's figure is a reference only where eevdf itself keeps the
        // contract (within 10% of the entitlement); it strayed 26% once.
        let ev_keeps = (ev_got - entitled).abs() <= 0.1 * entitled;
        if (got - entitled).abs() > 0.1 * entitled
            || (ev_keeps && (got - ev_got).abs() > 0.1 * ev_got)
        {
            bail!(
                "{name} got {got:.2} CPUs (median; runs {}): entitled to {entitled}, eevdf gave it \
                 {ev_got:.2}; expected within 10% of both",
                list(&each)
            );
        }
        out.push(format!(
            "{name} {got:.2} [{}] of {entitled} (eevdf {ev_got:.2})",
            list(&each)
        ));
    }
    let light = median_of(&sp, &|run| Ok(locality(run, &[("light", 0..4)])))?;
    let heavy = median_of(&sp, &|run| Ok(locality(run, &[("heavy", 4..8)])))?;
    let heavy_needed = 4.0 / 5.25;
    if light < 0.9 || heavy < 0.75 * heavy_needed {
        bail!(
            "locality: light {:.0}% on its node (expected >= 90%), heavy {:.0}% (expected >= \
             {:.0}%, 3/4 of the {:.0}% that fits at home)",
            light * 100.0,
            heavy * 100.0,
            75.0 * heavy_needed,
            100.0 * heavy_needed
        );
    }
    Ok(format!(
        "{}; at home: light {:.0}%, heavy {:.0}% (fits: {:.0}%; medians of {} runs)",
        out.join(", "),
        light * 100.0,
        heavy * 100.0,
        heavy_needed * 100.0,
        sp.len()
    ))
}

/// A group capped above one CPU alone on an idle machine, measured by
/// cpu.stat's usage (the kernel's count, which cpu.max is defined
/// against): within 5% of its quota, or, where eevdf in the same boot is
/// further off, within 2% more than eevdf is. Every task is parked each
/// period, and only the refill brings a CPU back for them. Below one CPU
/// see README's limits.
fn capped_alone(r: &Results) -> Result<String> {
    let fig = |policy: &str| -> Result<f64> {
        crate::table::probe_figures(r.run_of("capped-alone-above", policy)?)
            .get("usage_ms_per_s")
            .map(|ms| ms / 1000.0)
            .with_context(|| format!("no figure usage_ms_per_s under {policy}"))
    };
    let quota = 1.5;
    let (got, ev) = (fig("softpart")?, fig("eevdf")?);
    let line = (0.05f64).max((ev - quota).abs() / quota + 0.02);
    if (got - quota).abs() > line * quota {
        bail!(
            "capped at {quota} CPUs alone, the group used {got:.3} CPU-s per s (eevdf {ev:.3}): \
             expected within {:.0}% of its quota",
            line * 100.0
        );
    }
    Ok(format!("{got:.3} CPU-s per s of {quota} (eevdf {ev:.3})"))
}

/// A CPU-bound thread whose cgroup is entitled to more than its one CPU,
/// beside message-passing tenants that outnumber the CPUs, gets that CPU:
/// at least 0.9 of it (a slice end handing the CPU to the queue's head
/// whatever the vtimes left it 0.80-0.83; eevdf gives it 0.99-1.00).
fn cpu_bound_gets_its_cpu(r: &Results) -> Result<String> {
    let sp = r.run_of("cpu-bound-beside-wakers", "softpart")?;
    let ev = r.run_of("cpu-bound-beside-wakers", "eevdf")?;
    let (got, ev_got) = (cpus_of(sp, "thread")?, cpus_of(ev, "thread")?);
    let tenant = cpus_of(sp, "tenant")?;
    if ev_got < 0.9 {
        bail!("under eevdf the thread got {ev_got:.2} CPU: the scenario does not give it its CPU");
    }
    if got < 0.9 {
        bail!(
            "the CPU-bound thread got {got:.2} CPU-s per s of the one CPU its cgroup is \
             entitled to (eevdf {ev_got:.2}; the tenant {tenant:.2})"
        );
    }
    Ok(format!(
        "the thread {got:.2} CPU-s per s (eevdf {ev_got:.2}); the tenant {tenant:.2}"
    ))
}

/// The bandwidth scenario's scx_softpart policy: --diag counts the
/// charges to capped cgroups and the writes to their shared budgets.
const BANDWIDTH_SOFTPART: &str = "softpart:--diag";

/// Writes to a capped cgroup's budget per charge, at most: every charge
/// was one before the charges were folded per node.
const FOLDS_PER_CHARGE_MOST: f64 = 0.9;

/// The capped groups within 12% of their quota (the acceptance line is
/// 5%, which the figures in docs/results/tenants.md report against; the
/// margin keeps one 6 s window from flaking), throttling seen, the
/// uncapped group given what is left, as eevdf gives it, and the caps
/// charged locally: fewer writes to a budget's shared line than charges.
fn cpu_max_caps(r: &Results) -> Result<String> {
    let sp = r.run_of("bandwidth", BANDWIDTH_SOFTPART)?;
    let ev = r.run_of("bandwidth", "eevdf")?;
    let mut out = Vec::new();
    for (name, quota) in [("capped", 1.0), ("half", 0.5)] {
        let (got, ev_got) = (cpus_of(sp, name)?, cpus_of(ev, name)?);
        if (got - quota).abs() > 0.12 * quota {
            bail!(
                "{name} (cpu.max {quota} CPUs) got {got:.2} CPUs (eevdf {ev_got:.2}): \
                 more than 12% off its quota"
            );
        }
        out.push(format!("{name} {got:.2} of {quota} (eevdf {ev_got:.2})"));
    }
    let parked = crate::table::probe_figures(sp)
        .get("parked_per_s")
        .copied()
        .unwrap_or(0.0);
    if parked <= 0.0 {
        bail!(
            "no task was parked: the caps held without throttling ({})",
            out.join(", ")
        );
    }
    let (free, ev_free) = (cpus_of(sp, "free")?, cpus_of(ev, "free")?);
    if free < 0.9 * ev_free {
        bail!("the uncapped group got {free:.2} CPUs against eevdf's {ev_free:.2}");
    }
    let c = softpart_counters(exit_of(r, "bandwidth", BANDWIDTH_SOFTPART)?)?;
    let n = |k: &str| {
        c[k].as_f64()
            .with_context(|| format!("bandwidth: no {k} in the counters"))
    };
    let (charges, folds) = (n("cap_charges")?, n("cap_folds")?);
    if charges < 100.0 || folds > FOLDS_PER_CHARGE_MOST * charges {
        bail!(
            "{folds} writes to the capped cgroups' budgets for {charges} charges: \
             not charged locally (at most {FOLDS_PER_CHARGE_MOST} a charge)"
        );
    }
    Ok(format!(
        "{}; free {free:.2} (eevdf {ev_free:.2}); {parked:.0} parked per s; \
         {:.2} budget writes per charge",
        out.join(", "),
        folds / charges
    ))
}

/// Tasks of a cgroup throttled most of the time (10 ms per 100 ms, four
/// spinners): one moved out to an uncapped cgroup runs at once, the
/// others, killed, are gone within a few periods (a second: TCG makes an
/// exit slow), and once the cgroups are removed the scheduler's cgroup
/// table is back to its size before.
fn throttled_tasks_go_on(r: &Results) -> Result<String> {
    let sp = r.run_of("bandwidth", BANDWIDTH_SOFTPART)?;
    let figs = crate::table::probe_figures(sp);
    let get = |name: &str| {
        figs.get(name)
            .copied()
            .with_context(|| format!("no figure {name} from the probe: {:?}", sp.probes))
    };
    let (moved, killed) = (get("moved_out_ms_in_1s")?, get("killed_gone_ms")?);
    let (before, after) = (get("cgroup_slots_before")?, get("cgroup_slots_after")?);
    // Throttled for real meanwhile: 10 ms per 100 ms is 250 ms in 2.5 s
    // (unthrottled, its four spinners would run for seconds).
    let throttled = get("throttled_ms_in_2500ms")?;
    if throttled > 500.0 {
        bail!("the cgroup capped at 0.1 CPU ran {throttled:.0} ms in 2.5 s: it was not throttled");
    }
    if moved < 100.0 {
        bail!("the task moved out of the throttled cgroup ran {moved:.0} ms in the next second");
    }
    if killed > 1000.0 {
        bail!("the killed tasks of the throttled cgroup took {killed:.0} ms to go (period 100 ms)");
    }
    if after != before {
        bail!("cgroup slots {before} before the probe's cgroups, {after} after their removal");
    }
    Ok(format!(
        "capped at 0.1 CPU: {throttled:.0} ms in 2.5 s; moved-out task ran {moved:.0} ms in 1 s; killed ones gone in {killed:.0} ms; cgroup slots {before} before and after"
    ))
}

/// On a kernel that hands cpu.idle over, a cgroup with it set beside a
/// busy one gets at most 5% of the machine (eevdf's figure for reference).
fn idle_cgroup_share(r: &Results) -> Result<String> {
    let sp = r.run_of("idle-cgroup-newest", "softpart")?;
    let ev = r.run_of("idle-cgroup-newest", "eevdf")?;
    let cpus = sp.cpus.len().max(1) as f64;
    let (idle, ev_idle) = (cpus_of(sp, "idle")?, cpus_of(ev, "idle")?);
    let busy = cpus_of(sp, "busy")?;
    if idle > 0.05 * cpus {
        bail!(
            "the cpu.idle cgroup got {idle:.2} of {cpus} CPUs beside a busy one ({busy:.2}); \
             at most 5% expected (eevdf {ev_idle:.2})"
        );
    }
    Ok(format!(
        "idle {idle:.2} of {cpus} CPUs, busy {busy:.2} (eevdf idle {ev_idle:.2})"
    ))
}

/// On a kernel without ops.cgroup_set_idle, scx_softpart names the cgroup
/// whose cpu.idle it cannot enforce.
fn unenforced_named(r: &Results) -> Result<String> {
    let exit = exit_of(r, "idle-cgroup", "softpart")?;
    let want = "cgroup /bench/idle: cpu.idle 1 not enforced";
    if !exit.stderr_tail.contains(want) {
        bail!(
            "no warning {want:?} in the scheduler's log: {}",
            exit.stderr_tail
        );
    }
    Ok(format!("{want} ..."))
}

/// A weight lowered and a cap raised, written while the tasks run, hold
/// in the second that starts 200 ms after the write (cpu.stat's usage):
/// heavy at weight 100 beside light's 100 is entitled to what light gets
/// (it had 3x; by thread count it would get a third), and the capped
/// group nears its new 2 CPUs (eevdf's figures beside).
fn written_under_load(r: &Results) -> Result<String> {
    let fig = |scn: &str, policy: &str, name: &str| -> Result<f64> {
        crate::table::probe_figures(r.run_of(scn, policy)?)
            .get(name)
            .copied()
            .with_context(|| format!("no figure {name} from {scn} under {policy}"))
    };
    let (light, heavy) = (
        fig("weights", "softpart", "reweighted_light_ms")?,
        fig("weights", "softpart", "reweighted_heavy_ms")?,
    );
    let (ev_light, ev_heavy) = (
        fig("weights", "eevdf", "reweighted_light_ms")?,
        fig("weights", "eevdf", "reweighted_heavy_ms")?,
    );
    // 1:1 entitled; the old weights gave 3:1, sharing by task 1:3.
    let ratio = heavy / light.max(1.0);
    if !(0.6..=1.6).contains(&ratio) {
        bail!(
            "after heavy's weight went to 100, heavy ran {heavy:.0} ms and light {light:.0} ms \
             in 1 s: {ratio:.2}x, expected about 1x (eevdf {ev_heavy:.0} and {ev_light:.0})"
        );
    }
    let raised = fig("bandwidth", BANDWIDTH_SOFTPART, "raised_cap_ms")?;
    let ev_raised = fig("bandwidth", "eevdf", "raised_cap_ms")?;
    // A second spans ten periods; its edges fall inside periods, whose
    // budget is spent early (eevdf's figure moves the same way): 25%.
    if !(1500.0..=2500.0).contains(&raised) {
        bail!(
            "the cap raised to 2 CPUs gave {raised:.0} ms in 1 s (eevdf {ev_raised:.0}), \
             expected 2000 within 25%"
        );
    }
    Ok(format!(
        "weight lowered: heavy {heavy:.0} ms, light {light:.0} ms in 1 s (eevdf {ev_heavy:.0}, {ev_light:.0}); \
         cap raised to 2 CPUs: {raised:.0} ms (eevdf {ev_raised:.0})"
    ))
}
