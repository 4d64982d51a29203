//! Reading the fast path's statistics (src/bpf/stats.bpf.h): each CPU
//! keeps its own copy of the counters (a group's in group_stats.rs's
//! mapping), and each node its own copy of a group's histogram; this sums
//! them, by group and by partition.

use crate::bpf_intf::{sp_cpu_stats, sp_hist};
use crate::bpf_skel::BpfMaps;
use crate::group_stats::{GroupStats, RunAndWait};
use crate::stats::RawCounters;
use libbpf_rs::{MapCore, MapFlags};
use std::collections::BTreeSet;

/// A value of a per-CPU map, read from its bytes.
fn read<T: Copy>(bytes: &[u8]) -> Option<T> {
    // SAFETY: T is a plain C struct (bindgen) and `bytes` holds at least
    // size_of::<T>() bytes; the read makes no alignment assumption.
    (bytes.len() >= size_of::<T>())
        .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) })
}

/// One value per possible CPU (index = CPU id) of a per-CPU map's entry;
/// empty if the entry is missing.
fn per_cpu<T: Copy>(map: &impl MapCore, key: u32) -> Vec<T> {
    map.lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
        .ok()
        .flatten()
        .map(|cpus| cpus.iter().filter_map(|b| read(b)).collect())
        .unwrap_or_default()
}

/// Each CPU's event counters and partition figures.
pub(crate) fn cpu_stats(maps: &BpfMaps) -> Vec<sp_cpu_stats> {
    per_cpu(&maps.cpu_stats, 0)
}

/// The event counters, summed over the CPUs, in `enum sp_stat` order.
pub(crate) fn events(cpus: &[sp_cpu_stats]) -> Vec<u64> {
    let mut sum = vec![0u64; crate::EVENT_NAMES.len()];
    for c in cpus {
        for (s, v) in sum.iter_mut().zip(c.events) {
            *s += v;
        }
    }
    sum
}

/// The keys of a group slot's run-delay histograms in group_hists, one
/// per load domain (src/bpf/stats.bpf.h).
fn hist_keys(maps: &BpfMaps, slot: u32) -> std::ops::Range<u32> {
    let domains = hist_domains(maps) as u32;
    slot * domains..(slot + 1) * domains
}

/// How many histograms a group slot has (one per load domain).
pub(crate) fn hist_domains(maps: &BpfMaps) -> usize {
    maps.rodata_data.as_ref().map_or(1, |r| r.hist_domains) as usize
}

/// A group slot's run-delay histogram, summed over the load domains.
fn group_hist(maps: &BpfMaps, slot: u32) -> Vec<u64> {
    let hists: Vec<sp_hist> = hist_keys(maps, slot)
        .filter_map(|k| {
            maps.group_hists
                .lookup(&k.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
        })
        .filter_map(|b| read(&b))
        .collect();
    sum_hists(hists.iter())
}

fn sum_hists<'a>(hists: impl Iterator<Item = &'a sp_hist>) -> Vec<u64> {
    let mut sum = Vec::new();
    for h in hists {
        sum.resize(h.buckets.len(), 0);
        for (s, v) in sum.iter_mut().zip(h.buckets) {
            *s += v;
        }
    }
    sum
}

/// A group slot's counters with its run-delay histogram, summed over the
/// CPUs: what a statistics or metrics request reports.
pub(crate) fn group(maps: &BpfMaps, stats: &GroupStats, slot: u32) -> RawCounters {
    RawCounters {
        delay_hist: group_hist(maps, slot),
        ..group_counts(stats, slot)
    }
}

/// A group slot's counters without the histogram (the periodic samples
/// need none of it).
pub(crate) fn group_counts(stats: &GroupStats, slot: u32) -> RawCounters {
    let mut raw = RawCounters::default();
    for g in stats.per_cpu(slot) {
        raw.run_home_ns += g.run_home_ns;
        raw.run_away_ns += g.run_away_ns;
        raw.run_away_room_ns += g.run_away_room_ns;
        raw.spills += g.spills;
        raw.returns += g.returns;
        raw.delay_ns += g.delay_ns;
        raw.nr_delays += g.nr_delays;
        for (m, v) in raw.migrations.iter_mut().zip(g.migrations) {
            *m += v;
        }
        raw.xnode.resize(g.xnode.len(), 0);
        for (m, v) in raw.xnode.iter_mut().zip(g.xnode) {
            *m += v;
        }
    }
    raw
}

/// A group's CPU time on each partition's CPUs (run at home or away).
pub(crate) fn group_part_ns(per_cpu: &[RunAndWait], parts: &[BTreeSet<usize>]) -> Vec<u64> {
    parts
        .iter()
        .map(|cpus| {
            cpus.iter()
                .filter_map(|&c| per_cpu.get(c))
                .map(|g| g.run_ns)
                .sum()
        })
        .collect()
}

/// A partition's counters: the sum of its CPUs'.
pub(crate) fn partition(cpus_stats: &[sp_cpu_stats], cpus: &BTreeSet<usize>) -> RawCounters {
    let mut raw = RawCounters::default();
    let mine: Vec<&sp_cpu_stats> = cpus.iter().filter_map(|&c| cpus_stats.get(c)).collect();
    for c in &mine {
        raw.delay_ns += c.delay_ns;
        raw.nr_delays += c.nr_delays;
        raw.steals += c.steals;
        raw.foreign_ns += c.foreign_ns;
    }
    raw.delay_hist = sum_hists(mine.iter().map(|c| &c.delay_hist));
    raw
}

/// Zeroes a group slot's counters and histograms, for a home id taken by
/// a new group.
pub(crate) fn reset_group(maps: &BpfMaps, stats: &GroupStats, slot: u32) -> anyhow::Result<()> {
    stats.reset(slot);
    let zeros = vec![0u8; size_of::<sp_hist>()];
    for k in hist_keys(maps, slot) {
        maps.group_hists
            .update(&k.to_ne_bytes(), &zeros, MapFlags::ANY)?;
    }
    Ok(())
}
