//! The control plane's side of the cgroup slot table: a copy of the fast
//! path's table, taken again only when a cgroup callback changed it (the
//! fast path bumps `cgroups_changed` after each change), and the cgroups'
//! load, which the fast path counts per load domain (a NUMA node) rather
//! than per CPU, so that a reading costs a few bytes per cgroup and node.

use crate::bpf_intf::softpart_consts_SP_LOAD_DOMAINS as LOAD_DOMAINS;
use crate::bpf_intf::softpart_consts_SP_MAX_CGROUPS as MAX_CGROUPS;
use crate::bpf_skel::types::{bss, bss_cg_load, sp_cg_load, sp_cgroup};
use crate::traffic::MapTraffic;
use std::collections::BTreeSet;
use std::sync::atomic::{Ordering, fence};

/// A cgroup slot's runnable tasks, summed over the load domains.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct CgroupSums {
    /// Its runnable tasks' summed weight.
    pub weight: i64,
    /// Its runnable tasks.
    pub nr: i64,
}

/// The copy of the slot table and what it was copied at.
#[derive(Default)]
pub(crate) struct CgroupTable {
    /// Slots 0..used of the fast path's table, as of `seen`.
    slots: Vec<sp_cgroup>,
    /// `cgroups_changed` when the copy was taken; None: never taken.
    seen: Option<u64>,
    /// The load domains some CPU counts in (its node modulo LOAD_DOMAINS).
    domains: Vec<usize>,
}

fn read_volatile<T: Copy>(v: &T) -> T {
    // SAFETY: a valid, aligned value of the mapped .bss, written whole by
    // the fast path.
    unsafe { std::ptr::read_volatile(v) }
}

impl CgroupTable {
    /// For a machine whose CPUs have these node ids (as given to the fast
    /// path's `cpu_node`, offline CPUs included).
    pub(crate) fn new(cpu_nodes: impl Iterator<Item = u32>) -> Self {
        let domains: BTreeSet<usize> = cpu_nodes.map(|n| (n % LOAD_DOMAINS) as usize).collect();
        Self {
            domains: domains.into_iter().collect(),
            ..Default::default()
        }
    }

    /// The copy, up to the last slot ever taken.
    pub(crate) fn slots(&self) -> &[sp_cgroup] {
        &self.slots
    }

    /// Takes the copy again if a cgroup callback changed the table since
    /// the last one; true if it did.
    pub(crate) fn refresh(&mut self, bss: &bss, traffic: &mut MapTraffic) -> bool {
        let changed = read_volatile(&bss.cgroups_changed);
        traffic.read::<u64>(1);
        fence(Ordering::Acquire);
        if self.seen == Some(changed) {
            return false;
        }
        let used = (read_volatile(&bss.cgroups_used) as usize).min(MAX_CGROUPS as usize);
        traffic.read::<u32>(1);
        self.slots.clear();
        self.slots
            .extend(bss.cgroups[..used].iter().map(read_volatile));
        traffic.read::<sp_cgroup>(used);
        self.seen = Some(changed);
        true
    }

    /// Each copied slot's runnable load, summed over the load domains.
    pub(crate) fn loads(&self, bss: &bss_cg_load, traffic: &mut MapTraffic) -> Vec<CgroupSums> {
        let used = self.slots.len();
        let mut sums = vec![CgroupSums::default(); used];
        for &d in &self.domains {
            let row = &bss.cg_loads[d * MAX_CGROUPS as usize..][..used];
            for (sum, entry) in sums.iter_mut().zip(row) {
                let v: sp_cg_load = read_volatile(entry);
                sum.weight += v.weight as i64;
                sum.nr += v.nr as i64;
            }
            traffic.read::<sp_cg_load>(used);
        }
        sums
    }

    /// Each copied slot's CPU time run, summed over the load domains.
    pub(crate) fn run_ns(&self, bss: &bss_cg_load, traffic: &mut MapTraffic) -> Vec<u64> {
        let used = self.slots.len();
        let mut sums = vec![0u64; used];
        for &d in &self.domains {
            let row = &bss.cg_run_ns[d * MAX_CGROUPS as usize..][..used];
            for (sum, entry) in sums.iter_mut().zip(row) {
                *sum = sum.wrapping_add(read_volatile(entry));
            }
            traffic.read::<u64>(used);
        }
        sums
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zeroed .bss, as the fast path's is at load.
    fn zeroed_bss() -> Box<bss> {
        // SAFETY: bss is plain data (integers and arrays of them), for
        // which all-zero bytes are a valid value.
        unsafe { Box::<bss>::new_zeroed().assume_init() }
    }

    fn zeroed_loads() -> Box<bss_cg_load> {
        // SAFETY: as above.
        unsafe { Box::<bss_cg_load>::new_zeroed().assume_init() }
    }

    #[test]
    fn the_table_is_copied_again_only_after_a_change() {
        let mut b = zeroed_bss();
        let mut t = CgroupTable::new([0, 0, 1, 1].into_iter());
        let mut traffic = MapTraffic::default();
        b.cgroups_used = 3;
        b.cgroups[1].cgid = 42;
        b.cgroups[1].weight = 300;
        b.cgroups_changed = 1;
        assert!(t.refresh(&b, &mut traffic));
        assert_eq!(t.slots().len(), 3);
        assert_eq!((t.slots()[1].cgid, t.slots()[1].weight), (42, 300));
        let copied = traffic.read;
        assert_eq!(
            copied,
            (8 + 4 + 3 * size_of::<sp_cgroup>()) as u64,
            "the counter, the slots used and three slots"
        );
        // Unchanged: only the counter is read, and the copy stands.
        b.cgroups[1].weight = 500;
        assert!(!t.refresh(&b, &mut traffic));
        assert_eq!(traffic.read - copied, 8);
        assert_eq!(t.slots()[1].weight, 300);
        b.cgroups_changed = 2;
        assert!(t.refresh(&b, &mut traffic));
        assert_eq!(t.slots()[1].weight, 500);
    }

    #[test]
    fn loads_and_run_time_are_summed_over_the_nodes_that_have_cpus() {
        let mut b = zeroed_bss();
        // CPUs on nodes 0 and 2 only; a stray count in domain 1 is not read.
        let mut t = CgroupTable::new([0, 2, 2].into_iter());
        let mut traffic = MapTraffic::default();
        let n = MAX_CGROUPS as usize;
        b.cgroups_used = 2;
        b.cgroups_changed = 1;
        t.refresh(&b, &mut traffic);
        let mut l = zeroed_loads();
        l.cg_loads[1].weight = 100;
        l.cg_loads[1].nr = 1;
        l.cg_loads[2 * n + 1].weight = 200;
        l.cg_loads[2 * n + 1].nr = 2;
        l.cg_loads[n + 1].nr = 7;
        l.cg_run_ns[1] = 5;
        l.cg_run_ns[2 * n + 1] = 6;
        let before = traffic.read;
        let loads = t.loads(&l, &mut traffic);
        assert_eq!(loads[0], CgroupSums::default());
        assert_eq!(loads[1], CgroupSums { weight: 300, nr: 3 });
        assert_eq!(
            traffic.read - before,
            (2 * 2 * size_of::<sp_cg_load>()) as u64
        );
        assert_eq!(t.run_ns(&l, &mut traffic), vec![0, 11]);
    }
}
