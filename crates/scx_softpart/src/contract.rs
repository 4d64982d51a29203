//! The cgroup CPU contract, control side. Every period each cgroup's load
//! (its runnable tasks, counted per node by the fast path) and contract
//! (cpu.weight and cpu.max, from the slot table the fast path fills from
//! the kernel's callbacks) become the rate its tasks' CPU time is charged
//! at on the vtime clock (softpart_core::shares::charge_rates).

use crate::bpf_intf::softpart_consts_SP_CAP_DEPTH as CAP_DEPTH;
use crate::bpf_intf::softpart_consts_SP_NO_CGROUP as NO_CGROUP;
use crate::bpf_intf::softpart_consts_SP_RATE_ONE as RATE_ONE;
use crate::bpf_skel::types::{sp_cg_ctl, sp_cgroup};
use crate::cgroup_table::CgroupSums;
use softpart_core::shares::{CgroupLoad, contract_pass};
use std::collections::HashMap;
use std::sync::atomic::{Ordering, fence};

/// The smoothed load's time constant, in seconds: a task that runs in
/// bursts counts by how often it is runnable, not by where a reading fell,
/// and a tenant that starts or stops moves the rates within a few tenths
/// of a second.
const LOAD_TAU_S: f64 = 0.2;

/// How much of a new reading a smoothed value with time constant `tau`
/// takes after `secs`.
fn smoothing(secs: f64, tau: f64) -> f64 {
    if secs <= 0.0 {
        return 1.0;
    }
    1.0 - (-secs / tau).exp()
}

/// The highest rate given, in task weight per CPU: a cgroup's tasks pay
/// at most 10000x a plain task's charge (the weight range's ratio).
const MAX_RATE: f64 = 100.0 * 10_000.0;

/// For each cgroup, the nearest one at or above it with a cpu.max cap (an
/// index into `cgroups`): the fast path charges a task's CPU time to that
/// one, then to the nearest capped one above it, and so on.
pub(crate) fn nearest_caps(cgroups: &[CgroupLoad]) -> Vec<Option<usize>> {
    cgroups
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let mut at = Some(i);
            // Deeper than cgroups nest: ends a cycle in bad input.
            for _ in 0..256 {
                let c = &cgroups[at?];
                if c.cap.is_some() {
                    return at;
                }
                at = c.parent.filter(|&p| p < cgroups.len());
            }
            None
        })
        .collect()
}

/// For each cgroup, whether more than `depth` capped cgroups are at or
/// above it (`caps`: nearest_caps of the same cgroups): the fast path
/// charges a task's CPU time to the nearest `depth` of them only.
pub(crate) fn caps_beyond(
    cgroups: &[CgroupLoad],
    caps: &[Option<usize>],
    depth: usize,
) -> Vec<bool> {
    (0..cgroups.len())
        .map(|i| {
            let mut at = caps[i];
            // Past the nearest `depth` caps (a bound that also ends a
            // cycle in bad input), is there one more?
            for _ in 0..depth {
                let Some(c) = at else { return false };
                at = cgroups[c]
                    .parent
                    .filter(|&p| p < cgroups.len())
                    .and_then(|p| caps[p]);
            }
            at.is_some()
        })
        .collect()
}

/// What the statistics say of one cgroup, as of the last period.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CgroupView {
    /// Its slot in the fast path's table.
    pub slot: usize,
    pub weight: u32,
    /// cpu.max in CPUs; `None` for "max".
    pub cap: Option<f64>,
    /// What its contract and everyone's load entitle it to, in CPUs (its
    /// own tasks' share and its descendants').
    pub entitled: f64,
    /// CPU time its own tasks ran since it was first seen.
    pub run_ns: u64,
    /// Its own tasks' CPU time lately, in CPUs (about a second's average).
    pub cpus_used: f64,
}

/// The time constant of the smoothed CPU time the statistics show, in
/// seconds.
const USED_TAU_S: f64 = 1.0;

/// For each cgroup, whether it or one above it has cpu.idle set.
pub(crate) fn idle_under(cgroups: &[CgroupLoad], idle: &[bool]) -> Vec<bool> {
    (0..cgroups.len())
        .map(|i| {
            let mut at = Some(i);
            // Deeper than cgroups nest: ends a cycle in bad input.
            for _ in 0..256 {
                let Some(c) = at else { return false };
                if idle.get(c).copied().unwrap_or(false) {
                    return true;
                }
                at = cgroups[c].parent.filter(|&p| p < cgroups.len());
            }
            false
        })
        .collect()
}

/// Per cgroup id: the smoothed runnable load (summed weight, count), the
/// run time counted in its slot before it was first seen there, and what
/// the statistics read.
#[derive(Default)]
pub(crate) struct Contract {
    load: HashMap<u64, (f64, f64)>,
    run_base: HashMap<u64, u64>,
    pub(crate) view: HashMap<u64, CgroupView>,
    last_run_at: Option<std::time::Instant>,
    /// The cgroups now under more capped cgroups than the fast path
    /// charges (SP_CAP_DEPTH), by id.
    caps_too_deep: std::collections::HashSet<u64>,
    /// Cgroups found so, each counted once from when it is found until it
    /// is no longer; and the latest found.
    pub(crate) caps_too_deep_found: u64,
    pub(crate) caps_too_deep_last: u64,
}

/// cpu.max as CPUs, `None` for "max" (or a quota the kernel would not set).
pub(crate) fn cap_cpus(quota_us: u64, period_us: u64) -> Option<f64> {
    (quota_us != u64::MAX && period_us > 0).then(|| quota_us as f64 / period_us as f64)
}

impl Contract {
    /// One period, `secs` after the last: smooths `runnable` (per slot,
    /// from cgroup_table::CgroupTable::loads) and writes each live slot's
    /// rate, cap chain and cpu.idle inheritance into `ctl`, stamped with
    /// the slot's generation as read here: a slot that changed hands since
    /// gets nothing the fast path takes. Only entries that changed are
    /// written; returns how many were.
    pub(crate) fn refresh(
        &mut self,
        slots: &[sp_cgroup],
        ctl: &mut [sp_cg_ctl],
        runnable: &[CgroupSums],
        cpus: f64,
        secs: f64,
    ) -> usize {
        // Each slot's generation before anything else of it: what is read
        // after it is of that cgroup or of a later one, whose generation
        // no longer matches what is written here.
        let gens: Vec<u32> = slots.iter().map(|s| read_gen(&s.slot_gen)).collect();
        let used: Vec<usize> = (0..slots.len())
            .filter(|&i| gens[i] & 1 == 1 && slots[i].cgid != 0)
            .collect();
        let index: HashMap<u32, usize> = used
            .iter()
            .enumerate()
            .map(|(at, &slot)| (slot as u32, at))
            .collect();
        let alpha = smoothing(secs, LOAD_TAU_S);
        let mut seen = HashMap::with_capacity(used.len());
        let loads: Vec<CgroupLoad> = used
            .iter()
            .map(|&slot| {
                let cg = &slots[slot];
                let sums = runnable.get(slot).copied().unwrap_or_default();
                let now = (sums.weight.max(0) as f64, sums.nr.max(0) as f64);
                let smooth = match self.load.get(&cg.cgid) {
                    Some(old) => (
                        old.0 + alpha * (now.0 - old.0),
                        old.1 + alpha * (now.1 - old.1),
                    ),
                    None => (alpha * now.0, alpha * now.1),
                };
                seen.insert(cg.cgid, smooth);
                CgroupLoad {
                    parent: index.get(&cg.parent).copied(),
                    // cpu.idle: the kernel weighs the cgroup at 3/1024 of
                    // a nice-0 task, below the least cpu.weight (1).
                    weight: if cg.idle != 0 { 1 } else { cg.weight.max(1) },
                    cap: cap_cpus(cg.quota_us, cg.period_us),
                    runnable_weight: smooth.0,
                    runnable: smooth.1,
                }
            })
            .collect();
        self.load = seen;
        let (rates, shares) = contract_pass(&loads, cpus);
        self.note_view(slots, &used, &loads, &shares);
        let caps = nearest_caps(&loads);
        self.note_caps_too_deep(
            slots,
            &used,
            &caps_beyond(&loads, &caps, CAP_DEPTH as usize),
        );
        let idle: Vec<bool> = used.iter().map(|&slot| slots[slot].idle != 0).collect();
        let under = idle_under(&loads, &idle);
        let mut written = 0;
        for (at, &slot) in used.iter().enumerate() {
            let rate = rates[at];
            let want = sp_cg_ctl {
                slot_gen: gens[slot],
                rate: if rate > 0.0 {
                    (rate.min(MAX_RATE) * RATE_ONE as f64).round().max(1.0) as u32
                } else {
                    0
                },
                cap_up: caps[at].map_or(NO_CGROUP, |c| used[c] as u32),
                idle_under: under[at] as u32,
            };
            if let Some(entry) = ctl.get_mut(slot)
                && write_ctl(entry, &want)
            {
                written += 1;
            }
        }
        written
    }
}

/// A slot generation as the fast path last wrote it.
fn read_gen(slot_gen: &u32) -> u32 {
    // SAFETY: a valid, aligned u32 of the mapped table; the fast path
    // writes it whole.
    let slot_gen = unsafe { std::ptr::read_volatile(slot_gen) };
    fence(Ordering::Acquire);
    slot_gen
}

/// Writes `want` over `entry` if it differs: the fields first, then the
/// generation that makes the fast path take them, so that it never takes
/// one cgroup's generation with another's fields. True if it wrote.
fn write_ctl(entry: &mut sp_cg_ctl, want: &sp_cg_ctl) -> bool {
    if entry.slot_gen == want.slot_gen
        && entry.rate == want.rate
        && entry.cap_up == want.cap_up
        && entry.idle_under == want.idle_under
    {
        return false;
    }
    // SAFETY: fields of a valid, aligned entry of the mapped table, which
    // the fast path only reads.
    unsafe {
        std::ptr::write_volatile(&mut entry.rate, want.rate);
        std::ptr::write_volatile(&mut entry.cap_up, want.cap_up);
        std::ptr::write_volatile(&mut entry.idle_under, want.idle_under);
        fence(Ordering::Release);
        std::ptr::write_volatile(&mut entry.slot_gen, want.slot_gen);
    }
    true
}

impl Contract {
    /// What the cgroups homed on each home id are entitled to, in CPUs
    /// (`homed`: cgroup id -> its home id). A homed cgroup inside another
    /// homed cgroup counts on its own home, and its entitlement is taken
    /// off its ancestor's, which includes it. Cgroups without a slot
    /// (not under the cpu controller, or the table full) count nothing.
    pub(crate) fn entitled_by_home(
        &self,
        slots: &[sp_cgroup],
        homed: &HashMap<u64, u32>,
    ) -> HashMap<u32, f64> {
        let mut out: HashMap<u32, f64> = HashMap::new();
        for (&cgid, &home) in homed {
            let Some(v) = self.view.get(&cgid) else {
                continue;
            };
            *out.entry(home).or_default() += v.entitled;
            // The nearest homed ancestor counted this cgroup's share too.
            let mut at = slots.get(v.slot).map(|s| s.parent);
            for _ in 0..256 {
                let Some(up) = at.and_then(|p| slots.get(p as usize)) else {
                    break;
                };
                if let Some(&up_home) = homed.get(&up.cgid) {
                    *out.entry(up_home).or_default() -= v.entitled;
                    break;
                }
                at = Some(up.parent);
            }
        }
        for e in out.values_mut() {
            *e = e.max(0.0);
        }
        out
    }

    /// Counts the cgroups newly found under more capped cgroups than the
    /// fast path charges (`beyond`, per used slot).
    fn note_caps_too_deep(&mut self, slots: &[sp_cgroup], used: &[usize], beyond: &[bool]) {
        let now: std::collections::HashSet<u64> = used
            .iter()
            .zip(beyond)
            .filter(|&(_, &b)| b)
            .map(|(&slot, _)| slots[slot].cgid)
            .collect();
        for &cgid in now.difference(&self.caps_too_deep) {
            self.caps_too_deep_found += 1;
            self.caps_too_deep_last = cgid;
        }
        self.caps_too_deep = now;
    }

    /// The statistics' view: each cgroup's contract and entitlement; its
    /// run time as last read (note_run).
    fn note_view(
        &mut self,
        slots: &[sp_cgroup],
        used: &[usize],
        loads: &[CgroupLoad],
        shares: &[f64],
    ) {
        let mut view = HashMap::with_capacity(used.len());
        for (at, &slot) in used.iter().enumerate() {
            let cg = &slots[slot];
            let old = self.view.get(&cg.cgid);
            view.insert(
                cg.cgid,
                CgroupView {
                    slot,
                    weight: cg.weight,
                    cap: loads[at].cap,
                    entitled: shares[at],
                    run_ns: old.map_or(0, |o| o.run_ns),
                    cpus_used: old.map_or(0.0, |o| o.cpus_used),
                },
            );
        }
        self.view = view;
    }

    /// Each cgroup's run time (`run`: per slot, from
    /// cgroup_table::CgroupTable::run_ns), counted from when its id was
    /// first seen in its slot (a slot's counter goes on from the cgroup
    /// that had it before), and its smoothed CPU use, for the statistics.
    pub(crate) fn note_run(&mut self, run: &[u64]) {
        let now = std::time::Instant::now();
        let secs = self
            .last_run_at
            .map_or(0.0, |t| now.duration_since(t).as_secs_f64());
        self.last_run_at = Some(now);
        let alpha = smoothing(secs, USED_TAU_S);
        let mut base = HashMap::with_capacity(self.view.len());
        for (&cgid, v) in self.view.iter_mut() {
            let total = run.get(v.slot).copied().unwrap_or(0);
            let from = *self.run_base.get(&cgid).unwrap_or(&total);
            base.insert(cgid, from);
            let run_ns = total.saturating_sub(from);
            if secs > 0.0 {
                let now = run_ns.saturating_sub(v.run_ns) as f64 / 1e9 / secs;
                v.cpus_used += alpha * (now - v.cpus_used);
            }
            v.run_ns = run_ns;
        }
        self.run_base = base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(cgid: u64, parent: u32, weight: u32) -> sp_cgroup {
        sp_cgroup {
            cgid,
            slot_gen: 1,
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
        let sums = |weight, nr| CgroupSums { weight, nr };
        let runnable = vec![sums(0, 0), sums(0, 0), sums(1600, 16), sums(2400, 24)];
        let mut ctl = vec![sp_cg_ctl::default(); slots.len()];
        let mut c = Contract::default();
        for _ in 0..100 {
            c.refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        }
        // Entitlements 2 and 6 CPUs: 800 and 400 per CPU.
        let one = RATE_ONE as f64;
        assert!(
            (ctl[2].rate as f64 / one - 800.0).abs() < 1.0,
            "{}",
            ctl[2].rate
        );
        assert!(
            (ctl[3].rate as f64 / one - 400.0).abs() < 1.0,
            "{}",
            ctl[3].rate
        );
        assert_eq!(ctl[0].rate, 0);
        assert_eq!(ctl[1].rate, 0);
        assert_eq!(
            ctl.iter().map(|c| c.slot_gen).collect::<Vec<_>>(),
            vec![1, 0, 1, 1]
        );
        // Gone: the next reading forgets it.
        slots[3].cgid = 0;
        slots[3].slot_gen = 2;
        c.refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        assert!(!c.load.contains_key(&8));
    }

    #[test]
    fn charges_go_to_the_nearest_cap_above() {
        let none = crate::bpf_intf::softpart_consts_SP_NO_CGROUP;
        // root (0) -> a (1, capped) -> x (2) -> y (3, capped); root -> b (4).
        let mut slots = vec![
            slot(1, none, 100),
            slot(2, 0, 100),
            slot(3, 1, 100),
            slot(4, 2, 100),
            slot(5, 0, 100),
        ];
        slots[1].quota_us = 100_000;
        slots[3].quota_us = 50_000;
        let runnable = vec![CgroupSums::default(); 5];
        let mut ctl = vec![sp_cg_ctl::default(); slots.len()];
        Contract::default().refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        let caps: Vec<u32> = ctl.iter().map(|s| s.cap_up).collect();
        assert_eq!(caps, vec![none, 1, 1, 3, none]);
        // cpu.idle on a: it and everything below it.
        slots[1].idle = 1;
        Contract::default().refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        let idle: Vec<u32> = ctl.iter().map(|s| s.idle_under).collect();
        assert_eq!(idle, vec![0, 1, 1, 1, 0]);
        // A cycle in bad input ends.
        let looped = vec![
            CgroupLoad {
                parent: Some(1),
                weight: 100,
                cap: None,
                runnable_weight: 0.0,
                runnable: 0.0,
            },
            CgroupLoad {
                parent: Some(0),
                weight: 100,
                cap: None,
                runnable_weight: 0.0,
                runnable: 0.0,
            },
        ];
        assert_eq!(nearest_caps(&looped), vec![None, None]);
        assert_eq!(idle_under(&looped, &[false, false]), vec![false, false]);
    }

    #[test]
    fn cgroups_under_more_caps_than_are_charged_are_found_once_each() {
        let none = crate::bpf_intf::softpart_consts_SP_NO_CGROUP;
        let depth = CAP_DEPTH as usize;
        // A chain root -> c1 -> ... -> c(depth + 2), each capped but root,
        // with an uncapped leaf under the last: the deepest two and the
        // leaf are under more than `depth` caps.
        let n = depth + 4;
        let mut slots: Vec<sp_cgroup> = (0..n)
            .map(|i| slot(i as u64 + 1, if i == 0 { none } else { i as u32 - 1 }, 100))
            .collect();
        for s in &mut slots[1..n - 1] {
            s.quota_us = 50_000;
        }
        let runnable = vec![CgroupSums::default(); n];
        let mut ctl = vec![sp_cg_ctl::default(); n];
        let mut c = Contract::default();
        c.refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        assert_eq!(c.caps_too_deep_found, 3);
        assert!(
            c.caps_too_deep_last >= n as u64 - 2,
            "{}",
            c.caps_too_deep_last
        );
        // The same tree again: nothing new.
        c.refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        assert_eq!(c.caps_too_deep_found, 3);
        // The topmost cap lifted: only the leaf and the last are deeper.
        slots[1].quota_us = u64::MAX;
        c.refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        assert_eq!(c.caps_too_deep_found, 3);
        // Put back: the cgroup above them is found again, and counted.
        slots[1].quota_us = 50_000;
        c.refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        assert_eq!(c.caps_too_deep_found, 4);
        assert_eq!(c.caps_too_deep_last, n as u64 - 2);
        // Within the depth: none.
        let loads: Vec<CgroupLoad> = (0..depth)
            .map(|i| CgroupLoad {
                parent: i.checked_sub(1),
                weight: 100,
                cap: Some(0.5),
                runnable_weight: 0.0,
                runnable: 0.0,
            })
            .collect();
        let caps = nearest_caps(&loads);
        assert_eq!(caps_beyond(&loads, &caps, depth), vec![false; depth]);
    }

    #[test]
    fn homed_cgroups_add_up_by_home_without_counting_a_nested_one_twice() {
        let none = crate::bpf_intf::softpart_consts_SP_NO_CGROUP;
        // root (0) -> a (1) -> a1 (2); root -> b (3); all busy.
        let slots = vec![
            slot(1, none, 100),
            slot(2, 0, 100),
            slot(3, 1, 100),
            slot(4, 0, 300),
        ];
        let sums = |nr: i64| CgroupSums {
            weight: 100 * nr,
            nr,
        };
        let runnable = vec![sums(0), sums(4), sums(4), sums(8)];
        let mut ctl = vec![sp_cg_ctl::default(); slots.len()];
        let mut c = Contract::default();
        for _ in 0..100 {
            c.refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        }
        let entitled = |cgid| c.view[&cgid].entitled;
        // a (with a1) 2 CPUs, b 6: b's 8 threads could use 8.
        assert!((entitled(2) - 2.0).abs() < 0.01, "{}", entitled(2));
        assert!((entitled(4) - 6.0).abs() < 0.01, "{}", entitled(4));
        // a homed on home 0, a1 on home 1, b on home 0 too.
        let homed = HashMap::from([(2, 0), (3, 1), (4, 0)]);
        let by_home = c.entitled_by_home(&slots, &homed);
        // a1 (weight 100) beside a's own four tasks (400): a fifth of a's 2.
        let a1 = entitled(3);
        assert!((a1 - 0.4).abs() < 0.01, "{a1}");
        assert!((by_home[&0] - (8.0 - a1)).abs() < 0.01, "{by_home:?}");
        assert!((by_home[&1] - a1).abs() < 0.01, "{by_home:?}");
        // A cgroup the contract has not seen counts nothing.
        let by_home = c.entitled_by_home(&slots, &HashMap::from([(99, 2)]));
        assert!(by_home.is_empty(), "{by_home:?}");
    }

    #[test]
    fn a_slot_being_set_up_or_given_to_another_cgroup_gets_nothing_of_its_predecessor() {
        let none = crate::bpf_intf::softpart_consts_SP_NO_CGROUP;
        // root (0) -> a (1, capped at 1 CPU, busy).
        let mut slots = vec![slot(1, none, 100), slot(2, 0, 100)];
        slots[1].quota_us = 100_000;
        let busy = CgroupSums { weight: 400, nr: 4 };
        let runnable = vec![CgroupSums::default(), busy];
        let mut ctl = vec![sp_cg_ctl::default(); 2];
        let mut c = Contract::default();
        c.refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        assert_eq!((ctl[1].slot_gen, ctl[1].cap_up), (1, 1));
        let fields = |c: &sp_cg_ctl| (c.slot_gen, c.rate, c.cap_up, c.idle_under);
        let was = fields(&ctl[1]);
        // a exits (generation 2) and b's cgroup_init has the slot, not done
        // yet (still 2): nothing is written for it.
        slots[1].slot_gen = 2;
        slots[1].cgid = 3;
        slots[1].quota_us = u64::MAX;
        c.refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        assert_eq!(fields(&ctl[1]), was);
        // b is set up (3): its own values, under its own generation.
        slots[1].slot_gen = 3;
        c.refresh(&slots, &mut ctl, &runnable, 8.0, 0.1);
        assert_eq!((ctl[1].slot_gen, ctl[1].cap_up), (3, none));
    }

    #[test]
    fn cpu_max_reads_as_cpus() {
        assert_eq!(cap_cpus(u64::MAX, 100_000), None);
        assert_eq!(cap_cpus(50_000, 100_000), Some(0.5));
        assert_eq!(cap_cpus(200_000, 100_000), Some(2.0));
    }
}
