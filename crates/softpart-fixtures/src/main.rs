//! scx_abort_fixture: a test fixture for the guest tests, not shipped.
//!
//! Attaches a small sched_ext scheduler (src/bpf/abort.bpf.c) that
//! direct-dispatches from select_cpu and enqueue, allows queued wakeups,
//! and calls scx_bpf_error() a set time after its first wakeup, so that the
//! kernel disables it with wakeups in flight. The guest test then starts
//! scx_softpart on the same load (docs/reliability.md).
//!
//! Exits 0 when the scheduler ended with its own error, 1 when it ended
//! any other way or did not end within --timeout-s.

use anyhow::{Context, Result, bail};
use clap::Parser;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_read};
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

mod bpf_skel {
    include!(concat!(env!("OUT_DIR"), "/bpf_skel.rs"));
}
use bpf_skel::*;

/// Attach a scheduler that aborts itself under load (a test fixture).
#[derive(Parser)]
#[command(version)]
struct Opts {
    /// How long after its first wakeup the scheduler calls scx_bpf_error(), ms.
    #[arg(long, default_value_t = 500)]
    abort_after_ms: u64,
    /// Give up waiting for the abort after this long, s.
    #[arg(long, default_value_t = 60)]
    timeout_s: u64,
}

fn main() -> Result<()> {
    let opts = Opts::parse();
    let mut open_object = MaybeUninit::uninit();
    let builder = BpfSkelBuilder::default();
    let mut skel = scx_ops_open!(builder, &mut open_object, abort_ops, None)?;
    skel.struct_ops.abort_ops_mut().flags = *scx_utils::compat::SCX_OPS_ALLOW_QUEUED_WAKEUP;
    skel.maps
        .rodata_data
        .as_mut()
        .context("no rodata")?
        .abort_after_ns = opts.abort_after_ms * 1_000_000;
    let mut skel = scx_ops_load!(skel, abort_ops, uei)?;
    let link = scx_ops_attach!(skel, abort_ops)?;
    println!(
        "attached; queued wakeups {}; aborting after {} ms",
        if *scx_utils::compat::SCX_OPS_ALLOW_QUEUED_WAKEUP != 0 {
            "allowed"
        } else {
            "not supported by this kernel"
        },
        opts.abort_after_ms
    );
    let started = Instant::now();
    while !uei_exited!(&skel, uei) {
        if started.elapsed() > Duration::from_secs(opts.timeout_s) {
            bail!("still attached after {} s", opts.timeout_s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(link);
    let uei = uei_read!(&skel, uei);
    let ended = format!("{uei:?}");
    println!(
        "ended after {:.2} s: {ended}",
        started.elapsed().as_secs_f64()
    );
    if !ended.contains("abort fixture: aborting") {
        bail!("the scheduler did not end with its own error");
    }
    Ok(())
}
