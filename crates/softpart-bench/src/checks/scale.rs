//! Large hosts: the control plane's cost at thousands of cgroups.

use super::{Check, Results, exit_of, probe_of, softpart_counters};
use anyhow::{Context, Result, bail};
use softpart_core::control::StatView;
use std::collections::BTreeMap;

pub(super) const TESTS: &[(&str, Check)] = &[
    (
        "control_plane_reads_little_at_2000_cgroups",
        control_plane_at_2000_cgroups,
    ),
    (
        "callbacks_verify_in_bounded_steps",
        callbacks_verify_in_bounded_steps,
    ),
    (
        "fast_path_work_per_call_does_not_grow_to_64_cpus",
        fast_path_work_per_call_does_not_grow,
    ),
    (
        "other_partitions_queues_are_not_locked_to_look",
        other_partitions_queues_are_not_locked_to_look,
    ),
    (
        "starts_with_1024_possible_cpu_ids",
        starts_with_1024_possible_cpu_ids,
    ),
    (
        "nested_caps_charged_eight_deep_and_deeper_said",
        nested_caps_charged,
    ),
    (
        "holds_500_homes_and_says_when_the_table_is_full",
        holds_500_homes_and_says_when_full,
    ),
    (
        "a_home_redefined_is_looked_up_again_by_its_own_tasks_only",
        home_redefined_touches_its_own_tasks,
    ),
];

/// fast-path-64's and fast-path-8's policy.
const FAST_PATH_POLICY: &str = "softpart:--diag";

/// The fast path's work at `scenario`, from the exit counters.
struct FastPathWork {
    /// Other CPUs' lines read per select_cpu call.
    lines: f64,
    /// Other partitions' queue heads looked at per enqueue or dispatch call.
    heads: f64,
    /// Other partitions' queue heads looked at, in all.
    heads_read: f64,
    /// Other partitions' queues peeked at under their lock, in all.
    heads_locked: f64,
    /// Tasks taken from other partitions' queues (steals and pulls).
    moves: f64,
    /// The most rounds a task waited.
    rounds: f64,
}

fn work_per_call(r: &Results, scenario: &str) -> Result<FastPathWork> {
    let c = softpart_counters(exit_of(r, scenario, FAST_PATH_POLICY)?)?;
    let n = |k: &str| {
        c[k].as_f64()
            .with_context(|| format!("{scenario}: no {k} in the counters"))
    };
    let (select, queue) = (
        n("calls_select_cpu")?,
        n("calls_enqueue")? + n("calls_dispatch")?,
    );
    if select < 100.0 || queue < 1000.0 {
        bail!(
            "{scenario}: {select} select_cpu and {queue} enqueue and dispatch calls: too few to count"
        );
    }
    Ok(FastPathWork {
        lines: n("cpu_lines_read")? / select,
        heads: n("part_heads_read")? / queue,
        heads_read: n("part_heads_read")?,
        heads_locked: n("part_heads_locked")?,
        moves: n("dispatch_steal")? + n("pull_behind")?,
        rounds: n("max_wait_rounds")?,
    })
}

/// The callbacks of every scheduling event: called in any window.
const PER_EVENT_CALLBACKS: [&str; 6] = [
    "select_cpu",
    "enqueue",
    "dispatch",
    "running",
    "stopping",
    "tick",
];

/// Each callback's verified instructions in `scenario`'s run under
/// `policy` (callback_costs figures), with one for every callback of
/// PER_EVENT_CALLBACKS.
fn verified_insns(r: &Results, scenario: &str, policy: &str) -> Result<BTreeMap<String, f64>> {
    let run = r.run_of(scenario, policy)?;
    let per_cb: BTreeMap<String, f64> = crate::table::probe_figures(run)
        .into_iter()
        .filter_map(|(k, v)| {
            k.strip_prefix("cb_")
                .and_then(|k| k.strip_suffix("_verified_insns"))
                .map(|cb| (cb.to_string(), v))
        })
        .collect();
    if let Some(cb) = PER_EVENT_CALLBACKS
        .iter()
        .find(|cb| !per_cb.contains_key(**cb))
    {
        bail!("{scenario}: no verified-instruction count for {cb}: {per_cb:?}");
    }
    Ok(per_cb)
}

/// The same scenario on 8 and on 64 vCPUs (2 and 4 nodes): per call, the
/// other CPUs' lines read and other partitions' heads looked at stay
/// within twice the 8-vCPU figure (or 1 line and 2 heads, a walk's few
/// looks: by construction at most 4 lines a lookup and 8 heads a walk,
/// where a scan of every CPU reads 64 lines); the verifier walks each
/// callback in as many instructions (within 2%: nothing it walks loops
/// over the CPUs or partitions); and no task waits past the wait bound
/// of a 16-CPU partition.
fn fast_path_work_per_call_does_not_grow(r: &Results) -> Result<String> {
    let w8 = work_per_call(r, "fast-path-8")?;
    let w64 = work_per_call(r, "fast-path-64")?;
    let (lines8, heads8) = (w8.lines, w8.heads);
    let (lines64, heads64, rounds64) = (w64.lines, w64.heads, w64.rounds);
    let (v8, v64) = (
        verified_insns(r, "fast-path-8", FAST_PATH_POLICY)?,
        verified_insns(r, "fast-path-64", FAST_PATH_POLICY)?,
    );
    let said = format!(
        "per select_cpu call {lines8:.3} other CPUs' lines read at 8 vCPUs, {lines64:.3} at 64; \
         per enqueue or dispatch call {heads8:.3} other partitions' heads, {heads64:.3}; \
         dispatch verified in {} and {} instructions; at most {rounds64} rounds waited at 64",
        v8["dispatch"], v64["dispatch"]
    );
    if lines64 > (2.0 * lines8).max(1.0) || heads64 > (2.0 * heads8).max(2.0) {
        bail!("{said}: the work per call grew with the host");
    }
    for cb in PER_EVENT_CALLBACKS {
        // Both hold every per-event callback (verified_insns()).
        let (a, b) = (v8[cb], v64[cb]);
        if (b - a).abs() > 0.02 * a {
            bail!("{said}: {cb} verified in {a} instructions at 8 vCPUs, {b} at 64");
        }
    }
    let bound = super::waits::bound_rounds(16);
    if rounds64 > bound {
        bail!("{said}: past the wait bound ({bound} rounds)");
    }
    Ok(said)
}

/// Of the other partitions' queue heads looked at, the share that may be
/// peeked at under the queue's lock beyond the moves (a stale published
/// head): a queue's head is published where it changes, and a CPU of
/// another partition reads the copy.
const MAX_LOCKED_LOOKS: f64 = 0.05;

/// fast-path-64 runs on 6.17, where the kernel peeks at a queue's head
/// only under its lock: the other partitions' heads looked at are read
/// from their published copies, and a queue is peeked at under its lock
/// after a task was taken from it (by the CPU whose move took that lock)
/// and, beyond those, at most for MAX_LOCKED_LOOKS of the looks. Every
/// look was such a peek before the heads were published.
fn other_partitions_queues_are_not_locked_to_look(r: &Results) -> Result<String> {
    let w = work_per_call(r, "fast-path-64")?;
    let beyond = (w.heads_locked - w.moves).max(0.0);
    let said = format!(
        "{:.0} other partitions' heads looked at, {:.0} queues peeked at under their lock, \
         {:.0} of them after a task was taken from there ({:.0} steals and pulls), {beyond:.0} beyond",
        w.heads_read,
        w.heads_locked,
        w.heads_locked.min(w.moves),
        w.moves
    );
    if w.heads_read < 100.0 {
        bail!("{said}: too few looks to count");
    }
    if beyond > MAX_LOCKED_LOOKS * w.heads_read {
        bail!(
            "{said}: more than {:.0}% of the looks took a queue's lock",
            MAX_LOCKED_LOOKS * 100.0
        );
    }
    Ok(said)
}

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
    // What the two `softpart stat` requests themselves made it read (and
    // the homes' samples it keeps each second after one): the cost of
    // being watched, said apart and not gated.
    let for_stats =
        (b.cost.map_read_bytes_for_stats - a.cost.map_read_bytes_for_stats) as f64 / secs;
    let read = read - for_stats;
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
        "{} cgroup slots; over {secs:.1} s the control plane read {:.1} KB/s and wrote {:.2} KB/s of BPF maps (and read {:.1} KB/s for the statistics requests), and its main loop took {:.2}% of a CPU under TCG ({})",
        b.held.cgroup_slots,
        read / 1e3,
        written / 1e3,
        for_stats / 1e3,
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
    let read_by: Vec<String> = b
        .cost
        .map_read_bytes_by_phase
        .iter()
        .map(|(phase, &n)| {
            let was = a
                .cost
                .map_read_bytes_by_phase
                .get(phase)
                .copied()
                .unwrap_or(0);
            format!("{phase} {:.1} KB/s", (n - was) as f64 / secs / 1e3)
        })
        .collect();
    let said = format!(
        "{said}; {}; read by {}",
        runs.join(", "),
        read_by.join(", ")
    );
    let said = match crate::table::probe_figures(run).get("scheduler_cpu_ticks_in_10s") {
        Some(ticks) => format!("{said}; the whole process {:.1}% by /proc", ticks / 10.0),
        None => said,
    };
    if read + written > MAX_TRAFFIC {
        bail!("{said}: more than {:.0} KB/s", MAX_TRAFFIC / 1e3);
    }
    Ok(said)
}

/// Instructions the verifier may walk to load all of the scheduler's
/// callbacks, and any one of them. Loading takes time in proportion
/// (seconds per 100,000 under TCG, where every guest test loads the
/// scheduler again), and the fast path's loops call functions the
/// verifier must check once on their own (verify.bpf.h): walked again at
/// each call instead, they took the whole to about 215,000 and dispatch
/// alone to 133,000; the build before the loops took about 87,000.
/// Dispatch weighs published queue heads, field copies whose fields the
/// verifier cannot relate: it walks about 42,000 (14,000 before them),
/// within the whole's bound.
const MAX_VERIFIED_INSNS: f64 = 120_000.0;
const MAX_VERIFIED_INSNS_ONE: f64 = 50_000.0;

/// The verifier's walk of every callback, from the kernel's count of
/// each program's verified instructions (callback_costs figures).
fn callbacks_verify_in_bounded_steps(r: &Results) -> Result<String> {
    let per_cb = verified_insns(r, "cgroups-2000", CGROUPS_2000_POLICY)?;
    let total: f64 = per_cb.values().sum();
    let (top, top_n) = per_cb
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(cb, &n)| (cb.clone(), n))
        .expect("callbacks");
    let said = format!(
        "the verifier walked {total:.0} instructions over the {} callbacks called, the most {top_n:.0} for {top}",
        per_cb.len()
    );
    if total > MAX_VERIFIED_INSNS || top_n > MAX_VERIFIED_INSNS_ONE {
        bail!(
            "{said}: more than {MAX_VERIFIED_INSNS:.0} in all or {MAX_VERIFIED_INSNS_ONE:.0} for one"
        );
    }
    Ok(said)
}

/// cgroups-2000's policy (--diag counts the work per call).
const CGROUPS_2000_POLICY: &str =
    "softpart:--diag --config /etc/softpart.toml --balance /bench/tree/p*";

/// cpu-ids-1024's policy.
const CPU_IDS_POLICY: &str = "softpart:--config /etc/softpart.toml";

/// BPF map memory the scheduler may hold with 1,024 possible CPU ids:
/// per-CPU maps take an entry for each (the per-home counters are most of
/// it, 176 bytes a CPU id a home slot).
const MAX_MEMLOCK_KB_1024_IDS: f64 = 64.0 * 1024.0;

/// The most a spinner capped at `cap` CPUs (cpu.max of CAP_PERIOD_MS) may
/// run in a window of `window_ms` (timed by the probe around its two
/// cpu.stat reads, the kernel's count on the task clock cpu.max charges),
/// per ms: the window may hold one period's quota more than its share (a
/// refill at each end), and its last run may go past the quota by a slice
/// and a tick before the debt is paid.
fn cap_reading_most(cap: f64, window_ms: f64) -> f64 {
    const CAP_PERIOD_MS: f64 = 100.0;
    cap * (1.0 + CAP_PERIOD_MS / window_ms)
        + (super::waits::SLICE_MS + super::waits::TICK_MS) / window_ms
}

/// A window the probe timed, in ms; a reading of nothing is an error.
fn window_ms(run: &crate::plan::RunResult, name: &str) -> Result<f64> {
    let ms = figure(run, name)?;
    if ms <= 0.0 {
        bail!("the probe timed its window at {ms} ms");
    }
    Ok(ms)
}

/// The nested-cap probe's spinner, under nine capped cgroups: its eighth
/// nearest cap (0.1 CPU) is the tightest of the eight charged; the ninth
/// (0.02 CPU) is past the depth charged. It runs between half and 2.5x
/// its charged cap: 0.5 CPU if only the nearest 4 were charged, 0.02 if
/// the ninth were.
fn nested_caps_charged(r: &Results) -> Result<String> {
    const CHARGED_CAP: f64 = 0.1;
    let sp = r.run_of("cpu-ids-1024", CPU_IDS_POLICY)?;
    let used = figure(sp, "deep_usage_us")? / 1000.0 / window_ms(sp, "deep_window_ms")?;
    if !(0.5 * CHARGED_CAP..=2.5 * CHARGED_CAP).contains(&used) {
        bail!(
            "the spinner under nine caps ran {used:.3} CPUs: its eighth nearest cap, \
             {CHARGED_CAP} CPU, is not the one that holds it"
        );
    }
    let (_, _, out) = probe_of(sp, "sh /tmp/cap-depth.sh")?;
    let said = |prefix: &str| {
        out.lines()
            .filter(|l| l.starts_with(prefix) && l.contains("cap_depth"))
            .collect::<Vec<_>>()
    };
    let (stat, log) = (said("stat: "), said("log: limit reached"));
    if stat.len() != 1 || !stat[0].contains("/bench/deep") || log.len() != 1 {
        bail!(
            "the cgroups under nine caps are not said once in the log and listed by \
             softpart stat as the cap_depth limit: {out}"
        );
    }
    Ok(format!(
        "{used:.3} CPUs under nine nested caps (the eighth nearest 0.1); {}",
        stat[0]
    ))
}

/// A guest whose firmware lists 1,024 CPUs with 8 present: the kernel
/// counts all as possible, and the scheduler runs there with 300 cgroups
/// (their caps held, homes kept, no table full) in BPF maps of at most
/// MAX_MEMLOCK_KB_1024_IDS. A run-delay histogram per CPU per home (2.5 KB
/// each, allocated per possible CPU) exhausted this guest's memory.
fn starts_with_1024_possible_cpu_ids(r: &Results) -> Result<String> {
    let run = r.run_of("cpu-ids-1024", CPU_IDS_POLICY)?;
    let (_, _, ids) = probe_of(run, "cat /sys/devices/system/cpu/possible")?;
    let mut ids = ids.lines();
    let (possible, present) = (ids.next().unwrap_or(""), ids.next().unwrap_or(""));
    if possible != "0-1023" {
        bail!("possible CPUs {possible:?} (present {present:?}): expected 0-1023");
    }
    let (_, _, log) = probe_of(run, "i=0; until grep")?;
    if !log.starts_with("made 300 cgroups") || log.contains("failed") {
        bail!("the tree was not made: {log}");
    }
    let view = stat_view(run, "softpart stat --json")?;
    if view.held.cgroup_slots < 300 || view.held.cgroup_homes < 20 || !view.limits.is_empty() {
        bail!(
            "{} cgroup slots and {} cgroup homes held for 300 cgroups and 20 homes, limits hit {:?}",
            view.held.cgroup_slots,
            view.held.cgroup_homes,
            view.limits
        );
    }
    let window = window_ms(run, "capped_window_ms")?;
    let mut caps = Vec::new();
    for (i, path) in ["/bench/tree/p0/c8", "/bench/tree/p1/c16"]
        .iter()
        .enumerate()
    {
        let t = view
            .tenants
            .iter()
            .find(|t| t.path == *path)
            .with_context(|| format!("no tenant {path} in softpart stat"))?;
        let cap = t.cap_cpus.with_context(|| format!("{path}: no cap"))?;
        let used = figure(run, &format!("capped{}_usage_us", i + 1))? / 1000.0 / window;
        let most = cap_reading_most(cap, window);
        if used > most || used < cap * 0.5 {
            bail!(
                "{path} ran {used:.4} CPUs over {:.2} s under a cap of {cap} (cpu.stat): \
                 not within [{:.3}, {most:.4}]",
                window / 1000.0,
                cap * 0.5
            );
        }
        caps.push(format!("{used:.4}"));
    }
    let memlock = figure(run, "bpf_map_memlock_kb")?;
    let said = format!(
        "possible CPUs {possible}, present {present}; {} cgroup slots, {} cgroup homes; the capped \
         spinners ran {} CPUs over {:.2} s (cpu.stat) under caps of 0.05; BPF maps {:.1} MB",
        view.held.cgroup_slots,
        view.held.cgroup_homes,
        caps.join(" and "),
        window / 1000.0,
        memlock / 1024.0
    );
    if memlock > MAX_MEMLOCK_KB_1024_IDS {
        bail!(
            "{said}: more than {:.0} MB",
            MAX_MEMLOCK_KB_1024_IDS / 1024.0
        );
    }
    Ok(said)
}

/// homes-500's policy, and its home table.
const HOMES_POLICY: &str =
    "softpart:--max-homes 520 --config /etc/softpart.toml --metrics 127.0.0.1:17321";
const HOMES_TABLE: usize = 520;

/// 510 cgroups with a home from a config rule and 30 processes given one
/// by `softpart prefer`, against a table of HOMES_TABLE: every id is
/// taken, the 20 groups past it are refused, and the refusal is logged
/// once, listed by softpart stat with its count and counted in the
/// metrics.
fn holds_500_homes_and_says_when_full(r: &Results) -> Result<String> {
    let run = r.run_of("homes-500", HOMES_POLICY)?;
    let (_, _, log) = probe_of(run, "i=0; until grep")?;
    if !log.starts_with("made 510 cgroups") {
        bail!("the cgroups were not made: {log}");
    }
    let (ok, refused) = (figure(run, "prefer_ok")?, figure(run, "prefer_refused")?);
    if ok != 10.0 || refused != 20.0 {
        bail!("softpart prefer: {ok} homes given and {refused} refused of 30, expected 10 and 20");
    }
    let view = stat_view(run, "sleep 1.5; softpart stat --json")?;
    let h = &view.held;
    if h.home_ids != HOMES_TABLE || h.cgroup_homes != 510 || h.task_homes < 10 {
        bail!(
            "held {} home ids of {HOMES_TABLE}, {} cgroup homes of 510, {} thread homes (10 processes' at least)",
            h.home_ids,
            h.cgroup_homes,
            h.task_homes
        );
    }
    let limit = view
        .limits
        .iter()
        .find(|l| l.limit == "home_ids")
        .with_context(|| format!("softpart stat lists no home_ids limit: {:?}", view.limits))?;
    if limit.size != Some(HOMES_TABLE) || limit.hits != 20 || !limit.last.starts_with("group pid ")
    {
        bail!("softpart stat lists {limit:?}: expected 520 entries, 20 hits, a process last");
    }
    let (_, _, logged) = probe_of(run, "grep -h 'limit reached'")?;
    let said: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("home_ids (520 entries)"))
        .collect();
    if said.len() != 1 {
        bail!(
            "the scheduler's log says the home_ids limit {} times (once expected): {logged}",
            said.len()
        );
    }
    let (_, _, metrics) = probe_of(run, "wget -q -O - http://127.0.0.1:17321/metrics")?;
    if !metrics
        .lines()
        .any(|l| l == "softpart_limit_refusals_total{limit=\"home_ids\"} 20")
    {
        bail!("the metrics do not count the 20 refusals: {metrics}");
    }
    Ok(format!(
        "{} home ids held ({} cgroups', {} threads'); 20 refused past the table, logged once, listed by softpart stat, counted in the metrics",
        h.home_ids, h.cgroup_homes, h.task_homes
    ))
}

/// Home lookups 10 redefinitions of one home may add to a quiet
/// stretch's: its own 2 workers' and the probe's new processes' (each new
/// task looks its home up at its first wakeup), with room; every one of
/// the 100 homeless hackbench tasks looking again at each would be 1,000.
const MAX_RESOLVES_FOR_10_MOVES: f64 = 300.0;

/// One home's CPUs redefined 10 times beside 100 homeless tasks: the home
/// lookups the fast path counted over the moves, against as long with
/// none.
///
/// After the last move the workers must run on the new home in more than
/// half the samples: 16-20 of 20 seen; left on the old one, both busy,
/// they would be there only when they spill.
fn home_redefined_touches_its_own_tasks(r: &Results) -> Result<String> {
    let run = r.run_of("home-redefine", "softpart:--metrics 127.0.0.1:17321")?;
    let (_, _, out) = probe_of(run, "sh /tmp/redefine.sh")?;
    if out.contains("prefer failed") {
        bail!("a redefinition was refused: {out}");
    }
    let (quiet, moving) = (
        figure(run, "resolves_quiet")?,
        figure(run, "resolves_moving")?,
    );
    let (samples, on_home) = (
        figure(run, "worker_samples")?,
        figure(run, "worker_samples_on_new_home")?,
    );
    let said = format!(
        "{moving:.0} home lookups over 10 redefinitions (5 s), {quiet:.0} over 5 s with none; \
         after the last, the workers ran on their new home in {on_home:.0} of {samples:.0} samples"
    );
    if moving - quiet > MAX_RESOLVES_FOR_10_MOVES {
        bail!(
            "{said}: more than {MAX_RESOLVES_FOR_10_MOVES:.0} added, as if every task looked again"
        );
    }
    if samples < 10.0 || on_home <= 0.5 * samples {
        bail!("{said}: the workers did not follow their home's CPUs");
    }
    Ok(said)
}

/// A figure `run`'s probes printed, or an error naming it.
fn figure(run: &crate::plan::RunResult, name: &str) -> Result<f64> {
    crate::table::probe_figures(run)
        .get(name)
        .copied()
        .with_context(|| format!("no figure {name} from the probes"))
}

/// The `softpart stat --json` document of `run`'s probe that starts with
/// `prefix`.
fn stat_view(run: &crate::plan::RunResult, prefix: &str) -> Result<StatView> {
    let (_, code, out) = probe_of(run, prefix)?;
    if *code != 0 {
        bail!("softpart stat --json: exit {code}: {out}");
    }
    serde_json::from_str(out).with_context(|| format!("parsing softpart stat --json: {out}"))
}
