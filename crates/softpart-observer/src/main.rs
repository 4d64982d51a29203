//! softpart-observe: per-cgroup scheduling figures under whatever scheduler
//! is running (EEVDF, scx_softpart, any other sched_ext scheduler).

use anyhow::{Context, Result, bail};
use clap::Parser;
use softpart_core::cpulist;
use softpart_observer::report::{group_report, machine_report};
use softpart_observer::{Observer, RealtimeReads, cgroups};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Shown after the options, one command per line (a doc comment's lines
/// would be joined into one paragraph).
const EXAMPLES: &str = "\
Examples:
  softpart-observe --duration 10
  softpart-observe --json -- stress-ng --cpu 4 --timeout 5";

/// Report, per cgroup, what the CPU scheduler decided: CPU time per NUMA
/// node, run delay (time runnable but not running) p50/p99/max, the share
/// of waits that began with the task switched out still runnable (slice
/// end, yield, preemption; "sw-out%", the rest began at a wakeup), and
/// migrations by distance (SMT sibling, same LLC, same node, cross-node);
/// and per machine, CPU time left idle while some task waited to run.
///
/// Works under any scheduler, so the same figures compare EEVDF, hard
/// pinning, scx_softpart and other sched_ext schedulers. Needs root.
#[derive(Debug, Parser)]
#[command(version, after_help = EXAMPLES)]
struct Opts {
    /// Observe for this many seconds (default: until Ctrl-C, or until
    /// COMMAND exits).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,

    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,

    /// Only report cgroups whose path starts with this prefix.
    #[arg(long, value_name = "PATH", default_value = "/")]
    prefix: String,

    /// Run COMMAND and observe while it runs.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

fn main() -> Result<()> {
    let opts = Opts::parse();
    if let Some(d) = opts.duration
        && !(d > 0.0 && d.is_finite())
    {
        bail!("--duration {d}: must be a positive number of seconds");
    }
    let obs = Observer::start()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))?;

    let before = {
        let _rt = RealtimeReads::start();
        obs.snapshot()?
    };
    let started = Instant::now();
    let mut child = match opts.command.split_first() {
        Some((prog, args)) => Some(
            Command::new(prog)
                .args(args)
                .spawn()
                .with_context(|| format!("running {prog:?}"))?,
        ),
        None => None,
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(d) = opts.duration
            && started.elapsed().as_secs_f64() >= d
        {
            break;
        }
        if let Some(c) = child.as_mut()
            && c.try_wait()?.is_some()
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = {
        let _rt = RealtimeReads::start();
        obs.snapshot()?
    };
    let window = after.since(&before);
    let names = cgroups::paths_by_id(Path::new(cgroups::CGROUP2_ROOT));
    let machine = machine_report(&window);

    let mut rows = Vec::new();
    for (id, g) in &window.groups {
        let name = names.get(id).cloned().unwrap_or_else(|| format!("id:{id}"));
        if !name.starts_with(&opts.prefix) {
            continue;
        }
        rows.push((name, group_report(g, obs.places(), None)));
    }

    if opts.json {
        let groups: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(n, r)| Ok((n.clone(), serde_json::to_value(r)?)))
            .collect::<Result<_>>()?;
        println!(
            "{}",
            serde_json::json!({ "machine": machine, "groups": groups })
        );
        return Ok(());
    }

    let nr_nodes = obs.places().iter().map(|p| p.node).max().unwrap_or(0) + 1;
    println!(
        "window {:.2}s; idle {:.2} CPU-s, of which {:.3} CPU-s while a task waited",
        machine.wall_s, machine.idle_s, machine.idle_while_waiting_s
    );
    print!("{:<40} {:>8}", "cgroup", "CPU s");
    for n in 0..nr_nodes {
        print!(" {:>6}", format!("node{n}%"));
    }
    println!(
        " {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "p50 us", "p99 us", "max us", "sw-out%", "mig-smt", "mig-llc", "mig-nod", "mig-x"
    );
    let fmt_us = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
    for (name, r) in &rows {
        print!("{name:<40} {:>8.3}", r.cpu_s);
        for s in &r.node_cpu_s {
            let pct = if r.cpu_s > 0.0 {
                100.0 * s / r.cpu_s
            } else {
                0.0
            };
            print!(" {pct:>6.1}");
        }
        println!(
            " {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7}",
            fmt_us(r.run_delay_p50_us),
            fmt_us(r.run_delay_p99_us),
            fmt_us(r.run_delay_max_us),
            r.switched_out_share
                .map_or("-".to_string(), |x| format!("{:.1}", 100.0 * x)),
            r.migrations_smt,
            r.migrations_llc,
            r.migrations_node,
            r.migrations_xnode
        );
    }
    let online: Vec<usize> = (0..obs.places().len()).collect();
    println!("CPUs observed: {}", cpulist::format(&online));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Opts::command().debug_assert();
    }

    #[test]
    fn help_shows_each_example_on_its_own_line() {
        for help in [
            Opts::command().render_help().to_string(),
            Opts::command().render_long_help().to_string(),
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
