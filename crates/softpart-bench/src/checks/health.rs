//! Whether the scheduler stayed healthy in every boot: a clean kernel log,
//! attached through churn, a clean unload.

use super::*;

pub(super) const TESTS: &[(&str, Check)] = &[
    ("no_kernel_problems", no_kernel_problems),
    (
        "softpart_stays_attached_under_churn",
        softpart_stays_attached,
    ),
    ("softpart_unloads_cleanly", softpart_unloads_cleanly),
];

fn no_kernel_problems(r: &Results) -> Result<String> {
    if !r.problems.is_empty() {
        bail!("{}", r.problems.join("\n"));
    }
    if r.restarts.is_empty() {
        return Ok("kernel log clean".into());
    }
    // Said in the passing line too, so a fault that keeps coming back is seen.
    Ok(format!(
        "kernel log clean; booted again after: {}",
        r.restarts.join("; ")
    ))
}

fn softpart_stays_attached(r: &Results) -> Result<String> {
    let run = r.run("overload")?;
    if run.sched_ext_state != "enabled" || !run.sched_ext_ops.starts_with("softpart") {
        bail!(
            "after 60 s sched_ext state is {:?} with ops {:?}: the scheduler was kicked out",
            run.sched_ext_state,
            run.sched_ext_ops
        );
    }
    if !run.early_exits.is_empty() {
        bail!("workloads died: {:?}", run.early_exits);
    }
    Ok(format!(
        "{} after {:.0} s",
        run.sched_ext_state,
        run.wall_ns as f64 / 1e9
    ))
}

fn softpart_unloads_cleanly(r: &Results) -> Result<String> {
    r.run("overload")?;
    let exit = r
        .exits
        .iter()
        .find(|e| e.scenario == "overload")
        .context("scx_softpart never attached")?;
    if !exit.clean {
        bail!("exit {}: {}", exit.status, exit.stderr_tail);
    }
    if !exit.stderr_tail.contains("unregistered from user space") {
        bail!("unexpected exit reason: {}", exit.stderr_tail);
    }
    let c = softpart_counters(exit)?;
    let get = |k: &str| c[k].as_u64().unwrap_or(0);
    // Every wakeup placed on an idle CPU, at home or away: every pick_*
    // counter but pick_none and pick_kernel (a subset of pick_near and
    // pick_cpu_any).
    let placed: u64 = c
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("pick_") && *k != "pick_none" && *k != "pick_kernel")
        .filter_map(|(_, v)| v.as_u64())
        .sum();
    let dispatched = get("dispatch_own") + get("dispatch_steal");
    if placed == 0 || dispatched == 0 || get("enqueue") == 0 {
        bail!("the fast path did not run: {c}");
    }
    Ok(format!(
        "{placed} wakeups placed on idle CPUs, {} queued, {dispatched} dispatches",
        get("enqueue")
    ))
}
