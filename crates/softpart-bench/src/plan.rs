//! What the host hands the guest (a Plan, as /softpart/plan.json in the
//! initramfs) and what the guest sends back: one Message per line, as JSON,
//! on the second serial port, which carries nothing else.

use crate::scenario::{Policy, Scenario};
use serde::{Deserialize, Serialize};
use softpart_observer::counters::{CpuCounters, GroupCounters};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub scenarios: Vec<PlannedScenario>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedScenario {
    pub scenario: Scenario,
    /// (label as the user wrote it, parsed policy).
    pub policies: Vec<(String, Policy)>,
    pub reps: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Message {
    Hello(GuestInfo),
    Run(RunResult),
    SchedulerStopped(SchedulerExit),
    Error {
        context: String,
        message: String,
    },
    /// Every run of the named scenario has been reported: a guest that
    /// dies later need not run it again.
    ScenarioDone {
        name: String,
    },
    Done,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuestInfo {
    pub kernel: String,
    pub nr_cpus: usize,
    /// CPU list of each NUMA node, from sysfs.
    pub nodes: Vec<String>,
    /// SMT sibling lists, from sysfs.
    pub smt_siblings: Vec<String>,
    /// The guest kernel's command line (/proc/cmdline); empty in results
    /// saved before it was recorded.
    #[serde(default)]
    pub cmdline: String,
    /// The guest's clocksource (sysfs): on TCG the TSC is marked unstable
    /// and the kernel's clock is the emulated HPET, which every
    /// bpf_ktime_get_ns() reads. Empty in results saved before.
    #[serde(default)]
    pub clocksource: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub scenario: String,
    pub policy: String,
    pub load: u32,
    pub rep: u32,
    pub wall_ns: u64,
    /// The cpuacct window (ns): it encloses the observer's and is a little
    /// longer. 0 in results written before it was recorded.
    #[serde(default)]
    pub cpuacct_wall_ns: u64,
    /// The longer of the observer's two snapshot reads (ns): a window's CPU
    /// time is exact to within this much per CPU. 0 in older results.
    #[serde(default)]
    pub snapshot_read_ns: u64,
    /// Of that read: the reading thread's time on a CPU, and runnable but
    /// waiting (Snapshot::read_on_cpu_ns). 0 in older results.
    #[serde(default)]
    pub snapshot_read_on_cpu_ns: u64,
    #[serde(default)]
    pub snapshot_read_runnable_ns: u64,
    pub groups: BTreeMap<String, GroupResult>,
    pub cpus: Vec<CpuCounters>,
    /// /sys/kernel/sched_ext/state and root/ops at the end of the window.
    pub sched_ext_state: String,
    pub sched_ext_ops: String,
    /// Workloads that exited before the window ended, with their stderr.
    pub early_exits: Vec<String>,
    /// The scenario's probes: (command, exit status, stdout + stderr).
    #[serde(default)]
    pub probes: Vec<(String, i32, String)>,
    /// The sched_ext scheduler's select_cpu program over the window, from
    /// the kernel's BPF statistics (kernel.bpf_stats_enabled).
    #[serde(default)]
    pub select_cpu: Option<ProgCost>,
    /// The kernel's NUMA-balancing counters over the window, host-wide
    /// (`/proc/vmstat`: numa_pte_updates, numa_hint_faults,
    /// numa_hint_faults_local, numa_pages_migrated). Empty in older
    /// results.
    #[serde(default)]
    pub vmstat: BTreeMap<String, u64>,
}

impl RunResult {
    /// The cpuacct window in seconds (the observer's for results written
    /// before the cpuacct window was timed).
    pub fn cpuacct_wall_s(&self) -> f64 {
        let ns = if self.cpuacct_wall_ns > 0 {
            self.cpuacct_wall_ns
        } else {
            self.wall_ns
        };
        ns.max(1) as f64 / 1e9
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgCost {
    pub run_ns: u64,
    pub calls: u64,
    /// Instructions the verifier walked to load the program(s), a measure
    /// of the paths through them (not a cost per call).
    #[serde(default)]
    pub verified_insns: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupResult {
    pub counters: GroupCounters,
    /// cpuacct.usage_percpu over the same window (ns), a cross-check that
    /// does not depend on the observer.
    pub cpuacct_ns: Vec<u64>,
    /// Growth of schedstat run_delay (/proc/PID/task/TID/schedstat, field
    /// 2) summed over the group's threads across the window: the kernel's
    /// own count of time runnable but not running.
    #[serde(default)]
    pub schedstat_delay_ns: u64,
    /// Threads in the cgroup at the window's end, and those of them that
    /// waited to run through the whole window without running once.
    #[serde(default)]
    pub threads: usize,
    /// Threads in the cgroup at the window's start: fewer than at its end
    /// means the workload was still starting when the window opened.
    #[serde(default)]
    pub threads_at_start: usize,
    #[serde(default)]
    pub stalled_threads: Vec<u32>,
    /// The group's memory as its memory controller counts it; None where
    /// the controller is off or in older results.
    #[serde(default)]
    pub memory: Option<GroupMemory>,
}

/// A group's memory: what it holds per node at the window's end, and what
/// the kernel's NUMA balancing did to it from the group's start (each run
/// makes its cgroup anew) to then.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupMemory {
    /// Anonymous and shared memory per node, bytes (memory.numa_stat:
    /// anon + shmem; softpart_core::memstat::resident_per_node).
    pub resident_per_node: Vec<u64>,
    /// From the group's start (memory.stat; None on kernels whose
    /// memory.stat lacks them): pages NUMA balancing's scan made inaccessible to learn
    /// who touches them (a huge page counts its 512), the hint faults
    /// those pages then took (one per huge page), and the pages it
    /// migrated.
    #[serde(default)]
    pub numa_pte_updates: Option<u64>,
    pub numa_hint_faults: Option<u64>,
    pub numa_pages_migrated: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SchedulerExit {
    pub scenario: String,
    pub policy: String,
    /// Whether the scheduler attached (sched_ext state became "enabled").
    pub attached: bool,
    /// Exited by itself on SIGINT with status 0 and sched_ext disabled.
    pub clean: bool,
    pub status: String,
    pub stdout_tail: String,
    pub stderr_tail: String,
}
