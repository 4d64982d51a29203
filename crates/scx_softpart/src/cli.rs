//! scx_softpart's command line: its options, their defaults and the
//! checks clap makes on them before anything is loaded.

use clap::Parser;
use softpart_core::softness::Softness;
use std::path::PathBuf;

/// When a wakeup bound for an idle CPU away from home waits at home
/// instead (`--queued-spill`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum QueuedSpill {
    /// Never: every spill goes straight onto the idle CPU.
    Off,
    /// Only wakeups whose waker is about to sleep at the task's home.
    Sync,
    /// Every spill.
    Always,
    /// As "sync", and also every spill bound for a CPU that its own
    /// partition's homed tasks used within the steal wait (the CPUs that
    /// defer their steals, --steal-defer-us).
    Owned,
}

/// scx_softpart: soft CPU partitions for hosts that run several workloads
/// side by side.
///
/// CPUs are grouped into partitions (by default one per NUMA node, or one
/// per LLC when a node has several). A task or cgroup may have a home
/// (`softpart prefer ...`): it wakes on an idle CPU at home when there is
/// one, and spills to idle CPUs elsewhere, nearest first, when there is
/// not; a task without a home stays near the partition it last ran in.
/// When no CPU is idle a task queues at home, and any idle CPU allowed to
/// run it is woken to take it: no CPU stays idle while work it may run
/// waits. A task's real affinity (taskset, cpuset) is never widened.
///
/// Stop it with Ctrl-C or SIGTERM: the kernel then returns every task to
/// the default scheduler. If this process dies, the kernel does the same.
#[derive(Debug, Parser)]
#[command(version)]
pub(crate) struct Opts {
    /// Scheduling slice, in microseconds.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(100..=100_000))]
    pub(crate) slice_us: u64,

    /// Most vtime credit a task keeps while it sleeps, in microseconds: a
    /// long sleeper wakes at most this far ahead of the others.
    #[arg(long, default_value_t = 20000, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub(crate) slice_lag_us: u64,

    /// CPU partitions, in the group balancer's syntax: CPU lists separated
    /// by ';', e.g. "0-15;16-31". CPUs no list names form one more
    /// partition. Default: one per NUMA node, or per LLC when a node has
    /// several.
    #[arg(long, value_name = "LIST;LIST...")]
    pub(crate) partitions: Option<String>,

    /// Do not look for whole idle cores first (the seed's SIS_CORE off).
    #[arg(long)]
    pub(crate) no_idle_core: bool,

    /// Look at no more than this many cores at home for an idle CPU, from a
    /// rotating start (seed 003's bounded scan); 0 = the whole home.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub(crate) scan_cores: u32,

    /// Away from home, search for an idle CPU ourselves (prev, the home's
    /// node, whole cores, any) instead of with the kernel's
    /// scx_bpf_select_cpu_and() (6.16 and later; without it, ours is used
    /// anyway; --no-idle-core implies it, as the kernel's pick always
    /// looks for whole idle cores first).
    #[arg(long)]
    pub(crate) no_kernel_pick: bool,

    /// Track idle CPUs in one machine-wide mask even where the kernel
    /// offers one mask per NUMA node (SCX_OPS_BUILTIN_IDLE_PER_NODE, 6.15
    /// and later), which is used by default on machines with several
    /// nodes: wakeups on one node then do not contend with another's.
    #[arg(long)]
    pub(crate) no_idle_per_node: bool,

    /// Do not look at the partition queues again when a CPU goes idle
    /// (ops.update_idle). For comparison only: without the second look, a
    /// task queued just as a CPU goes idle can wait while that CPU sleeps.
    #[arg(long)]
    pub(crate) no_idle_recheck: bool,

    /// Do not let a CPU about to go idle take tasks waiting in another
    /// partition's queue: each queue is served by its own partition's CPUs
    /// only. Wakeups that find no idle CPU at home still go straight onto
    /// an idle CPU elsewhere (implies --queued-spill=off, whose queued
    /// wakeups a kicked CPU elsewhere would have to steal, so the two
    /// switches are not taken together). This breaks
    /// work conservation: a CPU may idle while a task allowed on it waits.
    /// For comparison only: what steals cost in locality and give in CPU
    /// time (docs/experiments.md, "Without steals").
    #[arg(long, conflicts_with = "queued_spill")]
    pub(crate) no_steal: bool,

    /// How long a CPU about to go idle waits before it takes a task from
    /// another partition's queue that ran less than this long ago, in
    /// microseconds; 0: it takes it at once. Only a CPU that its own
    /// partition's homed tasks used within that time waits (its own
    /// tasks are likely to want it back, and the task's own partition to
    /// free a CPU first); a CPU serving no owners, as a node a single
    /// instance bursts into, never does. A per-CPU timer brings the CPU
    /// back when the wait is over, so no CPU idles longer than this while
    /// a task it may run waits. EEVDF's balancer waits the same way before
    /// pulling a task that just ran (task_hot()). Default: four slices
    /// (4 x --slice-us: 12 ms; at most 100 ms).
    /// docs/design.md, "Deferred steals".
    #[arg(long, value_name = "US", conflicts_with = "no_steal",
          value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub(crate) steal_defer_us: Option<u64>,

    /// How recently a CPU's own partition's homed tasks must have run on
    /// it for it to defer its steals (--steal-defer-us), in microseconds.
    /// Default: the steal wait itself, or one slice with --steal-defer-us
    /// 0 (where it only says which CPUs --queued-spill=owned counts as
    /// their owners'). For comparison: one slice, the default before
    /// docs/experiments.md, "Owners' CPUs defer for the whole steal wait".
    #[arg(long, value_name = "US", conflicts_with = "no_steal",
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(crate) owner_window_us: Option<u64>,

    /// Treat a task that its CPU puts back (slice end, yield) while only
    /// per-CPU kthreads are queued there like any other: send it to an
    /// idle CPU. By default it waits the kthreads' turn on its own CPU,
    /// as under EEVDF, and woken per-CPU kthreads go straight to their
    /// CPU's local queue. For comparison only.
    #[arg(long)]
    pub(crate) no_wait_behind_kthreads: bool,

    /// Do not hold a task its CPU puts back in its partition's queue
    /// (slice end, yield, another task taking its turn) for that CPU. By
    /// default it is held for up to a slice (--hold-put-back-us): other
    /// CPUs still busy with their own task leave it at the head instead of
    /// displacing their task into the queue in its place, and an idle CPU
    /// still takes it at once. For comparison only (docs/experiments.md,
    /// "Held put-backs").
    #[arg(long)]
    pub(crate) no_hold_put_back: bool,

    /// How long a task put back in its partition's queue is held for its
    /// CPU, in microseconds. Default: one slice (--slice-us).
    #[arg(long, value_name = "US", conflicts_with = "no_hold_put_back",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) hold_put_back_us: Option<u64>,

    /// Send a task running away from home (a visitor) that its CPU
    /// switches out for a passing task (a per-CPU kthread, or a task with
    /// no home at the head of that CPU's partition queue) straight to its
    /// home's queue, where the next home CPU to reach a slice end takes
    /// it. By default it waits behind per-CPU kthreads on its CPU, and is
    /// held in its home's queue for its CPU while another passes, as a
    /// partition's own tasks are. For comparison only (docs/experiments.md,
    /// "Visitors held for their CPU").
    #[arg(long)]
    pub(crate) no_hold_visitors: bool,

    /// End the slice of a task away from home at every sched_yield(), so
    /// that each yield goes through dispatch(). By default such a task
    /// keeps its slice at a yield with nobody waiting for its CPU, as a
    /// task at home does, and whether it should give its CPU to its home's
    /// queue or go home is decided at the slice's end. For comparison only
    /// (docs/experiments.md, "Yields away from home").
    #[arg(long)]
    pub(crate) yield_away_ends_slice: bool,

    /// Let the kernel hand a wakeup to the target CPU's wake list
    /// (SCX_OPS_ALLOW_QUEUED_WAKEUP, 6.15 and later), as EEVDF does: the
    /// waker only sends the IPI and the woken CPU queues the task itself.
    /// Off by default; ignored where the kernel lacks the flag.
    #[arg(long)]
    pub(crate) queued_wakeup: bool,

    /// Put a task woken synchronously (the waker is about to sleep, as in a
    /// pipe write) on the waker's CPU when that CPU is at the task's home
    /// and has nothing queued, instead of waking an idle CPU; EEVDF's
    /// wake_affine() does much the same. Off by default (an experiment:
    /// docs/experiments.md, "Sync wakeups").
    #[arg(long)]
    pub(crate) wake_sync: bool,

    /// A wakeup that finds no idle CPU at home but one elsewhere: whether
    /// it waits in its home's queue, with that idle CPU kicked, instead of
    /// going straight onto it, so that a home CPU freeing up first runs it.
    /// "sync" (default): only when the waker says it is about to sleep (a
    /// pipe or socket write) on a CPU that serves that queue; "owned": as
    /// "sync", and also when the idle CPU's own partition's homed tasks
    /// ran on it within the last slice (so it takes the task by the rule
    /// of --steal-defer-us, as a steal; at once with 0); "always" (also plain
    /// --queued-spill); "off". docs/design.md, Queued spills.
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        default_value_t = QueuedSpill::Sync,
        num_args = 0..=1,
        default_missing_value = "always"
    )]
    pub(crate) queued_spill: QueuedSpill,

    /// A task woken with no idle CPU it may use takes the turn of the task
    /// that has run longest on its queue's CPUs, if that task has run at
    /// least US microseconds and is behind it on the vtime clock (EEVDF
    /// lets a wakee with an earlier deadline preempt so). Without this a
    /// woken task waits for a slice end, which the kernel sees only at a
    /// tick, or a sleep. Off by default (an experiment: docs/experiments.md,
    /// "Wakeup preemption").
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(crate) wakeup_preempt: Option<u64>,

    /// A task waking to a full home takes a home CPU back from another
    /// partition's task running there (evicts it) only if that task's own
    /// home has an idle CPU to go to; otherwise the waking task goes
    /// where it would with no visitor there (an idle CPU nearby, or its
    /// home's queue, which home CPUs serve first at their next slice end).
    /// This switch evicts whatever the visitor's home looks like: the rule
    /// before, which at a full machine cost the balanced groups CPU time
    /// (docs/experiments.md, "Evictions toward room").
    #[arg(long)]
    pub(crate) evict_always: bool,

    /// A balanced group's waiting tasks keep the steal wait in a partition
    /// whose balanced groups' demand (CPU time plus waiting, with the
    /// partition's other load) is over 1.15x its CPUs, until it falls
    /// under 1.0x: an over-full partition. By default
    /// such a partition's queued tasks may be taken by idle CPUs elsewhere
    /// at once: its own CPUs do not get through the queue within the wait,
    /// and exclusivity is promised only while the load fits
    /// (docs/design.md, "Over-full partitions"). Homes set with prefer or
    /// the config keep the wait either way.
    #[arg(long)]
    pub(crate) steal_wait_overfull: bool,

    /// Softness (seed 000): "home-first" (default: wake at home whenever it
    /// has an idle CPU, spill only when it has none), or the seed's
    /// ALLOWED:PREFERRED ratio, e.g. 100:1 or 5:4: search the whole allowed
    /// set first once the home's per-CPU utilisation exceeds the machine's
    /// by that ratio.
    #[arg(long, default_value = "home-first")]
    pub(crate) softness: Softness,

    /// Config file (TOML; see docs/config.md): homes for cgroups by path or
    /// glob, cgroups to balance, partitions. Read and checked whole at
    /// start; rules are matched again as cgroups appear.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Balance the cgroups this path or glob matches (repeatable): each
    /// settles, as a group, into the partition with the least predicted
    /// load, and still bursts when it is full (seed 004). "PATH/*" is every
    /// child of PATH. Also `[[balance]]` in the config file.
    #[arg(long, value_name = "CGROUP")]
    pub(crate) balance: Vec<String>,

    /// How often the balancer looks at loads and may move one group, in
    /// milliseconds; a `[[balance]]` rule's period_ms overrides it for its
    /// groups (they move no more often than that).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub(crate) balance_period_ms: u64,

    /// Print placement statistics every SECS seconds while running:
    /// locality, spills and returns, run delay and migrations by distance,
    /// per group and per partition.
    #[arg(long, value_name = "SECS")]
    pub(crate) stats: Option<f64>,

    /// Do not schedule: print the statistics of the scx_softpart already
    /// running every SECS seconds, until Ctrl-C.
    #[arg(long, value_name = "SECS", conflicts_with = "stats")]
    pub(crate) monitor: Option<f64>,

    /// Where the `softpart` CLI reaches the scheduler.
    #[arg(long, default_value = softpart_core::control::DEFAULT_SOCKET)]
    pub(crate) control_socket: PathBuf,

    /// Kernel exit dump length (0 = kernel default).
    #[arg(long, default_value_t = 0)]
    pub(crate) exit_dump_len: u32,

    /// Print libbpf's messages (including the verifier's log on failure).
    #[arg(short, long)]
    pub(crate) verbose: bool,
}

/// Slices a CPU its owners just used waits before it takes another
/// partition's task that ran within that time (docs/design.md, "Deferred
/// steals"): with one slice two hackbench instances of one group kept
/// 99.1-99.2% of their time at home, with four 99.0-99.9% (four boots,
/// the last the whole issue 3 table on 420beb7), at the same CPU time and
/// with 0.13-0.56x eevdf's cross-node moves against 0.4-1.3x
/// (docs/experiments.md, "Deferred steals for four slices"). The
/// CI failure that had it reverted once was the held put-back test's
/// noise, not this wait ("Held put-backs and the steal wait").
const STEAL_DEFER_SLICES: u64 = 4;

/// --steal-defer-us, or four slices up to the 100 ms that
/// --steal-defer-us itself accepts (a long --slice-us would otherwise let
/// a CPU idle for 400 ms while a task waits).
pub(crate) fn steal_defer_us(opts: &Opts) -> u64 {
    opts.steal_defer_us
        .unwrap_or((STEAL_DEFER_SLICES * opts.slice_us).min(100_000))
}

/// How recently a CPU's own partition's homed tasks must have run on it
/// for it to defer its steals, in microseconds: the steal wait itself
/// (docs/design.md, "Deferred steals"). With one slice, a CPU idle a
/// little longer than that took the other partition's task at once even
/// while its owners were about to want it back: two hackbench instances
/// of one group crossed the nodes 0.39-0.61x as often as under eevdf in
/// three boots, against 0.28-0.34x with the wait's 12 ms
/// (docs/experiments.md, "Owners' CPUs defer for the whole steal wait").
/// Without a wait, a slice: it still says which CPUs --queued-spill=owned
/// counts as their owners'. --owner-window-us overrides it.
pub(crate) fn owner_window_us(opts: &Opts) -> u64 {
    opts.owner_window_us.unwrap_or(match steal_defer_us(opts) {
        0 => opts.slice_us,
        us => us,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued_spill(args: &[&str]) -> Result<QueuedSpill, clap::Error> {
        let argv = std::iter::once("scx_softpart").chain(args.iter().copied());
        Opts::try_parse_from(argv).map(|o| o.queued_spill)
    }

    #[test]
    fn help_keeps_the_schedulers_description() {
        let cmd = <Opts as clap::CommandFactory>::command();
        let about = cmd
            .get_long_about()
            .map(|a| a.to_string())
            .unwrap_or_default();
        assert!(about.contains("soft CPU partitions"), "{about}");
        assert!(about.contains("Stop it with Ctrl-C"), "{about}");
    }

    #[test]
    fn queued_spill_defaults_to_sync_and_the_bare_flag_means_always() {
        assert_eq!(queued_spill(&[]).unwrap(), QueuedSpill::Sync);
        assert_eq!(
            queued_spill(&["--queued-spill"]).unwrap(),
            QueuedSpill::Always
        );
        assert_eq!(
            queued_spill(&["--queued-spill=off"]).unwrap(),
            QueuedSpill::Off
        );
        assert_eq!(
            queued_spill(&["--queued-spill", "sync"]).unwrap(),
            QueuedSpill::Sync
        );
        assert_eq!(
            queued_spill(&["--queued-spill=owned"]).unwrap(),
            QueuedSpill::Owned
        );
        let err = queued_spill(&["--queued-spill=sometimes"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("sometimes"), "{err}");
    }

    #[test]
    fn no_steal_turns_queued_spills_off_and_refuses_an_explicit_choice() {
        let argv = ["scx_softpart", "--no-steal"];
        let opts = Opts::try_parse_from(argv).unwrap();
        assert!(opts.no_steal);
        // The default (sync) is not a choice the operator made.
        assert_eq!(opts.queued_spill, QueuedSpill::Sync);
        for explicit in [
            "--queued-spill",
            "--queued-spill=always",
            "--queued-spill=off",
        ] {
            let err = queued_spill(&["--no-steal", explicit])
                .unwrap_err()
                .to_string();
            assert!(err.contains("--no-steal"), "{explicit}: {err}");
            assert!(err.contains("--queued-spill"), "{explicit}: {err}");
        }
    }

    #[test]
    fn owners_window_is_the_steal_wait_or_a_slice_without_one() {
        let window = |args: &[&str]| {
            let argv = std::iter::once("scx_softpart").chain(args.iter().copied());
            owner_window_us(&Opts::try_parse_from(argv).unwrap())
        };
        assert_eq!(window(&[]), 12_000);
        assert_eq!(window(&["--steal-defer-us", "5000"]), 5_000);
        assert_eq!(window(&["--slice-us", "2000"]), 8_000);
        assert_eq!(window(&["--steal-defer-us", "0"]), 3_000);
        assert_eq!(
            window(&["--steal-defer-us", "0", "--slice-us", "1500"]),
            1_500
        );
        assert_eq!(window(&["--owner-window-us", "3000"]), 3_000);
        for bad in ["0", "100001", "-5", "3ms"] {
            let err = Opts::try_parse_from(["scx_softpart", &format!("--owner-window-us={bad}")])
                .unwrap_err()
                .to_string();
            assert!(err.contains("--owner-window-us"), "{bad}: {err}");
        }
    }

    #[test]
    fn steal_defer_takes_zero_and_names_a_bad_value() {
        let opts = Opts::try_parse_from(["scx_softpart"]).unwrap();
        assert_eq!(opts.steal_defer_us, None);
        assert_eq!(steal_defer_us(&opts), 12_000);
        // The default follows the slice.
        let opts = Opts::try_parse_from(["scx_softpart", "--slice-us", "1000"]).unwrap();
        assert_eq!(steal_defer_us(&opts), 4_000);
        let opts = Opts::try_parse_from(["scx_softpart", "--slice-us", "100000"]).unwrap();
        assert_eq!(steal_defer_us(&opts), 100_000);
        let opts = Opts::try_parse_from(["scx_softpart", "--steal-defer-us", "0"]).unwrap();
        assert_eq!(opts.steal_defer_us, Some(0));
        assert_eq!(steal_defer_us(&opts), 0);
        for bad in ["100001", "-1", "half"] {
            let err = Opts::try_parse_from([
                "scx_softpart".to_string(),
                format!("--steal-defer-us={bad}"),
            ])
            .unwrap_err()
            .to_string();
            assert!(err.contains("--steal-defer-us"), "{bad}: {err}");
            assert!(err.contains(bad), "{bad}: {err}");
        }
        // Without steals there is nothing to defer: an explicit value is refused.
        let err = Opts::try_parse_from(["scx_softpart", "--no-steal", "--steal-defer-us", "100"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--no-steal"), "{err}");
    }
}
