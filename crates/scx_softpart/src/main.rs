//! scx_softpart: soft CPU partitions as a sched_ext scheduler.
//!
//! The Rust side reads the topology, decides the partitions, hands them to
//! the BPF fast path (src/bpf/main.bpf.c) and reports how the scheduler
//! exited. It makes no per-event decision itself.

mod bpf_intf;
mod bpf_skel;
mod partitions;

use anyhow::{Context, Result, bail};
use bpf_skel::*;
use clap::Parser;
use libbpf_rs::OpenObject;
use log::info;
use scx_utils::{
    Topology, UserExitInfo, scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report,
};
use softpart_core::cpulist;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const SCHEDULER_NAME: &str = "scx_softpart";

/// scx_softpart: soft CPU partitions for hosts that run several workloads
/// side by side.
///
/// CPUs are grouped into partitions (by default one per NUMA node, or one
/// per LLC when a node has several). A waking task goes to an idle CPU near
/// where it last ran, preferring a whole idle core in its partition; when
/// none is idle it queues on its partition, and any idle CPU allowed to run
/// it is woken to take it: no CPU stays idle while work it may run waits.
///
/// Stop it with Ctrl-C or SIGTERM: the kernel then returns every task to
/// the default scheduler. If this process dies, the kernel does the same.
#[derive(Debug, Parser)]
#[command(version)]
struct Opts {
    /// Scheduling slice, in microseconds.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(100..=100_000))]
    slice_us: u64,

    /// Most vtime credit a task keeps while it sleeps, in microseconds: a
    /// long sleeper wakes at most this far ahead of the others.
    #[arg(long, default_value_t = 20000, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    slice_lag_us: u64,

    /// CPU partitions, in the group balancer's syntax: CPU lists separated
    /// by ';', e.g. "0-15;16-31". CPUs no list names form one more
    /// partition. Default: one per NUMA node, or per LLC when a node has
    /// several.
    #[arg(long, value_name = "LIST;LIST...")]
    partitions: Option<String>,

    /// Do not look for whole idle cores first (the seed's SIS_CORE off).
    #[arg(long)]
    no_idle_core: bool,

    /// Kernel exit dump length (0 = kernel default).
    #[arg(long, default_value_t = 0)]
    exit_dump_len: u32,

    /// Print libbpf's messages.
    #[arg(short, long)]
    verbose: bool,
}

struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    link: Option<libbpf_rs::Link>,
}

impl<'a> Scheduler<'a> {
    fn init(opts: &Opts, open_object: &'a mut MaybeUninit<OpenObject>) -> Result<Self> {
        if !std::path::Path::new("/sys/kernel/sched_ext").exists() {
            bail!(
                "this kernel ({}) has no sched_ext: scx_softpart needs Linux >= 6.12 built with CONFIG_SCHED_CLASS_EXT=y",
                std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .unwrap_or_default()
                    .trim()
            );
        }
        let topo = Topology::new().context("reading the CPU topology")?;
        let parts = partitions::from_topology(&topo, opts.partitions.as_deref())?;
        let nr_cpu_ids = *scx_utils::NR_CPU_IDS;
        if nr_cpu_ids > bpf_intf::softpart_consts_SP_MAX_CPUS as usize {
            bail!(
                "this machine has {nr_cpu_ids} CPU ids; scx_softpart supports {}",
                bpf_intf::softpart_consts_SP_MAX_CPUS
            );
        }
        info!(
            "{SCHEDULER_NAME} {}: {} CPUs, SMT {}, partitions: {}",
            env!("CARGO_PKG_VERSION"),
            topo.all_cpus.len(),
            if topo.smt_enabled { "on" } else { "off" },
            partitions::describe(&parts)
        );

        let mut builder = BpfSkelBuilder::default();
        builder.obj_builder.debug(opts.verbose);
        let mut skel = scx_ops_open!(builder, open_object, softpart_ops, None)?;
        skel.struct_ops.softpart_ops_mut().exit_dump_len = opts.exit_dump_len;

        let rodata = skel.maps.rodata_data.as_mut().context("no rodata")?;
        rodata.nr_cpus = nr_cpu_ids as u32;
        rodata.nr_parts = parts.len() as u32;
        rodata.slice_ns = opts.slice_us * 1000;
        rodata.slice_lag_ns = opts.slice_lag_us * 1000;
        rodata.smt_enabled = topo.smt_enabled && !opts.no_idle_core;
        for (cpu, part) in softpart_core::partition::cpu_to_part(&parts, nr_cpu_ids)
            .into_iter()
            .enumerate()
        {
            rodata.cpu_part[cpu] = part;
        }

        let mut skel = scx_ops_load!(skel, softpart_ops, uei)?;
        let link = scx_ops_attach!(skel, softpart_ops)?;
        info!(
            "attached; online CPUs {}",
            cpulist::format(topo.all_cpus.keys())
        );
        Ok(Self {
            skel,
            link: Some(link),
        })
    }

    fn run(&mut self, shutdown: Arc<AtomicBool>) -> Result<UserExitInfo> {
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            std::thread::sleep(Duration::from_millis(200));
        }
        self.print_counters();
        let _ = self.link.take();
        uei_report!(&self.skel, uei)
    }

    /// One JSON line with the fast path's counters, for tests and scripts.
    fn print_counters(&self) {
        let names = [
            "pick_prev",
            "pick_core_part",
            "pick_cpu_part",
            "pick_core_any",
            "pick_cpu_any",
            "pick_none",
            "enqueue",
            "kick",
            "dispatch_own",
            "dispatch_steal",
        ];
        let Some(bss) = self.skel.maps.bss_data.as_ref() else {
            return;
        };
        let fields: Vec<String> = names
            .iter()
            .zip(bss.stats.iter())
            .map(|(n, v)| format!("\"{n}\":{v}"))
            .collect();
        println!("{{\"softpart_counters\":{{{}}}}}", fields.join(","));
    }
}

fn main() -> Result<()> {
    let opts = Opts::parse();
    simplelog::TermLogger::init(
        simplelog::LevelFilter::Info,
        simplelog::ConfigBuilder::new()
            .set_time_level(simplelog::LevelFilter::Off)
            .set_target_level(simplelog::LevelFilter::Off)
            .set_thread_level(simplelog::LevelFilter::Off)
            .build(),
        simplelog::TerminalMode::Stderr,
        simplelog::ColorChoice::Never,
    )?;
    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the SIGINT/SIGTERM handler")?;

    let mut open_object = MaybeUninit::uninit();
    loop {
        let mut sched = Scheduler::init(&opts, &mut open_object)?;
        let uei = sched.run(shutdown.clone())?;
        if !uei.should_restart() {
            break;
        }
        info!("the kernel asked for a restart");
    }
    Ok(())
}
