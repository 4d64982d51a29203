//! Figures derived from a window of counters: what `softpart-observe` prints
//! and what the bench aggregates.

use crate::counters::{GroupCounters, Window};
use serde::{Deserialize, Serialize};
use softpart_core::hist;
use softpart_core::topo::CpuPlace;
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupReport {
    pub cpu_s: f64,
    /// CPU seconds on each NUMA node.
    pub node_cpu_s: Vec<f64>,
    /// Share of the CPU time spent on the given home CPUs, if any.
    pub home_share: Option<f64>,
    pub run_delay_p50_us: Option<f64>,
    pub run_delay_p99_us: Option<f64>,
    pub run_delay_max_us: Option<f64>,
    pub run_delay_mean_us: Option<f64>,
    /// Number of runnable→running waits measured.
    pub waits: u64,
    /// Share of the waits that began with the task switched out still
    /// runnable (slice end, yield, preemption) rather than at a wakeup,
    /// and those waits' p99.
    pub switched_out_share: Option<f64>,
    pub run_delay_switched_out_p99_us: Option<f64>,
    pub migrations_smt: u64,
    pub migrations_llc: u64,
    pub migrations_node: u64,
    pub migrations_xnode: u64,
}

pub fn group_report(
    g: &GroupCounters,
    places: &[CpuPlace],
    home: Option<&BTreeSet<usize>>,
) -> GroupReport {
    let nr_nodes = places
        .iter()
        .map(|p| p.node as usize + 1)
        .max()
        .unwrap_or(1);
    let mut node_cpu_s = vec![0.0; nr_nodes];
    let mut home_ns = 0u64;
    for (cpu, &ns) in g.cpu_ns.iter().enumerate() {
        if let Some(place) = places.get(cpu) {
            node_cpu_s[place.node as usize] += ns as f64 / 1e9;
        }
        if home.is_some_and(|h| h.contains(&cpu)) {
            home_ns += ns;
        }
    }
    let total = g.total_cpu_ns();
    let us = |v: Option<u64>| v.map(|ns| ns as f64 / 1e3);
    GroupReport {
        cpu_s: total as f64 / 1e9,
        node_cpu_s,
        home_share: home.map(|_| {
            if total == 0 {
                0.0
            } else {
                home_ns as f64 / total as f64
            }
        }),
        run_delay_p50_us: us(hist::quantile(&g.delay_hist, 0.50)),
        run_delay_p99_us: us(hist::quantile(&g.delay_hist, 0.99)),
        run_delay_max_us: us(hist::max(&g.delay_hist)),
        run_delay_mean_us: (g.nr_delays > 0).then(|| g.delay_ns as f64 / g.nr_delays as f64 / 1e3),
        waits: g.nr_delays,
        switched_out_share: {
            let all: u64 = g.delay_hist.iter().sum();
            (all > 0).then(|| g.preempted_hist.iter().sum::<u64>() as f64 / all as f64)
        },
        run_delay_switched_out_p99_us: us(hist::quantile(&g.preempted_hist, 0.99)),
        migrations_smt: g.migrations[0],
        migrations_llc: g.migrations[1],
        migrations_node: g.migrations[2],
        migrations_xnode: g.migrations[3],
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineReport {
    pub wall_s: f64,
    pub idle_s: f64,
    /// CPU-seconds a CPU sat idle while some task waited to run.
    pub idle_while_waiting_s: f64,
    pub idle_while_waiting_per_cpu_s: Vec<f64>,
}

pub fn machine_report(w: &Window) -> MachineReport {
    MachineReport {
        wall_s: w.wall_ns as f64 / 1e9,
        idle_s: w.cpus.iter().map(|c| c.idle_ns).sum::<u64>() as f64 / 1e9,
        idle_while_waiting_s: w.cpus.iter().map(|c| c.idle_waiting_ns).sum::<u64>() as f64 / 1e9,
        idle_while_waiting_per_cpu_s: w
            .cpus
            .iter()
            .map(|c| c.idle_waiting_ns as f64 / 1e9)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use softpart_core::topo::GuestTopo;

    #[test]
    fn node_split_and_home_share() {
        let places = "2n2c2t".parse::<GuestTopo>().unwrap().places();
        let mut g = GroupCounters {
            cpu_ns: vec![0; 8],
            delay_hist: vec![0; hist::NR_BUCKETS],
            ..Default::default()
        };
        g.cpu_ns[0] = 3_000_000_000;
        g.cpu_ns[5] = 1_000_000_000;
        g.delay_hist[hist::bucket(50_000)] = 99;
        g.delay_hist[hist::bucket(9_000_000)] = 1;
        g.nr_delays = 100;
        g.delay_ns = 99 * 50_000 + 9_000_000;
        let home: BTreeSet<usize> = (0..4).collect();
        let r = group_report(&g, &places, Some(&home));
        assert_eq!(r.cpu_s, 4.0);
        assert_eq!(r.node_cpu_s, vec![3.0, 1.0]);
        assert_eq!(r.home_share, Some(0.75));
        assert!(r.run_delay_p50_us.unwrap() < 60.0);
        assert!(
            r.run_delay_p99_us.unwrap() < 60.0,
            "99 of 100 waits were ~50us"
        );
        assert!(r.run_delay_max_us.unwrap() >= 9_000.0);
        assert!(group_report(&g, &places, None).home_share.is_none());
        assert_eq!(
            r.switched_out_share,
            Some(0.0),
            "no wait began switched out"
        );
        assert_eq!(r.run_delay_switched_out_p99_us, None);
    }

    #[test]
    fn waits_that_began_switched_out_are_reported_apart() {
        let places = "2n2c2t".parse::<GuestTopo>().unwrap().places();
        let mut g = GroupCounters {
            cpu_ns: vec![1_000_000_000; 8],
            delay_hist: vec![0; hist::NR_BUCKETS],
            preempted_hist: vec![0; hist::NR_BUCKETS],
            ..Default::default()
        };
        // 75 wakeups waiting 50 us, 25 slice ends waiting 3 ms.
        g.delay_hist[hist::bucket(50_000)] = 75;
        g.delay_hist[hist::bucket(3_000_000)] = 25;
        g.preempted_hist[hist::bucket(3_000_000)] = 25;
        g.nr_delays = 100;
        let r = group_report(&g, &places, None);
        assert_eq!(r.switched_out_share, Some(0.25));
        let p99 = r.run_delay_switched_out_p99_us.unwrap();
        assert!((2_900.0..=3_500.0).contains(&p99), "{p99}");
        assert!(r.run_delay_p50_us.unwrap() < 60.0, "the wakeups' waits");
    }
}
