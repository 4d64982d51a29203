//! The part of the bench that runs inside the guest: for every scenario,
//! policy, repetition and load level it starts the workloads in their
//! cgroups, measures a window with the observer and cpuacct, stops them,
//! and sends the counts to the host.

use crate::balancer_moves;
use crate::callback_costs::{self, Costs};
use crate::memory;
use crate::plan::{
    GroupResult, GuestInfo, Message, Plan, PlannedScenario, RunResult, SchedulerExit,
};
use crate::scenario::{Policy, Scenario};
use crate::watchdog;
use anyhow::{Context, Result, bail};
use softpart_core::cpulist;
use softpart_core::topo::GuestTopo;
use softpart_observer::{Observer, cgroups};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RESULTS_TTY: &str = "/dev/ttyS1";
/// One byte every 2 s while the guest schedules at all (`guest::FREEZE_LIMIT`).
const HEARTBEAT_TTY: &str = "/dev/ttyS2";
const BENCH_CG: &str = "/sys/fs/cgroup/bench";
const ACCT_ROOT: &str = "/acct";
const SCX_STATE: &str = "/sys/kernel/sched_ext/state";
const SCX_OPS: &str = "/sys/kernel/sched_ext/root/ops";
pub const SCHEDULER_BIN: &str = "/softpart/bin/scx_softpart";

struct Channel(fs::File);

impl Channel {
    fn send(&mut self, m: &Message) {
        let line = serde_json::to_string(m).unwrap_or_else(|e| {
            format!("{{\"kind\":\"Error\",\"context\":\"encode\",\"message\":\"{e}\"}}")
        });
        // One write per line: the watchdog (watchdog.rs) writes its own
        // lines on another descriptor of the same tty.
        let _ = self.0.write_all(format!("{line}\n").as_bytes());
    }
}

fn read_trim(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn write(path: impl AsRef<Path>, value: &str) -> Result<()> {
    let path = path.as_ref();
    fs::write(path, value).with_context(|| format!("writing {value:?} to {}", path.display()))
}

fn guest_info() -> GuestInfo {
    let mut nodes = Vec::new();
    for n in 0.. {
        let p = format!("/sys/devices/system/node/node{n}/cpulist");
        if !Path::new(&p).exists() {
            break;
        }
        nodes.push(read_trim(&p));
    }
    let mut sib = std::collections::BTreeSet::new();
    for c in 0.. {
        let p = format!("/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list");
        if !Path::new(&p).exists() {
            break;
        }
        sib.insert(read_trim(&p));
    }
    let kernel = read_trim("/proc/sys/kernel/osrelease");
    GuestInfo {
        kernel,
        cmdline: read_trim("/proc/cmdline"),
        clocksource: read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        nr_cpus: cpulist::parse(&read_trim("/sys/devices/system/cpu/online"))
            .map_or(0, |s| s.len()),
        nodes,
        smt_siblings: {
            let mut v: Vec<String> = sib.into_iter().collect();
            v.sort_by_key(|l| cpulist::parse(l).ok().and_then(|s| s.first().copied()));
            v
        },
    }
}

pub fn main(plan_path: &Path) -> Result<()> {
    let tty = fs::OpenOptions::new()
        .write(true)
        .open(RESULTS_TTY)
        .with_context(|| format!("opening the results channel {RESULTS_TTY}"))?;
    let mut ch = Channel(tty);
    watchdog::start(RESULTS_TTY);
    if let Ok(mut beat) = fs::OpenOptions::new().write(true).open(HEARTBEAT_TTY) {
        std::thread::spawn(move || {
            while beat.write_all(b".").and_then(|_| beat.flush()).is_ok() {
                std::thread::sleep(Duration::from_secs(2));
            }
        });
    }
    let result = run_plan(plan_path, &mut ch);
    if let Err(e) = &result {
        ch.send(&Message::Error {
            context: "agent".into(),
            message: format!("{e:#}"),
        });
    }
    ch.send(&Message::Done);
    result
}

fn run_plan(plan_path: &Path, ch: &mut Channel) -> Result<()> {
    let plan: Plan = serde_json::from_slice(&fs::read(plan_path)?)?;
    ch.send(&Message::Hello(guest_info()));

    prepare_cgroups()?;
    // Per-program run time and count, for the cost of select_cpu.
    write("/proc/sys/kernel/bpf_stats_enabled", "1")?;
    let obs = Observer::start().context("starting the observer")?;
    for ps in &plan.scenarios {
        run_scenario(ps, &obs, ch)?;
        ch.send(&Message::ScenarioDone {
            name: ps.scenario.name.clone(),
        });
    }
    Ok(())
}

/// The controllers the bench's groups have, under every policy: with the
/// cpu controller on, the default scheduler shares CPUs among groups by
/// cpu.weight, as it does on a real host (systemd and container runtimes
/// turn it on), not among tasks; the memory controller counts each group's
/// memory per node (memory.numa_stat) and its NUMA-balancing events. A
/// tree a workload makes below its group gets only what it enables.
const GROUP_CONTROLLERS: &str = "+cpuset +cpu +memory";

fn prepare_cgroups() -> Result<()> {
    write("/sys/fs/cgroup/cgroup.subtree_control", GROUP_CONTROLLERS)?;
    if !Path::new(BENCH_CG).exists() {
        fs::create_dir(BENCH_CG)?;
    }
    write(
        format!("{BENCH_CG}/cgroup.subtree_control"),
        GROUP_CONTROLLERS,
    )?;
    Ok(())
}

/// A group's `cpu.weight`, `cpu.max` and `cpu.idle`, where the scenario
/// gives them.
fn set_cpu_contract(cg: &Path, g: &crate::scenario::Group) -> Result<()> {
    if let Some(w) = g.weight {
        write(cg.join("cpu.weight"), &w.to_string())?;
    }
    if let Some((quota, period)) = g.cpu_max()? {
        let quota = quota.map_or("max".to_string(), |q| q.to_string());
        write(cg.join("cpu.max"), &format!("{quota} {period}"))?;
    }
    if g.idle {
        write(cg.join("cpu.idle"), "1")?;
    }
    Ok(())
}

fn run_scenario(ps: &PlannedScenario, obs: &Observer, ch: &mut Channel) -> Result<()> {
    let sc = &ps.scenario;
    let topo = sc.topo()?;
    for (path, content) in &sc.files {
        if let Some(dir) = Path::new(path).parent() {
            fs::create_dir_all(dir)?;
        }
        write(path, content)?;
    }
    for rep in 0..ps.reps {
        for i in policy_order(ps.policies.len(), rep) {
            let (label, policy) = &ps.policies[i];
            // The uptime lets a boot's console log say what each run cost.
            println!(
                "agent: {} rep {} policy {label} at uptime {}",
                sc.name,
                rep + 1,
                read_trim("/proc/uptime")
                    .split_whitespace()
                    .next()
                    .unwrap_or("?")
            );
            let revived = bring_cpus_online();
            if !revived.is_empty() {
                println!(
                    "agent: brought CPUs {} back online",
                    cpulist::format(&revived)
                );
            }
            let sched = match start_policy(policy) {
                Ok(s) => s,
                Err(e) => {
                    ch.send(&Message::Error {
                        context: format!("{}: starting {label}", sc.name),
                        message: format!("{e:#}"),
                    });
                    continue;
                }
            };
            for &load in &sc.loads {
                match run_once(sc, &topo, label, policy, load, rep, obs) {
                    Ok(r) => ch.send(&Message::Run(r)),
                    Err(e) => ch.send(&Message::Error {
                        context: format!("{}: {label} load {load} rep {rep}", sc.name),
                        message: format!("{e:#}"),
                    }),
                }
            }
            if let Some(s) = sched {
                ch.send(&Message::SchedulerStopped(stop_scheduler(
                    s, &sc.name, label,
                )));
            }
        }
    }
    Ok(())
}

/// The order of a scenario's policies in repetition `rep`: each repetition
/// starts one further along, so over `n` repetitions each policy runs first
/// once. The policy run first in a boot has read lowest in a balancer cell
/// whichever build it was (docs/results/scale.md); rotating spreads such a
/// position effect over every policy instead of charging it to one.
fn policy_order(n: usize, rep: u32) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| (i + rep as usize) % n)
}

/// Every run starts with every CPU online: a workload that takes CPUs
/// offline (the soak's hotplug loop) may be stopped between its offline
/// and online steps, and the next run's homes would then name missing
/// CPUs. Done before the scheduler starts, whose attachment a CPU coming
/// online would end. Returns the CPUs it brought back.
fn bring_cpus_online() -> std::collections::BTreeSet<usize> {
    // The kernel's list of CPUs possible but not online.
    let offline = cpulist::parse(&read_trim("/sys/devices/system/cpu/offline")).unwrap_or_default();
    offline
        .into_iter()
        .filter(|cpu| fs::write(format!("/sys/devices/system/cpu/cpu{cpu}/online"), "1").is_ok())
        .collect()
}

struct RunningScheduler {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

fn start_policy(policy: &Policy) -> Result<Option<RunningScheduler>> {
    let argv: Vec<String> = match policy {
        Policy::Eevdf | Policy::Pinned => return Ok(None),
        Policy::Softpart(args) | Policy::SoftpartNoHomes(args) => {
            std::iter::once(SCHEDULER_BIN.to_string())
                .chain(args.iter().cloned())
                .collect()
        }
        Policy::External(cmd) | Policy::ExternalHomes(cmd) => cmd.clone(),
    };
    if read_trim(SCX_STATE) != "disabled" {
        bail!("sched_ext is {:?} before start", read_trim(SCX_STATE));
    }
    let stamp = crate::guest::unique_stamp();
    let out = PathBuf::from(format!("/tmp/sched-{stamp}.out"));
    let err = PathBuf::from(format!("/tmp/sched-{stamp}.err"));
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out)?)
        .stderr(fs::File::create(&err)?)
        .spawn()
        .with_context(|| format!("spawning {argv:?}"))?;
    let started = Instant::now();
    while read_trim(SCX_STATE) != "enabled" {
        if let Some(st) = child.try_wait()? {
            bail!(
                "{argv:?} exited ({st}) before attaching: {}",
                tail(&err, 6000)
            );
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            bail!("{argv:?} did not attach within 120 s: {}", tail(&err, 2000));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "agent: {} attached after {:.1}s",
        read_trim(SCX_OPS),
        started.elapsed().as_secs_f64()
    );
    Ok(Some(RunningScheduler { child, out, err }))
}

fn tail(path: &Path, max: usize) -> String {
    let s = fs::read_to_string(path).unwrap_or_default();
    let start = s.len().saturating_sub(max);
    let start = (start..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    s[start..].to_string()
}

fn stop_scheduler(mut s: RunningScheduler, scenario: &str, policy: &str) -> SchedulerExit {
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGINT) };
    let started = Instant::now();
    let mut status = None;
    while started.elapsed() < Duration::from_secs(30) {
        if let Ok(Some(st)) = s.child.try_wait() {
            status = Some(st);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status_text = match status {
        Some(st) => st.to_string(),
        None => {
            let _ = s.child.kill();
            let _ = s.child.wait();
            "did not exit within 30 s of SIGINT; killed".into()
        }
    };
    let mut disabled = false;
    for _ in 0..100 {
        if read_trim(SCX_STATE) == "disabled" {
            disabled = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    SchedulerExit {
        scenario: scenario.into(),
        policy: policy.into(),
        attached: true,
        clean: status.is_some_and(|st| st.success()) && disabled,
        status: status_text,
        stdout_tail: tail(&s.out, 4000),
        stderr_tail: tail(&s.err, 4000),
    }
}

fn read_percpu(path: &Path) -> Result<Vec<u64>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.split_whitespace()
        .map(|v| {
            v.parse::<u64>()
                .with_context(|| format!("{}: {v:?}", path.display()))
        })
        .collect()
}

/// (time on CPU, run_delay) of every thread in a cgroup, by tid, from
/// /proc/TID/schedstat.
fn schedstat_delays(cg: &Path) -> BTreeMap<u32, (u64, u64)> {
    let mut out = BTreeMap::new();
    let Ok(text) = fs::read_to_string(cg.join("cgroup.threads")) else {
        return out;
    };
    for tid in text
        .split_whitespace()
        .filter_map(|t| t.parse::<u32>().ok())
    {
        if let Some(times) = fs::read_to_string(format!("/proc/{tid}/schedstat"))
            .ok()
            .and_then(|st| softpart_observer::counters::parse_schedstat(&st))
        {
            out.insert(tid, times);
        }
    }
    out
}

/// Growth between two reads; threads that appeared count from zero, threads
/// that left are not counted (their last waits are lost to both reads).
fn delay_growth(before: &BTreeMap<u32, (u64, u64)>, after: &BTreeMap<u32, (u64, u64)>) -> u64 {
    after
        .iter()
        .map(|(tid, (_, d))| d.saturating_sub(before.get(tid).map_or(0, |b| b.1)))
        .sum()
}

/// Threads present at both reads that waited to run and never ran between
/// them: stalled. A thread that slept throughout did not wait.
fn stalled_threads(
    before: &BTreeMap<u32, (u64, u64)>,
    after: &BTreeMap<u32, (u64, u64)>,
) -> Vec<u32> {
    after
        .iter()
        .filter_map(|(tid, &(exec, delay))| {
            let &(exec0, delay0) = before.get(tid)?;
            (exec == exec0 && delay > delay0).then_some(*tid)
        })
        .collect()
}

pub const CLI_BIN: &str = "/softpart/bin/softpart";

/// Gives a cgroup its home through the CLI, as an operator would. A CPU
/// coming back at the end of a hotplug test can restart the scheduler just
/// as the next scenario starts; the CLI then refuses with "attaching again"
/// and asks to be retried, which this does for up to ten seconds.
fn give_home(cg: &Path, home: &std::collections::BTreeSet<usize>) -> Result<()> {
    const TRIES: u32 = 20;
    for attempt in 1..=TRIES {
        let out = Command::new(CLI_BIN)
            .args(["prefer", "--cgroup"])
            .arg(cg)
            .args(["--cpus", &cpulist::format(home)])
            .output()
            .context("running softpart prefer")?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !stderr.contains("attaching again") || attempt == TRIES {
            bail!(
                "softpart prefer --cgroup {} failed (try {attempt}): {stderr}",
                cg.display()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    unreachable!("the last try returns or bails")
}

fn run_probe(cmd: &str) -> (String, i32, String) {
    match Command::new("/bin/sh").arg("-c").arg(cmd).output() {
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).to_string();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            (cmd.to_string(), out.status.code().unwrap_or(-1), text)
        }
        Err(e) => (cmd.to_string(), -1, e.to_string()),
    }
}

struct Workload {
    name: String,
    cg: PathBuf,
    acct: PathBuf,
    child: Child,
    err: PathBuf,
}

/// Removes a cgroup and every cgroup below it (a workload may have made
/// some), retrying while their tasks exit.
fn remove_cgroup(path: &Path) {
    if let Ok(entries) = fs::read_dir(path) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = fs::write(e.path().join("cgroup.kill"), "1");
                remove_cgroup(&e.path());
            }
        }
    }
    for _ in 0..200 {
        match fs::remove_dir(path) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(Duration::from_millis(25)),
        }
    }
    eprintln!("agent: could not remove {}", path.display());
}

fn run_once(
    sc: &Scenario,
    topo: &GuestTopo,
    label: &str,
    policy: &Policy,
    load: u32,
    rep: u32,
    obs: &Observer,
) -> Result<RunResult> {
    let mut workloads: Vec<Workload> = Vec::new();
    // Parent groups' cgroups, outermost first: created before their
    // children, removed after them.
    let mut parents: Vec<PathBuf> = Vec::new();
    let result = (|| -> Result<RunResult> {
        obs.forget_groups()
            .context("emptying the observer's group map")?;
        for g in sc.groups.iter().filter(|g| sc.is_parent(g)) {
            let cg = PathBuf::from(format!("{BENCH_CG}/{}", sc.cgroup_path(g)));
            remove_cgroup(&cg);
            fs::create_dir(&cg).with_context(|| format!("creating {}", cg.display()))?;
            parents.push(cg.clone());
            set_cpu_contract(&cg, g)?;
            write(cg.join("cgroup.subtree_control"), GROUP_CONTROLLERS)?;
        }
        for g in sc.leaves() {
            let cg = PathBuf::from(format!("{BENCH_CG}/{}", sc.cgroup_path(g)));
            let acct = PathBuf::from(format!("{ACCT_ROOT}/{}", g.name));
            remove_cgroup(&cg);
            remove_cgroup(&acct);
            fs::create_dir(&cg).with_context(|| format!("creating {}", cg.display()))?;
            fs::create_dir(&acct).with_context(|| format!("creating {}", acct.display()))?;
            let pin = match (policy, sc.home_cpus(g, topo)?, &g.cpuset) {
                (_, _, Some(c)) => Some(c.clone()),
                (Policy::Pinned, Some(home), None) => Some(cpulist::format(&home)),
                _ => None,
            };
            if let Some(cpus) = pin {
                write(cg.join("cpuset.cpus"), &cpus)?;
            }
            set_cpu_contract(&cg, g)?;
            // SoftpartNoHomes: deliberately none.
            if let (Policy::Softpart(_) | Policy::ExternalHomes(_), Some(home)) =
                (policy, sc.home_cpus(g, topo)?)
            {
                give_home(&cg, &home)?;
            }
            let cmd = sc.command_for(g, load, topo);
            let err = PathBuf::from(format!("/tmp/{}.err", g.name));
            let script = format!(
                "echo $$ > {}/cgroup.procs && echo $$ > {}/tasks && exec {cmd}",
                cg.display(),
                acct.display()
            );
            let child = Command::new("/bin/sh")
                .arg("-c")
                .arg(&script)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(fs::File::create(&err)?)
                .process_group(0)
                .spawn()
                .with_context(|| format!("starting group {}: {cmd}", g.name))?;
            workloads.push(Workload {
                name: g.name.clone(),
                cg,
                acct,
                child,
                err,
            });
        }
        std::thread::sleep(Duration::from_secs_f64(sc.warmup_s));
        // The slower reads (every thread's schedstat, the BPF program
        // statistics) bracket the window from outside, so that cpuacct and
        // the observer are read back to back and their windows differ only
        // by the time one read takes; the cpuacct window is timed on its
        // own all the same (a busy TCG guest can stall any read).
        let sched0: Vec<_> = workloads.iter().map(|w| schedstat_delays(&w.cg)).collect();
        let progs0 = Costs::read();
        let progs0_at = Instant::now();
        let cgids: Vec<u64> = workloads
            .iter()
            .map(|w| cgroups::id_of(&w.cg))
            .collect::<std::io::Result<_>>()?;
        let realtime = softpart_observer::RealtimeReads::start();
        let window_start = Instant::now();
        let acct0_ns = softpart_observer::monotonic_ns();
        let acct0: Vec<Vec<u64>> = workloads
            .iter()
            .map(|w| read_percpu(&w.acct.join("cpuacct.usage_percpu")))
            .collect::<Result<_>>()?;
        let window_probe = sc
            .window_probe()
            .map(|cmd| std::thread::spawn(move || run_probe(&cmd)));
        let vmstat0 = memory::numa_vmstat();
        let s0 = obs.snapshot_of(&cgids)?;
        std::thread::sleep(Duration::from_secs_f64(sc.duration_s));
        let s1 = obs.snapshot_of(&cgids)?;
        let acct1: Vec<Vec<u64>> = workloads
            .iter()
            .map(|w| read_percpu(&w.acct.join("cpuacct.usage_percpu")))
            .collect::<Result<_>>()?;
        let acct1_ns = softpart_observer::monotonic_ns();
        drop(realtime);
        let vmstat = memory::growth(&vmstat0, &memory::numa_vmstat());
        let progs1 = Costs::read();
        let progs_s = progs0_at.elapsed().as_secs_f64();
        let progs = progs0.since(&progs1);
        let sched1: Vec<_> = workloads.iter().map(|w| schedstat_delays(&w.cg)).collect();
        let window = s1.since(&s0);
        if s1.groups_full > s0.groups_full {
            bail!(
                "the observer's group map ({} cgroups) was full during the window: \
                 some groups' runs and waits were not counted",
                softpart_observer::MAX_GROUPS
            );
        }

        let mut probes: Vec<_> = window_probe
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| (String::new(), -1, "window probe panicked".into()))
            })
            .collect();
        probes.extend(sc.probe_commands().iter().map(|p| run_probe(p)));
        if sc.balancer_moves
            && let Some(v) = balancer_moves::stat()
        {
            let since = window_start.elapsed().as_secs_f64();
            probes.push((
                "softpart stat --json (balancer moves against the window)".to_string(),
                0,
                balancer_moves::figures(&v, since),
            ));
        }
        if sc.callback_costs {
            probes.push((
                "BPF program statistics around the window (callback costs)".to_string(),
                0,
                callback_costs::figures(&progs, progs_s),
            ));
        }
        let mut early_exits = Vec::new();
        for w in workloads.iter_mut() {
            if let Some(st) = w.child.try_wait()? {
                early_exits.push(format!(
                    "{} exited early ({st}): {}",
                    w.name,
                    tail(&w.err, 500)
                ));
            }
        }
        let mut groups = BTreeMap::new();
        for (i, w) in workloads.iter().enumerate() {
            let id = cgroups::id_of(&w.cg)?;
            let counters = window.groups.get(&id).cloned().unwrap_or_default();
            let cpuacct_ns = acct1[i]
                .iter()
                .zip(acct0[i].iter().chain(std::iter::repeat(&0)))
                .map(|(b, a)| b.saturating_sub(*a))
                .collect();
            groups.insert(
                w.name.clone(),
                GroupResult {
                    counters,
                    cpuacct_ns,
                    schedstat_delay_ns: delay_growth(&sched0[i], &sched1[i]),
                    threads: sched1[i].len(),
                    threads_at_start: sched0[i].len(),
                    stalled_threads: stalled_threads(&sched0[i], &sched1[i]),
                    memory: memory::group_memory(&w.cg),
                },
            );
        }
        Ok(RunResult {
            scenario: sc.name.clone(),
            policy: label.to_string(),
            load,
            rep,
            wall_ns: window.wall_ns,
            cpuacct_wall_ns: acct1_ns.saturating_sub(acct0_ns),
            snapshot_read_ns: window.read_ns,
            snapshot_read_on_cpu_ns: window.read_on_cpu_ns,
            snapshot_read_runnable_ns: window.read_runnable_ns,
            groups,
            cpus: window.cpus,
            sched_ext_state: read_trim(SCX_STATE),
            sched_ext_ops: read_trim(SCX_OPS),
            early_exits,
            probes,
            select_cpu: progs.select_cpu(),
            vmstat,
        })
    })();

    // Every group killed before any is waited for: a task of one group
    // that cannot run (behind another group's RT task) must not keep the
    // others alive.
    for w in workloads.iter_mut() {
        let _ = write(w.cg.join("cgroup.kill"), "1");
        let _ = w.child.kill();
    }
    for w in workloads.iter_mut() {
        let _ = w.child.wait();
    }
    for w in &workloads {
        remove_cgroup(&w.cg);
        remove_cgroup(&w.acct);
    }
    for cg in parents.iter().rev() {
        remove_cgroup(cg);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::policy_order;

    #[test]
    fn each_policy_runs_first_once_over_as_many_repetitions() {
        let n = 3usize;
        let firsts: Vec<usize> = (0..n)
            .map(|rep| policy_order(n, rep as u32).next().unwrap())
            .collect();
        assert_eq!(firsts, vec![0, 1, 2]);
        for rep in 0..5 {
            let mut seen: Vec<usize> = policy_order(n, rep).collect();
            seen.sort_unstable();
            assert_eq!(seen, vec![0, 1, 2], "rep {rep} runs every policy once");
        }
        assert_eq!(policy_order(0, 2).count(), 0);
    }
}
