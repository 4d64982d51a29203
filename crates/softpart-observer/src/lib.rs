//! softpart observer: loads a BPF tracing program that counts, per cgroup,
//! what the running scheduler decided, whichever scheduler that is.
//!
//! ```no_run
//! let obs = softpart_observer::Observer::start()?;
//! let before = obs.snapshot()?;
//! std::thread::sleep(std::time::Duration::from_secs(5));
//! let window = obs.snapshot()?.since(&before);
//! # Ok::<(), anyhow::Error>(())
//! ```

mod bpf_intf;
mod bpf_skel;
pub mod cgroups;
pub mod counters;
mod realtime;
pub mod report;

pub use realtime::RealtimeReads;

use anyhow::{Context, Result, bail};
use bpf_skel::*;
use counters::{CpuCounters, GroupCounters, Running, Snapshot};
use libbpf_rs::MapCore;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use softpart_core::topo::CpuPlace;
use std::collections::BTreeMap;
use std::mem::MaybeUninit;

pub const MAX_CPUS: usize = bpf_intf::observer_consts_OBS_MAX_CPUS as usize;
pub const NR_BUCKETS: usize = bpf_intf::observer_consts_OBS_NR_BUCKETS as usize;
/// How many cgroups the observer's group map holds.
pub const MAX_GROUPS: usize = bpf_intf::observer_consts_OBS_MAX_GROUPS as usize;

pub struct Observer {
    skel: ObserverSkel<'static>,
    places: Vec<CpuPlace>,
}

/// CLOCK_MONOTONIC in ns: the clock bpf_ktime_get_ns() reads.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's time on a CPU and time runnable but waiting for
/// one (ns). Brackets a snapshot read, so that a long read says whether the
/// thread ran (a vCPU the host did not run, or a slow system call), waited
/// behind other guest work, or neither (it slept). The CPU time is the
/// thread CPU clock, which brings the running thread's count up to now;
/// schedstat's first field can lag by a tick or more (a 1 ms read once
/// showed 16 ms on a CPU). Its second field, the wait, is complete once
/// the thread runs again. The wait is 0 where the kernel has no schedstat.
fn thread_times() -> (u64, u64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    let on_cpu = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    let waited = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| counters::parse_schedstat(&s))
        .map_or(0, |(_, w)| w);
    (on_cpu, waited)
}

/// Where each CPU id sits, from sysfs (via scx_utils). Core and LLC ids are
/// renumbered to be unique machine-wide; absent CPU ids get a place of
/// their own so that they never look close to anything.
pub fn read_places() -> Result<Vec<CpuPlace>> {
    let topo = scx_utils::Topology::new().context("reading the CPU topology")?;
    let nr = topo.all_cpus.keys().max().map_or(0, |m| m + 1);
    let mut cores = BTreeMap::new();
    let mut llcs = BTreeMap::new();
    let mut places: Vec<CpuPlace> = (0..nr)
        .map(|i| CpuPlace {
            core: u32::MAX - i as u32,
            llc: u32::MAX - i as u32,
            node: u32::MAX - i as u32,
        })
        .collect();
    for cpu in topo.all_cpus.values() {
        let n = cores.len() as u32;
        let core = *cores
            .entry((cpu.node_id, cpu.llc_id, cpu.core_id))
            .or_insert(n);
        let n = llcs.len() as u32;
        let llc = *llcs.entry((cpu.node_id, cpu.llc_id)).or_insert(n);
        places[cpu.id] = CpuPlace {
            core,
            llc,
            node: cpu.node_id as u32,
        };
    }
    if nr > MAX_CPUS {
        bail!("this machine has {nr} CPU ids; the observer supports {MAX_CPUS}");
    }
    Ok(places)
}

impl Observer {
    /// Loads and attaches the tracing program. Needs root (CAP_BPF and
    /// CAP_PERFMON) and a kernel with BTF.
    pub fn start() -> Result<Self> {
        let places = read_places()?;
        // The skeleton borrows its object for its whole life; an observer
        // lives as long as the process that made it.
        let object: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = ObserverSkelBuilder::default()
            .open(object)
            .context("opening the observer BPF object")?;
        let rodata = open.maps.rodata_data.as_mut().context("no rodata")?;
        for (cpu, p) in places.iter().enumerate() {
            rodata.cpu_core[cpu] = p.core;
            rodata.cpu_llc[cpu] = p.llc;
            rodata.cpu_node[cpu] = p.node;
        }
        let mut skel = open.load().context("loading the observer BPF program")?;
        skel.attach()
            .context("attaching to sched_switch/sched_waking/sched_wakeup/sched_migrate_task")?;
        Ok(Self { skel, places })
    }

    pub fn places(&self) -> &[CpuPlace] {
        &self.places
    }

    /// Empties the group map. It holds every cgroup a task ran in since the
    /// observer started and is never pruned by the BPF side, so a process
    /// that makes cgroups run after run (a guest-test boot makes thousands)
    /// empties it before each run's cgroups are made; past its size
    /// (OBS_MAX_GROUPS) new groups get no entry at all and count nothing
    /// (`Snapshot::groups_full` counts those misses).
    pub fn forget_groups(&self) -> Result<()> {
        let keys: Vec<Vec<u8>> = self.skel.maps.groups.keys().collect();
        for k in keys {
            // An entry a CPU re-made meanwhile is simply kept.
            let _ = self.skel.maps.groups.delete(&k);
        }
        Ok(())
    }

    /// One group's counters from the map, or None if it has no entry.
    fn read_group(&self, key: &[u8], nr: usize) -> Result<Option<GroupCounters>> {
        let Some(val) = self
            .skel
            .maps
            .groups
            .lookup(key, libbpf_rs::MapFlags::ANY)?
        else {
            return Ok(None);
        };
        if val.len() < std::mem::size_of::<bpf_intf::obs_group>() {
            bail!("unexpected group map entry size");
        }
        // SAFETY: the value is an obs_group as laid out by the BPF side
        // (same intf.h), and its size was checked above.
        let g: bpf_intf::obs_group = unsafe { std::ptr::read_unaligned(val.as_ptr() as *const _) };
        Ok(Some(GroupCounters {
            cpu_ns: g.cpu_ns[..nr].to_vec(),
            migrations: g.migrations,
            delay_hist: g.delay_hist.to_vec(),
            delay_ns: g.delay_ns,
            nr_delays: g.nr_delays,
            max_delay_ns: g.max_delay_ns,
            idle_end_hist: g.idle_end_hist.to_vec(),
            preempted_hist: g.preempted_hist.to_vec(),
            preempted_delay_ns: g.preempted_delay_ns,
            nr_outside: g.nr_outside,
            outside_ns: g.outside_ns,
        }))
    }

    fn running(&self, nr: usize) -> Result<Vec<Running>> {
        let bss = self.skel.maps.bss_data.as_ref().context("no bss")?;
        Ok(bss.cpus[..nr]
            .iter()
            .map(|c| Running {
                start_ns: c.run_start_ns,
                cgid: c.run_cgid,
            })
            .collect())
    }

    /// Reads every counter, adding the run or idle interval each CPU is in
    /// right now, so a CPU-bound task that has not switched out still counts.
    ///
    /// Reading the group map takes many system calls (long ones in a busy
    /// TCG guest), and a CPU may switch while it is read: its finished run
    /// is then charged to the map at a moment we cannot place, before or
    /// after its group's entry was read. So each CPU's current run is read
    /// before and after the map; where it changed, its group is read again
    /// and the map's figure (which now holds the finished run) is used
    /// alone. A run is thus counted once, never twice or not at all; a
    /// lone CPU hog, whose runs last seconds, lost a whole run otherwise.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.read(None)
    }

    /// As `snapshot`, for the given cgroups only. One lookup per group
    /// instead of two system calls per entry of the whole map, which
    /// holds every cgroup that ran since it was last emptied (hundreds in
    /// a busy guest, where reading them all took 250 ms).
    pub fn snapshot_of(&self, cgids: &[u64]) -> Result<Snapshot> {
        self.read(Some(cgids))
    }

    fn read(&self, only: Option<&[u64]>) -> Result<Snapshot> {
        let nr = self.places.len();
        let before = self.running(nr)?;
        let bss = self.skel.maps.bss_data.as_ref().context("no bss")?;
        let idle: Vec<_> = bss.cpus[..nr]
            .iter()
            .map(|c| {
                (
                    c.idle_ns,
                    c.idle_waiting_ns,
                    c.idle_since_ns,
                    c.idle_wclock0,
                )
            })
            .collect();
        let (nr_waiting, wait_since, wait_total) =
            (bss.nr_waiting, bss.wait_since_ns, bss.wait_total_ns);
        let times0 = thread_times();
        let at_ns = monotonic_ns();

        let mut groups = BTreeMap::new();
        match only {
            Some(ids) => {
                for &cgid in ids {
                    if let Some(g) = self.read_group(&cgid.to_ne_bytes(), nr)? {
                        groups.insert(cgid, g);
                    }
                }
            }
            None => {
                for key in self.skel.maps.groups.keys() {
                    if key.len() != 8 {
                        bail!("unexpected group map key size");
                    }
                    if let Some(g) = self.read_group(&key, nr)? {
                        groups.insert(u64::from_ne_bytes(key[..8].try_into()?), g);
                    }
                }
            }
        }
        let after = self.running(nr)?;
        let wanted = |cgid: &u64| only.is_none_or(|ids| ids.contains(cgid));
        for cgid in counters::switched_during_read(&before, &after)
            .into_iter()
            .filter(wanted)
        {
            if let Some(g) = self.read_group(&cgid.to_ne_bytes(), nr)? {
                groups.insert(cgid, g);
            }
        }
        counters::add_running(&mut groups, &before, &after, at_ns, NR_BUCKETS);
        groups.retain(|cgid, _| wanted(cgid));
        let read_ns = monotonic_ns().saturating_sub(at_ns);
        let times1 = thread_times();

        let wait_clock = if nr_waiting > 0 && at_ns > wait_since {
            wait_total + (at_ns - wait_since)
        } else {
            wait_total
        };
        let cpus = idle
            .iter()
            .enumerate()
            .map(|(cpu, &(idle_ns, idle_waiting_ns, since, wclock0))| {
                let mut cc = CpuCounters {
                    idle_ns,
                    idle_waiting_ns,
                };
                if before[cpu].start_ns == 0 && since != 0 && at_ns > since {
                    cc.idle_ns += at_ns - since;
                    cc.idle_waiting_ns += wait_clock.saturating_sub(wclock0);
                }
                cc
            })
            .collect();
        Ok(Snapshot {
            at_ns,
            groups,
            cpus,
            groups_full: bss.groups_full,
            read_ns,
            read_on_cpu_ns: times1.0.saturating_sub(times0.0),
            read_runnable_ns: times1.1.saturating_sub(times0.1),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn histogram_layout_matches_core() {
        assert_eq!(super::NR_BUCKETS, softpart_core::hist::NR_BUCKETS);
        assert_eq!(
            super::bpf_intf::softpart_hist_consts_SP_HIST_SUB_BITS,
            softpart_core::hist::SUB_BITS
        );
        assert_eq!(
            super::bpf_intf::softpart_hist_consts_SP_HIST_MAX_MSB,
            softpart_core::hist::MAX_MSB
        );
    }
}
