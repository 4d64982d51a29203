//! Guest tests: one guest boot runs the scenarios in guest-tests/, then each
//! test below checks a property of what came back. Margins are wide enough
//! never to flake under TCG; the bench carries the precise figures.

use crate::plan::{GuestInfo, Message, RunResult, SchedulerExit};
use crate::scenario::Scenario;
use crate::{boot, plan_for, reliability};
use anyhow::{Context, Result, bail};
use softpart_core::hist;
use softpart_core::stats::Summary;
use std::collections::BTreeMap;
use std::path::Path;

const SCENARIOS: &[(&str, &str)] = &[
    ("overload", include_str!("../guest-tests/overload.toml")),
    ("hotplug", include_str!("../guest-tests/hotplug.toml")),
    (
        "cgroup-churn",
        include_str!("../guest-tests/cgroup-churn.toml"),
    ),
    (
        "kill-restart",
        include_str!("../guest-tests/kill-restart.toml"),
    ),
    (
        "permissions",
        include_str!("../guest-tests/permissions.toml"),
    ),
    (
        "kernel-range",
        include_str!("../guest-tests/kernel-range.toml"),
    ),
    (
        "observer-validation",
        include_str!("../guest-tests/observer-validation.toml"),
    ),
    (
        "spill-paths",
        include_str!("../guest-tests/spill-paths.toml"),
    ),
    (
        "spill-paths-newest",
        include_str!("../guest-tests/spill-paths-newest.toml"),
    ),
    (
        "spill-futex",
        include_str!("../guest-tests/spill-futex.toml"),
    ),
    (
        "spill-owned",
        include_str!("../guest-tests/spill-owned.toml"),
    ),
    (
        "kthread-wait",
        include_str!("../guest-tests/kthread-wait.toml"),
    ),
    (
        "hold-put-back",
        include_str!("../guest-tests/hold-put-back.toml"),
    ),
    (
        "hold-visitors",
        include_str!("../guest-tests/hold-visitors.toml"),
    ),
    ("steal", include_str!("../guest-tests/steal.toml")),
    (
        "steal-one-instance",
        include_str!("../guest-tests/steal-one-instance.toml"),
    ),
    ("swap-back", include_str!("../guest-tests/swap-back.toml")),
    ("reaction", include_str!("../guest-tests/reaction.toml")),
    (
        "evict-toward-room",
        include_str!("../guest-tests/evict-toward-room.toml"),
    ),
    (
        "overfull-steal",
        include_str!("../guest-tests/overfull-steal.toml"),
    ),
    (
        "cgroup-made-again",
        include_str!("../guest-tests/cgroup-made-again.toml"),
    ),
    (
        "homes-two-instances",
        include_str!("../guest-tests/homes-two-instances.toml"),
    ),
    (
        "homes-one-instance",
        include_str!("../guest-tests/homes-one-instance.toml"),
    ),
    (
        "config-and-stats",
        include_str!("../guest-tests/config-and-stats.toml"),
    ),
    (
        "topology-4n2c2t",
        include_str!("../guest-tests/topology-4n2c2t.toml"),
    ),
    (
        "balance-phase",
        include_str!("../guest-tests/balance-phase.toml"),
    ),
    (
        "balance-4n2c2t",
        include_str!("../guest-tests/balance-4n2c2t.toml"),
    ),
    (
        "topology-1n4c2t",
        include_str!("../guest-tests/topology-1n4c2t.toml"),
    ),
];

/// A check returns what it measured, printed beside "ok".
type Check = fn(&Results) -> Result<String>;

const TESTS: &[(&str, Check)] = &[
    ("no_kernel_problems", no_kernel_problems),
    (
        "softpart_stays_attached_under_churn",
        softpart_stays_attached,
    ),
    ("softpart_unloads_cleanly", softpart_unloads_cleanly),
    (
        "overload_every_thread_runs_far_from_the_watchdog",
        reliability::overload_every_thread_runs,
    ),
    (
        "overload_keeps_homes_and_balancer",
        reliability::overload_balancer_and_homes_active,
    ),
    (
        "no_thread_runs_outside_its_allowed_cpus",
        reliability::no_run_outside_allowed_set,
    ),
    (
        "hotplug_reattaches_without_stall",
        reliability::hotplug_no_stall,
    ),
    (
        "hotplug_gives_every_home_back",
        reliability::hotplug_homes_come_back,
    ),
    (
        "cgroup_churn_leaves_no_map_entries",
        reliability::cgroup_churn_leaves_nothing,
    ),
    (
        "sigkill_falls_back_and_restart_resumes",
        reliability::sigkill_falls_back_and_restart_resumes,
    ),
    (
        "permissions_follow_sched_setaffinity",
        reliability::permissions_follow_setaffinity,
    ),
    (
        "second_kernel_loads_and_keeps_homes",
        reliability::second_kernel_loads_and_homes_hold,
    ),
    (
        "every_scheduler_exits_cleanly",
        reliability::every_scheduler_exits_cleanly,
    ),
    (
        "observer_pinned_group_is_all_on_its_node",
        observer_pinned_group,
    ),
    (
        "observer_hog_time_matches_wall_time",
        observer_hog_wall_time,
    ),
    ("observer_agrees_with_cpuacct", observer_agrees_with_cpuacct),
    (
        "observer_windows_fit_the_machine",
        observer_windows_fit_the_machine,
    ),
    (
        "observer_sees_run_delay_and_idle_while_waiting",
        observer_run_delay,
    ),
    (
        "observer_run_delay_agrees_with_schedstat",
        observer_run_delay_schedstat,
    ),
    ("homes_keep_instances_at_home", homes_keep_instances_at_home),
    ("homes_let_an_instance_burst", homes_let_an_instance_burst),
    (
        "spills_through_the_kernels_idle_pick",
        spills_through_kernel_pick,
    ),
    (
        "spills_through_our_own_idle_search",
        spills_through_own_search,
    ),
    (
        "spills_wait_at_home_only_after_sync_wakeups",
        queued_spills_follow_sync_wakeups,
    ),
    (
        "spills_onto_cpus_their_owners_just_used_wait_at_home_when_asked",
        queued_spills_onto_owned_cpus,
    ),
    (
        "kthread_turns_are_waited_for_on_the_cpu",
        kthread_turns_waited_on_cpu,
    ),
    (
        "put_back_threads_are_held_for_their_cpu",
        put_back_held_for_cpu,
    ),
    (
        "visitors_are_held_for_their_cpu_while_a_task_passes",
        visitors_held_for_their_cpu,
    ),
    (
        "idle_cpus_take_the_other_partitions_waiting_tasks",
        idle_cpus_steal,
    ),
    (
        "cross_node_moves_are_told_by_their_decision",
        cross_node_moves_attributed,
    ),
    (
        "steals_wait_on_cpus_their_owners_just_used",
        steals_deferred_for_owners,
    ),
    (
        "steals_do_not_wait_on_cpus_serving_no_owners",
        steals_not_deferred_without_owners,
    ),
    ("yields_with_nobody_waiting_keep_the_cpu", yields_kept),
    ("yields_away_from_home_keep_the_cpu_too", yields_away_kept),
    ("bench_times_each_scheduler_callback", callbacks_timed),
    (
        "idle_masks_per_node_where_the_kernel_has_them",
        idle_masks_per_node,
    ),
    (
        "evictions_only_toward_room_at_a_full_machine",
        evictions_toward_room,
    ),
    (
        "over_full_partitions_lose_the_steal_wait",
        overfull_partitions_steal_at_once,
    ),
    (
        "swapped_instances_swap_back_home",
        swapped_instances_swap_back,
    ),
    (
        "a_full_home_spills_at_the_first_wakeup_and_returns_within_100ms",
        reaction_spills_at_once_and_returns,
    ),
    (
        "a_cgroup_made_again_keeps_its_home",
        cgroup_made_again_keeps_its_home,
    ),
    ("cli_shows_a_cgroup_home", cli_shows_cgroup_home),
    ("cli_rejects_bad_input_naming_it", cli_rejects_bad_input),
    ("cli_exec_home_survives_exec_and_fork", cli_exec_inherits),
    (
        "cli_task_home_overrides_and_clears",
        cli_task_home_and_clear,
    ),
    ("config_file_gives_new_cgroups_homes", config_file_homes),
    ("stats_report_groups_and_partitions", stats_report),
    ("operator_mistakes_are_refused", operator_mistakes_refused),
    ("cli_sets_a_group_softness", cli_group_softness),
    ("topology_4n2c2t_guest_and_partitions", topology_4n),
    ("balancer_settles_groups_apart", balancer_settles_apart),
    ("balancer_loses_no_capacity", balancer_capacity),
    ("balancer_still_in_steady_state", balancer_steady),
    ("balancer_resettles_after_a_phase_change", balancer_phase),
    ("topology_1n4c2t_guest_and_partitions", topology_1n),
];

pub struct Results {
    /// Guest facts by topology spec.
    pub guests: BTreeMap<String, GuestInfo>,
    pub problems: Vec<String>,
    pub runs: Vec<RunResult>,
    pub exits: Vec<SchedulerExit>,
    /// Guests booted again after an emulator fault (`boot`).
    pub restarts: Vec<String>,
}

impl Results {
    pub fn run_of(&self, scenario: &str, policy: &str) -> Result<&RunResult> {
        self.runs
            .iter()
            .find(|r| r.scenario == scenario && r.policy == policy)
            .with_context(|| format!("no {policy} result from scenario {scenario}"))
    }

    /// Every run of `policy` in `scenario` (one per rep); an error if none.
    pub fn runs_of(&self, scenario: &str, policy: &str) -> Result<Vec<&RunResult>> {
        let runs: Vec<_> = self
            .runs
            .iter()
            .filter(|r| r.scenario == scenario && r.policy == policy)
            .collect();
        if runs.is_empty() {
            bail!("no {policy} result from scenario {scenario}");
        }
        Ok(runs)
    }

    pub fn run(&self, scenario: &str) -> Result<&RunResult> {
        self.runs
            .iter()
            .find(|r| r.scenario == scenario)
            .with_context(|| format!("no result from scenario {scenario}"))
    }
}

fn scenario(name: &str) -> Result<Scenario> {
    let text = SCENARIOS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .context("unknown test scenario")?;
    let sc: Scenario = toml::from_str(text)?;
    sc.validate()?;
    Ok(sc)
}

pub fn run_guest_tests(out: &Path, only: &[String]) -> Result<()> {
    for name in only {
        if !SCENARIOS.iter().any(|(n, _)| n == name) {
            let known: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
            bail!(
                "--only {name:?}: no such test scenario (there are: {})",
                known.join(", ")
            );
        }
    }
    let scenarios = SCENARIOS
        .iter()
        .filter(|(n, _)| only.is_empty() || only.iter().any(|o| o == n))
        .map(|(n, _)| scenario(n))
        .collect::<Result<Vec<_>>>()?;
    // One boot per topology, kernel and guest kernel parameters.
    let boot_key = |s: &Scenario| {
        let mut key = match &s.kernel {
            Some(k) => format!("{}@{k}", s.topology),
            None => s.topology.clone(),
        };
        for a in &s.guest_args {
            key += &format!("-{a}");
        }
        key
    };
    let mut topologies: Vec<String> = scenarios.iter().map(boot_key).collect();
    topologies.sort();
    topologies.dedup();
    let mut results = Results {
        guests: BTreeMap::new(),
        problems: vec![],
        runs: vec![],
        exits: vec![],
        restarts: vec![],
    };
    let mut logs = Vec::new();
    for topo in &topologies {
        let group: Vec<Scenario> = scenarios
            .iter()
            .filter(|s| &boot_key(s) == topo)
            .cloned()
            .collect();
        let plan = plan_for(&group, None, None)?;
        eprintln!("guest tests: booting a {topo} guest");
        let gr = boot(&plan, &out.join(topo))?;
        eprintln!(
            "guest tests: {topo} guest ran {:.0} s; console log {}",
            gr.elapsed.as_secs_f64(),
            gr.console_path.display()
        );
        logs.push(gr.console_path.display().to_string());
        if let Some(r) = gr.restarted {
            results.restarts.push(format!("{topo}: {r}"));
        }
        if let Some(info) = gr.info {
            results.guests.insert(topo.clone(), info);
        }
        results
            .problems
            .extend(gr.problems.into_iter().map(|p| format!("{topo}: {p}")));
        results.runs.extend(gr.runs);
        results
            .exits
            .extend(gr.messages.iter().filter_map(|m| match m {
                Message::SchedulerStopped(s) => Some(s.clone()),
                _ => None,
            }));
    }
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "guests": results.guests,
            "problems": results.problems,
            "restarts": results.restarts,
            "runs": results.runs,
        }))?,
    )?;
    let (mut passed, mut failed) = (0, 0);
    for (name, check) in TESTS {
        let outcome = check(&results);
        // With --only, a test whose scenario did not run is not a failure.
        if !only.is_empty()
            && let Err(e) = &outcome
            && ["result from scenario", "guest came up"]
                .iter()
                .any(|m| format!("{e:#}").contains(m))
        {
            println!("test guest::{name} ... skipped (--only)");
            continue;
        }
        match outcome {
            Ok(measured) => {
                println!("test guest::{name} ... ok ({measured})");
                passed += 1;
            }
            Err(e) => {
                println!("test guest::{name} ... FAILED: {e:#}");
                failed += 1;
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        bail!(
            "{failed} guest test(s) failed; console logs: {}",
            logs.join(" ")
        );
    }
    Ok(())
}

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

/// The counters line scx_softpart prints when it exits.
fn softpart_counters(exit: &SchedulerExit) -> Result<serde_json::Value> {
    let line = exit
        .stdout_tail
        .lines()
        .find(|l| l.contains("softpart_counters"))
        .context("scx_softpart printed no counters")?;
    let v: serde_json::Value = serde_json::from_str(line)?;
    Ok(v["softpart_counters"].clone())
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

fn group<'a>(run: &'a RunResult, name: &str) -> Result<&'a crate::plan::GroupResult> {
    run.groups
        .get(name)
        .with_context(|| format!("no group {name} in the results"))
}

fn observer_pinned_group(r: &Results) -> Result<String> {
    let run = r.run("observer-validation")?;
    let g = &group(run, "pinned0")?.counters;
    let total = g.total_cpu_ns();
    let node0: u64 = g.cpu_ns.iter().take(4).sum();
    if total == 0 {
        bail!("pinned0 got no CPU time");
    }
    let share = node0 as f64 / total as f64;
    if share < 0.999 {
        bail!("pinned0 ran {:.2}% on node 0, expected 100%", share * 100.0);
    }
    if g.migrations[3] != 0 {
        bail!(
            "pinned0 shows {} cross-node migrations, expected 0",
            g.migrations[3]
        );
    }
    let rate = total as f64 / run.wall_ns as f64;
    if !(3.6..=4.1).contains(&rate) {
        bail!("pinned0 (4 threads on 4 CPUs) got {rate:.2} CPU-s/s, expected ~4");
    }
    Ok(format!(
        "{:.2}% on node 0, {rate:.2} CPU-s/s",
        share * 100.0
    ))
}

fn observer_hog_wall_time(r: &Results) -> Result<String> {
    let run = r.run("observer-validation")?;
    let g = &group(run, "hog")?.counters;
    // One thread alone on its CPU (the others allowed there are idle
    // neighbours' kworkers): it runs all the time but for their blips.
    let ratio = g.total_cpu_ns() as f64 / run.wall_ns as f64;
    if !(0.93..=1.02).contains(&ratio) {
        bail!("the hog's CPU time is {ratio:.3} x wall time, expected 1 (0.93-1.02)");
    }
    Ok(format!("{ratio:.3} x wall time"))
}

/// The observer against cpuacct, as rates over each one's own window: the
/// two are read back to back, but a busy TCG guest can stall a read.
fn observer_agrees_with_cpuacct(r: &Results) -> Result<String> {
    let run = r.run("observer-validation")?;
    let (obs_wall, acct_wall) = (run.wall_ns.max(1) as f64 / 1e9, run.cpuacct_wall_s());
    let mut worst: f64 = 0.0;
    // Not the sleeper: it runs ~0.05 CPU-s/s in 100 wakeups a second, and
    // the observer (switch to switch) charges it each wakeup's switch and
    // signal delivery, which cpuacct leaves out: 0.066 vs 0.047 once.
    for (name, g) in run.groups.iter().filter(|(n, _)| *n != "sleeper") {
        let obs = g.counters.total_cpu_ns() as f64 / 1e9 / obs_wall;
        let acct = g.cpuacct_ns.iter().sum::<u64>() as f64 / 1e9 / acct_wall;
        if acct <= 0.0 || (obs / acct - 1.0).abs() > 0.05 {
            bail!(
                "group {name}: observer {obs:.3} CPU-s/s over {obs_wall:.2} s vs cpuacct {acct:.3} CPU-s/s over {acct_wall:.2} s"
            );
        }
        worst = worst.max((obs / acct - 1.0).abs());
        for (cpu, (&o, &a)) in g
            .counters
            .cpu_ns
            .iter()
            .zip(g.cpuacct_ns.iter())
            .enumerate()
        {
            let (o, a) = (o as f64 / 1e9 / obs_wall, a as f64 / 1e9 / acct_wall);
            if (o - a).abs() > 0.05 {
                bail!("group {name} CPU {cpu}: observer {o:.3} CPU-s/s vs cpuacct {a:.3} CPU-s/s");
            }
        }
    }
    Ok(format!(
        "largest per-group difference {:.2}% (windows {obs_wall:.2} s and {acct_wall:.2} s)",
        worst * 100.0
    ))
}

/// Every window of every scenario: the groups' CPU time fits in the
/// machine (CPU ids x wall time), to within the error the window's own
/// reads allow, and those reads are short. Reads preempted for up to
/// 600 ms once gave 8.4 CPU-s per s on 8 CPUs (RealtimeReads); they took
/// 4-12% of 4 of 5 windows of an overloaded scenario. Reading every
/// cgroup the observer ever saw took 250 ms a read (snapshot_of).
fn observer_windows_fit_the_machine(r: &Results) -> Result<String> {
    let (mut worst_fill, mut worst_read_ms, mut checked) = (0.0f64, 0.0f64, 0);
    let mut long_reads = Vec::new();
    let mut read_shares = Vec::new();
    for run in r.runs.iter().filter(|run| run.wall_ns > 0) {
        let capacity = run.cpus.len() as f64 * run.wall_ns as f64;
        let used: u64 = run.groups.values().map(|g| g.counters.total_cpu_ns()).sum();
        let fill = used as f64 / capacity;
        let read_share = run.snapshot_read_ns as f64 / run.wall_ns as f64;
        let read_ms = run.snapshot_read_ns as f64 / 1e6;
        if fill > 1.02 + read_share {
            bail!(
                "{} under {} (load {}, rep {}): the groups ran {:.2} CPU-s per s on {} CPUs (reads {read_ms:.0} ms)",
                run.scenario,
                run.policy,
                run.load,
                run.rep,
                used as f64 / run.wall_ns as f64,
                run.cpus.len()
            );
        }
        // Relative, not absolute, and judged by the median: a SCHED_FIFO
        // read still waits while the host runs other vCPUs, on a 16-vCPU
        // guest at full load for 400-600 ms (6-10% of a 6.5 s window),
        // twice in one CI run, in windows whose median read took 0.02%.
        // A reader that is slow by itself (preempted inside the guest, or
        // reading too much) is slow in most windows and moves the median.
        if read_share > 0.25 {
            bail!(
                "{} under {} (load {}, rep {}): a snapshot read took {read_ms:.0} ms ({}), {:.1}% of the {:.1} s window (limit 25%)",
                run.scenario,
                run.policy,
                run.load,
                run.rep,
                read_split(run),
                read_share * 100.0,
                run.wall_ns as f64 / 1e9
            );
        }
        if read_share > 0.05 {
            long_reads.push(format!(
                "{} under {} (load {}, rep {}): {read_ms:.0} ms ({}), {:.1}%",
                run.scenario,
                run.policy,
                run.load,
                run.rep,
                read_split(run),
                read_share * 100.0
            ));
        }
        worst_fill = worst_fill.max(fill);
        worst_read_ms = worst_read_ms.max(read_ms);
        read_shares.push(read_share);
        checked += 1;
    }
    if checked == 0 {
        bail!("no windows: nothing was checked");
    }
    read_shares.sort_by(f64::total_cmp);
    let median = read_shares[read_shares.len() / 2];
    if median > 0.02 {
        bail!(
            "the median snapshot read took {:.1}% of its window (limit 2%); {} of {checked} over 5%: {}",
            median * 100.0,
            long_reads.len(),
            long_reads.join("; ")
        );
    }
    Ok(format!(
        "{checked} windows; fullest {:.1}% of the machine, median read {:.2}% of its window, longest {worst_read_ms:.0} ms, {} over 5%{}",
        worst_fill * 100.0,
        median * 100.0,
        long_reads.len(),
        long_reads
            .first()
            .map(|r| format!(": {r}"))
            .unwrap_or_default()
    ))
}

/// Where a snapshot read's time went, as the reading thread's schedstat
/// saw it: on a CPU (running, or on a vCPU the host was not running),
/// runnable behind other guest work, or neither (asleep).
fn read_split(run: &RunResult) -> String {
    let (on, waiting) = (run.snapshot_read_on_cpu_ns, run.snapshot_read_runnable_ns);
    let asleep = run.snapshot_read_ns.saturating_sub(on + waiting);
    format!(
        "on a CPU {:.0} ms, runnable {:.0} ms, asleep {:.0} ms",
        on as f64 / 1e6,
        waiting as f64 / 1e6,
        asleep as f64 / 1e6
    )
}

fn observer_run_delay(r: &Results) -> Result<String> {
    let run = r.run("observer-validation")?;
    let g = &group(run, "crowded")?.counters;
    let on7 = g.cpu_ns.get(7).copied().unwrap_or(0) as f64 / g.total_cpu_ns().max(1) as f64;
    if on7 < 0.999 {
        bail!("crowded ran {:.1}% on CPU 7, expected 100%", on7 * 100.0);
    }
    let p50 = hist::quantile(&g.delay_hist, 0.5).unwrap_or(0);
    if p50 < 1_000_000 {
        bail!(
            "4 CPU-bound threads on one CPU: run delay p50 {} us, expected > 1 ms",
            p50 / 1000
        );
    }
    let wall = run.wall_ns as f64 / 1e9;
    let waiting_idle: f64 =
        run.cpus.iter().map(|c| c.idle_waiting_ns).sum::<u64>() as f64 / 1e9 / wall;
    // CPUs 4-6 minus the hog: about two CPUs idle while crowded waits.
    if waiting_idle < 1.0 {
        bail!("idle while waiting {waiting_idle:.2} CPU-s/s, expected about 2");
    }
    // Where a wait ended: crowded's on a CPU busy with a sibling, the
    // sleeper's on its CPU leaving idle.
    let idle_end = |g: &softpart_observer::counters::GroupCounters| {
        g.idle_end_hist.iter().sum::<u64>() as f64 / g.delay_hist.iter().sum::<u64>().max(1) as f64
    };
    let crowded_idle = idle_end(g);
    if crowded_idle > 0.05 {
        bail!(
            "{:.1}% of crowded's waits ended on an idle CPU, expected ~0 (CPU 7 never idles while they wait)",
            crowded_idle * 100.0
        );
    }
    let s = &group(run, "sleeper")?.counters;
    let sleeper_idle = idle_end(s);
    if s.nr_delays < 50 || sleeper_idle < 0.8 {
        bail!(
            "{:.1}% of the sleeper's {} waits ended on an idle CPU, expected nearly all of at least 50",
            sleeper_idle * 100.0,
            s.nr_delays
        );
    }
    // How a wait began: crowded's CPU-bound threads only ever wait after
    // being switched out runnable, the sleeper only after a wakeup.
    let preempted = |g: &softpart_observer::counters::GroupCounters| {
        g.preempted_hist.iter().sum::<u64>() as f64 / g.delay_hist.iter().sum::<u64>().max(1) as f64
    };
    let (crowded_pre, sleeper_pre) = (preempted(g), preempted(s));
    if crowded_pre < 0.95 || sleeper_pre > 0.05 {
        bail!(
            "waits that began switched out runnable: crowded {:.1}% (expected ~100), the sleeper {:.1}% (expected ~0)",
            crowded_pre * 100.0,
            sleeper_pre * 100.0
        );
    }
    Ok(format!(
        "crowded p50 {} us, idle while waiting {waiting_idle:.2} CPU-s/s; waits ended on an idle CPU: crowded {:.1}%, the sleeper {:.1}% of {}; began switched out runnable: crowded {:.1}%, the sleeper {:.1}%",
        p50 / 1000,
        crowded_idle * 100.0,
        sleeper_idle * 100.0,
        s.nr_delays,
        crowded_pre * 100.0,
        sleeper_pre * 100.0
    ))
}

fn topology_check(r: &Results, spec: &str, nodes: &[&str], parts: &str) -> Result<String> {
    let info = r
        .guests
        .get(spec)
        .with_context(|| format!("no {spec} guest came up"))?;
    if info.nodes != nodes {
        bail!(
            "{spec} guest has NUMA nodes {:?}, expected {nodes:?}",
            info.nodes
        );
    }
    let pairs = info.nr_cpus / 2;
    if info.smt_siblings.len() != pairs
        || info.smt_siblings.first().map(String::as_str) != Some("0-1")
    {
        bail!(
            "{spec} guest has SMT siblings {:?}, expected {pairs} pairs 0-1, 2-3, ...",
            info.smt_siblings
        );
    }
    let scenario = format!("topology-{spec}");
    // Under --only, a scenario that did not run is skipped, not failed.
    r.run(&scenario)?;
    let exit = r
        .exits
        .iter()
        .find(|e| e.scenario == scenario)
        .with_context(|| format!("scx_softpart never attached on {spec}"))?;
    if !exit.stderr_tail.contains(parts) {
        bail!(
            "scx_softpart on {spec} did not report {parts:?}: {}",
            exit.stderr_tail
        );
    }
    if !exit.clean {
        bail!(
            "scx_softpart on {spec} exited {}: {}",
            exit.status,
            exit.stderr_tail
        );
    }
    let granted = |policy: &str| -> Result<f64> {
        let run = r
            .runs
            .iter()
            .find(|x| x.scenario == scenario && x.policy == policy)
            .with_context(|| format!("no {policy} run on {spec}"))?;
        let ns: u64 = run.groups.values().map(|g| g.counters.total_cpu_ns()).sum();
        Ok(ns as f64 / run.wall_ns as f64)
    };
    let (softpart, eevdf) = (granted("softpart")?, granted("eevdf")?);
    // More runnable threads than CPUs: every CPU should be busy. Under TCG
    // idle vCPUs wake slowly, so the bar is what the default scheduler
    // achieves in the same boot.
    if softpart < 0.8 * eevdf || softpart < 0.7 * info.nr_cpus as f64 {
        bail!(
            "scx_softpart granted {softpart:.1} CPU-s/s, eevdf {eevdf:.1}, on {} CPUs with more work than CPUs",
            info.nr_cpus
        );
    }
    Ok(format!(
        "scx_softpart {softpart:.1} CPU-s/s, eevdf {eevdf:.1}, {} CPUs",
        info.nr_cpus
    ))
}

fn topology_4n(r: &Results) -> Result<String> {
    topology_check(
        r,
        "4n2c2t",
        &["0-3", "4-7", "8-11", "12-15"],
        "partitions: PART-0 0-3, PART-1 4-7, PART-2 8-11, PART-3 12-15",
    )
}

fn topology_1n(r: &Results) -> Result<String> {
    topology_check(r, "1n4c2t", &["0-7"], "partitions: PART-0 0-7")
}

/// The observer's total wait time against the kernel's schedstat run_delay,
/// for the group that waits most (four threads on one CPU). Waits that
/// straddle the window's edges are counted differently by the two, so the
/// margin is 10%.
fn observer_run_delay_schedstat(r: &Results) -> Result<String> {
    let run = r.run("observer-validation")?;
    let g = group(run, "crowded")?;
    let obs = g.counters.delay_ns as f64 / 1e9;
    let kernel = g.schedstat_delay_ns as f64 / 1e9;
    if kernel < 1.0 {
        bail!("schedstat shows only {kernel:.2} s of run delay for 4 threads sharing one CPU");
    }
    if (obs / kernel - 1.0).abs() > 0.10 {
        bail!("observer run delay {obs:.2} s vs schedstat {kernel:.2} s");
    }
    Ok(format!("observer {obs:.2} s, schedstat {kernel:.2} s"))
}

/// Share of all groups' CPU time spent on their scenario home.
pub fn locality(run: &RunResult, homes: &[(&str, std::ops::Range<usize>)]) -> f64 {
    let (mut home, mut total) = (0u64, 0u64);
    for (name, cpus) in homes {
        if let Some(g) = run.groups.get(*name) {
            total += g.counters.total_cpu_ns();
            home += g
                .counters
                .cpu_ns
                .iter()
                .enumerate()
                .filter(|(c, _)| cpus.contains(c))
                .map(|(_, n)| n)
                .sum::<u64>();
        }
    }
    home as f64 / total.max(1) as f64
}

fn granted(run: &RunResult) -> f64 {
    run.groups
        .values()
        .map(|g| g.counters.total_cpu_ns())
        .sum::<u64>() as f64
        / run.wall_ns as f64
}

fn homes_keep_instances_at_home(r: &Results) -> Result<String> {
    let homes = [("inst0", 0..4), ("inst1", 4..8)];
    let sp = r.run_of("homes-two-instances", "softpart")?;
    let ev = r.run_of("homes-two-instances", "eevdf")?;
    let (l_sp, l_ev) = (locality(sp, &homes), locality(ev, &homes));
    if l_sp < 0.95 {
        bail!(
            "softpart locality {:.1}% (eevdf {:.1}%), expected >= 95%",
            l_sp * 100.0,
            l_ev * 100.0
        );
    }
    let (g_sp, g_ev) = (granted(sp), granted(ev));
    if g_sp < 0.9 * g_ev {
        bail!("softpart granted {g_sp:.2} CPU-s/s, eevdf {g_ev:.2}");
    }
    Ok(format!(
        "locality softpart {:.1}%, eevdf {:.1}%; granted {g_sp:.2} vs {g_ev:.2} CPU-s/s",
        l_sp * 100.0,
        l_ev * 100.0
    ))
}

/// One instance of 8 CPU-bound workers homed on a 4-CPU node, the other
/// node idle: scx_softpart lets it burst into the idle node, as EEVDF
/// does; hard pinning cannot. Medians over the scenario's runs: in 2 of
/// 36 runs under scx_softpart (and once in CI) the group got 0.9 CPU less
/// because workers were not runnable (CPUs idle with no task waiting),
/// not because a CPU idled while one waited (docs/experiments.md, "A
/// flaky run in homes_let_an_instance_burst").
fn homes_let_an_instance_burst(r: &Results) -> Result<String> {
    const SCENARIO: &str = "homes-one-instance";
    let per_run = |policy: &str| -> Result<Vec<f64>> {
        Ok(r.runs_of(SCENARIO, policy)?
            .into_iter()
            .map(granted)
            .collect())
    };
    let median = |v: &[f64]| Summary::of(v).map_or(0.0, |s| s.median);
    let (ev, pin, sp) = (per_run("eevdf")?, per_run("pinned")?, per_run("softpart")?);
    let away: Vec<f64> = r
        .runs_of(SCENARIO, "softpart")?
        .into_iter()
        .map(|run| granted(run) * locality(run, &[("inst0", 4..8)]))
        .collect();
    let seen = format!(
        "granted softpart {:.2}, eevdf {:.2}, pinned {:.2} CPU-s/s (medians of {} runs; softpart per run {}; of it on the idle node {})",
        median(&sp),
        median(&ev),
        median(&pin),
        sp.len(),
        list(&sp),
        list(&away)
    );
    if median(&sp) < 0.9 * median(&ev) {
        bail!("softpart got under 0.9x eevdf's CPU time: {seen}");
    }
    if median(&away) < 2.0 {
        bail!("softpart did not burst into the idle node: {seen}");
    }
    if median(&pin) > 0.7 * median(&ev) {
        bail!(
            "pinned got over 0.7x eevdf's CPU time: the scenario does not exceed the home: {seen}"
        );
    }
    Ok(seen)
}

fn list(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// How the scheduler of `policy` in `scenario` exited.
fn exit_of<'a>(r: &'a Results, scenario: &str, policy: &str) -> Result<&'a SchedulerExit> {
    r.exits
        .iter()
        .find(|e| e.scenario == scenario && e.policy == policy)
        .with_context(|| format!("no {policy} exit in {scenario} (no result from scenario)"))
}

/// The fast path's counters from the exit of `policy` in `scenario`.
fn exit_counters(r: &Results, scenario: &str, policy: &str) -> Result<serde_json::Value> {
    softpart_counters(exit_of(r, scenario, policy)?)
}

/// Wakeups placed on an idle CPU away from home, by either path.
const AWAY_PICKS: [&str; 4] = [
    "pick_prev_away",
    "pick_near",
    "pick_core_any",
    "pick_cpu_any",
];

/// One spill run: (wakeups placed away from home, of which by the kernel's
/// pick, CPU time granted as a share of eevdf's in the same boot).
fn spill_run(r: &Results, scenario: &str, policy: &str) -> Result<(u64, u64, f64)> {
    let share = granted(r.run_of(scenario, policy)?) / granted(r.run_of(scenario, "eevdf")?);
    let c = exit_counters(r, scenario, policy)?;
    let get = |k: &str| c[k].as_u64().unwrap_or(0);
    let away: u64 = AWAY_PICKS.iter().map(|k| get(k)).sum();
    // A home too full to wake in must spill, and lose nothing by it.
    if away == 0 {
        bail!("{scenario} {policy}: no wakeup placed away from the full home: {c}");
    }
    if share < 0.85 {
        bail!("{scenario} {policy}: granted {share:.2} x eevdf's");
    }
    Ok((away, get("pick_kernel"), share))
}

fn spills_through_kernel_pick(r: &Results) -> Result<String> {
    let mut seen = Vec::new();
    for (scenario, guest) in [
        ("spill-paths", "2n2c2t"),
        ("spill-paths-newest", "2n2c2t@linux-image-7.3.4+deb13-amd64"),
    ] {
        let (away, kernel, share) = spill_run(r, scenario, "softpart")?;
        if kernel == 0 {
            bail!("{scenario}: {away} wakeups away from home, none by scx_bpf_select_cpu_and()");
        }
        let release = r.guests.get(guest).map_or("?", |g| g.kernel.as_str());
        seen.push(format!(
            "{release}: {kernel} of {away} by the kernel, granted {share:.2} x eevdf"
        ));
    }
    Ok(seen.join("; "))
}

/// How the run's scheduler tracked idle CPUs, from its "attached" line.
fn idle_masks<'a>(r: &'a Results, scenario: &str, policy: &str) -> Result<&'a str> {
    let exit = r
        .exits
        .iter()
        .find(|e| e.scenario == scenario && e.policy == policy)
        .with_context(|| format!("no {policy} exit in {scenario} (no result from scenario)"))?;
    ["per node", "machine-wide"]
        .into_iter()
        .find(|m| exit.stderr_tail.contains(&format!("idle masks: {m};")))
        .with_context(|| {
            format!(
                "{scenario} {policy}: no \"idle masks\" in its log: {}",
                exit.stderr_tail
            )
        })
}

/// The guest kernels (6.17, 7.3) have per-node idle masks and the guest
/// two nodes: the scheduler must load with them (the kernel would stop it
/// at the first machine-wide idle lookup it missed) and place wakeups
/// with them on both paths; --no-idle-per-node must still work.
fn idle_masks_per_node(r: &Results) -> Result<String> {
    for (scenario, policy) in [
        ("spill-paths", "softpart"),
        ("spill-paths", "softpart:--no-kernel-pick"),
        ("spill-paths-newest", "softpart"),
    ] {
        let masks = idle_masks(r, scenario, policy)?;
        if masks != "per node" {
            bail!("{scenario} {policy}: idle masks {masks}, not per node");
        }
    }
    let policy = "softpart:--no-kernel-pick --no-idle-per-node";
    let masks = idle_masks(r, "spill-paths", policy)?;
    if masks != "machine-wide" {
        bail!("--no-idle-per-node: idle masks {masks}");
    }
    let (away, _, share) = spill_run(r, "spill-paths", policy)?;
    Ok(format!(
        "per node by default (both kernels, both spill paths); --no-idle-per-node: machine-wide, {away} wakeups away from home, granted {share:.2} x eevdf"
    ))
}

fn spills_through_own_search(r: &Results) -> Result<String> {
    let (away, kernel, share) = spill_run(r, "spill-paths", "softpart:--no-kernel-pick")?;
    if kernel != 0 {
        bail!("--no-kernel-pick: {kernel} wakeups still went through the kernel's pick");
    }
    Ok(format!(
        "{away} wakeups away from home by our own search, granted {share:.2} x eevdf"
    ))
}

/// (spills queued at home, wakeups placed away from home) in a scheduler
/// run, refused as too few to judge below @min_away.
fn queued_of_away(r: &Results, scenario: &str, policy: &str, min_away: u64) -> Result<(u64, u64)> {
    let c = exit_counters(r, scenario, policy)?;
    let get = |k: &str| c[k].as_u64().unwrap_or(0);
    let away: u64 = AWAY_PICKS.iter().map(|k| get(k)).sum();
    if away < min_away {
        bail!("{scenario} {policy}: only {away} wakeups away from home, too few to judge: {c}");
    }
    Ok((get("spill_queued"), away))
}

/// Queued spills (default "sync"): hackbench's spills, woken by socket
/// writes, mostly wait at home first (67-70% of them in the experiments);
/// sysbench threads' futex wakes never do (0-3 of ~1500, system tasks'
/// own sync wakeups); --queued-spill=off queues none.
fn queued_spills_follow_sync_wakeups(r: &Results) -> Result<String> {
    let spills = |scenario: &str, policy: &str| queued_of_away(r, scenario, policy, 100);
    let (sync_q, sync_away) = spills("spill-paths", "softpart")?;
    if sync_q * 10 < sync_away * 3 {
        bail!("hackbench: {sync_q} of {sync_away} spills queued at home, expected most");
    }
    let (futex_q, futex_away) = spills("spill-futex", "softpart")?;
    if futex_q * 50 > futex_away {
        bail!(
            "sysbench threads: {futex_q} of {futex_away} spills queued, futex wakes are not sync"
        );
    }
    let (off_q, off_away) = spills("spill-paths", "softpart:--queued-spill=off")?;
    if off_q != 0 {
        bail!("--queued-spill=off: {off_q} of {off_away} spills queued");
    }
    Ok(format!(
        "queued at home: hackbench {sync_q} of {sync_away}, sysbench threads {futex_q} of {futex_away}, --queued-spill=off {off_q} of {off_away}"
    ))
}

/// Fewer wakeups away from home than this in a spill-owned run say too
/// little to judge.
const OWNED_MIN_AWAY: u64 = 20;

/// At least this share of spill-owned's wakeups away from home wait at home
/// under --queued-spill=owned: measured 43-73% in four runs (the rest go to
/// CPUs whose owners had not run there within the slice, such as a
/// visitor's previous CPU); "sync" queued 0 of 82-99.
const OWNED_QUEUED_MIN: f64 = 0.2;

/// --queued-spill=owned (spill-owned.toml): two sysbench-threads
/// instances, whose futex wakes the default ("sync") never queues, spill
/// onto CPUs the other instance keeps busy; "owned" queues a large share of
/// those spills at home, "sync" next to none, in the same boot.
fn queued_spills_onto_owned_cpus(r: &Results) -> Result<String> {
    let spills = |policy: &str| queued_of_away(r, "spill-owned", policy, OWNED_MIN_AWAY);
    let (sync_q, sync_away) = spills("softpart")?;
    let (owned_q, owned_away) = spills("softpart:--queued-spill=owned")?;
    if sync_q * 10 > sync_away {
        bail!("sync (default): {sync_q} of {sync_away} futex spills queued, expected next to none");
    }
    if (owned_q as f64) < OWNED_QUEUED_MIN * owned_away as f64 {
        bail!(
            "owned: {owned_q} of {owned_away} spills queued at home, expected at least {:.0}%",
            OWNED_QUEUED_MIN * 100.0
        );
    }
    Ok(format!(
        "queued at home: owned {owned_q} of {owned_away}, sync (default) {sync_q} of {sync_away}"
    ))
}

/// Fewer waits (observer) or kthread waits (scheduler) than this in a run
/// say too little to judge; a run has had 500-700 and over 1000.
const KTHREAD_MIN_WAITS: u64 = 100;
/// Share of the thread's waits ending on a CPU leaving idle: measured
/// 61-69% with --no-wait-behind-kthreads, 2.7-7.5% without (kthread-wait
/// at 1 and 2 threads, 5 runs each, docs/experiments.md).
const KTHREAD_OFF_IDLE_MIN: f64 = 0.3;
const KTHREAD_ON_IDLE_MAX: f64 = 0.2;

/// A thread interrupted by per-CPU kworkers waits for them on its CPU
/// instead of being handed to an idle CPU (kthread-wait.toml): few of its
/// waits end on a CPU leaving idle, against most of them with
/// --no-wait-behind-kthreads, in the same boot.
fn kthread_turns_waited_on_cpu(r: &Results) -> Result<String> {
    const OFF: &str = "softpart:--no-wait-behind-kthreads";
    let idle_ended = |policy: &str| -> Result<(f64, u64)> {
        let g = &group(r.run_of("kthread-wait", policy)?, "inst0")?.counters;
        let waits: u64 = g.delay_hist.iter().sum();
        let idle: u64 = g.idle_end_hist.iter().sum();
        Ok((idle as f64 / waits.max(1) as f64, waits))
    };
    let (on, on_waits) = idle_ended("softpart")?;
    let (off, off_waits) = idle_ended(OFF)?;
    let waited = exit_counters(r, "kthread-wait", "softpart")?["kthread_wait"]
        .as_u64()
        .unwrap_or(0);
    let off_waited = exit_counters(r, "kthread-wait", OFF)?["kthread_wait"]
        .as_u64()
        .unwrap_or(0);
    let seen = format!(
        "waits ending on a CPU leaving idle: {:.1}% of {on_waits} ({waited} waits behind kthreads), off {:.1}% of {off_waits}",
        on * 100.0,
        off * 100.0
    );
    if off_waits < KTHREAD_MIN_WAITS || off < KTHREAD_OFF_IDLE_MIN {
        bail!("the off run shows no moves to idle CPUs to avoid, nothing tested: {seen}");
    }
    if off_waited != 0 {
        bail!("--no-wait-behind-kthreads still waited behind kthreads: {seen}");
    }
    if on_waits < KTHREAD_MIN_WAITS || waited < KTHREAD_MIN_WAITS || on > KTHREAD_ON_IDLE_MAX {
        bail!("{seen}");
    }
    Ok(seen)
}

/// Migrations with the hold against without it: measured 0.26-0.54x
/// (two-sysbench-threads at 4 and 8 per instance, 3 runs each,
/// docs/experiments.md, "Held put-backs"). Since the yield callback
/// (dc2bada) fewer tasks are put back at all, and the gap is smaller and
/// swings more: 0.53x in CI on 93d4ff7, 0.81x in CI on 33796b8 (1063
/// against 1316 per s, where 0.75 failed it), 0.91x in CI on ddca701
/// with a single run each. One run is too noisy for this: 5 runs each in
/// one boot ranged 492-605 per s with the hold and 641-849 without
/// (0.71x pooled), so one pairing could give 0.94x. The test pools its
/// runs (hold-put-back.toml's reps; docs/experiments.md, "Held put-backs
/// and the steal wait").
const HOLD_MIGRATIONS_MAX: f64 = 0.9;
/// Busy CPUs leaving a held head, over all runs: over 100,000 in 15 s.
const HOLD_MIN_SKIPS: u64 = 1000;
/// Visitors held over the pooled runs of hold-visitors.toml: 608-697 in
/// six runs of the test (three on ad95aac's rule, one of them CI's, and
/// three on a first form that held visitors whatever their home ran).
const HOLD_VISITORS_MIN: u64 = 100;
/// Of the visitors passed by the daemon, the share that ran next on the
/// same CPU, at least this much higher with the rule than without, and
/// the share that ran next across the nodes at most this share of it.
/// Pooled over 6 runs each in seven boots on 4a6959c + the counters and
/// on bfd43d2 / 0e2f418 (2026-11-28, two of them CI's): 62-73% against
/// 47-58% on the same CPU (9-20 points higher), 17-24% against 27-33%
/// across the nodes (0.60-0.75x); with 3
/// runs each, 4.5-20 points higher in five boots and 0.62-0.92x in six
/// (docs/experiments.md, "The hold-visitors guest test, pooled wider").
/// The instance's cross-node moves per s, the rule's outcome, swing with
/// the host: 0.47-0.85x over CI's three 3-run boots (24.9-52.2 per s
/// without; CI on e8d6a40 failed an old bound of 0.85x at 21.1 against
/// 24.9), 0.51-0.84x in the thirteen boots above, so the test asks only
/// that the rule add none.
const HOLD_VISITORS_SAME_CPU_GAIN: f64 = 0.03;
const HOLD_VISITORS_CROSSED_MAX: f64 = 0.95;

/// A thread its CPU puts back is held for that CPU (hold-put-back.toml):
/// busy CPUs leave it instead of taking it and queueing their own thread,
/// so the threads migrate far less than with --no-hold-put-back in the
/// same boot, with no CPU time lost to the wait.
fn put_back_held_for_cpu(r: &Results) -> Result<String> {
    const OFF: &str = "softpart:--no-hold-put-back";
    // Pooled over the runs: migrations and CPU time summed, over the
    // summed wall time.
    let moves = |policy: &str| -> Result<(f64, f64)> {
        let runs = r.runs_of("hold-put-back", policy)?;
        let wall: u64 = runs.iter().map(|run| run.wall_ns).sum();
        let (mut migrations, mut cpu_ns) = (0u64, 0u64);
        for run in &runs {
            for g in run.groups.values() {
                migrations += g.counters.migrations.iter().sum::<u64>();
                cpu_ns += g.counters.total_cpu_ns();
            }
        }
        Ok((
            migrations as f64 / (wall as f64 / 1e9),
            cpu_ns as f64 / wall as f64,
        ))
    };
    let (on, on_cpu) = moves("softpart")?;
    let (off, off_cpu) = moves(OFF)?;
    let skips = |policy: &str| -> Result<u64> {
        let mut sum = 0;
        for exit in r
            .exits
            .iter()
            .filter(|e| e.scenario == "hold-put-back" && e.policy == policy)
        {
            sum += softpart_counters(exit)?["held_skip"].as_u64().unwrap_or(0);
        }
        Ok(sum)
    };
    let (on_skips, off_skips) = (skips("softpart")?, skips(OFF)?);
    let seen = format!(
        "migrations {on:.0} per s with the hold ({on_skips} busy CPUs left a held head), {off:.0} without; CPU time {on_cpu:.2} against {off_cpu:.2} CPU-s per s"
    );
    if off_skips != 0 {
        bail!("--no-hold-put-back still held put-backs: {seen}");
    }
    if off < 100.0 {
        bail!("without the hold the threads hardly migrate, nothing tested: {seen}");
    }
    if on_skips < HOLD_MIN_SKIPS || on > off * HOLD_MIGRATIONS_MAX || on_cpu < off_cpu * 0.9 {
        bail!("{seen}");
    }
    Ok(seen)
}

/// Visitors switched out for a passing task are held for their CPU
/// (hold-visitors.toml: one sysbench-memory instance of 8 threads homed on
/// node 0, half of them visiting node 1, and a daemon with no home waking
/// every 2 ms). Pooled over the runs, a visitor passed by the daemon runs
/// next on its CPU more often with the rule than without (about 2 times
/// in 3 against 1 in 2) and across the nodes less often, and the instance
/// loses no CPU time.
fn visitors_held_for_their_cpu(r: &Results) -> Result<String> {
    const SCN: &str = "hold-visitors";
    const OFF: &str = "softpart:--no-hold-visitors";
    struct Figures {
        held: u64,
        same_cpu: u64,
        same_node: u64,
        crossed: u64,
        cross_per_s: f64,
        cpu: f64,
    }
    impl Figures {
        fn passed(&self) -> u64 {
            self.same_cpu + self.same_node + self.crossed
        }
        fn share(&self, n: u64) -> f64 {
            n as f64 / self.passed().max(1) as f64
        }
    }
    let figures = |policy: &str| -> Result<Figures> {
        let runs = r.runs_of(SCN, policy)?;
        let wall: u64 = runs.iter().map(|run| run.wall_ns).sum();
        let (mut cross, mut cpu_ns) = (0u64, 0u64);
        for run in &runs {
            let g = run
                .groups
                .get("inst0")
                .context("no figures for group inst0")?;
            cross += g.counters.migrations[3];
            cpu_ns += g.counters.total_cpu_ns();
        }
        let (mut held, mut same_cpu, mut same_node, mut crossed) = (0, 0, 0, 0);
        for exit in r
            .exits
            .iter()
            .filter(|e| e.scenario == SCN && e.policy == policy)
        {
            let c = softpart_counters(exit)?;
            let get = |k: &str| c[k].as_u64().unwrap_or(0);
            held += get("put_back_held_away");
            same_cpu += get("passed_same_cpu");
            same_node += get("passed_same_node");
            crossed += get("passed_crossed");
        }
        Ok(Figures {
            held,
            same_cpu,
            same_node,
            crossed,
            cross_per_s: cross as f64 / (wall as f64 / 1e9),
            cpu: cpu_ns as f64 / wall as f64,
        })
    };
    let on = figures("softpart")?;
    let off = figures(OFF)?;
    let show = |f: &Figures| {
        format!(
            "{} held; of {} passed, next on the same CPU {:.1}%, across the nodes {:.1}%; {:.1} cross-node moves per s; {:.2} CPU-s per s",
            f.held,
            f.passed(),
            100.0 * f.share(f.same_cpu),
            100.0 * f.share(f.crossed),
            f.cross_per_s,
            f.cpu,
        )
    };
    let seen = format!("{}; --no-hold-visitors: {}", show(&on), show(&off));
    if off.held != 0 {
        bail!("--no-hold-visitors still held visitors: {seen}");
    }
    if on.held < HOLD_VISITORS_MIN || off.passed() < HOLD_VISITORS_MIN {
        bail!("hardly a visitor passed, nothing tested: {seen}");
    }
    if on.share(on.same_cpu) < off.share(off.same_cpu) + HOLD_VISITORS_SAME_CPU_GAIN {
        bail!("held visitors went back to their CPU no more often than unheld ones: {seen}");
    }
    if on.share(on.crossed) > off.share(off.crossed) * HOLD_VISITORS_CROSSED_MAX {
        bail!("held visitors crossed the nodes as often as unheld ones: {seen}");
    }
    if on.cross_per_s > off.cross_per_s {
        bail!("the instance crossed the nodes more often with the rule: {seen}");
    }
    if on.cpu < off.cpu * 0.97 {
        bail!("the hold cost CPU time: {seen}");
    }
    Ok(seen)
}

/// sched_yield() with nobody waiting keeps the CPU without a dispatch()
/// (dc2bada), and a yield with a task waiting still hands the CPU over
/// (hold-put-back.toml's default run: two sysbench-threads instances of 8
/// per 4-CPU node, which yield in a loop). In sysbench-threads-handoffs
/// at that load: 218 thousand kept and 14 thousand hand-offs per s.
fn yields_kept(r: &Results) -> Result<String> {
    let c = exit_counters(r, "hold-put-back", "softpart")?;
    let get = |k: &str| c[k].as_u64().unwrap_or(0);
    let (kept, handoffs) = (get("yield_kept"), get("dispatch_own"));
    let seen = format!("{kept} yields kept their CPU, {handoffs} hand-offs to queued tasks");
    if kept < 10_000 {
        bail!("yields with nobody waiting did not keep their CPU: {seen}");
    }
    if handoffs < 1_000 {
        bail!("yields no longer hand the CPU to waiting tasks: {seen}");
    }
    Ok(seen)
}

/// Yields away from home that kept their CPU over the scheduler's run of
/// steal-one-instance: 493 thousand on d6efba7 (241 thousand on 2fd305f,
/// which kept fewer).
const YIELD_AWAY_MIN_KEPT: u64 = 10_000;

/// A thread away from home keeps its CPU at a yield with nobody waiting,
/// as one at home does (steal-one-instance.toml: 16 sysbench threads
/// homed on a 4-CPU node burst into the idle node and yield in a loop
/// there); with --yield-away-ends-slice every such yield goes through
/// dispatch() and none is kept.
fn yields_away_kept(r: &Results) -> Result<String> {
    const SCN: &str = "steal-one-instance";
    const ENDS: &str = "softpart:--yield-away-ends-slice";
    let figures = |policy: &str| -> Result<(u64, f64)> {
        let kept = exit_counters(r, SCN, policy)?["yield_kept_away"]
            .as_u64()
            .unwrap_or(0);
        Ok((kept, granted(r.run_of(SCN, policy)?)))
    };
    let (kept, cpu) = figures("softpart")?;
    let (ends_kept, ends_cpu) = figures(ENDS)?;
    let seen = format!(
        "{kept} yields away from home kept their CPU, {cpu:.2} CPU-s per s; ending the slice: {ends_kept} kept, {ends_cpu:.2} CPU-s per s"
    );
    if ends_kept != 0 {
        bail!("--yield-away-ends-slice still kept yields away from home: {seen}");
    }
    if kept < YIELD_AWAY_MIN_KEPT {
        bail!("yields away from home did not keep their CPU: {seen}");
    }
    if cpu < ends_cpu * 0.9 {
        bail!("keeping the CPU at yields away from home cost CPU time: {seen}");
    }
    Ok(seen)
}

/// Steals in a run of steal.toml at --steal-defer-us 0, over the
/// scheduler's whole run: 497-723 in three runs on 4c8b9a9, 269 and 361
/// in the two CI runs of 60d6f27 and 174130f, 118-212 in five runs on the
/// build that deferred steals by default.
const STEAL_MIN: u64 = 50;
const STEAL_AT_ONCE: &str = "softpart:--steal-defer-us 0";

/// The counters of a scheduler run that say what its steals did.
fn steal_counters(r: &Results, scenario: &str, policy: &str) -> Result<(u64, u64, u64)> {
    let c = exit_counters(r, scenario, policy)?;
    let get = |name: &str| c[name].as_u64().unwrap_or(0);
    Ok((
        get("dispatch_steal"),
        get("steal_deferred"),
        get("steal_timer"),
    ))
}

/// By default a CPU about to go idle that its own instance just used waits
/// before it takes the other instance's task that just ran, and its timer
/// brings it back to take it once the wait is over (steal.toml, default
/// against --steal-defer-us 0): deferrals happen, timers fire, the CPUs
/// still steal, and the wait costs little CPU time.
fn steals_deferred_for_owners(r: &Results) -> Result<String> {
    let (steals, deferred, timers) = steal_counters(r, "steal", "softpart")?;
    let (now_steals, now_deferred, _) = steal_counters(r, "steal", STEAL_AT_ONCE)?;
    let cpu = granted(r.run_of("steal", "softpart")?);
    let now_cpu = granted(r.run_of("steal", STEAL_AT_ONCE)?);
    let seen = format!(
        "{steals} steals, {deferred} deferred, {timers} timer kicks, {cpu:.2} CPU-s per s; at once: {now_steals} steals, {now_deferred} deferred, {now_cpu:.2} CPU-s per s"
    );
    if now_deferred != 0 {
        bail!("--steal-defer-us 0 still deferred: {seen}");
    }
    // 41-83 deferrals and 23-39 timer kicks in seven runs, when both
    // dispatch() and update_idle() counted a deferral (dispatch() only now).
    if deferred < 5 || timers == 0 {
        bail!("no steal waited for its timer: {seen}");
    }
    if steals < 10 {
        bail!("the deferred steals never happened: {seen}");
    }
    // Against stealing at once: 0.98x in a 5-run boot of 9442fec, each
    // run 0.98-0.99x the other's median (docs/experiments.md, "Owners'
    // CPUs defer for the whole steal wait"); single CI runs 0.976, 0.959
    // and 0.968x. A timer that failed to end the wait would leave CPUs
    // idle for good.
    if cpu < now_cpu * 0.93 {
        bail!("waiting cost CPU time: {seen}");
    }
    Ok(seen)
}

/// At a full machine (evict-toward-room.toml) a waking owner evicts only
/// visitors whose home has an idle CPU: far fewer evictions than
/// --evict-always, and the balanced groups keep most of shared mode's CPU
/// time. Three 3-run boots: 51-58 evictions per s evicting always against
/// 7-8 toward room (medians of 1,506-1,544 per scheduler run against
/// 296-327, with the experiment's probes lengthening each run; CI's first
/// run of this test: 439 against 46), at
/// 0.90-0.93x shared mode's CPU time against 0.96-0.97x.
fn evictions_toward_room(r: &Results) -> Result<String> {
    const SCN: &str = "evict-toward-room";
    const BALANCED: &str = "softpart:--balance /bench/*";
    const ALWAYS: &str = "softpart:--balance /bench/* --evict-always";
    let evicts = |policy: &str| -> Result<u64> {
        Ok(exit_counters(r, SCN, policy)?["evict"]
            .as_u64()
            .unwrap_or(0))
    };
    let (toward, always) = (evicts(BALANCED)?, evicts(ALWAYS)?);
    let cpu = granted(r.run_of(SCN, BALANCED)?);
    let always_cpu = granted(r.run_of(SCN, ALWAYS)?);
    let shared = granted(r.run_of(SCN, "softpart-nohome")?);
    let seen = format!(
        "{toward} evictions, {cpu:.2} CPU-s per s; evicting always: {always}, {always_cpu:.2}; shared mode {shared:.2}"
    );
    if always < 100 {
        bail!("--evict-always hardly evicted, so the machine was not full: {seen}");
    }
    if toward * 2 > always {
        bail!("evictions were not kept to visitors with room at home: {seen}");
    }
    // 0.96-0.97x in three boots (the lowest run 0.948x); 1.00x and 0.96x
    // in two CI runs since over-full partitions lose the steal wait
    // (89dc1cd), a single run each; the old
    // rule's 0.90-0.93x would pass too, so this catches only a collapse.
    if cpu < shared * 0.90 {
        bail!("the balanced groups lost CPU time to partitioning: {seen}");
    }
    Ok(seen)
}

/// At a full machine (overfull-steal.toml) the balancer marks the
/// partitions over-full, and their groups' queued tasks are taken without
/// the steal wait: once they are marked, a fraction of the deferrals of
/// --steal-wait-overfull, and the balanced groups get about shared mode's
/// CPU time.
fn overfull_partitions_steal_at_once(r: &Results) -> Result<String> {
    const SCN: &str = "overfull-steal";
    const BALANCED: &str = "softpart:--balance /bench/*";
    const WAIT: &str = "softpart:--balance /bench/* --steal-wait-overfull";
    let marked = |policy: &str| -> Result<usize> {
        let parts: std::collections::BTreeSet<&str> = exit_of(r, SCN, policy)?
            .stderr_tail
            .lines()
            .filter(|l| l.contains("over-full: its groups'"))
            .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("PART-")))
            .collect();
        Ok(parts.len())
    };
    let (over, over_wait) = (marked(BALANCED)?, marked(WAIT)?);
    let deferred_per_s = |policy: &str| -> Result<f64> {
        let figs = crate::table::probe_figures(r.run_of(SCN, policy)?);
        Ok(figs.get("steals_deferred_per_s").copied().unwrap_or(0.0))
    };
    let (deferred, wait_deferred) = (deferred_per_s(BALANCED)?, deferred_per_s(WAIT)?);
    let cpu = granted(r.run_of(SCN, BALANCED)?);
    let wait_cpu = granted(r.run_of(SCN, WAIT)?);
    let shared = granted(r.run_of(SCN, "softpart-nohome")?);
    let seen = format!(
        "{over} partitions marked over-full, {deferred:.1} steals deferred per s, {cpu:.2} CPU-s per s; \
         keeping the wait: {over_wait} marked, {wait_deferred:.1} deferred per s, {wait_cpu:.2}; shared mode {shared:.2}"
    );
    if over < 3 {
        bail!("the balancer did not mark the full machine's partitions over-full: {seen}");
    }
    if over_wait > 0 {
        bail!("--steal-wait-overfull still marked partitions over-full: {seen}");
    }
    // After the window: 23-40 per s keeping the wait, 0-0.6 without, in
    // two experiment boots.
    if wait_deferred < 5.0 {
        bail!("keeping the wait hardly deferred a steal, nothing tested: {seen}");
    }
    if deferred * 4.0 > wait_deferred {
        bail!("over-full partitions' queued tasks still waited: {seen}");
    }
    // 0.99-1.00x in three boots against 0.97-0.98x keeping the wait; only
    // a collapse fails here.
    if cpu < shared * 0.92 {
        bail!("the balanced groups lost CPU time to partitioning: {seen}");
    }
    Ok(seen)
}

/// One instance bursting into a node that is no one's home
/// (steal-one-instance.toml): that node's CPUs serve no owners, so they
/// take its queued threads at once, as with --steal-defer-us 0, and its
/// CPU time is that of stealing at once. Deferring on every CPU there
/// counted 217 deferrals per s (dispatch() and update_idle() both
/// counting then) against 108 steals, at 0.95x the CPU time.
fn steals_not_deferred_without_owners(r: &Results) -> Result<String> {
    const SCN: &str = "steal-one-instance";
    let (steals, deferred, _) = steal_counters(r, SCN, "softpart")?;
    let (now_steals, _, _) = steal_counters(r, SCN, STEAL_AT_ONCE)?;
    let cpu = granted(r.run_of(SCN, "softpart")?);
    let now_cpu = granted(r.run_of(SCN, STEAL_AT_ONCE)?);
    let seen = format!(
        "{steals} steals, {deferred} deferred, {cpu:.2} CPU-s per s; at once: {now_steals} steals, {now_cpu:.2} CPU-s per s"
    );
    if steals < STEAL_MIN {
        bail!("the instance hardly stole, nothing tested: {seen}");
    }
    // The few a home CPU may defer (node 1's queue holds homeless tasks).
    if deferred * 10 > steals {
        bail!("CPUs serving no owners deferred their steals: {seen}");
    }
    // One run each: 5.81-6.37 CPU-s per s in five runs at once.
    if cpu < now_cpu * 0.90 {
        bail!("the instance lost CPU time to deferred steals: {seen}");
    }
    Ok(seen)
}

/// A CPU of one node out of work takes the other node's waiting task
/// (steal.toml): with --steal-defer-us 0 it steals at once, with
/// --no-steal it does not, and
/// those steals are most of the cross-node moves and of the time away from
/// home, at no cost in CPU time. Three runs: 103-136 against 23-33 moves
/// per s, locality 94.1-96.0 against 99.2-99.4%, CPU time 7.43-7.63
/// against 7.41-7.51 CPU-s per s.
fn idle_cpus_steal(r: &Results) -> Result<String> {
    // Locality without steals: 97.4-99.7% in nine runs up to 4c8b9a9,
    // 98.5-98.6% in two on dc2bada, and 95.8% in one slow CI boot of
    // dc2bada (6.98 CPU-s per s granted against 7.4-7.6 elsewhere), where
    // steals still moved twice as many tasks across nodes.
    const NO_STEAL_LOCALITY_MIN: f64 = 0.93;
    const OFF: &str = "softpart:--no-steal";
    let homes = [("inst0", 0..4), ("inst1", 4..8)];
    let figures = |policy: &str| -> Result<(u64, f64, f64, f64)> {
        let run = r.run_of("steal", policy)?;
        let wall = run.wall_ns as f64 / 1e9;
        let cross: u64 = run.groups.values().map(|g| g.counters.migrations[3]).sum();
        let steals = exit_counters(r, "steal", policy)?["dispatch_steal"]
            .as_u64()
            .unwrap_or(0);
        Ok((
            steals,
            cross as f64 / wall,
            locality(run, &homes),
            granted(run),
        ))
    };
    let (on_steals, on_cross, on_local, on_cpu) = figures(STEAL_AT_ONCE)?;
    let (off_steals, off_cross, off_local, off_cpu) = figures(OFF)?;
    let seen = format!(
        "{on_steals} steals, {on_cross:.0} cross-node moves per s, locality {:.1}%, {on_cpu:.2} CPU-s per s; --no-steal: {off_steals}, {off_cross:.0}, {:.1}%, {off_cpu:.2}",
        on_local * 100.0,
        off_local * 100.0
    );
    if off_steals != 0 {
        bail!("--no-steal still stole: {seen}");
    }
    if on_steals < STEAL_MIN {
        bail!("idle CPUs hardly stole, nothing tested: {seen}");
    }
    if on_cross < off_cross * 1.5 || off_local <= on_local || off_local < NO_STEAL_LOCALITY_MIN {
        bail!("the steals are not what moves the instances: {seen}");
    }
    // With steals against without, CPU time: 0.99-1.03x up to 4c8b9a9;
    // on dc2bada 1.03-1.07x in three runs and 0.98x in one CI boot.
    if on_cpu < off_cpu * 0.95 {
        bail!("stealing cost CPU time: {seen}");
    }
    Ok(seen)
}

/// The `xnode_*` events, by the decision that made each cross-node move.
fn xnode_events() -> impl Iterator<Item = &'static str> {
    softpart_core::events::EVENT_NAMES
        .iter()
        .copied()
        .filter(|n| n.starts_with("xnode_"))
}

/// Every cross-node move of a homed task is put down to the decision that
/// made it (steal.toml, two hackbench instances homed one per node): the
/// scheduler's `xnode_*` events over its whole run come to at least the
/// cross-node moves the observer saw in the window, next to none of them
/// are unexplained (`xnode_other`), steals at once show as steals, and
/// with --no-steal the only tasks another partition's CPU takes from a
/// queue are a visitor's home's turns (`visitor_yield`). A decision that
/// forgot to say what it did lands in `xnode_other`; a move not counted
/// leaves the sum short.
fn cross_node_moves_attributed(r: &Results) -> Result<String> {
    const OFF: &str = "softpart:--no-steal";
    let figures = |policy: &str| -> Result<(u64, serde_json::Value)> {
        let run = r.run_of("steal", policy)?;
        let seen: u64 = run.groups.values().map(|g| g.counters.migrations[3]).sum();
        Ok((seen, exit_counters(r, "steal", policy)?))
    };
    let (seen, c) = figures(STEAL_AT_ONCE)?;
    let (off_seen, off) = figures(OFF)?;
    let get = |c: &serde_json::Value, k: &str| c[k].as_u64().unwrap_or(0);
    let sum = |c: &serde_json::Value| -> u64 { xnode_events().map(|k| get(c, k)).sum() };
    let parts = |c: &serde_json::Value| -> String {
        xnode_events()
            .map(|k| format!("{} {}", k.trim_start_matches("xnode_"), get(c, k)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (total, other, steals) = (
        sum(&c),
        get(&c, "xnode_other"),
        get(&c, "xnode_queue_steal"),
    );
    let off_total = sum(&off);
    let seen_text = format!(
        "steals at once: {total} attributed over the run ({}) against {seen} seen in the window; --no-steal: {off_total} ({}) against {off_seen}",
        parts(&c),
        parts(&off)
    );
    if seen < 50 {
        bail!("the instances hardly crossed the nodes, nothing tested: {seen_text}");
    }
    // The run holds the window; a few moves may fall between the
    // observer's reads and the scheduler's, hence 0.9.
    if (total as f64) < seen as f64 * 0.9 || (off_total as f64) < off_seen as f64 * 0.9 {
        bail!("cross-node moves went uncounted: {seen_text}");
    }
    if other * 20 > total {
        bail!("more than 5% of the cross-node moves are put down to no decision: {seen_text}");
    }
    if steals * 4 < total {
        bail!("steals at once are not a quarter of the cross-node moves: {seen_text}");
    }
    // Without steals another partition's CPU takes a queued task only
    // when a visitor there hands its home's queue a turn.
    if get(&off, "xnode_queue_steal") > get(&off, "visitor_yield") {
        bail!("--no-steal still moved tasks by steals: {seen_text}");
    }
    Ok(seen_text)
}

/// The bench's `callback_costs` on a real kernel (steal.toml's default
/// run): the callbacks a switch passes through are told apart by their
/// truncated program names and timed, the observer's programs are timed
/// beside them, and the callbacks' sum is a share of the machine, not
/// more. The time inside the callbacks is charged to the tasks on the CPU,
/// and hackbench's groups fill the guest.
fn callbacks_timed(r: &Results) -> Result<String> {
    let run = r.run_of("steal", "softpart")?;
    let figs = crate::table::probe_figures(run);
    let get = |name: &str| figs.get(name).copied().unwrap_or(0.0);
    let per_call: Vec<(&str, f64)> = ["select_cpu", "enqueue", "dispatch", "running", "stopping"]
        .iter()
        .map(|cb| (*cb, get(&format!("cb_{cb}_us_per_call"))))
        .collect();
    let listed: Vec<String> = per_call
        .iter()
        .map(|(cb, us)| format!("{cb} {us:.1}"))
        .collect();
    let all = get("cb_all_cpu_s_per_s");
    let cpus = run.cpus.len() as f64;
    let seen = format!(
        "callbacks {all:.2} CPU-s per s of {:.2} granted, {:.0} calls per s; us per call: {}; other BPF programs {:.1} CPU-ms per s",
        granted(run),
        get("cb_all_calls_per_s"),
        listed.join(", "),
        get("other_bpf_ms_per_s"),
    );
    if per_call.iter().any(|(_, us)| *us <= 0.0) {
        bail!("a callback of every switch was not timed: {seen}");
    }
    if get("other_bpf_ms_per_s") <= 0.0 {
        bail!("the observer's programs were not timed: {seen}");
    }
    if all <= 0.0 || all > cpus {
        bail!("the callbacks' sum is not a share of {cpus} CPUs: {seen}");
    }
    Ok(seen)
}

/// Two full instances left on each other's homes go back (swap-back.toml).
fn swapped_instances_swap_back(r: &Results) -> Result<String> {
    let run = r.run("swap-back")?;
    let (_, _, log) = probe_of(run, "cat /tmp/swap.log")?;
    // "before the swap: inst0 on CPUs 4 5 6 7 1 ; inst1 on CPUs ...": the
    // worker threads must have sat on their first homes, or nothing is
    // tested. (The list includes each instance's sleeping parent.)
    let before = log
        .lines()
        .find_map(|l| l.split_once("before the swap: "))
        .map(|(_, rest)| rest)
        .with_context(|| format!("the flip script did not run to the swap: {log}"))?;
    if !log.contains("homes swapped") {
        bail!("the homes were not swapped: {log}");
    }
    let on = |inst: &str, cpus: std::ops::Range<usize>| -> usize {
        before
            .split(';')
            .find(|part| part.trim_start().starts_with(inst))
            .map_or(0, |part| {
                part.split_whitespace()
                    .filter_map(|w| w.parse::<usize>().ok())
                    .filter(|c| cpus.contains(c))
                    .count()
            })
    };
    let (settled0, settled1) = (on("inst0", 4..8), on("inst1", 0..4));
    if settled0 < 3 || settled1 < 3 {
        bail!("before the swap the instances were not on their first homes: {before}");
    }
    let loc = locality(run, &[("inst0", 0..4), ("inst1", 4..8)]);
    if loc < 0.8 {
        bail!(
            "after the homes were swapped, locality {:.1}%: the instances stayed on each other's nodes",
            loc * 100.0
        );
    }
    Ok(format!(
        "{settled0} and {settled1} of 5 tasks each on the first homes; {:.1}% at the new homes from 3 s after the swap",
        loc * 100.0
    ))
}

/// Issue 3's reaction targets (reaction.toml, 3 runs of 5 cycles): a
/// thread started into a full home runs first on the idle node ("spill
/// within one wakeup"), and once load drops every remaining thread is home
/// again within 100 ms. In the experiments' boots the default spilled at
/// the first wakeup in every cycle of every run, never failed to return
/// within a phase (600 ms), and returned in 12-42 ms (a run's median),
/// 60.5 ms at worst; so only a broken path fails here. Under EEVDF, which
/// keeps no home, the same workload reports all 5 cycles not at home
/// before the spill and 3-5 never returning (docs/experiments.md,
/// "reaction").
fn reaction_spills_at_once_and_returns(r: &Results) -> Result<String> {
    const SCN: &str = "reaction";
    const FIRST_WAKEUP_PCT_MIN: f64 = 80.0;
    const RETURN_MS_MAX: f64 = 100.0;
    let runs = r.runs_of(SCN, "softpart")?;
    let figures: Vec<_> = runs
        .iter()
        .map(|run| crate::table::probe_figures(run))
        .collect();
    // One figure of every run, in run order; an error names a run whose
    // workload did not report it.
    let column = |name: &str| -> Result<Vec<f64>> {
        runs.iter()
            .zip(&figures)
            .map(|(run, figs)| {
                figs.get(name).copied().with_context(|| {
                    format!(
                        "run {}: the reaction workload reported no {name} (probe: {:?})",
                        run.rep,
                        run.probes.first().map(|p| &p.2)
                    )
                })
            })
            .collect()
    };
    let first = column("cycles_spilled_at_first_wakeup_pct")?;
    let not_home = column("cycles_not_home_before_spill")?;
    let not_returned = column("cycles_not_returned")?;
    let ret_median = column("return_ms_median")?;
    let ret_max = column("return_ms_max")?;
    let mean_first = first.iter().sum::<f64>() / first.len() as f64;
    let seen = format!(
        "per run: first run outside the full home {}% of cycles; not at home before the spill {}; \
         never returned {}; return median {} ms, worst {} ms",
        list(&first),
        list(&not_home),
        list(&not_returned),
        list(&ret_median),
        list(&ret_max)
    );
    if not_home.iter().any(|&n| n > 0.0) {
        bail!("the group was not all at home before its home filled: {seen}");
    }
    if mean_first < FIRST_WAKEUP_PCT_MIN {
        bail!("a full home did not spill at the first wakeup: {seen}");
    }
    if not_returned.iter().any(|&n| n > 0.0) {
        bail!("threads stayed away from a home with room for a whole phase: {seen}");
    }
    let median_return = Summary::of(&ret_median).map_or(f64::MAX, |s| s.median);
    if median_return > RETURN_MS_MAX {
        bail!("the return home took over {RETURN_MS_MAX} ms: {seen}");
    }
    Ok(seen)
}

/// A cgroup removed and made again at the same path keeps its home after
/// the scan forgets the old one and another cgroup gets a home
/// (cgroup-made-again.toml).
fn cgroup_made_again_keeps_its_home(r: &Results) -> Result<String> {
    let run = r.run("cgroup-made-again")?;
    let (_, _, log) = probe_of(run, "cat /tmp/made-again.txt")?;
    if log.contains("step failed") || !log.contains("show:") {
        bail!("the steps did not all run: {log}");
    }
    let field = |name: &str| {
        log.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let preferred = field("preferred:").with_context(|| format!("no preferred CPUs: {log}"))?;
    let from = field("from:").unwrap_or_default();
    if preferred != "0-3" || !from.contains("/sp-again/a") {
        bail!(
            "the task in the new /sp-again/a prefers {preferred:?} from {from:?}, expected 0-3 from its cgroup: {log}"
        );
    }
    Ok(format!("preferred {preferred}, from {from}"))
}

/// The softpart run's probe whose command starts with `prefix`.
fn probe<'a>(r: &'a Results, prefix: &str) -> Result<&'a (String, i32, String)> {
    r.run_of("homes-two-instances", "softpart")?
        .probes
        .iter()
        .find(|(c, _, _)| c.starts_with(prefix))
        .with_context(|| format!("no probe {prefix:?}"))
}

fn cli_shows_cgroup_home(r: &Results) -> Result<String> {
    let (_, code, out) = probe(
        r,
        "softpart show --pid $(head -1 /sys/fs/cgroup/bench/inst0",
    )?;
    if *code != 0 || !out.contains("preferred: 0-3") || !out.contains("cgroup /bench/inst0") {
        bail!("exit {code}: {out}");
    }
    Ok("show reports preferred 0-3 from cgroup /bench/inst0".into())
}

fn cli_rejects_bad_input(r: &Results) -> Result<String> {
    let cases = [
        ("softpart prefer --pid 999999", "999999"),
        ("softpart prefer --pid 1 --cpus 0-99", "8-99"),
        ("softpart prefer --pid 1 --cpus 3-1", "3-1"),
        ("softpart prefer --pid 1 --node 7", "node 7"),
        ("softpart prefer --cgroup /no/such/group", "/no/such/group"),
        ("softpart prefer --pid 1,999999", "999999"),
        ("softpart prefer --pid 1 --cpus 0,,2", "0,,2"),
    ];
    for (cmd, named) in cases {
        let (_, code, out) = probe(r, cmd)?;
        // The probes that go on to `show` report the exit status in text.
        let failed = if out.contains("exit ") {
            !out.contains("exit 0")
        } else {
            *code != 0
        };
        if !failed || !out.contains(named) {
            bail!("{cmd}: exit {code}, output does not name {named:?}: {out}");
        }
        // Nothing applied: pid 1 kept no home.
        if out.contains("pid 1 (") && !out.contains("preferred: -") {
            bail!("{cmd} failed but changed pid 1's home: {out}");
        }
    }
    Ok(format!(
        "{} bad inputs rejected, each naming the value",
        cases.len()
    ))
}

fn cli_exec_inherits(r: &Results) -> Result<String> {
    for cmd in [
        "softpart exec --cpus 6-7 -- sh -c 'softpart show --pid $$'",
        "softpart exec --cpus 6-7 -- sh -c 'sleep 5 & softpart show --pid $!'",
    ] {
        let (_, code, out) = probe(r, cmd)?;
        if *code != 0 || !out.contains("preferred: 6-7") || !out.contains("its own") {
            bail!("{cmd}: exit {code}: {out}");
        }
    }
    Ok("exec'd command and its forked child both prefer 6-7".into())
}

fn cli_task_home_and_clear(r: &Results) -> Result<String> {
    let (_, code, out) = probe(r, "P=$(head -1 /sys/fs/cgroup/bench/inst1")?;
    // prefer --cpus 1, show, --clear, show: the task's own home, then its
    // cgroup's again.
    let at = |needle: &str| out.find(needle);
    let ok = *code == 0
        && matches!(
            (at("preferred: 1\n"), at("own home cleared"), at("preferred: 4-7")),
            (Some(a), Some(b), Some(c)) if a < b && b < c
        )
        && out.contains("cgroup /bench/inst1");
    if !ok {
        bail!("exit {code}: {out:?}");
    }
    Ok("task home 1 overrides cgroup 4-7; --clear falls back to the cgroup".into())
}

pub fn probe_of<'a>(run: &'a RunResult, prefix: &str) -> Result<&'a (String, i32, String)> {
    run.probes
        .iter()
        .find(|(c, _, _)| c.starts_with(prefix))
        .with_context(|| format!("no probe {prefix:?}"))
}

const CONFIG_POLICY: &str = "softpart:--config /etc/softpart.toml";

fn config_file_homes(r: &Results) -> Result<String> {
    let homes = [("inst0", 0..4), ("inst1", 4..8)];
    let sp = r.run_of("config-and-stats", CONFIG_POLICY)?;
    let ev = r.run_of("config-and-stats", "eevdf")?;
    let (l_sp, l_ev) = (locality(sp, &homes), locality(ev, &homes));
    if l_sp < 0.95 {
        bail!(
            "locality with config-file homes {:.1}% (eevdf {:.1}%), expected >= 95%",
            l_sp * 100.0,
            l_ev * 100.0
        );
    }
    Ok(format!(
        "locality {:.1}% (eevdf {:.1}%) with homes from two glob rules",
        l_sp * 100.0,
        l_ev * 100.0
    ))
}

/// The last `group LABEL` line of a --monitor output, as fields.
fn last_line<'a>(out: &'a str, prefix: &str) -> Option<Vec<&'a str>> {
    out.lines()
        .rev()
        .find(|l| l.trim_start().starts_with(prefix))
        .map(|l| l.split_whitespace().collect())
}

/// The value after `key` in a report line ("local 99.8%" -> 99.8).
fn field(words: &[&str], key: &str) -> Option<f64> {
    let i = words.iter().position(|w| *w == key)?;
    words
        .get(i + 1)?
        .trim_end_matches(['%', 's'])
        .trim_end_matches("u")
        .parse()
        .ok()
}

fn operator_mistakes_refused(r: &Results) -> Result<String> {
    let sp = r.run_of("config-and-stats", CONFIG_POLICY)?;
    let (_, _, out) = probe_of(sp, "if [ $(cat /sys/kernel/sched_ext/state) = enabled ]")?;
    if !out.contains("another scx_softpart is running") || out.contains("exit 0") {
        bail!("a second scx_softpart was not refused: {out}");
    }
    if !out.contains("first still answers") {
        bail!("the running scx_softpart lost its control socket: {out}");
    }
    let (_, _, out) = probe_of(
        sp,
        "timeout 20 scx_softpart --config /etc/softpart-bad.toml",
    )?;
    if !out.contains("exit 1") || !out.contains("[[home]] #2") || !out.contains("8-99") {
        bail!("a bad config was not refused naming the entry and value: {out}");
    }
    if !out.lines().any(|l| l.trim() == "enabled") {
        bail!("the running scheduler was disturbed by a rejected start: {out}");
    }
    Ok("second instance refused (the first keeps its socket); bad config refused naming [[home]] #2 and CPUs 8-99".into())
}

fn stats_report(r: &Results) -> Result<String> {
    let sp = r.run_of("config-and-stats", CONFIG_POLICY)?;
    let (_, code, out) = probe_of(sp, "timeout 3.5 scx_softpart --monitor")?;
    // timeout ends the monitor with SIGTERM: 143 (or 124 from busybox).
    if ![0, 124, 143].contains(code) || !out.contains("[softpart]") {
        bail!("monitor exit {code}: {out}");
    }
    let mut seen = Vec::new();
    for (label, home, softness) in [
        ("/bench/inst0", "0-3", "100:1"),
        ("/bench/inst1", "4-7", "home-first"),
    ] {
        let w = last_line(out, &format!("group {label} "))
            .with_context(|| format!("no line for group {label}: {out}"))?;
        let local = field(&w, "local").context("no locality")?;
        let cpus = field(&w, "cpus").context("no cpus")?;
        let xnode = field(&w, "xnode").context("no xnode")?;
        if w.get(3) != Some(&home) || w.get(4) != Some(&softness) {
            bail!("group {label}: expected home {home} softness {softness}: {w:?}");
        }
        // Three CPU hogs that fit their node: all at home, ~3 CPUs.
        if local < 95.0 || !(2.0..=4.5).contains(&cpus) || xnode > 5.0 {
            bail!("group {label}: local {local}% cpus {cpus} xnode {xnode}/s: {w:?}");
        }
        seen.push(format!("{label} local {local}% cpus {cpus}"));
    }
    for part in ["part 0 ", "part 1 "] {
        let w = last_line(out, part).with_context(|| format!("no {part:?} line: {out}"))?;
        let util = field(&w, "util").context("no util")?;
        if !(50.0..=100.0).contains(&util) {
            bail!("{part}: util {util}% with 3 hogs on 4 CPUs: {w:?}");
        }
        seen.push(format!("{}util {util}%", part));
    }
    Ok(seen.join("; "))
}

fn cli_group_softness(r: &Results) -> Result<String> {
    let sp = r.run_of("config-and-stats", CONFIG_POLICY)?;
    let (_, code, out) = probe_of(
        sp,
        "softpart prefer --cgroup /bench/inst1 --node 1 --softness 5:4",
    )?;
    let w = last_line(out, "group /bench/inst1 ").with_context(|| format!("exit {code}: {out}"))?;
    if w.get(3) != Some(&"4-7") || w.get(4) != Some(&"5:4") {
        bail!("after --softness 5:4: {w:?}");
    }
    for (cmd, named) in [
        (
            "softpart prefer --cgroup /bench/inst1 --node 1 --softness 3",
            "\"3\"",
        ),
        ("softpart prefer --cgroup '' --node 0", "empty"),
    ] {
        let (_, code, out) = probe_of(sp, cmd)?;
        if *code == 0 || !out.contains(named) {
            bail!("{cmd}: exit {code}, does not name {named}: {out}");
        }
    }
    Ok(
        "inst1 reports softness 5:4 after prefer --softness; bad softness and empty path rejected"
            .into(),
    )
}

const BALANCE_POLICY: &str = "softpart:--balance /bench/*";

/// Each group's share of its CPU time in the 4-CPU partition it uses most,
/// and that partition.
fn exclusivity(run: &RunResult, group_name: &str) -> Result<(f64, usize)> {
    let g = group(run, group_name)?;
    let per_part: Vec<u64> = (0..4)
        .map(|p| g.counters.cpu_ns.iter().skip(p * 4).take(4).sum())
        .collect();
    let total: u64 = per_part.iter().sum();
    let (best, ns) = per_part
        .iter()
        .enumerate()
        .max_by_key(|(_, n)| **n)
        .map(|(i, n)| (i, *n))
        .unwrap_or((0, 0));
    Ok((ns as f64 / total.max(1) as f64, best))
}

fn balancer_settles_apart(r: &Results) -> Result<String> {
    let bal = r.run_of("balance-4n2c2t", BALANCE_POLICY)?;
    let ev = r.run_of("balance-4n2c2t", "eevdf")?;
    let mut used = std::collections::BTreeSet::new();
    let mut seen = Vec::new();
    for name in ["g0", "g1", "g2", "g3"] {
        let (e, part) = exclusivity(bal, name)?;
        let (e_ev, _) = exclusivity(ev, name)?;
        // Measured 86-95% (issue 4 asks 95%: a known miss); eevdf ~66%.
        if e < 0.75 {
            bail!(
                "{name}: {:.1}% in its partition (eevdf {:.1}%)",
                e * 100.0,
                e_ev * 100.0
            );
        }
        used.insert(part);
        seen.push(format!(
            "{name} {:.1}% (eevdf {:.1}%)",
            e * 100.0,
            e_ev * 100.0
        ));
    }
    if used.len() != 4 {
        bail!("groups share partitions {used:?}: {}", seen.join(", "));
    }
    Ok(format!("one partition each: {}", seen.join(", ")))
}

fn balancer_capacity(r: &Results) -> Result<String> {
    let bal = granted(r.run_of("balance-4n2c2t", BALANCE_POLICY)?);
    let none = granted(r.run_of("balance-4n2c2t", "softpart-nohome")?);
    let ev = granted(r.run_of("balance-4n2c2t", "eevdf")?);
    if bal < 0.9 * none {
        bail!("balanced {bal:.2} CPU-s/s, shared {none:.2}");
    }
    Ok(format!(
        "granted balanced {bal:.2}, shared (no homes) {none:.2}, eevdf {ev:.2} CPU-s/s"
    ))
}

fn balancer_steady(r: &Results) -> Result<String> {
    let bal = r.run_of("balance-4n2c2t", BALANCE_POLICY)?;
    let (_, code, table) = probe_of(bal, "softpart stat")?;
    let (_, _, json) = bal
        .probes
        .iter()
        .find(|(c, _, _)| c == "softpart stat --json")
        .context("no stat --json probe")?;
    let v: softpart_core::control::StatView =
        serde_json::from_str(json).with_context(|| format!("stat --json: {json}"))?;
    let window = scenario("balance-4n2c2t")?.duration_s;
    if *code != 0 || table.matches(" *").count() != 4 || v.groups.len() != 4 {
        bail!("stat exit {code}, expected 4 groups with a starred home:\n{table}");
    }
    let mut moves = 0;
    for g in &v.groups {
        if g.part.is_none() {
            bail!("{} not placed:\n{table}", g.label);
        }
        if g.last_move_s_ago.is_some_and(|s| s < window) {
            bail!(
                "{} moved {:.1} s before the end of a {window} s steady window:\n{table}",
                g.label,
                g.last_move_s_ago.unwrap_or(0.0)
            );
        }
        moves += g.moves;
    }
    Ok(format!(
        "4 groups placed, none moved in the window ({moves} moves before it)"
    ))
}

fn balancer_phase(r: &Results) -> Result<String> {
    let run = r.run_of("balance-phase", BALANCE_POLICY)?;
    let (_, code, out) = probe_of(run, "cat /tmp/phase.txt")?;
    let figs = crate::table::probe_figures(run);
    let (Some(moves), Some(periods)) =
        (figs.get("moves_after_change"), figs.get("resettle_periods"))
    else {
        bail!("no figures (exit {code}): {out}");
    };
    // 5 + 3 on two 4-CPU partitions: a 1-thread group must move.
    if *moves < 1.0 {
        bail!("no move after the load doubled: {out}");
    }
    if *periods > 5.0 {
        bail!("settled again only after {periods} periods: {out}");
    }
    Ok(format!(
        "{moves} move(s); settled {periods} periods after the change"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty 5 s window on 8 CPUs whose snapshot read took `read_ms`.
    fn window(rep: u32, read_ms: u64) -> RunResult {
        RunResult {
            scenario: "s".into(),
            policy: "p".into(),
            load: 1,
            rep,
            wall_ns: 5_000_000_000,
            cpuacct_wall_ns: 0,
            snapshot_read_ns: read_ms * 1_000_000,
            snapshot_read_on_cpu_ns: 0,
            snapshot_read_runnable_ns: 0,
            groups: BTreeMap::new(),
            cpus: vec![Default::default(); 8],
            sched_ext_state: String::new(),
            sched_ext_ops: String::new(),
            early_exits: Vec::new(),
            probes: Vec::new(),
            select_cpu: None,
        }
    }

    fn results(read_ms: &[u64]) -> Results {
        Results {
            guests: BTreeMap::new(),
            problems: Vec::new(),
            runs: read_ms
                .iter()
                .enumerate()
                .map(|(i, &ms)| window(i as u32, ms))
                .collect(),
            exits: Vec::new(),
            restarts: Vec::new(),
        }
    }

    #[test]
    fn long_reads_pass_while_most_reads_are_short() {
        // 400 ms is 8% of a 5 s window: host hiccups, as long as most
        // reads are short (the CI run that failed the old one-only rule).
        let ok = observer_windows_fit_the_machine(&results(&[20, 400, 30, 300, 5])).unwrap();
        assert!(
            ok.contains("median read 0.60% of its window, longest 400 ms, 2 over 5%"),
            "{ok}"
        );
        // Most reads long: the reader itself is slow.
        let err = observer_windows_fit_the_machine(&results(&[20, 400, 300]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("median snapshot read took 6.0%"), "{err}");
        assert!(err.contains("2 of 3 over 5%"), "{err}");
        // Over a quarter of its window, even alone.
        assert!(observer_windows_fit_the_machine(&results(&[20, 1300, 5])).is_err());
    }

    #[test]
    fn a_long_read_says_where_its_time_went() {
        let mut r = results(&[20, 400, 30]);
        r.runs[1].snapshot_read_on_cpu_ns = 350_000_000;
        r.runs[1].snapshot_read_runnable_ns = 30_000_000;
        let ok = observer_windows_fit_the_machine(&r).unwrap();
        assert!(
            ok.contains("400 ms (on a CPU 350 ms, runnable 30 ms, asleep 20 ms)"),
            "{ok}"
        );
    }

    /// Reaction runs whose workload reported (first-wakeup %, not home
    /// before the spill, never returned, return median ms) per run.
    fn reaction_runs(per_run: &[(f64, f64, f64, f64)]) -> Results {
        let mut r = results(&vec![0; per_run.len()]);
        for (run, &(first, not_home, not_ret, ret)) in r.runs.iter_mut().zip(per_run) {
            run.scenario = "reaction".into();
            run.policy = "softpart".into();
            let text = format!(
                "figure cycles_spilled_at_first_wakeup_pct {first}\n\
                 figure cycles_not_home_before_spill {not_home}\n\
                 figure cycles_not_returned {not_ret}\n\
                 figure return_ms_median {ret}\nfigure return_ms_max {}\n",
                ret * 2.0
            );
            run.probes = vec![("cat /tmp/reaction.txt".into(), 0, text)];
        }
        r
    }

    #[test]
    fn reaction_check_fails_where_homes_are_not_kept() {
        // The final build's guest run (2026-11-28).
        let ok = reaction_spills_at_once_and_returns(&reaction_runs(&[
            (100.0, 0.0, 0.0, 18.3),
            (100.0, 0.0, 0.0, 15.8),
            (100.0, 0.0, 0.0, 16.1),
        ]))
        .unwrap();
        assert!(ok.contains("return median 18.30 15.80 16.10 ms"), "{ok}");
        // EEVDF's figures from the same workload: no home kept.
        let eevdf = reaction_runs(&[(100.0, 5.0, 5.0, 0.0); 3]);
        assert!(reaction_spills_at_once_and_returns(&eevdf).is_err());
        // A thread stuck away for a whole phase in one cycle of one run.
        let stuck = reaction_runs(&[(100.0, 0.0, 0.0, 16.0), (100.0, 0.0, 1.0, 16.0)]);
        let err = reaction_spills_at_once_and_returns(&stuck).unwrap_err();
        assert!(err.to_string().contains("stayed away"), "{err}");
        // New threads queued at home first, spilling only later.
        let late = reaction_runs(&[(40.0, 0.0, 0.0, 16.0), (60.0, 0.0, 0.0, 16.0)]);
        let err = reaction_spills_at_once_and_returns(&late).unwrap_err();
        assert!(err.to_string().contains("first wakeup"), "{err}");
        // Returning, but slowly.
        let slow = reaction_runs(&[(100.0, 0.0, 0.0, 150.0); 3]);
        let err = reaction_spills_at_once_and_returns(&slow).unwrap_err();
        assert!(err.to_string().contains("100 ms"), "{err}");
        // The workload did not report: no figures, no pass.
        let mut silent = reaction_runs(&[(100.0, 0.0, 0.0, 16.0)]);
        silent.runs[0].probes[0].2 = String::new();
        assert!(reaction_spills_at_once_and_returns(&silent).is_err());
    }

    /// hold-visitors runs: per policy, (visitors held, passed visitors next
    /// on the same CPU, on its node, across the nodes, the instance's
    /// cross-node moves, its CPU-s per s), one run and scheduler exit each.
    fn hold_visitor_runs(per_policy: &[(&str, [u64; 6])]) -> Results {
        let mut r = results(&vec![0; per_policy.len()]);
        for (run, &(policy, [held, cpu_, node, crossed, moves, cpu_s])) in
            r.runs.iter_mut().zip(per_policy)
        {
            run.scenario = "hold-visitors".into();
            run.policy = policy.into();
            let g = serde_json::json!({
                "counters": {
                    "cpu_ns": [cpu_s * run.wall_ns],
                    "migrations": [0, 0, 0, moves * 5],
                    "delay_hist": [], "delay_ns": 0, "nr_delays": 0,
                },
                "cpuacct_ns": [],
            });
            run.groups
                .insert("inst0".into(), serde_json::from_value(g).unwrap());
            let counters = serde_json::json!({ "softpart_counters": {
                "put_back_held_away": held,
                "passed_same_cpu": cpu_,
                "passed_same_node": node,
                "passed_crossed": crossed,
            }});
            r.exits.push(SchedulerExit {
                scenario: "hold-visitors".into(),
                policy: policy.into(),
                attached: true,
                clean: true,
                status: String::new(),
                stdout_tail: counters.to_string(),
                stderr_tail: String::new(),
            });
        }
        r
    }

    #[test]
    fn hold_visitors_check_fails_where_visitors_are_not_held() {
        const OFF: &str = "softpart:--no-hold-visitors";
        // Pooled figures of a guest run on the counters' build (2026-11-28).
        const ON: [u64; 6] = [973, 687, 108, 179, 19, 8];
        const UNHELD: [u64; 6] = [0, 551, 199, 334, 38, 8];
        let check = |on, off| {
            visitors_held_for_their_cpu(&hold_visitor_runs(&[("softpart", on), (OFF, off)]))
        };
        let ok = check(ON, UNHELD).unwrap();
        assert!(
            ok.contains("same CPU 70.5%, across the nodes 18.4%"),
            "{ok}"
        );
        // (what the rule's run read instead, what the error names)
        let broken: [(&str, [u64; 6], [u64; 6], &str); 6] = [
            ("the rule off in both", UNHELD, UNHELD, "nothing tested"),
            (
                "held, not taken back by their CPU",
                [973, 494, 236, 243, 19, 8],
                UNHELD,
                "no more often",
            ),
            (
                "back on their CPU as often, the rest across the nodes",
                [973, 687, 0, 286, 19, 8],
                UNHELD,
                "crossed the nodes",
            ),
            (
                "the instance crossing more than without",
                [973, 687, 108, 179, 40, 8],
                UNHELD,
                "more often with the rule",
            ),
            (
                "held at a cost in CPU time",
                [973, 687, 108, 179, 19, 7],
                UNHELD,
                "CPU time",
            ),
            (
                "--no-hold-visitors holding",
                ON,
                [5, 551, 199, 334, 38, 8],
                "still held",
            ),
        ];
        for (case, on, off, names) in broken {
            let err = check(on, off).expect_err(case).to_string();
            assert!(err.contains(names), "{case}: {err}");
        }
    }

    #[test]
    fn guest_test_scenarios_are_valid() {
        for (name, _) in SCENARIOS {
            let sc = scenario(name).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(&sc.name, name, "a scenario's name is its key");
        }
    }
}
