//! The cgroup CPU contract, control side. Every period each cgroup's load
//! (its runnable tasks, counted per CPU by the fast path) and contract
//! (cpu.weight and cpu.max, from the slot table the fast path fills from
//! the kernel's callbacks) become the rate its tasks' CPU time is charged
//! at on the vtime clock (softpart_core::shares::charge_rates).

use crate::bpf_intf::softpart_consts_SP_RATE_ONE as RATE_ONE;
use crate::bpf_skel::types::sp_cgroup;
use softpart_core::shares::{CgroupLoad, charge_rates};
use std::collections::HashMap;

/// How much of a new reading the smoothed load takes each period: a time
/// constant of about five periods (100 ms), so that a task that runs in
/// bursts counts by how often it is runnable, not by where a reading fell.
const SMOOTHING: f64 = 0.2;

/// The highest rate given, in task weight per CPU: a cgroup's tasks pay
/// at most 10000x a plain task's charge (the weight range's ratio).
const MAX_RATE: f64 = 100.0 * 10_000.0;

/// Smoothed runnable load per cgroup id: (summed weight, count).
#[derive(Default)]
pub(crate) struct Contract {
    load: HashMap<u64, (f64, f64)>,
}

/// cpu.max as CPUs, `None` for "max" (or a quota the kernel would not set).
pub(crate) fn cap_cpus(quota_us: u64, period_us: u64) -> Option<f64> {
    (quota_us != u64::MAX && period_us > 0).then(|| quota_us as f64 / period_us as f64)
}

impl Contract {
    /// One period: smooths `runnable` (per slot, from
    /// counters::cgroup_runnable) and writes each slot's rate.
    pub(crate) fn refresh(&mut self, slots: &mut [sp_cgroup], runnable: &[(i64, i64)], cpus: f64) {
        let used: Vec<usize> = (0..slots.len()).filter(|&i| slots[i].cgid != 0).collect();
        let index: HashMap<u32, usize> = used
            .iter()
            .enumerate()
            .map(|(at, &slot)| (slot as u32, at))
            .collect();
        let mut seen = HashMap::with_capacity(used.len());
        let loads: Vec<CgroupLoad> = used
            .iter()
            .map(|&slot| {
                let cg = &slots[slot];
                let (w, n) = runnable.get(slot).copied().unwrap_or_default();
                let old = self.load.get(&cg.cgid).copied().unwrap_or((0.0, 0.0));
                let now = (w.max(0) as f64, n.max(0) as f64);
                let smooth = (
                    old.0 + SMOOTHING * (now.0 - old.0),
                    old.1 + SMOOTHING * (now.1 - old.1),
                );
                seen.insert(cg.cgid, smooth);
                CgroupLoad {
                    parent: index.get(&cg.parent).copied(),
                    weight: cg.weight.max(1),
                    cap: cap_cpus(cg.quota_us, cg.period_us),
                    runnable_weight: smooth.0,
                    runnable: smooth.1,
                }
            })
            .collect();
        self.load = seen;
        let rates = charge_rates(&loads, cpus);
        for (&slot, rate) in used.iter().zip(rates) {
            slots[slot].rate = if rate > 0.0 {
                (rate.min(MAX_RATE) * RATE_ONE as f64).round().max(1.0) as u32
            } else {
                0
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(cgid: u64, parent: u32, weight: u32) -> sp_cgroup {
        sp_cgroup {
            cgid,
            parent,
            weight,
            quota_us: u64::MAX,
            period_us: 100_000,
            ..Default::default()
        }
    }

    #[test]
    fn rates_follow_weights_once_the_load_settles() {
        let none = crate::bpf_intf::softpart_consts_SP_NO_CGROUP;
        // Free slot 1 between them: slots are not dense.
        let mut slots = vec![
            slot(1, none, 100),
            sp_cgroup::default(),
            slot(7, 0, 100),
            slot(8, 0, 300),
        ];
        let runnable = vec![(0, 0), (0, 0), (1600, 16), (2400, 24)];
        let mut c = Contract::default();
        for _ in 0..100 {
            c.refresh(&mut slots, &runnable, 8.0);
        }
        // Entitlements 2 and 6 CPUs: 800 and 400 per CPU.
        let one = RATE_ONE as f64;
        assert!(
            (slots[2].rate as f64 / one - 800.0).abs() < 1.0,
            "{}",
            slots[2].rate
        );
        assert!(
            (slots[3].rate as f64 / one - 400.0).abs() < 1.0,
            "{}",
            slots[3].rate
        );
        assert_eq!(slots[0].rate, 0);
        assert_eq!(slots[1].rate, 0);
        // Gone: the next reading forgets it.
        slots[3].cgid = 0;
        c.refresh(&mut slots, &runnable, 8.0);
        assert!(!c.load.contains_key(&8));
    }

    #[test]
    fn cpu_max_reads_as_cpus() {
        assert_eq!(cap_cpus(u64::MAX, 100_000), None);
        assert_eq!(cap_cpus(50_000, 100_000), Some(0.5));
        assert_eq!(cap_cpus(200_000, 100_000), Some(2.0));
    }
}
