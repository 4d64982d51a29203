//! The reaction workload (`softpart-bench reaction`, run in the guest as a
//! group's command): how fast a homed group spills when its home saturates
//! and how fast it returns when load drops. Spinning threads note every
//! change of the CPU they run on; the timeline gives, per cycle:
//!
//! - spill: the group runs one thread fewer than its home has CPUs (room
//!   for the odd kernel thread); two more start, one more than the home
//!   holds: the time to the first moment a thread is seen running outside
//!   the home;
//! - return: two threads stop, leaving one fewer than the home's CPUs
//!   again: the time to the first moment every remaining thread is at home
//!   at once.
//!
//! Results go to a file as `figure NAME VALUE` lines, which the bench reads
//! back through a probe and tabulates.

use anyhow::{Context, Result, bail};
use softpart_core::cpulist;
use softpart_core::stats::Summary;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct ReactionOpts {
    /// The group's home (where "spilled" and "returned" are judged).
    #[arg(long)]
    home: String,
    /// Spill/return cycles.
    #[arg(long, default_value_t = 5)]
    cycles: u32,
    /// Time each phase is held, ms.
    #[arg(long, default_value_t = 600)]
    hold_ms: u64,
    /// Where to write the figures.
    #[arg(long)]
    out: std::path::PathBuf,
}

/// (time since start, CPU) at every change of CPU.
type Timeline = Vec<(Duration, i32)>;

struct Spinner {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Timeline>,
}

fn spin(t0: Instant) -> Spinner {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = std::thread::spawn(move || {
        let mut line = Timeline::new();
        let mut last = -1;
        while !flag.load(Ordering::Relaxed) {
            // SAFETY: sched_getcpu has no arguments and no side effects.
            let cpu = unsafe { libc::sched_getcpu() };
            if cpu != last {
                line.push((t0.elapsed(), cpu));
                last = cpu;
            }
        }
        line
    });
    Spinner { stop, handle }
}

fn stop(s: Spinner) -> Timeline {
    s.stop.store(true, Ordering::Relaxed);
    s.handle.join().unwrap_or_default()
}

/// Where a timeline stands at `t` (the last CPU noted at or before it).
fn cpu_at(line: &Timeline, t: Duration) -> Option<i32> {
    line.iter()
        .take_while(|(at, _)| *at <= t)
        .last()
        .map(|x| x.1)
}

/// Whether a noted CPU is one of the home's.
fn is_home(home: &BTreeSet<usize>, cpu: i32) -> bool {
    usize::try_from(cpu).is_ok_and(|c| home.contains(&c))
}

/// First moment in [from, to) at which any timeline is outside `home`.
pub fn first_away(
    lines: &[&Timeline],
    home: &BTreeSet<usize>,
    from: Duration,
    to: Duration,
) -> Option<Duration> {
    let away = |cpu: i32| !is_home(home, cpu);
    let mut best: Option<Duration> = None;
    for line in lines {
        let hit = if cpu_at(line, from).is_some_and(away) {
            Some(from)
        } else {
            line.iter()
                .find(|(at, cpu)| *at >= from && *at < to && away(*cpu))
                .map(|x| x.0)
        };
        if let Some(h) = hit {
            best = Some(best.map_or(h, |b| b.min(h)));
        }
    }
    best
}

/// First moment in [from, to) at which every timeline is at home at once.
pub fn all_home(
    lines: &[&Timeline],
    home: &BTreeSet<usize>,
    from: Duration,
    to: Duration,
) -> Option<Duration> {
    let at_home = |cpu: Option<i32>| cpu.is_some_and(|c| is_home(home, c));
    let mut moments: Vec<Duration> = lines
        .iter()
        .flat_map(|l| l.iter().map(|x| x.0))
        .filter(|t| *t > from && *t < to)
        .collect();
    moments.push(from);
    moments.sort();
    moments
        .into_iter()
        .find(|&t| lines.iter().all(|l| at_home(cpu_at(l, t))))
}

pub fn main(o: ReactionOpts) -> Result<()> {
    let home = cpulist::parse(&o.home).with_context(|| format!("--home {:?}", o.home))?;
    let n = home.len();
    if n < 2 {
        bail!("--home {:?}: needs at least 2 CPUs", o.home);
    }
    let hold = Duration::from_millis(o.hold_ms);
    let t0 = Instant::now();
    let (mut spills, mut returns) = (Vec::new(), Vec::new());
    let mut not_home_at_start = 0;
    let mut never_returned = 0;
    // Cycles where a new thread's very first run was outside the home: the
    // spill happened at that wakeup ("spill within one wakeup").
    let mut first_run_away = 0;
    for _ in 0..o.cycles {
        // One thread fewer than the home has CPUs; let it settle.
        let mut base: Vec<Spinner> = (0..n - 1).map(|_| spin(t0)).collect();
        std::thread::sleep(hold);
        // Two more: one more than the home holds.
        let t_sat = t0.elapsed();
        let extra = [spin(t0), spin(t0)];
        std::thread::sleep(hold);
        // Two stop: one fewer than the home has CPUs again.
        let t_drop = t0.elapsed();
        let dropped: Vec<Timeline> = base.drain(..2.min(n - 1)).map(stop).collect();
        std::thread::sleep(hold);
        let t_end = t0.elapsed();
        let stayed: Vec<Timeline> = base.into_iter().map(stop).collect();
        let added: Vec<Timeline> = extra.into_iter().map(stop).collect();
        let before: Vec<&Timeline> = stayed.iter().chain(dropped.iter()).collect();
        let all: Vec<&Timeline> = before.iter().copied().chain(added.iter()).collect();
        // A spill only counts from a home that held all its threads.
        if first_away(&before, &home, t_sat.saturating_sub(hold / 2), t_sat).is_some() {
            not_home_at_start += 1;
        } else if let Some(at) = first_away(&all, &home, t_sat, t_drop) {
            spills.push((at - t_sat).as_secs_f64() * 1e3);
        }
        if added
            .iter()
            .any(|l| l.first().is_some_and(|x| !is_home(&home, x.1)))
        {
            first_run_away += 1;
        }
        let kept: Vec<&Timeline> = stayed.iter().chain(added.iter()).collect();
        match all_home(&kept, &home, t_drop, t_end) {
            Some(at) => returns.push((at - t_drop).as_secs_f64() * 1e3),
            None => never_returned += 1,
        }
    }
    let mut text = String::new();
    let mut put = |name: &str, v: &[f64]| {
        if let Some(s) = Summary::of(v) {
            let _ = writeln!(text, "figure {name}_median {:.2}", s.median);
            let _ = writeln!(text, "figure {name}_max {:.2}", s.max);
        }
    };
    put("spill_ms", &spills);
    put("return_ms", &returns);
    let _ = writeln!(
        text,
        "figure cycles_not_home_before_spill {not_home_at_start}"
    );
    let _ = writeln!(text, "figure cycles_not_returned {never_returned}");
    let _ = writeln!(
        text,
        "figure cycles_spilled_at_first_wakeup_pct {:.0}",
        100.0 * first_run_away as f64 / o.cycles.max(1) as f64
    );
    std::fs::write(&o.out, &text).with_context(|| format!("writing {}", o.out.display()))?;
    print!("{text}");
    // The bench expects a group's command to run until killed.
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn spill_and_return_from_timelines() {
        let home: BTreeSet<usize> = (0..4).collect();
        let a: Timeline = vec![(ms(0), 0)];
        let b: Timeline = vec![(ms(0), 1), (ms(105), 5), (ms(230), 2)];
        let c: Timeline = vec![(ms(101), 6), (ms(210), 6), (ms(240), 3)];
        let lines = [&a, &b, &c];
        assert_eq!(first_away(&lines, &home, ms(100), ms(200)), Some(ms(101)));
        assert_eq!(first_away(&[&a], &home, ms(100), ms(200)), None);
        // Every thread home at once from 240 ms.
        assert_eq!(all_home(&lines, &home, ms(200), ms(300)), Some(ms(240)));
        // Not yet within the window: never returned.
        assert_eq!(all_home(&lines, &home, ms(200), ms(235)), None);
        // Already home at the drop: zero reaction.
        assert_eq!(all_home(&[&a], &home, ms(200), ms(300)), Some(ms(200)));
    }
}
