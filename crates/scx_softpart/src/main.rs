//! scx_softpart: soft CPU partitions as a sched_ext scheduler.
//!
//! The Rust side reads the topology, decides the partitions, hands them to
//! the BPF fast path (src/bpf/main.bpf.c), serves the control socket that
//! gives tasks and cgroups their homes, and reports how the scheduler
//! exited. It makes no per-event decision itself.

mod balancer;
mod bpf_intf;
mod bpf_skel;
mod cgroup_scan;
mod cgroup_table;
mod cli;
mod contract;
mod control;
mod counters;
mod group_stats;
mod home_maps;
mod homes;
mod limits;
mod load;
mod machine;
mod memory;
mod memory_homes;
mod metrics;
mod mover;
mod notify;
mod partitions;
mod pending;
mod reload;
mod report;
mod requests;
mod state;
mod stats;
mod traffic;

use anyhow::{Context, Result, bail};
use bpf_skel::*;
use clap::Parser;
use cli::Opts;
use control::Call;
use home_maps::referenced_homes;
use homes::{Home, HomeTable};
use libbpf_rs::{MapCore, OpenObject};
use log::{info, warn};
use machine::Machine;
use scx_stats::prelude::StatsServer;
use scx_utils::{Topology, UserExitInfo, scx_ops_attach, scx_ops_load, uei_exited, uei_report};
use softpart_core::config;
use softpart_core::cpulist;
use softpart_core::home_contract::{HomeDemand, short_homes};
use softpart_core::softness::{Softness, mean_util, smooth_util};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write as _;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

const SCHEDULER_NAME: &str = "scx_softpart";

/// What outlives one attachment of the BPF scheduler: the control socket,
/// the stats server, the config as checked at start, and the homes given
/// to threads and cgroups. A CPU hotplug makes the kernel detach the
/// scheduler and ask for a restart; the next attachment starts from this,
/// on the CPUs that are online then.
struct Session {
    calls: Receiver<Call>,
    /// Shared with the control socket's thread.
    attached: Arc<AtomicBool>,
    stats_server: StatsServer<(), stats::Snapshot>,
    rules: Vec<config::Rule>,
    balance_rules: Vec<config::BalanceRule>,
    /// --partitions or the config's partitions, as checked at start; None:
    /// from the topology at each attachment.
    explicit_parts: Option<Vec<BTreeSet<usize>>>,
    /// Homes set before the restart, by thread and by cgroup (balanced
    /// cgroups excluded: they are placed again).
    task_homes: Vec<(u32, Home)>,
    cgroup_homes: Vec<(u64, Home)>,
    /// The cgroups whose home a config rule gave, and the rule.
    rule_homes: BTreeMap<u64, String>,
    /// Who gave the cgroups of `cgroup_homes` their home, where a program
    /// said (Request::Prefer's origin).
    origins: BTreeMap<u64, String>,
    /// Scrapes of --metrics, waiting for a snapshot.
    metrics: Option<Receiver<metrics::SnapshotRequest>>,
    restarts: u32,
    reloads: reload::Reloads,
    /// Memory following the homes: its thread outlives an attachment.
    memory: memory::MemoryPass,
}

/// Reads the CPU topology. A CPU going offline while it is read removes
/// the sysfs files being read (seen in the hotplug test: cpu7's core_id
/// vanished mid-read), so a failure is retried for up to five seconds
/// before it is reported.
fn read_topology() -> Result<Topology> {
    const TRIES: u32 = 50;
    let mut attempt = 1;
    loop {
        match Topology::new() {
            Ok(topo) => return Ok(topo),
            Err(e) if attempt < TRIES => {
                info!("reading the CPU topology (try {attempt}): {e:#}; retrying");
                attempt += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e).context("reading the CPU topology"),
        }
    }
}

/// The config file and the options that add to it, checked whole against
/// this machine's topology: what the scheduler starts with, or the first
/// thing wrong.
struct CheckedConfig {
    homes: Vec<config::Rule>,
    balance_rules: Vec<config::BalanceRule>,
    /// --partitions or the config's partitions; None: the default.
    explicit_parts: Option<Vec<BTreeSet<usize>>>,
    /// `[memory]`, with --no-memory-follow applied.
    memory: config::Memory,
}

impl CheckedConfig {
    fn new(opts: &Opts, file: Option<&Path>, topo: &Topology) -> Result<CheckedConfig> {
        let machine = Machine::from_topology(topo);
        let cfg = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                config::parse(&text, &machine.layout()).map_err(|e| {
                    anyhow::anyhow!("config file {}: {}", path.display(), e.replace('\n', "; "))
                })?
            }
            None => config::Config::default(),
        };
        let explicit_parts = match (&opts.partitions, &cfg.partitions) {
            (None, None) => None,
            (None, Some(spec)) => Some(
                partitions::from_topology(topo, Some(spec))
                    .with_context(|| format!("config file: field partitions = {spec:?}"))?,
            ),
            (Some(spec), _) => Some(
                partitions::from_topology(topo, Some(spec))
                    .with_context(|| format!("--partitions {spec:?}"))?,
            ),
        };
        let mut balance_rules = cfg.balance;
        for pattern in &opts.balance {
            balance_rules.push(
                config::BalanceRule::new(pattern, None)
                    .map_err(|e| anyhow::anyhow!("--balance {pattern:?}: {e}"))?,
            );
        }
        let mut memory = cfg.memory;
        if opts.no_memory_follow {
            memory.follow = false;
        }
        Ok(CheckedConfig {
            homes: cfg.homes,
            balance_rules,
            explicit_parts,
            memory,
        })
    }
}

/// --check-config: every error and warning in the file, checked against
/// this machine, then what it gives (`softpart check-config` has more).
fn check_config(path: &Path) -> Result<()> {
    let topo = read_topology()?;
    let layout = Machine::from_topology(&topo).layout();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    let checked = config::check(&text, &layout);
    print!(
        "{}",
        softpart_core::config_report::text(&path.display().to_string(), &checked, &[], None)
    );
    if checked.config.is_none() {
        bail!("{}: the scheduler would not start with it", path.display());
    }
    Ok(())
}

impl Session {
    fn start(opts: &Opts) -> Result<Session> {
        if !Path::new("/sys/kernel/sched_ext").exists() {
            bail!(
                "this kernel ({}) has no sched_ext: scx_softpart needs a kernel built with CONFIG_SCHED_CLASS_EXT=y (the tests boot 6.17 and later)",
                std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .unwrap_or_default()
                    .trim()
            );
        }
        let topo = read_topology()?;
        let checked = CheckedConfig::new(opts, opts.config.as_deref(), &topo)
            .map_err(|e| e.context(ConfigRefused))?;
        let restored = match &opts.state_dir {
            None => state::Restored::default(),
            Some(dir) => match state::load(dir, state::task_start_time, state::cgroup_id) {
                Ok(r) => {
                    info!(
                        "state: {} thread home(s) and {} cgroup home(s) from {} ({} gone, dropped)",
                        r.tasks.len(),
                        r.cgroups.len(),
                        dir.display(),
                        r.dropped
                    );
                    r
                }
                Err(e) => {
                    warn!("state: {e:#}: starting without the homes set before");
                    state::Restored::default()
                }
            },
        };
        let attached = Arc::new(AtomicBool::new(false));
        let metrics = opts
            .metrics
            .as_deref()
            .map(|addr| metrics::serve(addr, attached.clone(), opts.metrics_cgroups))
            .transpose()?;
        let calls = control::serve(&opts.control_socket, attached.clone())?;
        let stats_server = StatsServer::new(stats::server_data())
            .launch()
            .context("starting the stats server")?;
        Ok(Session {
            calls,
            attached,
            stats_server,
            rules: checked.homes,
            balance_rules: checked.balance_rules,
            explicit_parts: checked.explicit_parts,
            task_homes: restored.tasks,
            cgroup_homes: restored.cgroups,
            rule_homes: BTreeMap::new(),
            origins: restored.origins,
            metrics,
            restarts: 0,
            reloads: reload::Reloads::started(reload::unix_now()),
            memory: memory::MemoryPass::new(checked.memory),
        })
    }
}

struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    /// Each group slot's per-CPU counters, mapped (group_stats.rs).
    group_stats: group_stats::GroupStats,
    link: Option<libbpf_rs::Link>,
    machine: Machine,
    parts: Vec<BTreeSet<usize>>,
    homes: HomeTable,
    /// The config file's rules, and the cgroups (by id) already matched.
    rules: Vec<config::Rule>,
    balance_rules: Vec<config::BalanceRule>,
    balancer: balancer::Balancer,
    /// The balancer's decisions, made on a thread of their own.
    decider: balancer::Decider,
    balance_period: Duration,
    last_balance: std::time::Instant,
    seen_cgroups: BTreeSet<u64>,
    /// cgroup settings this kernel does not hand over (cgroup_scan.rs).
    unenforced: Vec<cgroup_scan::Unenforced>,
    /// Every cgroup's path by id, from the last scan (the statistics).
    cgroup_paths: std::collections::HashMap<u64, String>,
    /// The full tables seen so far (limits.rs).
    limits: softpart_core::limits::Limits,
    /// Cgroups with a home, by id: their group label.
    cgroup_groups: BTreeMap<u64, String>,
    /// The cgroups whose home a config rule gave, and the rule (reload.rs).
    rule_homes: BTreeMap<u64, String>,
    /// Who gave a cgroup its home or handed it to the balancer, where a
    /// program said (softpart-nri: "kubernetes NAMESPACE/POD ..."): its
    /// source in `softpart list`.
    origins: BTreeMap<u64, String>,
    /// The cgroups whose home their memory gave (memory_homes.rs).
    memory_homes: memory_homes::MemoryHomes,
    /// The options, for a reload.
    opts: Opts,
    metrics: Option<Receiver<metrics::SnapshotRequest>>,
    last_scan: std::time::Instant,
    /// Each homed group's counters at the last two scans, for the moves
    /// per s `softpart stat` gives.
    home_samples: report::HomeSamples,
    stats_server: StatsServer<(), stats::Snapshot>,
    calls: Receiver<Call>,
    softness: Softness,
    /// The cgroup CPU contract: each cgroup's smoothed load.
    contract: contract::Contract,
    /// The copy of the fast path's cgroup slot table, and its loads.
    cgroup_table: cgroup_table::CgroupTable,
    last_contract_at: std::time::Instant,
    /// The bytes read from and written to the fast path's maps.
    traffic: traffic::MapTraffic,
    /// The softness and steal flags per home id as last written (the
    /// fast path only reads them), so that only changes are written.
    allowed_written: Vec<u32>,
    steal_written: Vec<u32>,
    /// When the scheduler attached, and the main loop's CPU time then.
    attached_at: std::time::Instant,
    cpu_at_attach: u64,
    /// The main loop's CPU time by phase.
    phase_cpu: traffic::PhaseCpu,
    /// The fast path's count of cgroup tree changes at the last walk.
    cgroup_tree_seen: Option<u64>,
    /// Per home id, whether its tenants are entitled beyond its CPUs, as
    /// last written to the fast path (`entitled_beyond`).
    short_homes: Vec<bool>,
    /// Smoothed per-CPU utilisation and the busy counters it was read from.
    util: Vec<f64>,
    last_busy: Vec<u64>,
    last_util_at: std::time::Instant,
    restarts: u32,
    /// The config loads so far, and the status line last sent to systemd.
    reloads: reload::Reloads,
    status_sent: String,
    explicit_parts: Option<Vec<BTreeSet<usize>>>,
    attached: Arc<AtomicBool>,
    memory: memory::MemoryPass,
}

/// How often utilisation and the softness flags are refreshed.
const SOFTNESS_PERIOD: Duration = Duration::from_millis(20);
/// How often the cgroups' loads are read and their charge rates set, at
/// the latest: the rates follow loads smoothed over about this long
/// anyway, and a pass reads every cgroup's load and solves the whole
/// tree (docs/decisions.md). A change of a contract runs one at once.
const CONTRACT_PERIOD: Duration = Duration::from_millis(200);
/// How often the cgroup tree is walked for new and removed cgroups.
const CGROUP_SCAN_PERIOD: Duration = Duration::from_secs(1);
/// A balanced group moves only if that lowers the busiest partition's load
/// by more than this share of its capacity.
const BALANCE_HYSTERESIS: f64 = 0.1;

/// The fast path's event counters, in enum sp_stat order; the array type
/// makes the build fail if the list and the BPF enum differ in length.
const EVENT_NAMES: [&str; bpf_intf::sp_stat_SP_NR_STATS as usize] =
    softpart_core::events::EVENT_NAMES;

impl<'a> Scheduler<'a> {
    fn init(
        opts: &Opts,
        open_object: &'a mut MaybeUninit<OpenObject>,
        session: Session,
    ) -> Result<Self> {
        info!("attaching at uptime {:.2} s", uptime_s());
        // Read before the topology: a hotplug after this point makes the
        // kernel refuse the attachment (and ask for a restart) instead of
        // letting it run on a topology that is already stale.
        let hotplug_seq = std::fs::read_to_string("/sys/kernel/sched_ext/hotplug_seq")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        let topo = read_topology()?;
        let machine = Machine::from_topology(&topo);
        let parts = load::partitions(session.explicit_parts.as_deref(), &topo, &machine)?;
        let Session {
            calls,
            attached,
            stats_server,
            rules,
            balance_rules,
            explicit_parts,
            task_homes,
            cgroup_homes,
            rule_homes,
            origins,
            metrics,
            restarts,
            reloads,
            memory,
        } = session;
        let nr_cpu_ids = *scx_utils::NR_CPU_IDS;
        if nr_cpu_ids > bpf_intf::softpart_consts_SP_MAX_CPUS as usize {
            bail!(
                "this machine has {nr_cpu_ids} CPU ids; scx_softpart supports {}",
                bpf_intf::softpart_consts_SP_MAX_CPUS
            );
        }
        let per_home_cpu = size_of::<bpf_intf::sp_group_stats>();
        let nr_homes = opts.max_homes.map_or_else(
            || softpart_core::limits::default_homes(nr_cpu_ids, per_home_cpu),
            |n| n as usize,
        );
        let counters_mb = ((nr_homes + 1) * nr_cpu_ids * per_home_cpu) as f64 / (1 << 20) as f64;
        info!(
            "home ids: {nr_homes} ({}; their counters {counters_mb:.1} MB: {per_home_cpu} bytes a home a CPU id)",
            if opts.max_homes.is_some() {
                "--max-homes"
            } else {
                "default for this host, --max-homes to change"
            }
        );
        info!(
            "{SCHEDULER_NAME} {}: {} CPUs, SMT {}, partitions: {}",
            env!("CARGO_PKG_VERSION"),
            topo.all_cpus.len(),
            if topo.smt_enabled { "on" } else { "off" },
            partitions::describe(&parts)
        );

        let (mut skel, idle_per_node) = load::open_skel(
            opts,
            open_object,
            &load::Layout {
                topo: &topo,
                machine: &machine,
                parts: &parts,
                nr_cpu_ids,
                nr_homes,
            },
            hotplug_seq,
        )?;
        let mut skel = scx_ops_load!(skel, softpart_ops, uei).with_context(|| {
            format!(
                "loading the fast path (its maps include {nr_homes} home ids' counters, {counters_mb:.1} MB; --max-homes sets how many)"
            )
        })?;
        info!("loaded at uptime {:.2} s", uptime_s());
        let link = as_real_time(|| scx_ops_attach!(skel, softpart_ops))?;
        let kernel_pick = skel
            .maps
            .bss_data
            .as_ref()
            .is_some_and(|b| b.kernel_pick_used);
        load::log_attached(opts, kernel_pick, idle_per_node);
        let nr = machine.sibling.len();
        let parts_len = parts.len();
        let cpu_nodes: Vec<u32> = (0..nr_cpu_ids)
            .map(|c| load::cpu_node_id(&machine, c))
            .collect();
        let group_stats = group_stats::GroupStats::map(&skel.maps.group_stats, nr_cpu_ids)
            .context("mapping the groups' counters")?;
        let mut sched = Self {
            skel,
            group_stats,
            link: Some(link),
            machine,
            parts,
            homes: HomeTable::new(nr_homes),
            rules,
            balance_rules,
            balancer: balancer::Balancer::new(parts_len, BALANCE_HYSTERESIS),
            decider: balancer::Decider::spawn().context("starting the balancer's thread")?,
            balance_period: Duration::from_millis(opts.balance_period_ms),
            last_balance: std::time::Instant::now(),
            seen_cgroups: BTreeSet::new(),
            cgroup_paths: Default::default(),
            limits: Default::default(),
            unenforced: cgroup_scan::unenforced_settings(),
            cgroup_groups: BTreeMap::new(),
            rule_homes: BTreeMap::new(),
            origins: BTreeMap::new(),
            memory_homes: Default::default(),
            opts: opts.clone(),
            metrics,
            last_scan: std::time::Instant::now(),
            home_samples: Default::default(),
            stats_server,
            calls,
            softness: opts.softness,
            contract: contract::Contract::default(),
            cgroup_table: cgroup_table::CgroupTable::new(cpu_nodes.into_iter()),
            allowed_written: vec![0; nr_homes],
            steal_written: vec![0; nr_homes],
            attached_at: std::time::Instant::now(),
            cpu_at_attach: traffic::thread_cpu_ns(),
            phase_cpu: Default::default(),
            cgroup_tree_seen: None,
            last_contract_at: std::time::Instant::now(),
            traffic: Default::default(),
            short_homes: vec![false; nr_homes],
            util: vec![0.0; nr],
            last_busy: vec![0; nr],
            last_util_at: std::time::Instant::now(),
            restarts,
            reloads,
            status_sent: String::new(),
            explicit_parts,
            attached,
            memory,
        };
        // The tasks without a home have a statistics slot from the start.
        counters::reset_group(&sched.skel.maps, &sched.group_stats, nr_homes as u32)
            .context("creating the no-home group's statistics")?;
        sched.restore(task_homes, cgroup_homes);
        sched.rule_homes = rule_homes;
        sched.origins = origins;
        sched.attached.store(true, Ordering::Relaxed);
        if !sched.rules.is_empty() || !sched.balance_rules.is_empty() {
            info!(
                "config: {} home rule(s), {} balance rule(s)",
                sched.rules.len(),
                sched.balance_rules.len()
            );
            sched.scan_cgroups();
        }
        if sched.apply_pending() > 0 {
            sched.save_state();
        }
        Ok(sched)
    }

    fn run(&mut self, shutdown: Arc<AtomicBool>, reload: &AtomicBool) -> Result<UserExitInfo> {
        let (stats_tx, stats_rx) = self.stats_server.channels();
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            if reload.swap(false, Ordering::Relaxed) {
                // SIGHUP: the verdict goes to the log and the metrics.
                let _ = self.reload();
            }
            let mut at = traffic::thread_cpu_ns();
            if self.last_util_at.elapsed() >= SOFTNESS_PERIOD {
                self.refresh_softness();
                at = self.phase_cpu.add("softness", at, self.traffic.read);
            }
            if self.refresh_contract() {
                at = self.phase_cpu.add("contract", at, self.traffic.read);
            }
            if self.last_scan.elapsed() >= CGROUP_SCAN_PERIOD {
                // Always: the statistics name cgroups by path, and a
                // cgroup setting this kernel does not hand over is named
                // when its cgroup is found.
                if self.cgroup_tree_moved() {
                    self.scan_cgroups();
                    self.phase_cpu.count("cgroup_walks");
                }
                at = self.phase_cpu.add("cgroup_scan", at, self.traffic.read);
                self.check_limits();
                self.note_cgroup_run();
                // Groups of threads that have all ended give up their id.
                let used = referenced_homes(&self.skel.maps, &mut self.traffic);
                self.homes.release_unreferenced(&used);
                self.update_status();
                self.last_scan = std::time::Instant::now();
                at = self.phase_cpu.add("samples", at, self.traffic.read);
                if self.home_samples.wanted(std::time::Instant::now()) {
                    self.sample_homes();
                    at = self.phase_cpu.add("stats_samples", at, self.traffic.read);
                }
                self.home_by_memory(std::time::Instant::now());
                self.follow_memory();
                at = self.phase_cpu.add("memory", at, self.traffic.read);
            }
            if let Some((job, decision)) = self.decider.take() {
                self.apply_balance(&job, decision);
                at = self.phase_cpu.add("balancer", at, self.traffic.read);
            }
            if self.last_balance.elapsed() >= self.balance_period
                && !self.balance_rules.is_empty()
                && !self.decider.busy()
            {
                self.balance();
                at = self.phase_cpu.add("balancer", at, self.traffic.read);
            }
            while stats_rx.try_recv().is_ok() {
                stats_tx.send(self.snapshot())?;
            }
            while let Some(reply) = self.metrics.as_ref().and_then(|rx| rx.try_recv().ok()) {
                let _ = reply.send(self.snapshot());
            }
            match self.calls.recv_timeout(SOFTNESS_PERIOD) {
                Ok(call) => {
                    let changes = call.req.changes_homes();
                    let resp = self.handle(call.req, &call.peer);
                    let _ = call.reply.send(resp);
                    if changes {
                        self.save_state();
                        self.update_status();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => bail!("the control socket thread died"),
            }
            self.phase_cpu.add("requests", at, self.traffic.read);
        }
        self.attached.store(false, Ordering::Relaxed);
        self.save_state();
        self.print_counters();
        let _ = self.link.take();
        uei_report!(&self.skel, uei)
    }

    /// Each cgroup's charge rate, from its load and contract: every
    /// CONTRACT_PERIOD, and at once when a cgroup callback changed the
    /// slot table (a cgroup made or removed, a weight or cap written).
    /// True if it ran.
    fn refresh_contract(&mut self) -> bool {
        let cpus = self.machine.cpus.len() as f64;
        let Some(bss) = self.skel.maps.bss_data.as_mut() else {
            return false;
        };
        let moved = self.cgroup_table.refresh(bss, &mut self.traffic);
        if moved {
            self.phase_cpu.count("cgroup_table_copies");
        }
        if !moved && self.last_contract_at.elapsed() < CONTRACT_PERIOD {
            return false;
        }
        let secs = self.last_contract_at.elapsed().as_secs_f64();
        self.last_contract_at = std::time::Instant::now();
        let Some(per_domain) = self.skel.maps.bss_cg_load_data.as_ref() else {
            return false;
        };
        let runnable = self.cgroup_table.loads(per_domain, &mut self.traffic);
        let Some(bss) = self.skel.maps.bss_data.as_mut() else {
            return false;
        };
        let slots = self.cgroup_table.slots();
        let used = slots.len();
        let written = self
            .contract
            .refresh(slots, &mut bss.cg_ctl[..used], &runnable, cpus, secs);
        self.traffic.wrote::<bpf_skel::types::sp_cg_ctl>(written);
        self.refresh_short_homes();
        true
    }

    /// Whether a cgroup was made, removed or renamed since the last call
    /// (the fast path's tracepoints count them): the walk of the tree
    /// is for those alone.
    fn cgroup_tree_moved(&mut self) -> bool {
        let Some(bss) = self.skel.maps.bss_data.as_ref() else {
            return true;
        };
        // SAFETY: an aligned u64 of the mapped .bss, written whole.
        let now = unsafe { std::ptr::read_volatile(&bss.cgroup_tree_changes) };
        std::sync::atomic::fence(Ordering::Acquire);
        self.traffic.read::<u64>(1);
        let moved = self.cgroup_tree_seen != Some(now);
        self.cgroup_tree_seen = Some(now);
        moved
    }

    /// Each cgroup's CPU time, for the statistics: once a second.
    fn note_cgroup_run(&mut self) {
        let Some(per_domain) = self.skel.maps.bss_cg_load_data.as_ref() else {
            return;
        };
        let run = self.cgroup_table.run_ns(per_domain, &mut self.traffic);
        self.contract.note_run(&run);
    }

    /// Which homes' tenants are entitled to more than their CPUs
    /// (softpart_core::home_contract): their tasks then compete by vtime
    /// with other homes' owners. Written only where a flag changed.
    fn refresh_short_homes(&mut self) {
        let Some(bss) = self.skel.maps.bss_data.as_mut() else {
            return;
        };
        let homed: HashMap<u64, u32> = self
            .cgroup_groups
            .iter()
            .filter_map(|(&cgid, label)| Some((cgid, self.homes.find(label)?)))
            .collect();
        let entitled = self
            .contract
            .entitled_by_home(self.cgroup_table.slots(), &homed);
        let ids: Vec<u32> = self.homes.iter().map(|(id, _)| id).collect();
        let demands: Vec<HomeDemand> = self
            .homes
            .iter()
            .map(|(id, home)| HomeDemand {
                cpus: home.cpus.clone(),
                entitled: entitled.get(&id).copied().unwrap_or(0.0),
            })
            .collect();
        let was: Vec<bool> = ids
            .iter()
            .map(|&id| self.short_homes.get(id as usize).copied().unwrap_or(false))
            .collect();
        let mut now = vec![false; self.short_homes.len()];
        for (&id, short) in ids.iter().zip(short_homes(&demands, &was)) {
            if let Some(s) = now.get_mut(id as usize) {
                *s = short;
            }
        }
        for (id, (&is, old)) in now.iter().zip(self.short_homes.iter_mut()).enumerate() {
            if is != *old
                && let Some(flag) = bss.entitled_beyond.get_mut(id)
            {
                *flag = is as u32;
                *old = is;
                self.traffic.wrote::<u32>(1);
                let label = self.homes.get(id as u32).map_or("?", |h| h.label.as_str());
                let total = entitled.get(&(id as u32)).copied().unwrap_or(0.0);
                info!(
                    "home of {label}: {} (its tenants entitled to {total:.2} CPUs)",
                    if is {
                        "entitled beyond its CPUs, its tasks compete by vtime with other homes' owners"
                    } else {
                        "within its CPUs again"
                    }
                );
            }
        }
    }

    /// Per-CPU utilisation from the fast path's busy counters, and for
    /// every home the softness flag the fast path reads at wakeups.
    fn refresh_softness(&mut self) {
        let period = self.last_util_at.elapsed().as_nanos() as u64;
        self.last_util_at = std::time::Instant::now();
        let Some(bss) = self.skel.maps.bss_data.as_mut() else {
            return;
        };
        let n = self.util.len().min(bss.cpu_locals.len());
        for cpu in 0..n {
            let busy = bss.cpu_locals[cpu].busy_ns;
            let delta = busy.saturating_sub(self.last_busy[cpu]);
            self.last_busy[cpu] = busy;
            self.util[cpu] = smooth_util(self.util[cpu], delta, period, 0.5);
        }
        self.traffic.read::<u64>(n);
        let all = mean_util(&self.util, self.machine.cpus.iter());
        let mut written = 0;
        for (id, home) in self.homes.iter() {
            let flag = home
                .softness
                .unwrap_or(self.softness)
                .allowed_first(mean_util(&self.util, home.cpus.iter()), all)
                as u32;
            if let (Some(slot), Some(was)) = (
                bss.allowed_first.get_mut(id as usize),
                self.allowed_written.get_mut(id as usize),
            ) && *was != flag
            {
                *slot = flag;
                *was = flag;
                written += 1;
            }
        }
        // Every home's flag, so that an id given to another home since
        // does not keep a balanced group's; written where it changed.
        let mut steal_now = vec![0u32; self.steal_written.len()];
        for g in self.balancer.groups.values() {
            let over = g.part.and_then(|p| self.balancer.overfull.get(p).copied());
            if let (Some(true), Some(id)) = (over, self.homes.find(&g.label))
                && let Some(slot) = steal_now.get_mut(id as usize)
            {
                *slot = 1;
            }
        }
        for ((slot, was), want) in bss
            .steal_now
            .iter_mut()
            .zip(self.steal_written.iter_mut())
            .zip(steal_now)
        {
            if *was != want {
                *slot = want;
                *was = want;
                written += 1;
            }
        }
        self.traffic.wrote::<u32>(written);
    }

    /// Time charged to tasks on these CPUs since the attachment.
    pub(crate) fn busy_ns(&self, cpus: &BTreeSet<usize>) -> u64 {
        self.skel.maps.bss_data.as_ref().map_or(0, |bss| {
            cpus.iter()
                .filter_map(|&c| bss.cpu_locals.get(c))
                .map(|cc| cc.busy_ns)
                .sum()
        })
    }

    /// One balancing period: read the loads and hand the decision (place
    /// new groups, move at most one) to the balancer's thread.
    fn balance(&mut self) {
        self.last_balance = std::time::Instant::now();
        let mut readings = BTreeMap::new();
        for (cgid, g) in &self.balancer.groups {
            let Some(id) = self.homes.find(&g.label) else {
                continue;
            };
            let per_cpu = self.group_stats.run_and_wait(id);
            self.traffic
                .read::<[u8; group_stats::RUN_AND_WAIT_BYTES]>(per_cpu.len());
            let part_ns = counters::group_part_ns(&per_cpu, &self.parts);
            readings.insert(
                *cgid,
                balancer::Reading {
                    total_ns: part_ns.iter().sum(),
                    wait_ns: per_cpu.iter().map(|g| g.wait_ns).sum(),
                    part_ns,
                },
            );
        }
        let busy: Vec<u64> = self.parts.iter().map(|cpus| self.busy_ns(cpus)).collect();
        let capacity: Vec<usize> = self.parts.iter().map(BTreeSet::len).collect();
        let now = std::time::Instant::now();
        self.read_balanced_memory(now);
        let was_overfull = self.balancer.overfull.clone();
        let job = self.balancer.measure(now, &readings, &busy, &capacity);
        if !self.decider.submit(job) {
            warn!("balancer: its thread is gone; this period decides nothing");
        }
        for (p, (&was, &is)) in was_overfull.iter().zip(&self.balancer.overfull).enumerate() {
            if was != is {
                info!(
                    "balancer: PART-{p} {} (demand {:.2}x its {} CPUs)",
                    if is {
                        "over-full: its groups' waiting tasks may be stolen at once"
                    } else {
                        "has room again: its groups' waiting tasks keep the steal wait"
                    },
                    self.balancer.relative_demand.get(p).copied().unwrap_or(0.0),
                    capacity[p]
                );
            }
        }
    }

    /// The balancer's decision on `job`, made: new groups settle, at most
    /// one moves.
    fn apply_balance(&mut self, job: &balancer::Job, decision: softpart_core::balance::Decision) {
        let now = std::time::Instant::now();
        let actions = self.balancer.actions(&job.ids, decision, now);
        let moves = actions
            .placed
            .iter()
            .map(|&(cgid, p)| (cgid, p, false))
            .chain(actions.moved.map(|(cgid, _, to)| (cgid, to, true)));
        for (cgid, part, is_move) in moves.collect::<Vec<_>>() {
            let Some(label) = self.balancer.groups.get(&cgid).map(|g| g.label.clone()) else {
                continue;
            };
            let cpus = self.parts[part].clone();
            match self.set_cgroup_home(cgid, label.clone(), &cpus, None) {
                Ok(()) => {
                    self.balancer.settle(cgid, part, now, is_move);
                    info!(
                        "balancer: {label} {} PART-{part} ({}), load {:.2}",
                        if is_move { "moves to" } else { "settles in" },
                        cpulist::format(&cpus),
                        self.balancer.groups[&cgid].load
                    );
                }
                Err(e) => warn!("balancer: {label}: {e:#}"),
            }
        }
    }

    /// Gives back the homes an earlier attachment had (see Session).
    fn restore(&mut self, task_homes: Vec<(u32, Home)>, cgroup_homes: Vec<(u64, Home)>) {
        let (nt, nc) = (task_homes.len(), cgroup_homes.len());
        for (cgid, h) in cgroup_homes {
            if let Err(e) = self.set_cgroup_home(cgid, h.label.clone(), &h.cpus, h.softness) {
                warn!("restart: cgroup {}: {e:#}", h.label);
            }
        }
        for (tid, h) in task_homes {
            // Threads that ended while no scheduler was attached.
            if !Path::new(&format!("/proc/{tid}")).exists() {
                continue;
            }
            let label = h.label.clone();
            let applied = self
                .define_home(h.label, &h.cpus, h.softness)
                .and_then(|id| self.set_task_homes(&[tid], id));
            if let Err(e) = applied {
                warn!("restart: thread {tid} ({label}): {e:#}");
            }
        }
        if nt + nc > 0 {
            info!(
                "restart: {nt} thread homes and {nc} cgroup homes given back at uptime {:.2} s",
                uptime_s()
            );
        }
        self.bump_gen();
    }

    /// Every thread's own home, from the fast path's map.
    pub(crate) fn task_home_list(&self) -> Vec<(u32, Home)> {
        let mut task_homes = Vec::new();
        let map = &self.skel.maps.task_homes;
        for key in map.keys() {
            let (Ok(tid), Some(id)) = (<[u8; 4]>::try_from(&key[..]), Self::lookup_u32(map, &key))
            else {
                continue;
            };
            if let Some(h) = self.homes.get(id) {
                task_homes.push((u32::from_ne_bytes(tid), h.clone()));
            }
        }
        task_homes
    }

    /// Keeps the homes set at run time in --state-dir (state.rs).
    fn save_state(&self) {
        let Some(dir) = &self.opts.state_dir else {
            return;
        };
        let tasks: Vec<_> = self
            .task_home_list()
            .into_iter()
            .filter_map(|(tid, h)| Some((tid, state::task_start_time(tid)?, h)))
            .collect();
        let cgroups: Vec<_> = self
            .cgroup_groups
            .iter()
            .filter(|(cgid, _)| self.is_operator_home(**cgid))
            .filter_map(|(cgid, label)| {
                let h = self.homes.get(self.homes.find(label)?)?;
                Some((label.clone(), h.clone(), self.origins.get(cgid).cloned()))
            })
            .collect();
        if let Err(e) = state::save(dir, &tasks, &cgroups) {
            warn!("state: {e:#}");
        }
    }

    /// Ends this attachment, keeping what the next one needs.
    fn into_session(self) -> Session {
        let task_homes = self.task_home_list();
        let cgroup_homes = self
            .cgroup_groups
            .iter()
            .filter(|(cgid, _)| {
                !self.balancer.groups.contains_key(cgid)
                    && !self.memory_homes.given.contains_key(cgid)
            })
            .filter_map(|(&cgid, label)| {
                let h = self.homes.get(self.homes.find(label)?)?;
                Some((cgid, h.clone()))
            })
            .collect::<Vec<_>>();
        let origins = cgroup_homes
            .iter()
            .filter_map(|(cgid, _)| Some((*cgid, self.origins.get(cgid)?.clone())))
            .collect();
        Session {
            calls: self.calls,
            attached: self.attached,
            stats_server: self.stats_server,
            rules: self.rules,
            balance_rules: self.balance_rules,
            explicit_parts: self.explicit_parts,
            task_homes,
            cgroup_homes,
            rule_homes: self.rule_homes,
            origins,
            metrics: self.metrics,
            restarts: self.restarts + 1,
            reloads: self.reloads,
            memory: self.memory,
        }
    }
}

/// Runs `f` at nice -20 (this thread only), then puts the nice value back.
/// Attaching runs the BPF verifier for seconds; after a CPU hotplug it does
/// so under EEVDF against the whole load (12 s in a loaded guest against
/// 1.5 s idle), and every task runs without its home until it is done.
fn at_top_priority<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: plain syscalls on the calling thread (who = 0).
    let before = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    };
    let raised = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -20) } == 0;
    let out = f();
    if raised {
        // SAFETY: as above.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, before) };
    }
    out
}

/// Runs `f` as a SCHED_FIFO thread, then puts SCHED_OTHER back. Kernels
/// without the upstream fix "sched_ext: Fix starvation of scx_enable()
/// under fair-class saturation" (2026; 6.17.13 lacks it)
/// enable a scheduler in the attaching thread, switching every task (this
/// one too) to sched_ext one by one while the tasks not yet switched still
/// run under EEVDF, which always goes first. Attaching again after a CPU
/// hotplug, with the workload running, guest runs saw this thread switched
/// and then never picked again behind EEVDF's CPU hogs: sched_ext stayed
/// "enabling" and the guest hung (docs/reliability.md). sched_ext never
/// switches a real-time task, so as one this thread finishes the switch,
/// as the kernel's own RT helper thread does on newer kernels.
fn as_real_time<T>(f: impl FnOnce() -> T) -> T {
    let fifo = libc::sched_param { sched_priority: 1 };
    // SAFETY: plain syscalls on the calling thread (pid 0) with valid params.
    let raised = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } == 0;
    if !raised {
        warn!(
            "could not attach as a real-time thread ({}): a loaded machine may stall the attachment",
            std::io::Error::last_os_error()
        );
    }
    let out = f();
    if raised {
        let other = libc::sched_param { sched_priority: 0 };
        // SAFETY: as above.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &other) };
    }
    out
}

/// Seconds since boot, as /proc/uptime gives them: log times that line up
/// with the kernel's and with workload logs.
fn uptime_s() -> f64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn join(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Marks a start refused for its config file or options: the exit status
/// is then `EXIT_CONFIG`, which the unit does not restart on (a loop of
/// restarts would not fix the file).
#[derive(Debug)]
struct ConfigRefused;

impl std::fmt::Display for ConfigRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "not starting: the configuration is not usable (exit {EXIT_CONFIG})"
        )
    }
}

/// sysexits.h's EX_CONFIG; the unit's RestartPreventExitStatus.
const EXIT_CONFIG: u8 = 78;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e:#}");
            if e.downcast_ref::<ConfigRefused>().is_some() {
                std::process::ExitCode::from(EXIT_CONFIG)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}

fn run() -> Result<()> {
    let opts = Opts::parse();
    softpart_core::logger::init(if opts.verbose {
        log::LevelFilter::Debug
    } else {
        log::LevelFilter::Info
    })?;
    // libbpf's warnings (the verifier's log when a load fails) always; its
    // debug chatter with --verbose.
    scx_utils::init_libbpf_logging(Some(if opts.verbose {
        libbpf_rs::PrintLevel::Debug
    } else {
        libbpf_rs::PrintLevel::Warn
    }));
    if let Some(path) = &opts.check_config {
        return check_config(path);
    }
    if opts.help_stats {
        let mut out = std::io::stdout();
        stats::server_data().describe_meta(&mut out, None)?;
        writeln!(out)?;
        metrics::describe(&mut out)?;
        return Ok(());
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, shutdown.clone())
            .context("installing the SIGINT/SIGTERM handler")?;
    }
    // SIGHUP (systemctl reload): read the config file again.
    let reload = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, reload.clone())
        .context("installing the SIGHUP handler")?;

    let every = |secs: f64, what: &str| -> Result<Duration> {
        if !(secs.is_finite() && (0.01..=3600.0).contains(&secs)) {
            bail!("--{what} {secs}: give an interval from 0.01 to 3600 seconds");
        }
        Ok(Duration::from_secs_f64(secs))
    };
    if let Some(secs) = opts.monitor {
        let intv = every(secs, "monitor")?;
        let flag = shutdown.clone();
        return stats::monitor(intv, move || flag.load(Ordering::Relaxed));
    }
    if let Some(secs) = opts.stats {
        let intv = every(secs, "stats")?;
        let flag = shutdown.clone();
        std::thread::spawn(move || {
            if let Err(e) = stats::monitor(intv, move || flag.load(Ordering::Relaxed)) {
                warn!("stats: {e:#}");
            }
        });
    }

    let mut open_object = MaybeUninit::uninit();
    let mut session = Session::start(&opts)?;
    loop {
        let mut sched = at_top_priority(|| Scheduler::init(&opts, &mut open_object, session))?;
        sched.status_sent = sched.status_line();
        notify::ready(&sched.status_sent);
        let uei = sched.run(shutdown.clone(), &reload)?;
        if !uei.should_restart() {
            notify::stopping();
            break;
        }
        session = sched.into_session();
        warn!(
            "the kernel asked for a restart (CPU hotplug) at uptime {:.2} s: attaching again",
            uptime_s()
        );
    }
    let _ = std::fs::remove_file(&opts.control_socket);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// intf.h checks that enum sp_stat's XNODE entries follow enum sp_via;
    /// this, that the names scx_softpart prints for them do too.
    #[test]
    fn cross_node_events_sit_where_running_counts_them() {
        let first = bpf_intf::sp_stat_SP_STAT_XNODE_WAKE_HOME as usize;
        let last = bpf_intf::sp_stat_SP_STAT_XNODE_OTHER as usize;
        assert_eq!(EVENT_NAMES[first], "xnode_wake_home");
        assert_eq!(EVENT_NAMES[last], "xnode_other");
        assert_eq!(last - first + 1, bpf_intf::sp_via_SP_NR_VIA as usize);
        assert!(
            EVENT_NAMES[first..=last]
                .iter()
                .all(|n| n.starts_with("xnode_"))
        );
        assert_eq!(
            EVENT_NAMES
                .iter()
                .filter(|n| n.starts_with("xnode_"))
                .count(),
            bpf_intf::sp_via_SP_NR_VIA as usize
        );
    }

    /// Each decision's cause name fits its event: a per-group count by
    /// `enum sp_via` is reported under the cause its event describes.
    #[test]
    fn cross_node_causes_follow_the_events() {
        let first = bpf_intf::sp_stat_SP_STAT_XNODE_WAKE_HOME as usize;
        assert_eq!(
            stats::XNODE_CAUSE_BY_VIA.len(),
            bpf_intf::sp_via_SP_NR_VIA as usize
        );
        for (via, cause) in stats::XNODE_CAUSE_BY_VIA.iter().enumerate() {
            let event = EVENT_NAMES[first + via];
            let expected = match event {
                "xnode_wake_home" | "xnode_return" => "return_wakeup",
                "xnode_wake_away" => "spill_wakeup",
                "xnode_evict" => "evict",
                "xnode_return_slice" => "return_slice_end",
                "xnode_enqueue_idle" | "xnode_queue_own" | "xnode_queue_home" => "return_queued",
                "xnode_queue_steal" => "steal",
                "xnode_rehome" => "balancer",
                "xnode_other" => "other",
                e => panic!("no cause for {e}"),
            };
            assert_eq!(*cause, expected, "{event}");
        }
    }
}
