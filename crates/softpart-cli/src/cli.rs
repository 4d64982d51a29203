//! The `softpart` CLI's command line (also read by softpart-mangen for
//! the man page).

use clap::{Args, Parser, Subcommand};
use softpart_core::control::DEFAULT_SOCKET;
use std::path::PathBuf;

/// Shown after the options, one command per line (a doc comment's lines
/// would be joined into one paragraph).
pub(crate) const EXAMPLES: &str = "\
Examples:
  softpart prefer --pid 4242 --cpus 0-15
  softpart prefer --cgroup /sys/fs/cgroup/db1.slice --node 0
  softpart prefer --cgroup /db2.slice --node 1 --softness 5:4
  softpart exec --node 1 -- pg_ctl start -D /srv/db2
  softpart show --pid 4242
  softpart list
  softpart prefer --pid 4242 --clear
  softpart stat
  softpart check-config /etc/softpart/softpart.toml --live
  softpart check-config vm-host.toml --topology 2n32c2t
  softpart reload";

/// Give tasks and cgroups a soft home under scx_softpart.
///
/// A home is where a task prefers to run: it keeps to it while the home has
/// an idle CPU and bursts to idle CPUs elsewhere when it has none. Its
/// allowed CPUs (taskset, cpuset) are never widened.
#[derive(Debug, Parser)]
#[command(
    name = "softpart",
    version = concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("SOFTPART_GIT_REV"), ")"),
    after_help = EXAMPLES
)]
pub(crate) struct Cli {
    /// scx_softpart's control socket.
    #[arg(long, env = "SOFTPART_SOCKET", default_value = DEFAULT_SOCKET, global = true)]
    pub(crate) socket: PathBuf,

    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
    /// Set (or with --clear remove) the home of running tasks or a cgroup.
    #[command(
        override_usage = "softpart prefer (--pid PID[,PID...] | --cgroup PATH) \
                          (--cpus LIST | --node N | --llc N | --clear) [--softness R]"
    )]
    Prefer(PreferArgs),
    /// Run a command with a home; its children inherit it, like taskset.
    /// With the scheduler down the command runs anyway, with a warning,
    /// and the home applies when the scheduler starts.
    #[command(
        override_usage = "softpart exec (--cpus LIST | --node N | --llc N) [--softness R] -- COMMAND [ARGS...]"
    )]
    Exec(ExecArgs),
    /// Print a task's allowed CPUs and the home softpart uses for it.
    Show {
        #[arg(long)]
        pid: u32,
    },
    /// Print the group balancer's table: per balanced group, one line per
    /// partition "PART-N CPUS GROUP-LOAD PARTITION-LOAD", a star on the
    /// group's home; loads in CPUs' worth. Then the
    /// partitions whose groups' demand over-fills them (their waiting
    /// tasks are stolen by idle CPUs elsewhere without the steal wait).
    Stat {
        /// JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Print every home in effect: cgroups, then threads given one
    /// together, each with its CPUs and where it comes from (a config rule,
    /// the balancer, softpart prefer or exec, or, for a tenant nobody gave
    /// one, its memory).
    List {
        /// JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Check a config file as the scheduler would, without a scheduler:
    /// every error and warning with its line (FILE:LINE: ...), then what
    /// each rule gives. Warnings: an empty file, a rule behind a wider one
    /// that never applies, a name systemd cannot give a cgroup, a host
    /// without cgroup v2, and with --live a rule that matches no cgroup now.
    /// Exits 0 if the scheduler would start with the file, 1 if not (or,
    /// with --strict, if there is a warning).
    #[command(name = "check-config")]
    CheckConfig(CheckArgs),
    /// Make the scheduler read its config file again and apply it whole,
    /// or refuse it whole and keep the running config: prints the verdict,
    /// exits 3 on a refusal (what `systemctl reload softpart` runs).
    Reload,
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The config file (the service's: /etc/softpart/softpart.toml).
    pub(crate) file: PathBuf,
    /// List, per rule, the cgroups that exist now and that it takes (each
    /// cgroup goes to the first rule it matches).
    #[arg(long)]
    pub(crate) live: bool,
    /// Check for another machine: NODESnCOREScTHREADSt (e.g. 2n16c2t), or
    /// a file saved from `lscpu -p` on it. Default: this machine.
    #[arg(long, value_name = "SPEC|FILE")]
    pub(crate) topology: Option<String>,
    /// One JSON document instead of the text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Warnings fail the check too.
    #[arg(long)]
    pub(crate) strict: bool,
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false, id = "home")]
pub(crate) struct HomeArgs {
    /// CPU list, e.g. 0-15 or 0-3,8-11.
    #[arg(long, group = "home")]
    pub(crate) cpus: Option<String>,
    /// A NUMA node's CPUs.
    #[arg(long, group = "home")]
    pub(crate) node: Option<u32>,
    /// A last-level cache's CPUs (LLCs numbered from 0 in CPU order).
    #[arg(long, group = "home")]
    pub(crate) llc: Option<u32>,
}

#[derive(Debug, Args)]
pub(crate) struct PreferArgs {
    /// Process or thread ids, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        required_unless_present = "cgroup",
        conflicts_with = "cgroup"
    )]
    pub(crate) pid: Vec<u32>,
    /// A cgroup v2 directory (its descendants inherit).
    #[arg(long)]
    pub(crate) cgroup: Option<String>,
    /// CPU list, e.g. 0-15 or 0-3,8-11.
    #[arg(long, conflicts_with_all = ["node", "llc", "clear"])]
    pub(crate) cpus: Option<String>,
    /// A NUMA node's CPUs.
    #[arg(long, conflicts_with_all = ["llc", "clear"])]
    pub(crate) node: Option<u32>,
    /// A last-level cache's CPUs (LLCs numbered from 0 in CPU order).
    #[arg(long, conflicts_with = "clear")]
    pub(crate) llc: Option<u32>,
    /// This group's softness: "home-first", or ALLOWED:PREFERRED (e.g.
    /// 100:1, 5:4) to search all allowed CPUs first once the home is that
    /// much busier per CPU than the machine. Default: the scheduler's.
    #[arg(long, conflicts_with = "clear")]
    pub(crate) softness: Option<String>,
    /// Remove the home instead (tasks fall back to their cgroup's).
    #[arg(long)]
    pub(crate) clear: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    #[command(flatten)]
    pub(crate) home: HomeArgs,
    /// The group's softness (see `softpart prefer --help`).
    #[arg(long)]
    pub(crate) softness: Option<String>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}
