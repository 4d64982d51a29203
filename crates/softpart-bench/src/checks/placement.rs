//! Where tasks run: homes kept and burst out of, the two spill paths and
//! the idle masks, queued spills, cross-node moves by decision, swaps back
//! home, the reaction to a full home, and the cost of the callbacks.

use super::*;

pub(super) const TESTS: &[(&str, Check)] = &[
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
        "cross_node_moves_are_told_by_their_decision",
        cross_node_moves_attributed,
    ),
    ("bench_times_each_scheduler_callback", callbacks_timed),
    (
        "idle_masks_per_node_where_the_kernel_has_them",
        idle_masks_per_node,
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
];

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
/// does; hard pinning to the home would hold it to the home's 4 CPUs
/// (the experiments' pinned cells measure it: 0.50-0.70x eevdf's).
/// Medians over the scenario's runs: in 2 of
/// 36 runs under scx_softpart (and once in CI) the group got 0.9 CPU less
/// because workers were not runnable (CPUs idle with no task waiting),
/// not because a CPU idled while one waited.
fn homes_let_an_instance_burst(r: &Results) -> Result<String> {
    const SCENARIO: &str = "homes-one-instance";
    const HOME_CPUS: f64 = 4.0;
    let per_run = |policy: &str| -> Result<Vec<f64>> {
        Ok(r.runs_of(SCENARIO, policy)?
            .into_iter()
            .map(granted)
            .collect())
    };
    let median = |v: &[f64]| Summary::of(v).map_or(0.0, |s| s.median);
    let (ev, sp) = (per_run("eevdf")?, per_run("softpart")?);
    let away: Vec<f64> = r
        .runs_of(SCENARIO, "softpart")?
        .into_iter()
        .map(|run| granted(run) * locality(run, &[("inst0", 4..8)]))
        .collect();
    let seen = format!(
        "granted softpart {:.2}, eevdf {:.2} CPU-s/s, the home {HOME_CPUS} CPUs (medians of {} runs; softpart per run {}; of it on the idle node {})",
        median(&sp),
        median(&ev),
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
    if median(&ev) < 1.4 * HOME_CPUS {
        bail!(
            "eevdf gave the instance under 1.4x its home's CPUs: the scenario does not exceed the home: {seen}"
        );
    }
    Ok(seen)
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

/// The guest kernels (6.17, 7.3) have per-node idle masks and the 2-node
/// guest two nodes: the scheduler must load with them (the kernel would
/// stop it at the first machine-wide idle lookup it missed) and place
/// wakeups with them on both paths; on a guest of one node it keeps one
/// machine-wide mask.
fn idle_masks_per_node(r: &Results) -> Result<String> {
    for (scenario, policy) in [
        ("spill-paths", "softpart"),
        ("spill-paths", OWN_SEARCH),
        ("spill-paths-newest", "softpart"),
    ] {
        let masks = idle_masks(r, scenario, policy)?;
        if masks != "per node" {
            bail!("{scenario} {policy}: idle masks {masks}, not per node");
        }
    }
    let masks = idle_masks(r, "topology-1n4c2t", "softpart")?;
    if masks != "machine-wide" {
        bail!("one node: idle masks {masks}");
    }
    Ok("per node on two nodes (both kernels, both spill paths); machine-wide on one".into())
}

/// --no-idle-core: the kernel's pick always prefers whole idle cores, so
/// our own search places the wakeups away from home (as on kernels without
/// scx_bpf_select_cpu_and()).
const OWN_SEARCH: &str = "softpart:--no-idle-core";

fn spills_through_own_search(r: &Results) -> Result<String> {
    let (away, kernel, share) = spill_run(r, "spill-paths", OWN_SEARCH)?;
    if kernel != 0 {
        bail!("--no-idle-core: {kernel} wakeups still went through the kernel's pick");
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

/// Queued spills: hackbench's spills, woken by socket writes, mostly wait
/// at home first (67-70% of them in the experiments); sysbench threads'
/// futex wakes never do (0-3 of ~1500, system tasks' own sync wakeups).
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
    Ok(format!(
        "queued at home: hackbench {sync_q} of {sync_away}, sysbench threads {futex_q} of {futex_away}"
    ))
}

/// Every cross-node move of a homed task is put down to the decision that
/// made it (steal.toml, two hackbench instances homed one per node): the
/// scheduler's `xnode_*` events over its whole runs come to at least the
/// cross-node moves the observer saw in their windows, and next to none of
/// them are unexplained (`xnode_other`). A decision that forgot to say
/// what it did lands in `xnode_other`; a move not counted leaves the sum
/// short.
fn cross_node_moves_attributed(r: &Results) -> Result<String> {
    // Every rep of the scenario, summed: a run's window saw 4-42 moves,
    // few tasks queueing where a task not behind its queue's head keeps
    // its CPU.
    let seen: u64 = r
        .runs_of("steal", "softpart")?
        .iter()
        .flat_map(|run| run.groups.values())
        .map(|g| g.counters.migrations[3])
        .sum();
    let exits = exits_counters(r, "steal", "softpart")?;
    let get = |k: &str| {
        exits
            .iter()
            .map(|c| c[k].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let total: u64 = xnode_events().map(get).sum();
    let other = get("xnode_other");
    let parts = xnode_events()
        .map(|k| format!("{} {}", k.trim_start_matches("xnode_"), get(k)))
        .collect::<Vec<_>>()
        .join(", ");
    let seen_text = format!(
        "{total} attributed over {} runs ({parts}) against {seen} seen in their windows",
        exits.len()
    );
    // A handful still checks the counts.
    if seen < 5 {
        bail!("the instances hardly crossed the nodes, nothing tested: {seen_text}");
    }
    // Each run holds its window; a few moves may fall between the
    // observer's reads and the scheduler's, hence 0.9.
    if (total as f64) < seen as f64 * 0.9 {
        bail!("cross-node moves went uncounted: {seen_text}");
    }
    if other * 20 > total {
        bail!("more than 5% of the cross-node moves are put down to no decision: {seen_text}");
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

/// Two full instances left on each other's homes go back (swap-back.toml):
/// in every run they sat on their first homes before the swap, and the
/// median run's locality at the new homes is 80% or more (runs read
/// 79-100% across boots, nearly all 98% or more).
fn swapped_instances_swap_back(r: &Results) -> Result<String> {
    let runs = r.runs_of("swap-back", "softpart")?;
    let mut settled = Vec::new();
    let mut locs = Vec::new();
    for run in &runs {
        let (s0, s1) = settled_before_the_swap(run)?;
        settled.push(format!("{s0} and {s1}"));
        locs.push(locality(run, &[("inst0", 0..4), ("inst1", 4..8)]));
    }
    let loc = Summary::of(&locs).map_or(0.0, |s| s.median);
    let each: Vec<f64> = locs.iter().map(|l| l * 100.0).collect();
    if loc < 0.8 {
        bail!(
            "after the homes were swapped, locality {:.1}% (median; runs {}): the instances \
             stayed on each other's nodes",
            loc * 100.0,
            list(&each)
        );
    }
    Ok(format!(
        "{} of 5 tasks each on the first homes; {:.1}% at the new homes from 3 s after the \
         swap (median; runs {})",
        settled.join(", "),
        loc * 100.0,
        list(&each)
    ))
}

/// How many of each instance's tasks sat on its first home just before
/// the swap (the flip script's log); fewer than 3 of 5 and nothing is
/// tested.
fn settled_before_the_swap(run: &RunResult) -> Result<(usize, usize)> {
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
    Ok((settled0, settled1))
}

/// The reaction targets (reaction.toml, 3 runs of 5 cycles): a
/// thread started into a full home runs first on the idle node ("spill
/// within one wakeup"), and once load drops every remaining thread is home
/// again within 100 ms. In the experiments' boots the default spilled at
/// the first wakeup in every cycle of every run, never failed to return
/// within a phase (600 ms), and returned in 12-42 ms (a run's median),
/// 60.5 ms at worst; so only a broken path fails here. Under EEVDF, which
/// keeps no home, the same workload reports all 5 cycles not at home
/// before the spill and 3-5 never returning. A cycle counts as not at home
/// if any thread was seen away at any moment of the 300 ms before the
/// home filled: an idle CPU elsewhere may take a thread put back at a
/// slice end ("if there is idle, we use it"), and it is home again a few
/// slices later. How often depends on the host under the emulator (from
/// none to a fifth of a boot's cycles). The workload
/// leaves such a cycle out of its spill figure, and a home that did not
/// hold fails the return check as well; so this only asks that the home
/// held in most cycles: at most a third not at home, against all of them
/// under EEVDF.
pub(super) fn reaction_spills_at_once_and_returns(r: &Results) -> Result<String> {
    const SCN: &str = "reaction";
    const FIRST_WAKEUP_PCT_MIN: f64 = 80.0;
    const RETURN_MS_MAX: f64 = 100.0;
    // Cycles not all at home before the home filled, as a share of all.
    const NOT_HOME_SHARE_MAX: f64 = 1.0 / 3.0;
    // reaction.toml's --cycles.
    const CYCLES_PER_RUN: usize = 5;
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
    if not_home.iter().sum::<f64>() > NOT_HOME_SHARE_MAX * (CYCLES_PER_RUN * runs.len()) as f64 {
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
