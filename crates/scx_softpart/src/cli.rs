//! scx_softpart's command line: its options, their defaults and the
//! checks clap makes on them before anything is loaded.

use clap::Parser;
use softpart_core::softness::Softness;
use std::path::PathBuf;

/// `--metrics-cgroups`: which cgroups get series of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CgroupSeries {
    Contract,
    All,
    None,
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
#[derive(Debug, Clone, Parser)]
#[command(version = concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("SOFTPART_GIT_REV"), ")"))]
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

    /// Do not look for whole idle cores first: any idle CPU will do, as
    /// with the kernel's SIS_CORE feature off. Also searches for idle CPUs
    /// away from home ourselves rather than with the kernel's pick.
    #[arg(long)]
    pub(crate) no_idle_core: bool,

    /// Softness: "home-first" (default: wake at home whenever it has an
    /// idle CPU, spill only when it has none), or an ALLOWED:PREFERRED
    /// ratio, e.g. 100:1 or 5:4: search the whole allowed
    /// set first once the home's per-CPU utilisation exceeds the machine's
    /// by that ratio.
    #[arg(long, default_value = "home-first")]
    pub(crate) softness: Softness,

    /// Config file (TOML; every field in config.md, installed in
    /// share/doc/softpart): homes for cgroups by path or glob, cgroups to
    /// balance, partitions. Checked whole at start and at each SIGHUP
    /// (systemctl reload), which applies it whole or keeps the running
    /// one; rules are matched again as cgroups appear.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Leave tenants' memory where it is. By default the pages of a
    /// tenant that lives at its home (80% of its CPU time there) and lie
    /// on other NUMA nodes are moved to its home's nodes, at most 64 MB/s
    /// host-wide, never filling a node past its reserve, never those of a
    /// process that set its own memory policy nor pages another process
    /// maps; and a cgroup nobody gave a home, holding 64 MB or more, gets
    /// one from its memory (the node with 2/3 of it, or the node its
    /// threads run on). Off: neither. Also `[memory] follow = false` in the
    /// config file, which sets the rate and the reserve too.
    #[arg(long)]
    pub(crate) no_memory_follow: bool,

    /// Check a config file and exit: 0 if scx_softpart would start with it,
    /// else 1 with what is wrong. Needs no sched_ext kernel; homes are
    /// checked against this machine's CPUs, nodes and LLCs.
    #[arg(long, value_name = "FILE")]
    pub(crate) check_config: Option<PathBuf>,

    /// Balance the cgroups this path or glob matches (repeatable): each
    /// settles, as a group, into the partition with the least predicted
    /// load, and still bursts when it is full. "PATH/*" is every
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

    /// Serve the counters per group, partition and cgroup in the
    /// OpenMetrics text format (Prometheus) at http://ADDR/metrics, e.g.
    /// 127.0.0.1:17321 (outside the 9100-9999 range Prometheus allocates to
    /// exporters, so no exporter on the host has it by default).
    /// `--help-stats` lists them.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics: Option<String>,

    /// Which cgroups of the cpu controller get their own series in
    /// --metrics (softpart_cgroup_*, six each): "contract", those with a
    /// weight other than 100 or a cap; "all", also every other cgroup that
    /// ran (thousands on a container host); "none". Groups with a home or
    /// balanced are served whatever this says.
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = CgroupSeries::Contract)]
    pub(crate) metrics_cgroups: CgroupSeries,

    /// Print what --stats, --monitor and --metrics report, and exit.
    #[arg(long)]
    pub(crate) help_stats: bool,

    /// Do not schedule: print the statistics of the scx_softpart already
    /// running every SECS seconds, until Ctrl-C.
    #[arg(long, value_name = "SECS", conflicts_with = "stats")]
    pub(crate) monitor: Option<f64>,

    /// Keep the homes set with `softpart prefer` and `exec` in DIR, and give
    /// them back at start: threads that still run (same id and start time)
    /// and cgroups that still exist get them again. The service uses
    /// /run/softpart.
    #[arg(long, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,

    /// Home ids to make room for: every cgroup a config rule or the
    /// balancer gives a home and every `softpart prefer` takes one. Each
    /// costs 192 bytes of counters per CPU id. Default: 1024, fewer on
    /// hosts of more than 341 CPU ids (64 MB of counters at most), never
    /// fewer than 256. Past it a new home is refused, naming the limit.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub(crate) max_homes: Option<u32>,

    /// Where the `softpart` CLI reaches the scheduler.
    #[arg(long, default_value = softpart_core::control::DEFAULT_SOCKET)]
    pub(crate) control_socket: PathBuf,

    /// Kernel exit dump length (0 = kernel default).
    #[arg(long, default_value_t = 0)]
    pub(crate) exit_dump_len: u32,

    /// Count the diagnostic events too (marked "diag" in --monitor's event
    /// list): where held and passed tasks ran next, spills while a home
    /// CPU was still waking. They cost a scan of the CPUs at some spills
    /// and a few per-task fields; off, the fast path skips that work.
    #[arg(long)]
    pub(crate) diag: bool,

    /// Print libbpf's messages (including the verifier's log on failure).
    #[arg(short, long)]
    pub(crate) verbose: bool,
}

/// How long a CPU its owners just used waits before it takes another
/// partition's task that ran within that time, and how recently its
/// owners must have used it for it to wait: four slices, at most 100 ms
/// (docs/decisions.md, "Steal wait").
pub(crate) fn steal_defer_us(opts: &Opts) -> u64 {
    const STEAL_DEFER_SLICES: u64 = 4;
    (STEAL_DEFER_SLICES * opts.slice_us).min(100_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Opts, clap::Error> {
        Opts::try_parse_from(std::iter::once("scx_softpart").chain(args.iter().copied()))
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

    /// Every option is one an operator may choose on a real host: at most
    /// 21 of our own, none hidden, none there only to reproduce an earlier
    /// behaviour.
    #[test]
    fn help_lists_operator_options_only() {
        let cmd = <Opts as clap::CommandFactory>::command();
        let ours: Vec<_> = cmd
            .get_arguments()
            .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
            .collect();
        assert!(ours.len() <= 21, "{} options", ours.len());
        for a in &ours {
            assert!(!a.is_hide_set(), "--{} is hidden", a.get_id());
            let help = a
                .get_long_help()
                .or(a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default()
                .to_lowercase();
            for word in ["for comparison", "experiment", "seed ", "issue "] {
                assert!(
                    !help.contains(word),
                    "--{}: {word:?} in {help:?}",
                    a.get_id()
                );
            }
        }
    }

    #[test]
    fn max_homes_goes_up_to_the_fast_paths_table() {
        // homes.rs checks 16384 is the fast path's table.
        assert_eq!(
            parse(&["--max-homes", "16384"]).unwrap().max_homes,
            Some(16384)
        );
        let err = parse(&["--max-homes", "16385"]).unwrap_err().to_string();
        assert!(
            err.contains("--max-homes") && err.contains("16385"),
            "{err}"
        );
        assert_eq!(parse(&[]).unwrap().max_homes, None);
    }

    #[test]
    fn steal_wait_is_four_slices_up_to_100ms() {
        let wait = |args: &[&str]| steal_defer_us(&parse(args).unwrap());
        assert_eq!(wait(&[]), 12_000);
        assert_eq!(wait(&["--slice-us", "1000"]), 4_000);
        assert_eq!(wait(&["--slice-us", "100000"]), 100_000);
    }

    #[test]
    fn settled_switches_are_refused_by_name() {
        for gone in [
            "--no-steal",
            "--queued-spill",
            "--evict-always",
            "--wake-sync",
        ] {
            let err = parse(&[gone]).unwrap_err().to_string();
            assert!(err.contains(gone), "{gone}: {err}");
        }
    }
}
