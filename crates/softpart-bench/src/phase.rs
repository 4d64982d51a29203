//! The phase-change workload (`softpart-bench phase`, a scenario group's
//! command): CPU-bound threads whose number doubles after a while, in a
//! cgroup the group balancer places. From the doubling on it polls the
//! balancer (`softpart stat --json`) and reports how long the balancer took
//! to settle again: the time of the last group move after the change, in ms
//! and in balancing periods, and how many moves it made. Results are
//! `figure NAME VALUE` lines in a file the bench reads through a probe.

use crate::balancer_moves::{moves_and_latest, stat};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct PhaseOpts {
    /// CPU-bound threads before the change (twice as many after).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// When the load doubles, ms after start.
    #[arg(long, default_value_t = 8000)]
    change_after_ms: u64,
    /// How long to watch the balancer after the change, ms.
    #[arg(long, default_value_t = 6000)]
    watch_ms: u64,
    /// Where to write the figures.
    #[arg(long)]
    out: std::path::PathBuf,
}

fn spin(stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let mut x = 0u64;
        while !stop.load(Ordering::Relaxed) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            std::hint::black_box(x);
        }
    });
}

pub fn main(o: PhaseOpts) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for _ in 0..o.threads {
        spin(stop.clone());
    }
    std::thread::sleep(Duration::from_millis(o.change_after_ms));
    let before = stat();
    let t_change = Instant::now();
    for _ in 0..o.threads {
        spin(stop.clone());
    }
    // The last move seen after the change, as time since the change.
    let mut last_move: Option<Duration> = None;
    let mut view = None;
    while t_change.elapsed() < Duration::from_millis(o.watch_ms) {
        std::thread::sleep(Duration::from_millis(100));
        if let Some(v) = stat() {
            let (_, latest) = moves_and_latest(&v);
            if let Some(age) = latest {
                let at = t_change
                    .elapsed()
                    .saturating_sub(Duration::from_secs_f64(age));
                if age < t_change.elapsed().as_secs_f64() {
                    last_move = Some(last_move.map_or(at, |m: Duration| m.max(at)));
                }
            }
            view = Some(v);
        }
    }
    let mut text = String::new();
    if let (Some(b), Some(v)) = (before, view) {
        let moves = moves_and_latest(&v)
            .0
            .saturating_sub(moves_and_latest(&b).0);
        let _ = writeln!(text, "figure moves_after_change {moves}");
        let ms = last_move.map_or(0.0, |d| d.as_secs_f64() * 1e3);
        let _ = writeln!(text, "figure resettle_ms {ms:.0}");
        let _ = writeln!(
            text,
            "figure resettle_periods {:.1}",
            ms / v.period_ms.max(1) as f64
        );
    }
    std::fs::write(&o.out, &text).with_context(|| format!("writing {}", o.out.display()))?;
    // The bench expects a group's command to run until killed.
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
