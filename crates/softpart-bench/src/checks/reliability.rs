//! Reliability: overload, affinity churn, CPU hotplug, cgroup churn, a
//! killed control plane, permissions and a second kernel. Each reads one
//! scenario of guest-tests/.

use super::{Check, Results, locality, probe_of};
use crate::plan::RunResult;
use anyhow::{Context, Result, bail};
use softpart_core::control::StatView;
use softpart_core::hist;

pub(super) const TESTS: &[(&str, Check)] = &[
    (
        "a_cgroup_whose_park_queue_fails_is_refused_cleanly",
        cgroup_refused_cleanly,
    ),
    (
        "overload_every_thread_runs_far_from_the_watchdog",
        overload_every_thread_runs,
    ),
    (
        "overload_keeps_homes_and_balancer",
        overload_balancer_and_homes_active,
    ),
    (
        "no_thread_runs_outside_its_allowed_cpus",
        no_run_outside_allowed_set,
    ),
    ("hotplug_reattaches_without_stall", hotplug_no_stall),
    ("hotplug_gives_every_home_back", hotplug_homes_come_back),
    (
        "cgroup_churn_leaves_no_map_entries",
        cgroup_churn_leaves_nothing,
    ),
    (
        "sigkill_falls_back_and_restart_resumes",
        sigkill_falls_back_and_restart_resumes,
    ),
    (
        "permissions_follow_sched_setaffinity",
        permissions_follow_setaffinity,
    ),
    (
        "second_kernel_loads_and_keeps_homes",
        second_kernel_loads_and_homes_hold,
    ),
    (
        "every_scheduler_exits_cleanly",
        every_scheduler_exits_cleanly,
    ),
    (
        "attaches_after_an_aborted_scheduler",
        attaches_after_an_aborted_scheduler,
    ),
    (
        "attaches_after_an_aborted_scheduler_newest_kernel",
        attaches_after_an_aborted_scheduler_newest,
    ),
];

/// The kernel's sched_ext watchdog fires after 30 s without a run; a wait
/// must stay far below it.
const WATCHDOG_S: f64 = 30.0;

/// Longest single wait of a group, s: the observer's exact maximum, or the
/// histogram's top bucket for results that predate it.
fn max_wait_s(g: &crate::plan::GroupResult) -> f64 {
    let exact = g.counters.max_delay_ns;
    let from_hist = hist::max(&g.counters.delay_hist).unwrap_or(0);
    (if exact > 0 { exact } else { from_hist }) as f64 / 1e9
}

/// Every group ran, no thread waited through the window, and no wait came
/// near the watchdog. `nice19_bound_s` is the bound for the nice-19 group.
/// `sleepers` are groups that mostly sleep (a driver script): their CPU
/// time says nothing about starvation, so only their waits are bounded.
fn every_thread_runs(
    run: &RunResult,
    nice19_bound_s: f64,
    sleepers: &[&str],
) -> Result<Vec<String>> {
    let wall = run.wall_ns as f64 / 1e9;
    let mut seen = Vec::new();
    for (name, g) in &run.groups {
        let cpu = g.counters.total_cpu_ns() as f64 / 1e9;
        // nice 19 is weight 1 against ~100 tasks of weight 100: its fair
        // share is a fraction of a percent; it must still run.
        let least = if name == "nice19" { 0.001 } else { 0.02 };
        if !sleepers.contains(&name.as_str()) && cpu < least * wall {
            bail!("group {name} got {cpu:.2} CPU-s in {wall:.0} s: starved");
        }
        if !g.stalled_threads.is_empty() {
            bail!(
                "group {name}: threads {:?} waited through the whole window without running",
                g.stalled_threads
            );
        }
        let max = max_wait_s(g);
        let bound = if name == "nice19" {
            nice19_bound_s
        } else {
            5.0
        };
        if max > bound {
            bail!(
                "group {name} waited up to {max:.2} s to run (bound {bound} s; watchdog {WATCHDOG_S} s)"
            );
        }
        seen.push(format!(
            "{name} {}t max wait {:.0} ms",
            g.threads,
            max * 1e3
        ));
    }
    Ok(seen)
}

fn attached(run: &RunResult) -> Result<()> {
    if run.sched_ext_state != "enabled" || !run.sched_ext_ops.starts_with("softpart") {
        bail!(
            "at the window's end sched_ext is {:?} with ops {:?}",
            run.sched_ext_state,
            run.sched_ext_ops
        );
    }
    if !run.early_exits.is_empty() {
        bail!("workloads died: {:?}", run.early_exits);
    }
    Ok(())
}

fn stat_json(run: &RunResult) -> Result<StatView> {
    let (_, code, out) = [
        "softpart stat --json",
        "sleep 3; softpart stat --json",
        "n=0; while",
    ]
    .iter()
    .find_map(|p| probe_of(run, p).ok())
    .context("no softpart stat --json probe")?;
    // A probe may print the uptime first.
    let out = &out[out.find('{').unwrap_or(0)..];
    if *code != 0 {
        bail!("softpart stat --json: exit {code}: {out}");
    }
    serde_json::from_str(out).with_context(|| format!("parsing softpart stat --json: {out}"))
}

fn overload_every_thread_runs(r: &Results) -> Result<String> {
    let run = r.run("overload")?;
    attached(run)?;
    let threads: usize = run.groups.values().map(|g| g.threads).sum();
    let cpus = run.cpus.len().max(1);
    if threads < 4 * cpus {
        bail!("only {threads} threads on {cpus} CPUs: not an overload");
    }
    let nice19 = 10.0;
    let seen = every_thread_runs(run, nice19, &[])?;
    Ok(format!(
        "{threads} threads on {cpus} CPUs for {:.0} s; {}",
        run.wall_ns as f64 / 1e9,
        seen.join(", ")
    ))
}

fn overload_balancer_and_homes_active(r: &Results) -> Result<String> {
    let run = r.run("overload")?;
    let v = stat_json(run)?;
    let placed = v.groups.iter().filter(|g| g.part.is_some()).count();
    if v.groups.len() != 3 || placed != 3 {
        bail!(
            "balancer holds {} groups, {placed} placed; expected the 3 bal* groups",
            v.groups.len()
        );
    }
    if v.held.cgroup_homes < 5 {
        bail!(
            "{} cgroup homes; expected churn, hackbench and 3 balanced",
            v.held.cgroup_homes
        );
    }
    // Over capacity no move helps for long: one group going back and
    // forth every period made 6-25 moves in 60 s; since the over-capacity
    // hysteresis, 0-5. At most one move per 5 s of the window.
    let moves: u64 = v.groups.iter().map(|g| g.moves).sum();
    let secs = run.wall_ns as f64 / 1e9;
    if moves as f64 > secs / 5.0 {
        bail!(
            "the balancer moved groups {moves} times in {secs:.0} s of steady overload: it flaps"
        );
    }
    Ok(format!(
        "{placed} balanced groups placed, {} cgroup homes; {moves} moves",
        v.held.cgroup_homes
    ))
}

/// In every run of every scenario, no thread began a run on a CPU outside
/// its allowed set (the overload's affinity churners included).
fn no_run_outside_allowed_set(r: &Results) -> Result<String> {
    r.run("overload")?;
    let (mut runs, mut cpu_s, mut churn_s) = (0, 0.0, 0.0);
    for run in &r.runs {
        runs += 1;
        for (name, g) in &run.groups {
            if g.counters.nr_outside > 0 {
                bail!(
                    "{} ({}): group {name} began {} runs ({:.3} s) outside its allowed CPUs",
                    run.scenario,
                    run.policy,
                    g.counters.nr_outside,
                    g.counters.outside_ns as f64 / 1e9
                );
            }
            let s = g.counters.total_cpu_ns() as f64 / 1e9;
            cpu_s += s;
            if run.scenario == "overload" && name == "churn" {
                churn_s += s;
            }
        }
    }
    if churn_s <= 0.0 {
        bail!("no CPU time from the affinity churners: nothing was checked");
    }
    Ok(format!(
        "0 runs outside the allowed set in {runs} runs ({cpu_s:.0} CPU-s, {churn_s:.0} of them affinity churners)"
    ))
}

/// Longest gap between a hotplug step and the one before it: the script
/// sleeps at most 4 s, and taking four vCPUs down or up takes 1-2 s under
/// TCG (6 s gaps seen); a stalled driver would blow far past this.
const HOTPLUG_STEP_BOUND_S: f64 = 15.0;

/// The longest time between consecutive lines of the hotplug log, whose
/// lines start with the uptime in seconds.
fn longest_step_s(log: &str) -> Option<f64> {
    let times: Vec<f64> = log
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    times.windows(2).map(|w| w[1] - w[0]).reduce(f64::max)
}

fn hotplug_no_stall(r: &Results) -> Result<String> {
    let run = r.run("hotplug")?;
    attached(run)?;
    let (_, _, log) = probe_of(run, "cat /tmp/hotplug.log")?;
    if !log.contains(" done") || log.contains("failed") {
        bail!("hotplug script: {log}");
    }
    let events = log
        .lines()
        .filter(|l| l.contains("offline") || l.contains("online "))
        .count();
    // The driver sleeps 3-4 s between steps and spends the rest in the
    // kernel's hotplug work (0.6-1.0 CPU-s in all): its progress is the
    // time between its steps, not its CPU time.
    let seen = every_thread_runs(run, 5.0, &["hotplug"])?;
    let longest = longest_step_s(log).context("no timed steps in the hotplug log")?;
    if longest > HOTPLUG_STEP_BOUND_S {
        bail!(
            "a hotplug step took {longest:.1} s after the one before (bound {HOTPLUG_STEP_BOUND_S} s): the driver stalled\n{log}"
        );
    }
    let v = stat_json(run)?;
    if v.held.restarts < 2 {
        bail!(
            "{} restarts after {events} hotplug steps: the scheduler did not reattach",
            v.held.restarts
        );
    }
    let parts: Vec<&str> = v.parts.iter().map(|p| p.cpus.as_str()).collect();
    if parts != ["0-3", "4-7"] {
        bail!("partitions after the CPUs returned: {parts:?}");
    }
    Ok(format!(
        "{events} hotplug steps, longest {longest:.1} s apart, {} reattachments; partitions {parts:?}; {}",
        v.held.restarts,
        seen.join(", ")
    ))
}

fn hotplug_homes_come_back(r: &Results) -> Result<String> {
    let run = r.run("hotplug")?;
    let (_, c1, cg) = probe_of(
        run,
        "softpart show --pid $(head -1 /sys/fs/cgroup/bench/inst1",
    )?;
    let (_, c2, task) = probe_of(
        run,
        "softpart show --pid $(head -1 /sys/fs/cgroup/bench/exechome",
    )?;
    if *c1 != 0 || !cg.contains("preferred: 4-7") || !cg.contains("cgroup /bench/inst1") {
        bail!("inst1 after hotplug: exit {c1}: {cg}");
    }
    if *c2 != 0 || !task.contains("preferred: 6-7") {
        bail!("exec'd task after hotplug: exit {c2}: {task}");
    }
    let homes = [("inst0", 0..4), ("inst1", 4..8)];
    Ok(format!(
        "cgroup home 4-7 and thread home 6-7 back after the restarts; locality over the window (with node 1 offline part of it) {:.1}%",
        locality(run, &homes) * 100.0
    ))
}

fn cgroup_churn_leaves_nothing(r: &Results) -> Result<String> {
    let run = r.run("cgroup-churn")?;
    attached(run)?;
    let (_, _, log) = probe_of(run, "cat /tmp/churn.log")?;
    let churned: usize = log
        .lines()
        .find_map(|l| l.strip_prefix("churned "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("churn log: {log}"))?;
    if churned < 200 || log.contains("failed") {
        bail!("churn log: {log}");
    }
    // No hog was lost (left parked, never released): each got at least a
    // quarter of what its caps let it have (x 0.2 CPU; y what x leaves of
    // a's 0.3; c 0.5), in clock ticks of 10 ms.
    let ran: Vec<f64> = log
        .lines()
        .find_map(|l| l.strip_prefix("hogs ran "))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect()
        })
        .with_context(|| format!("churn log: {log}"))?;
    let [x, y, c, secs] = ran[..] else {
        bail!("churn log: {log}");
    };
    for (name, ticks, cap) in [("a/x", x, 0.2), ("a/y", y, 0.1), ("c", c, 0.5)] {
        let got = ticks / 100.0 / secs.max(1.0);
        if got < cap / 4.0 {
            bail!(
                "the hog in {name} got {got:.3} CPUs over {secs} s, under a quarter of its {cap}: {log}"
            );
        }
    }
    // The caps did bite: the scheduler throttled the churned cgroups.
    let (_, _, snapshots) = probe_of(run, "cat /tmp/churn-stat.")?;
    let mut throttles = 0;
    let mut seen = 0;
    for view in serde_json::Deserializer::from_str(snapshots).into_iter::<StatView>() {
        let view = view.with_context(|| format!("softpart stat during the churn: {snapshots}"))?;
        seen += 1;
        throttles += view
            .tenants
            .iter()
            .filter(|t| t.path.starts_with("/bench/churner/"))
            .map(|t| t.throttles)
            .sum::<u64>();
    }
    if seen == 0 || throttles == 0 {
        bail!(
            "{seen} snapshots of softpart stat during the churn showed {throttles} throttles of its capped cgroups"
        );
    }
    let v = stat_json(run)?;
    let h = &v.held;
    // One slot per cgroup of the cpu controller left: none leaked.
    let cpu_cgroups = crate::table::probe_figures(run)
        .get("cpu_cgroups")
        .copied()
        .context("no figure cpu_cgroups")? as usize;
    if h.cgroup_slots != cpu_cgroups {
        bail!(
            "after {churned} cgroups: {} cgroup slots in use for {cpu_cgroups} cgroups of the cpu controller",
            h.cgroup_slots
        );
    }
    // What the live groups need: the steady group's cgroup home only.
    if (h.task_homes, h.cgroup_homes, h.home_ids, h.balanced) != (0, 1, 1, 0) {
        let left = probe_of(run, "find /sys/fs/cgroup/bench")
            .map(|(_, _, out)| out.trim().replace('\n', ", "))
            .unwrap_or_default();
        bail!(
            "after {churned} cgroups: {} thread homes, {} cgroup homes, {} home ids, {} balanced (expected 0, 1, 1, 0); left under /bench: {left}",
            h.task_homes,
            h.cgroup_homes,
            h.home_ids,
            h.balanced
        );
    }
    // The churner's script sits in a cgroup of its own the bench does not
    // follow, and its hogs in cgroups gone by the end: their ticks above
    // say they ran.
    let ran = every_thread_runs(run, 5.0, &["churner"])?;
    let cpus = |ticks: f64| ticks / 100.0 / secs.max(1.0);
    Ok(format!(
        "{churned} cgroups churned, hogs at {:.2}/{:.2}/{:.2} CPUs ({throttles} throttles seen in {seen} snapshots); left: {cpu_cgroups} cgroup slots for as many cgroups, 0 thread homes, 1 cgroup home, 1 home id, 0 balanced; {}",
        cpus(x),
        cpus(y),
        cpus(c),
        ran.join(", ")
    ))
}

fn sigkill_falls_back_and_restart_resumes(r: &Results) -> Result<String> {
    let run = r.run("kill-restart")?;
    if !run.early_exits.is_empty() {
        bail!("workloads died: {:?}", run.early_exits);
    }
    let (_, _, log) = probe_of(run, "n=0; while ! grep -q restarted /tmp/kill.log")?;
    for want in [
        "started: enabled",
        "after sigkill: disabled",
        "restarted: enabled",
    ] {
        if !log.contains(want) {
            let sched = probe_of(run, "tail -5 /tmp/kill-sched2.log").map_or("", |p| p.2.as_str());
            bail!("kill log lacks {want:?}: {log}\nthe restarted scheduler's log ends: {sched}");
        }
    }
    let (_, _, outs) = probe_of(run, "n=0; until [ -s /tmp/hb.out ]")?;
    for want in ["work0 exit 0", "work1 exit 0", "hb exit 0"] {
        if !outs.contains(want) {
            bail!("a workload did not complete ({want:?} missing): {outs}");
        }
    }
    let (_, code, show) = probe_of(run, "softpart show --pid")?;
    if *code != 0 || !show.contains("preferred: 4-7") || !show.contains("cgroup /bench/work1") {
        bail!("after the restart work1's home is not the config's: exit {code}: {show}");
    }
    let (_, _, state) = probe_of(run, "kill -INT")?;
    if state.trim() != "disabled" {
        bail!("the restarted scheduler did not stop on SIGINT: state {state}");
    }
    let rounds = outs
        .split("after ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or("?");
    // Each log line starts with the uptime it was written at.
    let at = |what: &str| -> Option<f64> {
        log.lines()
            .find(|l| l.contains(what))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
    };
    let took = |from: &str, to: &str| match (at(from), at(to)) {
        (Some(a), Some(b)) => format!("{:.1} s", b - a),
        _ => "?".to_string(),
    };
    Ok(format!(
        "sched_ext read disabled (EEVDF back) within {} of SIGKILL, polled under load; all 3 workloads completed ({rounds} hackbench rounds); the restart attached in {} and gave work1 its config home 4-7",
        took("sigkill sent", "after sigkill"),
        took("relaunching", "restarted")
    ))
}

fn permissions_follow_setaffinity(r: &Results) -> Result<String> {
    let run = r.run("permissions")?;
    let p = |prefix: &str| probe_of(run, prefix).map(|(_, c, o)| (*c, o.as_str()));
    let (c, out) = p(
        "P=$(head -1 /sys/fs/cgroup/bench/alicework/cgroup.procs); su -s /bin/sh alice -c \"softpart prefer --pid $P --cpus 2-3\"",
    )?;
    if c != 0 || !out.contains("preferred: 2-3") {
        bail!("alice could not home her own task: exit {c}: {out}");
    }
    // softpart's status for a request the scheduler refused.
    let refused = |out: &str| out.contains("exit 3") && out.to_lowercase().contains("permi");
    let (_, out) = p(
        "R=$(head -1 /sys/fs/cgroup/bench/rootwork/cgroup.procs); su -s /bin/sh alice -c \"softpart prefer --pid $R --cpus 2-3\"",
    )?;
    if !refused(out) || !out.contains("preferred: -") {
        bail!("alice homed root's task, or the refusal changed it: {out}");
    }
    let (_, out) = p("su -s /bin/sh alice -c 'softpart prefer --cgroup /bench/rootwork")?;
    if !refused(out) {
        bail!("alice homed root's cgroup: {out}");
    }
    let (_, out) = p(
        "R=$(head -1 /sys/fs/cgroup/bench/rootwork/cgroup.procs); softpart prefer --pid $R --cpus 6-7",
    )?;
    if !refused(out) || !out.contains("preferred: 6-7") {
        bail!("alice cleared root's home: {out}");
    }
    let (_, out) = p("P=$(head -1 /sys/fs/cgroup/bench/alicework/cgroup.procs); R=")?;
    if !refused(out) || !out.contains("preferred: 2-3") {
        bail!("a list with root's task was not refused whole: {out}");
    }
    let (c, out) = p(
        "R=$(head -1 /sys/fs/cgroup/bench/rootwork/cgroup.procs); su -s /bin/sh alice -c \"softpart show",
    )?;
    if c != 0 || !out.contains("allowed:") {
        bail!("alice could not read a task's home: exit {c}: {out}");
    }
    Ok("own task: set; root's task, cgroup and clear: refused, unchanged; mixed list: refused whole".into())
}

fn second_kernel_loads_and_homes_hold(r: &Results) -> Result<String> {
    let sp = r.run_of("kernel-range", "softpart")?;
    let ev = r.run_of("kernel-range", "eevdf")?;
    attached(sp)?;
    let (_, _, uname) = probe_of(sp, "uname -r")?;
    let homes = [("inst0", 0..4), ("inst1", 4..8)];
    let (l_sp, l_ev) = (locality(sp, &homes), locality(ev, &homes));
    if l_sp < 0.95 {
        bail!(
            "on {}: locality {:.1}% (eevdf {:.1}%), expected >= 95%",
            uname.trim(),
            l_sp * 100.0,
            l_ev * 100.0
        );
    }
    let exit = r
        .exits
        .iter()
        .find(|e| e.scenario == "kernel-range")
        .context("no scheduler exit from kernel-range")?;
    if !exit.clean {
        bail!(
            "on {}: exit {}: {}",
            uname.trim(),
            exit.status,
            exit.stderr_tail
        );
    }
    Ok(format!(
        "kernel {}: attached, locality {:.1}% (eevdf {:.1}%), clean exit",
        uname.trim(),
        l_sp * 100.0,
        l_ev * 100.0
    ))
}

/// Every scheduler the bench started exited cleanly on SIGINT, including
/// those that reattached after hotplug.
fn every_scheduler_exits_cleanly(r: &Results) -> Result<String> {
    if r.exits.is_empty() {
        // Worded so that --only skips it when no scx_softpart policy ran.
        bail!("no scheduler exits recorded: no result from scenario with an scx_softpart policy");
    }
    for e in &r.exits {
        if !e.clean {
            bail!(
                "{} ({}): exit {}: {}",
                e.scenario,
                e.policy,
                e.status,
                e.stderr_tail
            );
        }
    }
    Ok(format!("{} clean exits", r.exits.len()))
}

/// One cycle of after-abort's control loop, from its log.
#[derive(Debug, Default, PartialEq)]
struct AbortCycle {
    fixture_exit: Option<i32>,
    fixture_gone: bool,
    attached: bool,
    softpart_exit: Option<i32>,
    /// The workloads' counts at the cycle's start, once the fixture was
    /// gone, once scx_softpart was attached and once it had exited.
    beats: Vec<Vec<u64>>,
}

/// Reads the control loop's log: "UPTIME cycle I WHAT ... beats N N ...".
fn abort_cycles(log: &str) -> Vec<AbortCycle> {
    let mut cycles: Vec<AbortCycle> = Vec::new();
    for line in log.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(i) = (words.get(1) == Some(&"cycle"))
            .then(|| words.get(2)?.parse::<usize>().ok())
            .flatten()
        else {
            continue;
        };
        if i == 0 {
            continue;
        }
        if cycles.len() < i {
            cycles.resize_with(i, AbortCycle::default);
        }
        let c = &mut cycles[i - 1];
        let rest = words[3..].join(" ");
        let code = |w: &str| {
            rest.strip_prefix(w)
                .and_then(|r| r.split_whitespace().next()?.parse().ok())
        };
        if rest.starts_with("fixture exit") {
            c.fixture_exit = code("fixture exit");
        } else if rest.starts_with("fixture gone: disabled") {
            c.fixture_gone = true;
        } else if rest.starts_with("softpart: enabled") {
            c.attached = true;
        } else if rest.starts_with("softpart exit") {
            c.softpart_exit = code("softpart exit");
        }
        if let Some(b) = rest.split("beats").nth(1) {
            c.beats.push(
                b.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect(),
            );
        }
    }
    cycles
}

/// Every count grew from each reading to the next within the cycle: every
/// workload loop got work done while the fixture was attached and aborted,
/// while scx_softpart attached, and while it ran.
fn every_loop_progressed(c: &AbortCycle, loops: usize) -> Result<()> {
    if c.beats.len() != 4 || c.beats.iter().any(|b| b.len() != loops) {
        bail!("expected 4 readings of {loops} counts, got {:?}", c.beats);
    }
    for w in c.beats.windows(2) {
        if let Some(k) = (0..loops).find(|&k| w[1][k] <= w[0][k]) {
            bail!(
                "loop {} made no progress between two readings ({} then {}): {:?}",
                k + 1,
                w[0][k],
                w[1][k],
                c.beats
            );
        }
    }
    Ok(())
}

/// The `stale_direct_dispatch` counts of every scx_softpart exit in the
/// probe's output, one per cycle.
fn stale_counts(out: &str) -> Vec<u64> {
    out.match_indices("\"stale_direct_dispatch\":")
        .filter_map(|(i, m)| {
            let rest = &out[i + m.len()..];
            let end = rest
                .find(|ch: char| !ch.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .collect()
}

/// `seen` is once in each of the `cycles`, or the test fails naming
/// `what` and `out`.
fn in_every_cycle(seen: usize, cycles: usize, what: &str, out: &str) -> Result<()> {
    if seen != cycles {
        bail!("{what}: {seen} times in {cycles} cycles:\n{out}");
    }
    Ok(())
}

fn attaches_after_an_aborted_scheduler(r: &Results) -> Result<String> {
    after_abort(r, "after-abort", false)
}

fn attaches_after_an_aborted_scheduler_newest(r: &Results) -> Result<String> {
    after_abort(r, "after-abort-newest", true)
}

/// Another sched_ext scheduler aborts under load, then scx_softpart
/// attaches, runs and stops, as many times in a boot as the run's load:
/// no kernel warning (no_kernel_problems fails the boot on one; this names
/// it), every cycle clean, every workload loop progressing through every
/// step. `fixed`: the kernel has the upstream fix, so no left-over direct
/// dispatch may reach scx_softpart at all.
fn after_abort(r: &Results, scenario: &str, fixed: bool) -> Result<String> {
    let run = r.run(scenario)?;
    let expected = run.load as usize;
    if expected == 0 {
        bail!("{scenario} asks for no cycles (its load is the number of cycles)");
    }
    if !run.early_exits.is_empty() {
        bail!("workloads died: {:?}", run.early_exits);
    }
    let (_, _, log) = probe_of(run, "n=0; while ! grep -q done /tmp/abort.log")?;
    // This scenario's boot only: the 6.17 boot's key is a prefix of 7.3's.
    let boot = format!("{}: ", super::boot_key(&super::scenario(scenario)?));
    let warned: Vec<&String> = r
        .problems
        .iter()
        .filter(|p| p.starts_with(&boot) && p.contains("WARNING"))
        .collect();
    if !warned.is_empty() {
        bail!("the kernel warned in this boot: {warned:?}");
    }
    if !log.lines().any(|l| l.ends_with(" done")) {
        bail!("the cycles did not finish: {log}");
    }
    let cycles = abort_cycles(log);
    in_every_cycle(cycles.len(), expected, "cycles logged", log)?;
    let (_, _, fixture) = probe_of(run, "for f in /tmp/fixture")?;
    let aborted = fixture.matches("abort fixture: aborting").count();
    in_every_cycle(aborted, expected, "the fixture aborted itself", fixture)?;
    // Eight timer loops and hackbench's rounds.
    const LOOPS: usize = 9;
    for (i, c) in cycles.iter().enumerate() {
        let n = i + 1;
        if c.fixture_exit != Some(0) || !c.fixture_gone {
            bail!("cycle {n}: the fixture did not end with its own error and leave: {c:?}");
        }
        if !c.attached || c.softpart_exit != Some(0) {
            bail!("cycle {n}: scx_softpart did not attach and stop cleanly: {c:?}\n{log}");
        }
        every_loop_progressed(c, LOOPS).with_context(|| format!("cycle {n}"))?;
    }
    let (_, _, exits) = probe_of(run, "for f in /tmp/softpart")?;
    let unregistered = exits.matches("EXIT: unregistered from user space").count();
    in_every_cycle(
        unregistered,
        expected,
        "scx_softpart ended unregistered",
        exits,
    )?;
    let stale = stale_counts(exits);
    in_every_cycle(
        stale.len(),
        expected,
        "scx_softpart printed its counters",
        exits,
    )?;
    let total: u64 = stale.iter().sum();
    if fixed && total > 0 {
        bail!(
            "a kernel with the fix left direct dispatches on {total} tasks (per cycle {stale:?}): docs/reliability.md is wrong about it"
        );
    }
    let hb = cycles
        .last()
        .and_then(|c| c.beats.last())
        .map_or(0, |b| b[LOOPS - 1]);
    let cycles = if expected == 1 {
        "1 cycle".to_string()
    } else {
        format!("{expected} cycles")
    };
    Ok(format!(
        "{cycles}: the fixture aborted itself each time, scx_softpart attached and unregistered each time, no kernel warning; every loop progressed through every step ({hb} hackbench rounds); wakeups that found a left-over direct dispatch, per cycle: {stale:?}"
    ))
}

/// A cgroup whose park queue cannot be made (injected) is refused at
/// mkdir; the scheduler stays attached; the next cgroup gets a slot of
/// its own; the table is back to its size afterwards.
fn cgroup_refused_cleanly(r: &Results) -> Result<String> {
    let f = crate::table::probe_figures(r.run_of("cgroup-refused", "eevdf")?);
    let get = |name: &str| -> Result<f64> {
        f.get(name)
            .copied()
            .with_context(|| format!("no figure {name} from the probe: {f:?}"))
    };
    if get("refused_made")? != 0.0 {
        bail!("mkdir of the cgroup whose park queue fails succeeded: it was not refused");
    }
    if get("still_attached")? != 1.0 || get("next_made")? != 1.0 {
        bail!("after the refusal the scheduler detached or the next cgroup was not made: {f:?}");
    }
    let (before, with, after) = (
        get("slots_before")?,
        get("slots_with_next")?,
        get("slots_after")?,
    );
    if with != before + 1.0 || after != before {
        bail!(
            "cgroup slots {before} before, {with} with the next cgroup (expected one more), {after} \
             after (expected {before})"
        );
    }
    let (_, _, out) = probe_of(r.run_of("cgroup-refused", "eevdf")?, "sh /tmp/refused.sh")?;
    let said = |prefix: &str| {
        out.lines()
            .filter(|l| l.starts_with(prefix) && l.contains("park_queues"))
            .count()
    };
    if said("stat: limit reached") != 1 || said("log: limit reached") != 1 {
        bail!("the refusal is not said once in the log and listed by softpart stat: {out}");
    }
    Ok(format!(
        "refused at mkdir, still attached; slots {before} -> {with} -> {after}; logged once and listed as a limit"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abort_cycle_is_read_from_its_log() {
        let log = "8.2 cycle 1 start beats 21 23\n\
                   14.8 cycle 1 fixture exit 0\n\
                   15.2 cycle 1 fixture gone: disabled beats 77 79\n\
                   26.8 cycle 1 softpart: enabled beats 164 167\n\
                   32.1 cycle 1 softpart exit 0 beats 198 201\n\
                   32.4 cycle 2 start beats 200 204\n\
                   38.0 cycle 2 fixture exit 1\n\
                   130.4 done\n";
        let c = abort_cycles(log);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].fixture_exit, Some(0));
        assert!(c[0].fixture_gone && c[0].attached);
        assert_eq!(c[0].softpart_exit, Some(0));
        assert_eq!(
            c[0].beats,
            vec![vec![21, 23], vec![77, 79], vec![164, 167], vec![198, 201]]
        );
        every_loop_progressed(&c[0], 2).unwrap();
        assert_eq!(c[1].fixture_exit, Some(1));
        assert!(every_loop_progressed(&c[1], 2).is_err());
        let stuck = AbortCycle {
            beats: vec![vec![1, 5], vec![2, 5], vec![3, 6], vec![4, 7]],
            ..Default::default()
        };
        let e = every_loop_progressed(&stuck, 2).unwrap_err().to_string();
        assert!(e.contains("loop 2 made no progress"), "{e}");
    }

    #[test]
    fn stale_counts_come_one_per_exit() {
        let out = "== /tmp/softpart1.log\n{\"softpart_counters\":{\"pick_kernel\":0,\"stale_direct_dispatch\":1,\"enqueue\":28}}\n\
                   == /tmp/softpart2.log\n{\"softpart_counters\":{\"stale_direct_dispatch\":0}}\n";
        assert_eq!(stale_counts(out), vec![1, 0]);
    }

    #[test]
    fn the_longest_hotplug_step_is_the_widest_gap() {
        let log = "11.59 offline 4-7: online 0-3\n17.60 online 4-7: online 0-7\n\
                   21.74 offline 4-7\n35.08 done\n";
        let longest = longest_step_s(log).unwrap();
        assert!((longest - 13.34).abs() < 1e-9, "{longest}");
        assert_eq!(longest_step_s("11.0 offline 4-7\n"), None);
        assert_eq!(longest_step_s("cpu4 -> 0 failed\n"), None);
    }
}
