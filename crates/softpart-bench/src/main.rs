//! softpart-bench: runs scenarios in a QEMU guest under several scheduling
//! policies in one boot, and reports what each scheduler decided.

mod agent;
mod balancer_moves;
mod callback_costs;
mod checks;
mod cri;
mod freeze;
mod guest;
mod memory;
mod phase;
mod plan;
mod plot;
mod reaction;
mod scenario;
mod summary;
mod table;
mod watchdog;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use plan::{GuestInfo, Message, Plan, PlannedScenario, RunResult};
use scenario::{Policy, Scenario};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Run softpart's scenarios in a QEMU guest and compare scheduling policies.
///
/// Every policy of a scenario runs in the same guest boot, in turn, so their
/// figures compare. Figures are what the guest's scheduler decided (where
/// each group ran, CPU time granted, run delay, migrations), measured by the
/// observer and cross-checked with cpuacct; guest throughput is not
/// reported (QEMU's vCPUs share the host's cores).
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run scenario files, print a summary per scenario (--full: one
    /// table per figure) and write the results and every table.
    Run(RunOpts),
    /// Run the guest tests (scheduler health, observer validation) and
    /// print one line per test and a "N passed, N failed" summary.
    Test(TestOpts),
    /// Print the summary of a results file written by `run` (with
    /// --full, every table).
    Report {
        /// results/<scenario>.json
        results: PathBuf,
        /// Every figure's table instead of the summary.
        #[arg(long)]
        full: bool,
    },
    /// Draw a results file's summary figures against load (SVG, written
    /// beside it as <scenario>.svg).
    Plot {
        /// results/<scenario>.json, one or more.
        #[arg(required = true)]
        results: Vec<PathBuf>,
    },
    /// A workload: spinning threads in a homed group measure how fast it
    /// spills when the home saturates and returns when load drops (run as
    /// a scenario group's command; see scenarios/reaction.toml).
    Reaction(reaction::ReactionOpts),
    /// A workload: CPU-bound threads that double after a while, in a
    /// balanced cgroup; reports how long the group balancer took to settle
    /// again (see scenarios/experiments/balance-phase.toml).
    Phase(phase::PhaseOpts),
    /// A CRI client, for a guest test: run, stop and remove pods through
    /// containerd as the kubelet does.
    Cri(cri::CriOpts),
    /// (inside the guest) Execute a plan; started by the guest's init.
    #[command(hide = true)]
    Agent { plan: PathBuf },
}

#[derive(Debug, clap::Args)]
struct RunOpts {
    /// Scenario files (TOML); see scenarios/.
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    /// Policies, comma-separated, overriding the scenario's: eevdf, pinned,
    /// softpart[:ARGS], softpart-nohome[:ARGS] (scx_softpart with no homes
    /// given), external:COMMAND [ARGS] (another sched_ext scheduler),
    /// external-homes:COMMAND [ARGS] (another scx_softpart build, e.g.
    /// from scripts/build-rev.sh, given the groups' homes as softpart is).
    #[arg(long, value_delimiter = ',')]
    policies: Option<Vec<String>>,
    /// Repetitions per cell, overriding the scenario's.
    #[arg(long)]
    reps: Option<u32>,
    /// Measured seconds per run, overriding the scenario's.
    #[arg(long)]
    duration: Option<f64>,
    /// Loads, comma-separated, overriding the scenario's (each fills the
    /// `{load}` of its commands): to re-run some rows of a table.
    #[arg(long, value_delimiter = ',')]
    loads: Option<Vec<u32>>,
    /// Boot this guest kernel for every scenario, overriding the scenario
    /// files' `kernel` and scripts/versions.sh's: a Debian trixie-backports
    /// package name, e.g. linux-image-7.3.4+deb13-amd64.
    #[arg(long, value_parser = scenario::parse_kernel_pkg)]
    kernel: Option<String>,
    /// Add this parameter to the guest kernel's command line for every
    /// scenario, replacing the scenario files' `guest_args` (repeat for
    /// several), e.g. --guest-arg idle=poll.
    #[arg(long = "guest-arg", value_parser = scenario::parse_guest_arg)]
    guest_args: Vec<String>,
    /// Where to write the JSON results and tables.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Print every figure's table instead of the summary (the tables are
    /// written to <scenario>.txt either way).
    #[arg(long)]
    full: bool,
}

#[derive(Debug, clap::Args)]
struct TestOpts {
    /// Where to keep the guest's logs.
    #[arg(long, default_value = "results/guest-tests")]
    out: PathBuf,

    /// Run only these scenarios (comma-separated names), and only the
    /// tests that read them: for working on one test.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Agent { plan } => agent::main(&plan),
        Cmd::Run(o) => run(o),
        Cmd::Test(o) => checks::run_guest_tests(&o.out, &o.only),
        Cmd::Report { results, full } => report(&results, full),
        Cmd::Plot { results } => {
            for path in &results {
                let svg = plot_file(path)?;
                eprintln!("softpart-bench: wrote {}", svg.display());
            }
            Ok(())
        }
        Cmd::Reaction(o) => reaction::main(o),
        Cmd::Phase(o) => phase::main(o),
        Cmd::Cri(o) => cri::main(o),
    }
}

fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Builds the plan for scenarios sharing one topology, applying overrides.
pub fn plan_for(
    scenarios: &[Scenario],
    policies: Option<&[String]>,
    reps: Option<u32>,
) -> Result<Plan> {
    let mut planned = Vec::new();
    for sc in scenarios {
        let labels: Vec<String> = policies.map(|p| p.to_vec()).unwrap_or(sc.policies.clone());
        let policies = labels
            .iter()
            .map(|l| Ok((l.clone(), Policy::parse(l)?)))
            .collect::<Result<Vec<_>>>()?;
        let reps = reps.unwrap_or(sc.reps);
        if reps == 0 {
            bail!("--reps 0: need at least one repetition");
        }
        planned.push(PlannedScenario {
            scenario: sc.clone(),
            policies,
            reps,
        });
    }
    Ok(Plan { scenarios: planned })
}

/// A generous bound on how long a plan takes in the guest.
pub fn plan_timeout(plan: &Plan) -> Duration {
    let mut secs = 120.0;
    for ps in &plan.scenarios {
        let sc = &ps.scenario;
        let per_run = sc.warmup_s + sc.duration_s + 5.0;
        let n = ps.reps as f64 * ps.policies.len() as f64;
        secs += n * (sc.loads.len() as f64 * per_run + 30.0);
    }
    Duration::from_secs_f64(secs * 3.0)
}

/// How long the guest may stay silent: between two result lines the
/// agent starts a scheduler (the verifier takes seconds under TCG), runs
/// one load and its probes, and stops the scheduler (at most 30 s).
pub fn plan_silence_limit(plan: &Plan) -> Duration {
    let longest = plan
        .scenarios
        .iter()
        .map(|ps| ps.scenario.warmup_s + ps.scenario.duration_s)
        .fold(0.0, f64::max);
    Duration::from_secs_f64(3.0 * (longest + 60.0) + 300.0)
}

pub struct GuestRun {
    pub info: Option<GuestInfo>,
    pub runs: Vec<RunResult>,
    pub messages: Vec<Message>,
    pub problems: Vec<String>,
    pub console_path: PathBuf,
    pub elapsed: Duration,
    /// Why the guest was booted again part way (see `boot`), if it was.
    pub restarted: Option<String>,
}

/// Boots one guest for a plan whose scenarios share a topology. If the
/// emulator, not the kernel or the scheduler, killed it
/// (`guest::emulator_fault`), it boots once more and runs the rest of the
/// plan from the scenario that was cut short; the scenarios already
/// reported keep their results. The first boot's console log and results
/// are kept beside the second's with a `-before-restart` suffix, and
/// `restarted` says what happened. A second fault is reported, not
/// retried; so is anything else that stops a guest (a freeze, a hung task,
/// a stall), which is never a reason to boot again.
pub fn boot(plan: &Plan, workdir: &Path) -> Result<GuestRun> {
    let first = boot_once(plan, workdir)?;
    let log = std::fs::read_to_string(&first.console_path).unwrap_or_default();
    let finished = first.messages.iter().any(|m| matches!(m, Message::Done));
    let (Some(fault), false) = (guest::emulator_fault(&log), finished) else {
        return Ok(first);
    };
    let (kept, rest) = resume_point(plan, &first.messages);
    let Some(cut_short) = rest.scenarios.first() else {
        return Ok(first);
    };
    let cut_short = cut_short.scenario.name.clone();
    let mut kept_log = String::new();
    for name in ["console.log", "results.jsonl", "heartbeat.log"] {
        let (stem, ext) = name.split_once('.').unwrap_or((name, ""));
        let to = workdir.join(format!("{stem}-before-restart.{ext}"));
        if std::fs::rename(workdir.join(name), &to).is_ok() && name == "console.log" {
            kept_log = to.display().to_string();
        }
    }
    let restarted = format!(
        "the emulator killed the guest ({fault}); booted again for the rest of the plan \
         from scenario {cut_short} (first console log: {kept_log})"
    );
    eprintln!("softpart-bench: {restarted}");
    // What the first boot found before the fault still counts.
    let before_fault: String = log
        .lines()
        .take_while(|l| !l.contains("Oops: int3:"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut problems = guest::scan_kernel_log(&before_fault);
    problems.extend(message_problems(&kept));
    let second = boot_once(&rest, workdir)?;
    problems.extend(second.problems);
    let mut runs: Vec<RunResult> = kept
        .iter()
        .filter_map(|m| match m {
            Message::Run(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    runs.extend(second.runs);
    let mut messages = kept;
    messages.extend(second.messages);
    Ok(GuestRun {
        info: first.info.or(second.info),
        runs,
        messages,
        problems,
        console_path: second.console_path,
        elapsed: first.elapsed + second.elapsed,
        restarted: Some(restarted),
    })
}

/// Splits a cut-short boot: the messages of the scenarios it finished
/// (they arrive in order, so everything after the last `ScenarioDone`
/// belongs to the scenario that was cut short), and the plan still to run.
fn resume_point(plan: &Plan, messages: &[Message]) -> (Vec<Message>, Plan) {
    let upto = messages
        .iter()
        .rposition(|m| matches!(m, Message::ScenarioDone { .. }))
        .map_or(0, |i| i + 1);
    let kept = messages[..upto].to_vec();
    let done: Vec<&str> = kept
        .iter()
        .filter_map(|m| match m {
            Message::ScenarioDone { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let rest = Plan {
        scenarios: plan
            .scenarios
            .iter()
            .filter(|ps| !done.contains(&ps.scenario.name.as_str()))
            .cloned()
            .collect(),
    };
    (kept, rest)
}

/// Errors the agent reported, as problems.
fn message_problems(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Error { context, message } => Some(format!("{context}: {message}")),
            _ => None,
        })
        .collect()
}

fn boot_once(plan: &Plan, workdir: &Path) -> Result<GuestRun> {
    let topo = plan
        .scenarios
        .first()
        .context("empty plan")?
        .scenario
        .topo()?;
    let extra_bins = plan
        .scenarios
        .iter()
        .flat_map(|ps| ps.policies.iter())
        .filter_map(|(_, p)| match p {
            Policy::External(cmd) | Policy::ExternalHomes(cmd) => cmd.first().cloned(),
            _ => None,
        })
        .collect();
    std::fs::create_dir_all(workdir)?;
    let guest = guest::Guest {
        topo,
        kernel: guest::kernel(plan.scenarios[0].scenario.kernel.as_deref())?,
        extra_args: plan.scenarios[0].scenario.guest_args.clone(),
        extra_bins,
        workdir: std::fs::canonicalize(workdir)?,
        timeout: plan_timeout(plan),
        silence_limit: plan_silence_limit(plan),
    };
    let out = guest.run(plan)?;
    let mut info = None;
    let mut runs = Vec::new();
    let mut problems = out.problems;
    problems.extend(message_problems(&out.messages));
    for m in &out.messages {
        match m {
            Message::Hello(i) => info = Some(i.clone()),
            Message::Run(r) => runs.push(r.clone()),
            _ => {}
        }
    }
    Ok(GuestRun {
        info,
        runs,
        messages: out.messages,
        problems,
        console_path: out.console_path,
        elapsed: out.elapsed,
        restarted: None,
    })
}

pub fn header(sc: &Scenario, info: Option<&GuestInfo>, reps: u32) -> String {
    let (kernel, nodes, smt) = match info {
        Some(i) => (
            i.kernel.clone(),
            i.nodes.join(" | "),
            i.smt_siblings.join(" "),
        ),
        None => ("?".into(), "?".into(), "?".into()),
    };
    let clock = match info.map(|i| i.clocksource.as_str()) {
        Some(c) if !c.is_empty() => format!(", clocksource {c}"),
        _ => String::new(),
    };
    // Extra guest parameters change what the figures mean (idle=poll
    // removes the halted vCPU's wake-up), so the header names them, as
    // the guest itself reported its command line.
    let args = if sc.guest_args.is_empty() {
        String::new()
    } else {
        let seen = info.map_or("?", |i| i.cmdline.as_str());
        format!("\nguest kernel command line: {seen}")
    };
    format!(
        "{} — {}\nkernel {kernel}, guest topology {} (NUMA nodes: {nodes}; SMT siblings: {smt}), QEMU TCG{clock}{args}\n{}, {} reps x {} s per cell (after {} s warm-up); cells: median [min-max]",
        sc.name,
        sc.description,
        sc.topology,
        now_utc(),
        reps,
        sc.duration_s,
        sc.warmup_s
    )
}

#[derive(serde::Deserialize)]
struct SavedResults {
    scenario: Scenario,
    guest: Option<GuestInfo>,
    policies: Vec<String>,
    runs: Vec<RunResult>,
    header: Option<String>,
}

/// A results file as `run` wrote it, with its cells and header.
fn load_results(path: &Path) -> Result<(SavedResults, Vec<table::Cell>, String)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let saved: SavedResults =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let sc = &saved.scenario;
    let runs: Vec<&RunResult> = saved.runs.iter().collect();
    let cells = table::cells(&runs, sc, &sc.topo()?, &saved.policies)?;
    let reps = saved.runs.iter().map(|r| r.rep + 1).max().unwrap_or(0);
    let header = saved
        .header
        .clone()
        .unwrap_or_else(|| header(sc, saved.guest.as_ref(), reps));
    Ok((saved, cells, header))
}

fn report(path: &Path, full: bool) -> Result<()> {
    let (saved, cells, header) = load_results(path)?;
    let sc = &saved.scenario;
    if full {
        print!("{}", table::render(sc, &saved.policies, &cells, &header));
    } else {
        print!("{}", summary::render(sc, &saved.policies, &cells, &header));
    }
    Ok(())
}

/// Writes <results>.svg beside a results file; returns its path.
fn plot_file(path: &Path) -> Result<PathBuf> {
    let (saved, cells, header) = load_results(path)?;
    let svg = plot::svg(&saved.scenario, &saved.policies, &cells, &header)?;
    let out = path.with_extension("svg");
    std::fs::write(&out, svg).with_context(|| format!("writing {}", out.display()))?;
    Ok(out)
}

/// One guest boot per topology, kernel and guest kernel parameters, in
/// the order the scenarios first name them; each boot runs every scenario
/// that shares all three.
fn boot_groups(scenarios: &[Scenario]) -> Vec<Vec<Scenario>> {
    let mut groups: Vec<Vec<Scenario>> = Vec::new();
    for sc in scenarios {
        match groups.iter_mut().find(|g| {
            g[0].topology == sc.topology
                && g[0].kernel == sc.kernel
                && g[0].guest_args == sc.guest_args
        }) {
            Some(g) => g.push(sc.clone()),
            None => groups.push(vec![sc.clone()]),
        }
    }
    groups
}

/// The directory a boot's logs go to: the topology, then the kernel and
/// the extra guest parameters when the scenario names them (both checked
/// to hold no path separators).
fn guest_workdir_name(sc: &Scenario) -> String {
    let mut name = format!("guest-{}", sc.topology);
    if let Some(k) = &sc.kernel {
        name += &format!("-{}", k.trim_start_matches("linux-image-"));
    }
    for a in &sc.guest_args {
        name += &format!("-{a}");
    }
    name
}

fn run(o: RunOpts) -> Result<()> {
    let mut scenarios = Vec::new();
    for p in &o.scenarios {
        let mut sc = Scenario::load(p)?;
        if let Some(d) = o.duration {
            sc.duration_s = d;
            sc.validate().context("--duration")?;
        }
        if let Some(l) = &o.loads {
            sc.loads = l.clone();
            sc.validate().context("--loads")?;
        }
        if let Some(k) = &o.kernel {
            sc.kernel = Some(k.clone());
        }
        if !o.guest_args.is_empty() {
            sc.guest_args = o.guest_args.clone();
        }
        scenarios.push(sc);
    }
    std::fs::create_dir_all(&o.out)?;
    let mut failed = false;
    for group in boot_groups(&scenarios) {
        let topo = group[0].topology.clone();
        let plan = plan_for(&group, o.policies.as_deref(), o.reps)?;
        let workdir = o.out.join(guest_workdir_name(&group[0]));
        eprintln!(
            "softpart-bench: booting a {topo} guest for {} (timeout {:.0} s)",
            group
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            plan_timeout(&plan).as_secs_f64()
        );
        let gr = boot(&plan, &workdir)?;
        eprintln!(
            "softpart-bench: guest ran {:.0} s",
            gr.elapsed.as_secs_f64()
        );
        for ps in &plan.scenarios {
            let sc = &ps.scenario;
            let labels: Vec<String> = ps.policies.iter().map(|(l, _)| l.clone()).collect();
            let runs: Vec<&RunResult> = gr.runs.iter().filter(|r| r.scenario == sc.name).collect();
            let cells = table::cells(&runs, sc, &sc.topo()?, &labels)?;
            let head = header(sc, gr.info.as_ref(), ps.reps);
            let text = table::render(sc, &labels, &cells, &head);
            if o.full {
                println!("{text}");
            } else {
                println!("{}", summary::render(sc, &labels, &cells, &head));
            }
            let stem = o.out.join(&sc.name);
            std::fs::write(stem.with_extension("txt"), &text)?;
            let json = serde_json::json!({
                "scenario": sc,
                "guest": gr.info,
                "header": head,
                "policies": labels,
                "cells": cells,
                "runs": runs,
                "problems": gr.problems,
                "restarted": gr.restarted,
            });
            std::fs::write(
                stem.with_extension("json"),
                serde_json::to_string_pretty(&json)?,
            )?;
            eprintln!("softpart-bench: wrote {}.{{txt,json}}", stem.display());
        }
        for m in &gr.messages {
            if let Message::SchedulerStopped(s) = m
                && !s.clean
            {
                eprintln!(
                    "softpart-bench: {} under {} did not exit cleanly: {}\n{}",
                    s.policy, s.scenario, s.status, s.stderr_tail
                );
                failed = true;
            }
        }
        if !gr.problems.is_empty() {
            eprintln!(
                "softpart-bench: problems in the guest (console log: {}):",
                gr.console_path.display()
            );
            for p in &gr.problems {
                eprintln!("  {p}");
            }
            failed = true;
        }
    }
    if failed {
        bail!("the bench finished with problems (see above)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(names: &[&str]) -> Plan {
        let scenarios: Vec<Scenario> = names
            .iter()
            .map(|n| {
                toml::from_str(&format!(
                    "name = \"{n}\"\ndescription = \"d\"\ntopology = \"2n2c2t\"\n\
                     duration_s = 1\nloads = [1]\npolicies = [\"eevdf\"]\n\
                     [[group]]\nname = \"g\"\ncommand = \"true\"\n"
                ))
                .unwrap()
            })
            .collect();
        plan_for(&scenarios, None, None).unwrap()
    }

    fn scenario(name: &str, topology: &str, kernel: Option<&str>) -> Scenario {
        let kernel = kernel
            .map(|k| format!("kernel = \"{k}\"\n"))
            .unwrap_or_default();
        toml::from_str(&format!(
            "name = \"{name}\"\ndescription = \"d\"\ntopology = \"{topology}\"\nduration_s = 1\n{kernel}\
             [[group]]\nname = \"g\"\ncommand = \"true\"\n"
        ))
        .unwrap()
    }

    fn names(groups: &[Vec<Scenario>]) -> Vec<Vec<&str>> {
        groups
            .iter()
            .map(|g| g.iter().map(|s| s.name.as_str()).collect())
            .collect()
    }

    #[test]
    fn header_names_the_guests_clocksource_where_recorded() {
        let sc = scenario("s", "2n2c2t", None);
        let mut info = GuestInfo {
            kernel: "6.17.13+deb13-amd64".into(),
            nr_cpus: 8,
            nodes: vec!["0-3".into(), "4-7".into()],
            smt_siblings: vec!["0-1".into()],
            cmdline: String::new(),
            clocksource: "hpet".into(),
        };
        let h = header(&sc, Some(&info), 3);
        assert!(h.contains("QEMU TCG, clocksource hpet\n"), "{h}");
        info.clocksource.clear();
        let h = header(&sc, Some(&info), 3);
        assert!(
            h.contains("QEMU TCG\n") && !h.contains("clocksource"),
            "{h}"
        );
    }

    #[test]
    fn one_boot_per_topology_and_kernel_in_first_named_order() {
        let k7 = Some("linux-image-7.3.4+deb13-amd64");
        let scs = [
            scenario("a", "2n2c2t", None),
            scenario("b", "4n2c2t", None),
            scenario("c", "2n2c2t", None),
            scenario("d", "2n2c2t", k7),
            scenario("e", "2n2c2t", k7),
        ];
        assert_eq!(
            names(&boot_groups(&scs)),
            vec![vec!["a", "c"], vec!["b"], vec!["d", "e"]]
        );
    }

    #[test]
    fn kernel_option_is_parsed_by_the_run_command() {
        let cli = Cli::try_parse_from([
            "softpart-bench",
            "run",
            "x.toml",
            "--kernel",
            "linux-image-7.3.4+deb13-amd64",
        ])
        .unwrap();
        let Cmd::Run(o) = cli.cmd else {
            panic!("not run")
        };
        assert_eq!(o.kernel.as_deref(), Some("linux-image-7.3.4+deb13-amd64"));
        assert!(
            Cli::try_parse_from(["softpart-bench", "run", "x.toml", "--kernel", "7.3"]).is_err()
        );
    }

    #[test]
    fn guest_args_split_boots_and_name_the_work_directory() {
        let with_args = |name: &str, args: &[&str]| {
            let mut sc = scenario(name, "2n1c1t", None);
            sc.guest_args = args.iter().map(|a| a.to_string()).collect();
            sc
        };
        let scs = [
            with_args("halt", &[]),
            with_args("poll", &["idle=poll"]),
            with_args("halt2", &[]),
            with_args("poll2", &["idle=poll"]),
            with_args("poll-nohz", &["idle=poll", "nohz=off"]),
        ];
        let groups = boot_groups(&scs);
        assert_eq!(
            names(&groups),
            vec![
                vec!["halt", "halt2"],
                vec!["poll", "poll2"],
                vec!["poll-nohz"]
            ]
        );
        let dirs: Vec<String> = groups.iter().map(|g| guest_workdir_name(&g[0])).collect();
        assert_eq!(
            dirs,
            [
                "guest-2n1c1t",
                "guest-2n1c1t-idle=poll",
                "guest-2n1c1t-idle=poll-nohz=off"
            ]
        );
        let mut k = scenario("k", "2n2c2t", Some("linux-image-7.3.4+deb13-amd64"));
        k.guest_args = vec!["idle=poll".into()];
        assert_eq!(
            guest_workdir_name(&k),
            "guest-2n2c2t-7.3.4+deb13-amd64-idle=poll"
        );
    }

    #[test]
    fn guest_arg_option_is_checked_and_repeatable() {
        let cli = Cli::try_parse_from([
            "softpart-bench",
            "run",
            "x.toml",
            "--guest-arg",
            "idle=poll",
            "--guest-arg",
            "nohz=off",
        ])
        .unwrap();
        let Cmd::Run(o) = cli.cmd else {
            panic!("not run")
        };
        assert_eq!(o.guest_args, ["idle=poll", "nohz=off"]);
        let err = Cli::try_parse_from([
            "softpart-bench",
            "run",
            "x.toml",
            "--guest-arg",
            "rdinit=/bin/sh",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("sets rdinit itself"), "{err}");
    }

    fn done(name: &str) -> Message {
        Message::ScenarioDone { name: name.into() }
    }

    fn error(context: &str) -> Message {
        Message::Error {
            context: context.into(),
            message: "m".into(),
        }
    }

    #[test]
    fn a_cut_short_boot_resumes_at_the_scenario_it_was_running() {
        let plan = plan_of(&["a", "b", "c"]);
        let messages = vec![error("a"), done("a"), error("b: rep 1")];
        let (kept, rest) = resume_point(&plan, &messages);
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(matches!(&kept[0], Message::Error { context, .. } if context == "a"));
        let names: Vec<&str> = rest
            .scenarios
            .iter()
            .map(|p| p.scenario.name.as_str())
            .collect();
        assert_eq!(names, ["b", "c"]);

        let (kept, rest) = resume_point(&plan, &[error("a: rep 1")]);
        assert!(kept.is_empty());
        assert_eq!(rest.scenarios.len(), 3);

        let (_, rest) = resume_point(&plan, &[done("a"), done("b"), done("c")]);
        assert!(rest.scenarios.is_empty());
    }
}
