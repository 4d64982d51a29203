//! The control protocol between the `softpart` CLI and the running
//! scheduler: one JSON request per connection on a Unix socket, one JSON
//! reply. The scheduler checks the peer's credentials (SO_PEERCRED) itself.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where the scheduler listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/softpart/control.sock";

/// `softpart`'s exit statuses, as its man page lists them. 126 and 127
/// are `taskset`'s and `env`'s for a command that cannot run.
pub mod exit {
    /// Anything not below (an unreadable answer, a file that cannot be
    /// written).
    pub const FAILURE: u8 = 1;
    /// Bad input: options, a CPU list (clap's own usage errors exit 2 too).
    pub const USAGE: u8 = 2;
    /// The scheduler refused the request: permission, CPUs it does not
    /// have, a config file it would not reload.
    pub const REFUSED: u8 = 3;
    /// No scheduler answered: not running, or attaching again.
    pub const DOWN: u8 = 4;
    /// `softpart exec`: the command was found but cannot run.
    pub const CANNOT_RUN: u8 = 126;
    /// `softpart exec`: no such command.
    pub const NOT_FOUND: u8 = 127;

    /// Every status with what it means, for the man page.
    pub const ALL: &[(u8, &str)] = &[
        (0, "success"),
        (FAILURE, "a failure not listed below"),
        (USAGE, "bad input: an option, a CPU list, a pid"),
        (
            REFUSED,
            "the scheduler refused the request (permission, CPUs it does not have, a config it would not reload)",
        ),
        (
            DOWN,
            "no scheduler answered on the control socket (not running, or attaching again)",
        ),
        (
            CANNOT_RUN,
            "exec: the command was found but could not be run",
        ),
        (NOT_FOUND, "exec: the command was not found"),
    ];
}

/// What a home is given as; the scheduler turns it into CPUs with its
/// topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HomeSpec {
    /// A CPU list, e.g. "0-15".
    Cpus(String),
    /// A NUMA node's CPUs.
    Node(u32),
    /// One last-level cache's CPUs (LLCs numbered machine-wide from 0, in
    /// CPU order).
    Llc(u32),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Threads or processes by id. A process id covers the threads it has
    /// now; threads and processes created later inherit at fork.
    Pids(Vec<u32>),
    /// A cgroup v2 directory (absolute, or relative to /sys/fs/cgroup); its
    /// descendants inherit unless they have a home of their own.
    Cgroup(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Request {
    /// Give the targets a home, with the group's own softness if given
    /// ("home-first" or "ALLOWED:PREFERRED"; default: the scheduler's).
    Prefer {
        target: Target,
        home: HomeSpec,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        softness: Option<String>,
        /// Who gives a cgroup this home, shown as its source in `softpart
        /// list` instead of "softpart prefer" (softpart-nri: "kubernetes
        /// NAMESPACE/POD[/CONTAINER] VALUE"). Cgroups only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
    },
    /// Hand a cgroup to the group balancer, as a `[[balance]]` rule would,
    /// replacing any home it has; `origin` as for `Prefer`. The balancer
    /// keeps it until its home is cleared or set, or the cgroup is gone.
    Balance {
        cgroup: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
    },
    /// Remove the targets' own home (they fall back to their cgroup's).
    Clear { target: Target },
    /// Report a task's allowed and preferred CPUs.
    Show { pid: u32 },
    /// Report the group balancer's partitions and groups.
    Stat,
    /// Report every home in effect.
    List,
    /// Read the config file again and apply it whole, or refuse it whole
    /// (the answer says which, and why): `systemctl reload`'s verdict.
    Reload,
}

impl Request {
    /// Whether it may change a home (and so what a restart gives back).
    pub fn changes_homes(&self) -> bool {
        matches!(
            self,
            Request::Prefer { .. }
                | Request::Balance { .. }
                | Request::Clear { .. }
                | Request::Reload
        )
    }
}

/// The group balancer's view (`softpart stat`). Loads are in CPUs' worth,
/// smoothed over balancing periods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatView {
    pub period_ms: u64,
    pub parts: Vec<PartView>,
    pub groups: Vec<GroupView>,
    /// What the scheduler holds: entries in its BPF maps and home ids in
    /// use (so that leaks show), and how often it reattached.
    #[serde(default)]
    pub held: Held,
    /// cgroups of the cpu controller with a contract set (a weight other
    /// than 100, a cap) or CPU time run lately.
    #[serde(default)]
    pub tenants: Vec<TenantView>,
    /// Every group with a home: its spills, returns and cross-node moves
    /// per second over the last `homes_window_s`.
    #[serde(default)]
    pub homes: Vec<HomeMovesView>,
    /// The window of `homes`: a second while someone asks, else the time
    /// since the last request.
    #[serde(default)]
    pub homes_window_s: f64,
    /// Tables that were full and turned something away (limits::Limits).
    #[serde(default)]
    pub limits: Vec<crate::limits::LimitView>,
    /// What the control plane's own work has cost since it attached.
    #[serde(default)]
    pub cost: ControlCost,
    /// Memory following the homes.
    #[serde(default)]
    pub memory: MemoryView,
}

/// Memory following the homes: the settings, what was moved since the
/// scheduler attached, and each home's memory as last read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryView {
    /// Whether memory follows the homes (`[memory] follow`,
    /// --no-memory-follow).
    pub follow: bool,
    pub rate_bytes_per_s: u64,
    /// The reserve a home node keeps above its high watermark; None: 1/64
    /// of the node, at least 16 MB.
    pub reserve_bytes: Option<u64>,
    /// The most bytes moved within one second so far.
    pub peak_bytes_per_s: u64,
    pub moved_bytes: u64,
    /// CPU time of the thread that moves pages.
    pub mover_cpu_s: f64,
    pub tenants: Vec<MemoryTenantView>,
}

/// One home's memory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryTenantView {
    /// A cgroup path, or "pid N".
    pub label: String,
    /// The nodes of its home's CPUs.
    pub nodes: Vec<usize>,
    /// What it holds that can move (anonymous and shared memory), on those
    /// nodes and elsewhere, as last read.
    pub home_bytes: u64,
    pub away_bytes: u64,
    pub moved_bytes: u64,
    /// Bytes a pass meant to move and did not, by cause: "reserve" (the
    /// home node's free memory), "rate", "user_policy" (a memory policy
    /// the process set), "shared" (mapped by another process, or outside
    /// its cpuset), "busy" (pinned, or in use at that moment), "no_memory",
    /// "not_permitted"; summed over passes.
    pub refused_bytes: BTreeMap<String, u64>,
    pub last_move_s_ago: Option<f64>,
    /// Why nothing moves now: "not_at_home" (under 80% of its CPU time at
    /// home over the last second), "nothing_away", "reserve", "off",
    /// "unreadable" (no memory controller, or the process gone); none while
    /// a move is under way or due.
    pub waiting: Option<String>,
}

/// What the control plane's periodic work costs: its main loop's CPU
/// time and the bytes it read from and wrote to the BPF maps (counted by
/// itself, as most go through the mmap of the scheduler's data), since
/// the scheduler attached.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlCost {
    /// Seconds since the attachment.
    pub secs: f64,
    /// CPU time of the control plane's main loop, seconds.
    pub cpu_s: f64,
    pub map_read_bytes: u64,
    pub map_written_bytes: u64,
    /// Of `map_read_bytes`, what was read only to answer statistics
    /// requests (`softpart stat`, `--stats`, metrics) and the samples of
    /// the homes' counters kept each second for a minute after a
    /// `softpart stat`: the cost of being watched, apart from the
    /// scheduling work's.
    #[serde(default)]
    pub map_read_bytes_for_stats: u64,
    /// The main loop's CPU time by phase (softness, contract,
    /// cgroup_scan, samples, stats_samples, balancer, requests), seconds.
    #[serde(default)]
    pub cpu_s_by_phase: std::collections::BTreeMap<String, f64>,
    /// The bytes of `map_read_bytes` each phase read.
    #[serde(default)]
    pub map_read_bytes_by_phase: std::collections::BTreeMap<String, u64>,
    /// How many times each phase ran, and how many times the copy of
    /// the cgroup slot table was taken (cgroup_table_copies) and the
    /// cgroup tree walked (cgroup_walks).
    #[serde(default)]
    pub runs: std::collections::BTreeMap<String, u64>,
}

/// One homed group's moves over the last second (`softpart stat`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HomeMovesView {
    /// The cgroup's path from the cgroup2 root, or the thread group's label.
    pub label: String,
    pub spills_per_s: f64,
    pub returns_per_s: f64,
    /// Cross-node moves per s by cause (spill_wakeup, return_wakeup,
    /// return_slice_end, return_queued, steal, evict, balancer, other).
    pub xnode_per_s: std::collections::BTreeMap<String, f64>,
}

/// The causes with moves in `rates` (per s), as "steal 3.0, evict 1.0";
/// empty if none. `--stats` and `softpart stat` print them alike.
pub fn nonzero_rates(rates: &std::collections::BTreeMap<String, f64>) -> String {
    rates
        .iter()
        .filter(|(_, r)| **r > 0.0)
        .map(|(k, r)| format!("{k} {r:.1}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One cgroup's CPU contract and what it got (`softpart stat`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantView {
    pub path: String,
    /// cpu.weight.
    pub weight: u32,
    /// cpu.max in CPUs; `None` for "max".
    pub cap_cpus: Option<f64>,
    /// What its contract entitles it to against everyone's load, in CPUs.
    pub entitled_cpus: f64,
    /// CPU time its own tasks ran lately, in CPUs (smoothed over about a
    /// second).
    pub cpus_used: f64,
    /// Time out of cpu.max budget, and how many times it ran out, since
    /// it appeared.
    pub throttled_s: f64,
    pub throttles: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// Threads with a home of their own (task_homes map).
    pub task_homes: usize,
    /// Cgroups with a home (cgroup_homes map).
    pub cgroup_homes: usize,
    /// Groups with a home id.
    pub home_ids: usize,
    /// Cgroups the balancer manages.
    pub balanced: usize,
    /// Times the BPF scheduler was attached again after the kernel asked
    /// for a restart (CPU hotplug).
    pub restarts: u32,
    /// Slots of the cgroup table in use: one per cgroup of the cpu
    /// controller (back to the baseline once cgroups are removed).
    #[serde(default)]
    pub cgroup_slots: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartView {
    pub id: usize,
    pub cpus: String,
    /// All load on the partition.
    pub load: f64,
    /// Its predicted load (placed groups' demand plus background) over
    /// its CPUs, and whether that makes it over-full
    /// (`softpart_core::overfull`).
    #[serde(default)]
    pub demand: f64,
    #[serde(default)]
    pub overfull: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupView {
    /// The cgroup's path from the cgroup2 root.
    pub label: String,
    /// Its partition; None while its load is first measured.
    pub part: Option<usize>,
    pub load: f64,
    /// Its load on each partition (it may burst out of its own).
    pub part_load: Vec<f64>,
    /// Share of its load inside its own partition.
    pub exclusivity: Option<f64>,
    /// Moves after its first placement.
    pub moves: u64,
    pub last_move_s_ago: Option<f64>,
    /// CPU-seconds its tasks ran away from their home since the home
    /// was set, and of those the part charged while the home had an idle
    /// CPU (placement lag; the rest is bursting out of a full home).
    #[serde(default)]
    pub away_s: f64,
    #[serde(default)]
    pub away_with_room_s: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskView {
    pub pid: u32,
    pub comm: String,
    /// Its real affinity (sched_getaffinity), which softpart never widens.
    pub allowed: String,
    /// The home softpart uses for it ("" if none), and where it comes from.
    pub preferred: String,
    pub source: String,
}

/// A home in effect (`softpart list`): a cgroup's, or the one a set of
/// threads was given together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HomeView {
    /// "cgroup" or "threads".
    pub kind: String,
    /// The cgroup's path from the cgroup2 root, or the group's label
    /// ("pid N") and its thread ids.
    pub target: String,
    pub cpus: String,
    /// None: the scheduler's --softness.
    pub softness: Option<String>,
    /// "config rule PATTERN", "balancer", "softpart prefer", or "memory: ..."
    /// (a homeless tenant's home from where its memory or its threads are);
    /// a home given with an origin shows it instead of "softpart prefer",
    /// and after "balancer, " for a cgroup handed to the balancer.
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Response {
    Ok {
        message: String,
    },
    Task(TaskView),
    Stat(Box<StatView>),
    Homes {
        homes: Vec<HomeView>,
    },
    Error {
        message: String,
    },
    /// No BPF scheduler attached (stopping, or attaching again): nothing
    /// was done.
    Unavailable {
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefer_without_an_origin_reads_as_before_and_balance_round_trips() {
        let old = r#"{"op":"prefer","target":{"cgroup":"/db"},"home":{"node":1}}"#;
        let r: Request = serde_json::from_str(old).unwrap();
        assert!(matches!(r, Request::Prefer { origin: None, .. }));
        assert_eq!(serde_json::to_string(&r).unwrap(), old);
        let b = Request::Balance {
            cgroup: "/kubepods.slice/x.slice".into(),
            origin: Some("kubernetes batch/job".into()),
        };
        let text = serde_json::to_string(&b).unwrap();
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), b);
        assert!(b.changes_homes());
    }

    #[test]
    fn nonzero_rates_name_only_the_causes_with_moves() {
        let rates = [("evict", 0.0), ("steal", 3.04), ("balancer", 0.25)]
            .into_iter()
            .map(|(k, r)| (k.to_string(), r))
            .collect();
        assert_eq!(nonzero_rates(&rates), "balancer 0.2, steal 3.0");
        assert_eq!(nonzero_rates(&Default::default()), "");
    }
}
