//! softpart: the operator's CLI. It asks the running scx_softpart, over its
//! control socket, to give tasks and cgroups a home; the scheduler checks
//! permissions (as sched_setaffinity does) and validates the whole request
//! before applying any of it.

mod check;
mod cli;

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use cli::{Cli, Cmd};
use softpart_core::control::{HomeSpec, HomeView, Request, Response, StatView, Target, exit};
use softpart_core::cpulist;
use softpart_core::pending::{self, Pending};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

fn home_spec(cpus: Option<String>, node: Option<u32>, llc: Option<u32>) -> Result<HomeSpec> {
    match (cpus, node, llc) {
        (Some(c), None, None) => {
            // Fail early on syntax; the scheduler checks the CPUs exist.
            let set = cpulist::parse(&c).map_err(|e| anyhow::anyhow!("--cpus: {e}"))?;
            if set.is_empty() {
                bail!("--cpus {c:?}: empty CPU list");
            }
            Ok(HomeSpec::Cpus(c))
        }
        (None, Some(n), None) => Ok(HomeSpec::Node(n)),
        (None, None, Some(l)) => Ok(HomeSpec::Llc(l)),
        _ => bail!("give exactly one of --cpus, --node, --llc"),
    }
}

/// An error with the exit status it gives (`exit`'s list).
#[derive(Debug)]
struct Failure {
    status: u8,
    error: anyhow::Error,
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        Failure {
            status: exit::FAILURE,
            error,
        }
    }
}

fn with_status(status: u8) -> impl FnOnce(anyhow::Error) -> Failure {
    move |error| Failure { status, error }
}

fn fail<T>(status: u8, message: String) -> std::result::Result<T, Failure> {
    Err(Failure {
        status,
        error: anyhow!(message),
    })
}

/// One request, one answer; a socket nobody answers on is `exit::DOWN`.
fn call(socket: &PathBuf, req: &Request) -> std::result::Result<Response, Failure> {
    let mut stream = UnixStream::connect(socket)
        .with_context(|| {
            format!(
                "connecting to {} (is scx_softpart running?)",
                socket.display()
            )
        })
        .map_err(with_status(exit::DOWN))?;
    Ok(exchange(&mut stream, req)?)
}

fn exchange(stream: &mut UnixStream, req: &Request) -> Result<Response> {
    writeln!(stream, "{}", serde_json::to_string(req)?)?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    if line.is_empty() {
        bail!("the scheduler closed the connection without an answer");
    }
    serde_json::from_str(&line).with_context(|| format!("unreadable answer {line:?}"))
}

fn report(resp: Response) -> std::result::Result<(), Failure> {
    match resp {
        Response::Ok { message } => {
            println!("{message}");
            Ok(())
        }
        Response::Task(t) => {
            println!("pid {} ({})", t.pid, t.comm);
            println!("  allowed:   {}", t.allowed);
            println!(
                "  preferred: {}",
                if t.preferred.is_empty() {
                    "-"
                } else {
                    &t.preferred
                }
            );
            println!("  from:      {}", t.source);
            Ok(())
        }
        Response::Stat(v) => {
            print!("{}", stat_table(&v));
            Ok(())
        }
        Response::Homes { homes } => {
            print!("{}", list_table(&homes));
            Ok(())
        }
        Response::Error { message } => fail(exit::REFUSED, message),
        Response::Unavailable { message } => fail(exit::DOWN, message),
    }
}

/// Leaves `req` for the scheduler to apply when it attaches; returns the
/// file it went to.
fn leave_pending(socket: &Path, pid: u32, req: Request) -> Result<PathBuf> {
    let start_time = pending::task_start_time(pid).context("reading this process's start time")?;
    let file = pending::file(socket, pid);
    let text = serde_json::to_string(&Pending {
        pid,
        start_time,
        request: req,
    })?;
    std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    Ok(file)
}

/// `softpart list`'s table: one home a line.
fn list_table(homes: &[HomeView]) -> String {
    use std::fmt::Write as _;
    if homes.is_empty() {
        return "no homes in effect\n".to_string();
    }
    let mut out = String::new();
    for h in homes {
        let soft = h
            .softness
            .as_deref()
            .map(|s| format!("  softness {s}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<8} {}  CPUs {}{soft}  ({})",
            h.kind, h.target, h.cpus, h.source
        );
    }
    out
}

/// The balancer's per-group report (a gb_stat-style table), per balanced group.
fn stat_table(v: &StatView) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if v.groups.is_empty() {
        let _ = writeln!(
            out,
            "no balanced groups (scx_softpart --balance CGROUP, or [[balance]] in its config)"
        );
    }
    for g in &v.groups {
        let excl = g
            .exclusivity
            .map_or("-".to_string(), |e| format!("{:.1}%", e * 100.0));
        let last = g
            .last_move_s_ago
            .map_or("never".to_string(), |s| format!("{s:.0} s ago"));
        let _ = writeln!(
            out,
            "{}  load {:.2}  exclusivity {excl}  moves {} (last {last})",
            g.label, g.load, g.moves
        );
        for p in &v.parts {
            let _ = writeln!(
                out,
                "PART-{} {} {:.2} {:.2}{}",
                p.id,
                p.cpus,
                g.part_load.get(p.id).copied().unwrap_or(0.0),
                p.load,
                if g.part == Some(p.id) { " *" } else { "" }
            );
        }
    }
    let over: Vec<String> = v
        .parts
        .iter()
        .filter(|p| p.overfull)
        .map(|p| format!("PART-{} ({:.2}x)", p.id, p.demand))
        .collect();
    if !over.is_empty() {
        let _ = writeln!(
            out,
            "over-full (their groups' waiting tasks stolen without the wait): {}",
            over.join(", ")
        );
    }
    for t in &v.tenants {
        let cap = t
            .cap_cpus
            .map_or("max".to_string(), |c| format!("{c:.2} CPUs"));
        let share = if t.entitled_cpus > 0.0 {
            format!("{:.0}%", 100.0 * t.cpus_used / t.entitled_cpus)
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            out,
            "cgroup {}  weight {}  cpu.max {cap}  cpus {:.2} of {:.2} entitled ({share})  throttled {:.1} s ({} times)",
            t.path, t.weight, t.cpus_used, t.entitled_cpus, t.throttled_s, t.throttles
        );
    }
    if !v.homes.is_empty() {
        let _ = writeln!(out, "homes' moves over the last {:.0} s:", v.homes_window_s);
    }
    for m in &v.homes {
        let causes = softpart_core::control::nonzero_rates(&m.xnode_per_s);
        let _ = writeln!(
            out,
            "home {}  spills {:.1}/s  returns {:.1}/s  cross-node moves {:.1}/s{}",
            m.label,
            m.spills_per_s,
            m.returns_per_s,
            m.xnode_per_s.values().sum::<f64>(),
            if causes.is_empty() {
                String::new()
            } else {
                format!(" ({causes})")
            }
        );
    }
    memory_lines(&mut out, &v.memory);
    let h = &v.held;
    let _ = writeln!(
        out,
        "held: {} thread homes, {} cgroup homes, {} home ids, {} balanced cgroups, {} cgroup slots; {} restarts",
        h.task_homes, h.cgroup_homes, h.home_ids, h.balanced, h.cgroup_slots, h.restarts
    );
    let c = &v.cost;
    if c.secs > 0.0 {
        let _ = writeln!(
            out,
            "control plane: {:.2}% of a CPU, BPF maps read {:.1} KB/s ({:.1} of it for statistics requests), written {:.1} KB/s (over {:.0} s)",
            100.0 * c.cpu_s / c.secs,
            c.map_read_bytes as f64 / 1e3 / c.secs,
            c.map_read_bytes_for_stats as f64 / 1e3 / c.secs,
            c.map_written_bytes as f64 / 1e3 / c.secs,
            c.secs
        );
    }
    for l in &v.limits {
        let _ = writeln!(
            out,
            "limit reached: {}{} {}, last for {}",
            l.limit,
            softpart_core::limits::entries(l.size),
            times(l.hits),
            l.last
        );
    }
    out
}

/// Memory following the homes: the settings and what moved, then each
/// home's memory on its nodes and elsewhere.
fn memory_lines(out: &mut String, m: &softpart_core::control::MemoryView) {
    use std::fmt::Write as _;
    const MB: f64 = 1048576.0;
    if !m.follow {
        let _ = writeln!(out, "memory follows the homes: off");
        return;
    }
    let reserve = m
        .reserve_bytes
        .map_or("1/64 of each node (at least 16 MB)".to_string(), |r| {
            format!("{:.0} MB a node", r as f64 / MB)
        });
    let _ = writeln!(
        out,
        "memory follows the homes: at most {:.0} MB/s (most in one second so far {:.1}), reserve {reserve}; moved {:.1} MB in {:.2} CPU-s",
        m.rate_bytes_per_s as f64 / MB,
        m.peak_bytes_per_s as f64 / MB,
        m.moved_bytes as f64 / MB,
        m.mover_cpu_s
    );
    for t in &m.tenants {
        let nodes: Vec<String> = t.nodes.iter().map(|n| n.to_string()).collect();
        let total = t.home_bytes + t.away_bytes;
        let on = if total > 0 {
            format!("{:.0}%", 100.0 * t.home_bytes as f64 / total as f64)
        } else {
            "-".to_string()
        };
        let refused: Vec<String> = t
            .refused_bytes
            .iter()
            .filter(|(_, b)| **b > 0)
            .map(|(k, b)| format!("{k} {:.1} MB", *b as f64 / MB))
            .collect();
        let _ = writeln!(
            out,
            "memory {}  node {}: {:.1} MB ({on}), elsewhere {:.1} MB  moved {:.1} MB (last {}){}{}",
            t.label,
            nodes.join(","),
            t.home_bytes as f64 / MB,
            t.away_bytes as f64 / MB,
            t.moved_bytes as f64 / MB,
            t.last_move_s_ago
                .map_or("never".to_string(), |s| format!("{s:.0} s ago")),
            if refused.is_empty() {
                String::new()
            } else {
                format!("  not moved: {}", refused.join(", "))
            },
            t.waiting
                .as_ref()
                .map_or(String::new(), |w| format!("  waiting: {w}"))
        );
    }
}

/// "once", "twice", "N times".
fn times(n: u64) -> String {
    match n {
        1 => "once".to_string(),
        2 => "twice".to_string(),
        n => format!("{n} times"),
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("softpart: {:#}", f.error);
            std::process::ExitCode::from(f.status)
        }
    }
}

fn run(cli: Cli) -> std::result::Result<(), Failure> {
    match cli.cmd {
        Cmd::Prefer(a) => {
            let target = match a.cgroup {
                Some(cg) => Target::Cgroup(cg),
                None => Target::Pids(a.pid),
            };
            let req = if a.clear {
                Request::Clear { target }
            } else {
                if a.cpus.is_none() && a.node.is_none() && a.llc.is_none() {
                    return fail(
                        exit::USAGE,
                        "give a home: --cpus, --node or --llc (or --clear)".into(),
                    );
                }
                Request::Prefer {
                    target,
                    home: home_spec(a.cpus, a.node, a.llc).map_err(with_status(exit::USAGE))?,
                    softness: a.softness,
                    origin: None,
                }
            };
            report(call(&cli.socket, &req)?)
        }
        Cmd::Show { pid } => report(call(&cli.socket, &Request::Show { pid })?),
        Cmd::Stat { json } => match call(&cli.socket, &Request::Stat)? {
            Response::Stat(v) if json => {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&v).map_err(anyhow::Error::from)?
                );
                Ok(())
            }
            Response::Stat(v) => {
                print!("{}", stat_table(&v));
                Ok(())
            }
            other => report(other),
        },
        Cmd::List { json } => match call(&cli.socket, &Request::List)? {
            Response::Homes { homes } if json => {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&homes).map_err(anyhow::Error::from)?
                );
                Ok(())
            }
            other => report(other),
        },
        Cmd::Reload => report(call(&cli.socket, &Request::Reload)?),
        Cmd::CheckConfig(a) => {
            let opts = check::Options {
                file: &a.file,
                topology: a.topology.as_deref(),
                live: a.live,
                json: a.json,
                strict: a.strict,
            };
            match check::run(&opts, Path::new(softpart_core::config::CGROUP_ROOT)) {
                Ok(true) => Ok(()),
                Ok(false) => Err(Failure {
                    status: exit::FAILURE,
                    error: anyhow!("{}: does not pass", a.file.display()),
                }),
                Err(e) => Err(Failure {
                    status: exit::USAGE,
                    error: e,
                }),
            }
        }
        Cmd::Exec(a) => {
            let home = home_spec(a.home.cpus, a.home.node, a.home.llc)
                .map_err(with_status(exit::USAGE))?;
            let me = std::process::id();
            let req = Request::Prefer {
                target: Target::Pids(vec![me]),
                home,
                softness: a.softness,
                origin: None,
            };
            // Quiet on success: the command's own output follows. A
            // scheduler that is down does not stop the command (a service
            // started with exec must not fail with the scheduler): the
            // request waits beside the socket for it. One that refuses the
            // home does.
            let down = match call(&cli.socket, &req) {
                Ok(Response::Error { message }) => return fail(exit::REFUSED, message),
                Ok(Response::Unavailable { message }) => Some(message),
                Ok(_) => None,
                Err(f) => Some(format!("{:#}", f.error)),
            };
            if let Some(why) = down {
                let later = match leave_pending(&cli.socket, me, req) {
                    Ok(file) => format!("the home applies when it starts ({})", file.display()),
                    Err(e) => format!("the home is not kept: {e:#}"),
                };
                eprintln!(
                    "softpart: warning: {why}; running {:?} without a home for now; {later}",
                    a.command[0]
                );
            }
            let err = std::process::Command::new(&a.command[0])
                .args(&a.command[1..])
                .exec();
            let status = if err.kind() == std::io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_RUN
            };
            fail(status, format!("running {:?}: {err}", a.command[0]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::EXAMPLES;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn stat_table_names_over_full_partitions_only() {
        use softpart_core::control::{GroupView, PartView};
        let part = |id: usize, demand: f64, overfull: bool| PartView {
            id,
            cpus: format!("{}-{}", id * 4, id * 4 + 3),
            load: 4.0,
            demand,
            overfull,
        };
        let v = StatView {
            period_ms: 1000,
            parts: vec![part(0, 1.44, true), part(1, 0.72, false)],
            groups: vec![GroupView {
                label: "/bench/g0".into(),
                part: Some(0),
                load: 5.8,
                part_load: vec![4.1, 1.7],
                exclusivity: Some(0.71),
                moves: 0,
                last_move_s_ago: None,
                away_s: 0.0,
                away_with_room_s: 0.0,
            }],
            held: Default::default(),
            cost: softpart_core::control::ControlCost {
                secs: 10.0,
                cpu_s: 0.05,
                map_read_bytes: 2_000_000,
                map_written_bytes: 10_000,
                map_read_bytes_for_stats: 1_500_000,
                ..Default::default()
            },
            homes: vec![softpart_core::control::HomeMovesView {
                label: "/bench/g0".into(),
                spills_per_s: 2.0,
                returns_per_s: 1.5,
                xnode_per_s: [("steal".to_string(), 3.0), ("evict".to_string(), 0.0)]
                    .into_iter()
                    .collect(),
            }],
            homes_window_s: 1.0,
            tenants: vec![softpart_core::control::TenantView {
                path: "/bench/capped".into(),
                weight: 100,
                cap_cpus: Some(0.5),
                entitled_cpus: 0.5,
                cpus_used: 0.49,
                throttled_s: 3.2,
                throttles: 40,
            }],
            limits: vec![softpart_core::limits::LimitView {
                limit: "cgroup_slots".into(),
                size: Some(2048),
                hits: 3,
                last: "cgroup /bench/c9".into(),
            }],
            memory: softpart_core::control::MemoryView {
                follow: true,
                rate_bytes_per_s: 64 << 20,
                reserve_bytes: None,
                peak_bytes_per_s: 64 << 20,
                moved_bytes: 160 << 20,
                mover_cpu_s: 0.4,
                tenants: vec![softpart_core::control::MemoryTenantView {
                    label: "/bench/g0".into(),
                    nodes: vec![0],
                    home_bytes: 150 << 20,
                    away_bytes: 10 << 20,
                    moved_bytes: 150 << 20,
                    refused_bytes: [("rate".to_string(), 3 << 20), ("shared".to_string(), 0)]
                        .into_iter()
                        .collect(),
                    last_move_s_ago: Some(2.0),
                    waiting: None,
                }],
            },
        };
        let t = stat_table(&v);
        assert!(
            t.contains(
                "memory follows the homes: at most 64 MB/s (most in one second so far 64.0), reserve 1/64 of each node (at least 16 MB); moved 160.0 MB in 0.40 CPU-s\n"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "memory /bench/g0  node 0: 150.0 MB (94%), elsewhere 10.0 MB  moved 150.0 MB (last 2 s ago)  not moved: rate 3.0 MB\n"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "limit reached: cgroup_slots (2048 entries) 3 times, last for cgroup /bench/c9\n"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "cgroup /bench/capped  weight 100  cpu.max 0.50 CPUs  cpus 0.49 of 0.50 entitled (98%)  throttled 3.2 s (40 times)"
            ),
            "{t}"
        );
        assert!(t.contains("PART-0 0-3 4.10 4.00 *"), "{t}");
        assert!(t.contains("homes' moves over the last 1 s:\n"), "{t}");
        // A cause with no move this second is left out of the line.
        assert!(
            t.contains(
                "home /bench/g0  spills 2.0/s  returns 1.5/s  cross-node moves 3.0/s (steal 3.0)\n"
            ),
            "{t}"
        );
        assert!(t.contains("PART-1 4-7 1.70 4.00\n"), "{t}");
        assert!(
            t.contains(
                "control plane: 0.50% of a CPU, BPF maps read 200.0 KB/s (150.0 of it for statistics requests), written 1.0 KB/s (over 10 s)\n"
            ),
            "{t}"
        );
        let over: Vec<&str> = t.lines().filter(|l| l.starts_with("over-full")).collect();
        assert_eq!(over.len(), 1, "{t}");
        assert!(over[0].ends_with(": PART-0 (1.44x)"), "{t}");
        let mut none = v.clone();
        none.parts[0].overfull = false;
        assert!(!stat_table(&none).contains("over-full"));
    }

    #[test]
    fn help_shows_each_example_on_its_own_line() {
        for help in [
            Cli::command().render_help().to_string(),
            Cli::command().render_long_help().to_string(),
        ] {
            let lines: Vec<&str> = help.lines().map(str::trim).collect();
            for example in EXAMPLES.lines().skip(1) {
                assert!(
                    lines.contains(&example.trim()),
                    "{example:?} is not a line of:\n{help}"
                );
            }
        }
    }
}
