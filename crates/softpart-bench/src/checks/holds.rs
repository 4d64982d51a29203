//! Holds and steals: tasks waiting behind per-CPU kthreads, held put-backs
//! and visitors, kept yields, deferred steals, evictions toward room and
//! over-full partitions.

use super::*;

pub(super) const TESTS: &[(&str, Check)] = &[
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
        "steals_wait_on_cpus_their_owners_just_used",
        steals_deferred_for_owners,
    ),
    (
        "steals_do_not_wait_on_cpus_serving_no_owners",
        steals_not_deferred_without_owners,
    ),
    ("yields_with_nobody_waiting_keep_the_cpu", yields_kept),
    ("yields_away_from_home_keep_the_cpu_too", yields_away_kept),
    (
        "evictions_only_toward_room_at_a_full_machine",
        evictions_toward_room,
    ),
    (
        "over_full_partitions_lose_the_steal_wait",
        overfull_partitions_steal_at_once,
    ),
];

/// Fewer waits (observer) or kthread waits (scheduler) than this in a run
/// say too little to judge; a run has had 500-700 and over 1000.
const KTHREAD_MIN_WAITS: u64 = 100;

/// Share of the thread's waits ending on a CPU leaving idle: 2.7-7.5% with
/// the wait behind kthreads, 61-69% when the thread was handed to an idle
/// CPU instead (kthread-wait at 1 and 2 threads, 5 runs each).
const KTHREAD_IDLE_MAX: f64 = 0.2;

/// A thread interrupted by per-CPU kworkers waits for them on its CPU
/// instead of being handed to an idle CPU (kthread-wait.toml): it waits
/// behind kthreads, and few of its waits end on a CPU leaving idle (eevdf's
/// share in the same boot shown beside it).
fn kthread_turns_waited_on_cpu(r: &Results) -> Result<String> {
    let idle_ended = |policy: &str| -> Result<(f64, u64)> {
        let g = &group(r.run_of("kthread-wait", policy)?, "inst0")?.counters;
        let waits: u64 = g.delay_hist.iter().sum();
        let idle: u64 = g.idle_end_hist.iter().sum();
        Ok((idle as f64 / waits.max(1) as f64, waits))
    };
    let (on, on_waits) = idle_ended("softpart")?;
    let (eevdf, eevdf_waits) = idle_ended("eevdf")?;
    let waited = exit_counters(r, "kthread-wait", "softpart")?["kthread_wait"]
        .as_u64()
        .unwrap_or(0);
    let seen = format!(
        "waits ending on a CPU leaving idle: {:.1}% of {on_waits} ({waited} waits behind kthreads); eevdf {:.1}% of {eevdf_waits}",
        on * 100.0,
        eevdf * 100.0
    );
    if on_waits < KTHREAD_MIN_WAITS || waited < KTHREAD_MIN_WAITS {
        bail!("too few waits behind kthreads to judge: {seen}");
    }
    if on > KTHREAD_IDLE_MAX {
        bail!("the thread was moved to idle CPUs instead of waiting: {seen}");
    }
    Ok(seen)
}

/// Share of held put-backs that ran next on the CPU they were held for,
/// pooled over hold-put-back's runs, at least this. Unheld, a put-back
/// thread went to whichever of its node's 4 CPUs reached a slice end
/// first; held, busy CPUs leave it to its own.
const HOLD_SAME_CPU_MIN: f64 = 0.5;

/// Busy CPUs leaving a held head, over all runs: over 100,000 in 15 s.
const HOLD_MIN_SKIPS: u64 = 1000;

/// A thread its CPU puts back is held for that CPU (hold-put-back.toml):
/// busy CPUs leave it instead of taking it and queueing their own thread,
/// and most held threads run next on the CPU they were held for.
fn put_back_held_for_cpu(r: &Results) -> Result<String> {
    let (mut skips, mut same, mut moved) = (0, 0, 0);
    for c in exits_counters(r, "hold-put-back", HOLD_POLICY)? {
        let get = |k: &str| c[k].as_u64().unwrap_or(0);
        skips += get("held_skip");
        same += get("put_back_same");
        moved += get("put_back_moved");
    }
    let share = same as f64 / (same + moved).max(1) as f64;
    let seen = format!(
        "{skips} busy CPUs left a held head; of {} held put-backs {:.1}% ran next on their CPU",
        same + moved,
        share * 100.0
    );
    if skips < HOLD_MIN_SKIPS || same + moved < HOLD_MIN_SKIPS {
        bail!("hardly a put-back was held, nothing tested: {seen}");
    }
    if share < HOLD_SAME_CPU_MIN {
        bail!("held put-backs did not go back to their CPU: {seen}");
    }
    Ok(seen)
}

/// The guest tests' scheduler with the diagnostic events on.
pub(super) const HOLD_POLICY: &str = "softpart:--diag";

/// Visitors held, and visitors passed, over the pooled runs of
/// hold-visitors.toml: several hundred held in a boot's runs.
const HOLD_VISITORS_MIN: u64 = 100;

/// Of the visitors passed by the daemon, the share that ran next on the
/// same CPU, at least this. Held, it moves with the host by more than the
/// hold moves it (held 43-77% over seventeen boots; unheld 39-58%), so no
/// line here tells hold from no hold: that is a same-boot comparison with
/// an earlier build (docs/decisions.md). This line catches a hold for
/// another CPU than the one it left: the CPU it is held for takes it, and
/// its own skips it.
const HOLD_VISITORS_SAME_CPU_MIN: f64 = 1.0 / 3.0;

/// Of the visitors passed, the share that ran next on the other node, at
/// most this: a held visitor stays in the partition it visits, and 4-7%
/// crossed in the boots that said so (the rest ran on its CPU's node).
const HOLD_VISITORS_CROSSED_MAX: f64 = 0.2;

/// Visitors switched out for a passing task are held for their CPU
/// (hold-visitors.toml: one sysbench-memory instance of 8 threads homed on
/// node 0, half of them visiting node 1, and a daemon with no home waking
/// every 2 ms). Pooled over the runs, visitors are held, and a visitor
/// passed by the daemon runs next on its CPU in a third of the cases or
/// more (the CPU it is held for takes it back) and hardly ever across the
/// nodes.
pub(super) fn visitors_held_for_their_cpu(r: &Results) -> Result<String> {
    let (mut held, mut same_cpu, mut same_node, mut crossed) = (0, 0, 0, 0);
    for c in exits_counters(r, "hold-visitors", HOLD_POLICY)? {
        let get = |k: &str| c[k].as_u64().unwrap_or(0);
        held += get("put_back_held_away");
        same_cpu += get("passed_same_cpu");
        same_node += get("passed_same_node");
        crossed += get("passed_crossed");
    }
    let passed = same_cpu + same_node + crossed;
    let share = |n: u64| n as f64 / passed.max(1) as f64;
    let seen = format!(
        "{held} held; of {passed} passed, next on the same CPU {:.1}%, on its node {:.1}%, across the nodes {:.1}%",
        100.0 * share(same_cpu),
        100.0 * share(same_node),
        100.0 * share(crossed),
    );
    if held < HOLD_VISITORS_MIN || passed < HOLD_VISITORS_MIN {
        bail!("hardly a visitor was held, nothing tested: {seen}");
    }
    if share(same_cpu) < HOLD_VISITORS_SAME_CPU_MIN {
        bail!("held visitors did not go back to their CPU: {seen}");
    }
    if share(crossed) > HOLD_VISITORS_CROSSED_MAX {
        bail!("held visitors ran next across the nodes: {seen}");
    }
    Ok(seen)
}

/// sched_yield() with nobody waiting keeps the CPU without a dispatch(),
/// and a yield with a task waiting still hands the CPU over
/// (hold-put-back.toml's default run: two sysbench-threads instances of 8
/// per 4-CPU node, which yield in a loop). In sysbench-threads-handoffs
/// at that load: 218 thousand kept and 14 thousand hand-offs per s.
fn yields_kept(r: &Results) -> Result<String> {
    let c = exit_counters(r, "hold-put-back", HOLD_POLICY)?;
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
/// steal-one-instance: 241-493 thousand.
const YIELD_AWAY_MIN_KEPT: u64 = 10_000;

/// A thread away from home keeps its CPU at a yield with nobody waiting,
/// as one at home does (steal-one-instance.toml: 16 sysbench threads
/// homed on a 4-CPU node burst into the idle node and yield in a loop
/// there), and the instance loses no CPU time against eevdf.
fn yields_away_kept(r: &Results) -> Result<String> {
    const SCN: &str = "steal-one-instance";
    let kept = exit_counters(r, SCN, "softpart")?["yield_kept_away"]
        .as_u64()
        .unwrap_or(0);
    let cpu = granted(r.run_of(SCN, "softpart")?);
    let eevdf = granted(r.run_of(SCN, "eevdf")?);
    let seen = format!(
        "{kept} yields away from home kept their CPU, {cpu:.2} CPU-s per s; eevdf {eevdf:.2}"
    );
    if kept < YIELD_AWAY_MIN_KEPT {
        bail!("yields away from home did not keep their CPU: {seen}");
    }
    if cpu < eevdf * 0.9 {
        bail!("the instance lost CPU time against eevdf: {seen}");
    }
    Ok(seen)
}

/// Steals in a run of steal.toml over the scheduler's whole run: 22-50
/// (few tasks queue, since a task not behind its queue's head keeps its
/// CPU at a slice end). Below this the steal path was hardly taken and
/// nothing is tested.
const STEAL_MIN: u64 = 10;

/// Cross-node moves counted over steal.toml's runs without homes below
/// which the ratio against them is mostly counting noise (about 14% at
/// 50).
const NOHOME_COUNTED_MIN: u64 = 50;

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

/// A CPU about to go idle that its own instance just used waits before it
/// takes the other instance's task that just ran, and its timer brings it
/// back to take it once the wait is over (steal.toml): deferrals happen,
/// timers fire, the CPUs still steal, and the instances keep the CPU time
/// the same scheduler gives them without homes (which never waits).
fn steals_deferred_for_owners(r: &Results) -> Result<String> {
    let (steals, deferred, timers) = steal_counters(r, "steal", "softpart")?;
    let cpu = granted(r.run_of("steal", "softpart")?);
    let nohome = granted(r.run_of("steal", "softpart-nohome")?);
    let seen = format!(
        "{steals} steals, {deferred} deferred, {timers} timer kicks, {cpu:.2} CPU-s per s; without homes {nohome:.2}"
    );
    if deferred < 5 || timers == 0 {
        bail!("no steal waited for its timer: {seen}");
    }
    if steals < 10 {
        bail!("the deferred steals never happened: {seen}");
    }
    // A timer that failed to end the wait would leave CPUs idle for good.
    if cpu < nohome * 0.9 {
        bail!("waiting cost CPU time: {seen}");
    }
    Ok(seen)
}

/// The balanced groups' CPU time in a full-machine scenario, and shared
/// mode's (the same scheduler with no homes) in the same boot.
fn balanced_and_shared(r: &Results, scenario: &str) -> Result<(f64, f64)> {
    Ok((
        granted(r.run_of(scenario, BALANCE_POLICY)?),
        granted(r.run_of(scenario, "softpart-nohome")?),
    ))
}

/// Evictions over the scheduler's run of evict-toward-room, at most: 46 in
/// CI's run, against 439 when every visitor was evicted (296-327 against
/// 1,506-1,544 in longer experiment runs).
const EVICT_TOWARD_ROOM_MAX: u64 = 200;

/// At a full machine (evict-toward-room.toml) a waking owner evicts only
/// visitors whose home has an idle CPU: few evictions, and the balanced
/// groups keep most of shared mode's CPU time.
fn evictions_toward_room(r: &Results) -> Result<String> {
    const SCN: &str = "evict-toward-room";
    let evicts = exit_counters(r, SCN, BALANCE_POLICY)?["evict"]
        .as_u64()
        .unwrap_or(0);
    let (cpu, shared) = balanced_and_shared(r, SCN)?;
    let seen = format!("{evicts} evictions, {cpu:.2} CPU-s per s; shared mode {shared:.2}");
    if evicts > EVICT_TOWARD_ROOM_MAX {
        bail!("evictions were not kept to visitors with room at home: {seen}");
    }
    // 0.96-1.00x; evicting every visitor gave 0.90-0.93x, so this catches
    // only a collapse.
    if cpu < shared * 0.90 {
        bail!("the balanced groups lost CPU time to partitioning: {seen}");
    }
    Ok(seen)
}

/// Steals deferred per s after the window in overfull-steal, at most: 0-0.6
/// with over-full partitions' groups stolen at once, 23-40 when they kept
/// the wait.
const OVERFULL_DEFERRED_MAX: f64 = 5.0;

/// At a full machine (overfull-steal.toml) the balancer marks the
/// partitions over-full, and their groups' queued tasks are taken without
/// the steal wait: once they are marked, hardly a steal is deferred, and
/// the balanced groups get about shared mode's CPU time.
fn overfull_partitions_steal_at_once(r: &Results) -> Result<String> {
    const SCN: &str = "overfull-steal";
    let marked: std::collections::BTreeSet<&str> = exit_of(r, SCN, BALANCE_POLICY)?
        .stderr_tail
        .lines()
        .filter(|l| l.contains("over-full: its groups'"))
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("PART-")))
        .collect();
    let figs = crate::table::probe_figures(r.run_of(SCN, BALANCE_POLICY)?);
    let deferred = figs.get("steals_deferred_per_s").copied().unwrap_or(0.0);
    let (cpu, shared) = balanced_and_shared(r, SCN)?;
    let seen = format!(
        "{} partitions marked over-full, {deferred:.1} steals deferred per s, {cpu:.2} CPU-s per s; shared mode {shared:.2}",
        marked.len()
    );
    if marked.len() < 3 {
        bail!("the balancer did not mark the full machine's partitions over-full: {seen}");
    }
    if deferred > OVERFULL_DEFERRED_MAX {
        bail!("over-full partitions' queued tasks still waited: {seen}");
    }
    // 0.99-1.00x in three boots; only a collapse fails here.
    if cpu < shared * 0.92 {
        bail!("the balanced groups lost CPU time to partitioning: {seen}");
    }
    Ok(seen)
}

/// One instance bursting into a node that is no one's home
/// (steal-one-instance.toml): that node's CPUs serve no owners, so they
/// take its queued threads at once, and the instance gets eevdf's CPU
/// time. Deferring on every CPU there counted 217 deferrals per s against
/// 108 steals, at 0.95x the CPU time of stealing at once.
fn steals_not_deferred_without_owners(r: &Results) -> Result<String> {
    const SCN: &str = "steal-one-instance";
    let (steals, deferred, _) = steal_counters(r, SCN, "softpart")?;
    let cpu = granted(r.run_of(SCN, "softpart")?);
    let eevdf = granted(r.run_of(SCN, "eevdf")?);
    let seen =
        format!("{steals} steals, {deferred} deferred, {cpu:.2} CPU-s per s; eevdf {eevdf:.2}");
    if steals < STEAL_MIN {
        bail!("the instance hardly stole, nothing tested: {seen}");
    }
    // The few a home CPU may defer (node 1's queue holds homeless tasks).
    if deferred * 10 > steals {
        bail!("CPUs serving no owners deferred their steals: {seen}");
    }
    if cpu < eevdf * 0.90 {
        bail!("the instance lost CPU time to deferred steals: {seen}");
    }
    Ok(seen)
}

/// A CPU of one node out of work takes the other node's waiting task
/// (steal.toml): idle CPUs steal, the steals are a large share of the
/// homed instances' cross-node moves (xnode_queue_steal), and the homes
/// add no cross-node moves: the instances cross the nodes at most 0.7x as
/// often as the same scheduler moves them without homes, at its CPU time
/// (medians of the scenario's runs). eevdf is no baseline here: its own
/// moves varied 2-4x between runs and 9-151 per s across boots, against
/// 184-191 per s without homes in one boot's three runs.
fn idle_cpus_steal(r: &Results) -> Result<String> {
    let median = |v: &[f64]| Summary::of(v).map_or(0.0, |s| s.median);
    // Per run: cross-node moves per s; over the runs: the moves counted
    // and the median CPU time.
    let figures = |policy: &str| -> Result<(Vec<f64>, u64, f64)> {
        let runs = r.runs_of("steal", policy)?;
        let counted: Vec<u64> = runs
            .iter()
            .map(|run| run.groups.values().map(|g| g.counters.migrations[3]).sum())
            .collect();
        let cross: Vec<f64> = runs
            .iter()
            .zip(&counted)
            .map(|(run, n)| *n as f64 / (run.wall_ns as f64 / 1e9))
            .collect();
        let cpu: Vec<f64> = runs.iter().map(|run| granted(run)).collect();
        Ok((cross, counted.iter().sum(), median(&cpu)))
    };
    let (cross, _, cpu) = figures("softpart")?;
    let (nohome_cross, nohome_counted, nohome_cpu) = figures("softpart-nohome")?;
    let (moves, nohome_moves) = (median(&cross), median(&nohome_cross));
    let c = exit_counters(r, "steal", "softpart")?;
    let get = |k: &str| c[k].as_u64().unwrap_or(0);
    let steals = get("dispatch_steal");
    let xnode: u64 = xnode_events().map(get).sum();
    let xsteals = get("xnode_queue_steal");
    let seen = format!(
        "{steals} steals, {xsteals} of {xnode} cross-node moves by steals (first run); cross-node moves per s {moves:.0} [{}], without homes {nohome_moves:.0} [{}] ({:.2}x, {nohome_counted} counted without); {cpu:.2} CPU-s per s, without homes {nohome_cpu:.2} (medians of {} runs)",
        list(&cross),
        list(&nohome_cross),
        moves / nohome_moves.max(1.0),
        cross.len()
    );
    if steals < STEAL_MIN {
        bail!("idle CPUs hardly stole, nothing tested: {seen}");
    }
    if xsteals * 5 < xnode {
        bail!("steals are not a fifth of the cross-node moves: {seen}");
    }
    if nohome_counted < NOHOME_COUNTED_MIN {
        bail!("without homes the instances hardly crossed the nodes, nothing to compare: {seen}");
    }
    if moves > 0.7 * nohome_moves {
        bail!(
            "the homed instances crossed the nodes more than 0.7x as often as without homes: {seen}"
        );
    }
    if cpu < nohome_cpu * 0.9 {
        bail!("stealing with the wait cost CPU time: {seen}");
    }
    Ok(seen)
}
