//! Which partitions the balanced groups over-fill: their predicted load
//! (the demand of the groups living there, plus the load nobody balances)
//! is more than the partition's CPUs can run.
//!
//! The fast path's steal wait (an idle CPU of another partition passes
//! over a queued task that ran within the wait, so that its own
//! partition's CPUs take it) keeps a group inside its partition, which is
//! what a balanced group is promised while the load fits the machine
//! (exclusivity of 95% or more). In a partition whose own
//! demand is more than its CPUs, those CPUs do not get through the queue
//! within the wait, and the other partitions' CPUs stood idle meanwhile:
//! the balanced groups got 0.96-0.97x shared mode's CPU time, against
//! 0.98x stealing at once (docs/decisions.md).
//! So a balanced group's queued tasks may be taken at once while its
//! partition is over-full. Groups with an explicit home keep the wait
//! everywhere: locality is what their operator asked for.
//!
//! A partition at about its capacity is not over-full: there its queue
//! is short and its own CPUs get to it within the wait. Demand includes
//! the time tasks waited, which the wait itself lengthens, so the rule
//! has hysteresis: a partition becomes over-full above `ENTER` times its
//! capacity and stops below `LEAVE` times. One sysbench-memory thread per
//! CPU still read 1.15-1.28x in some partitions under TCG (the bench's
//! own tasks beside it, and the waits they cause, count) and was marked;
//! its queue is seldom non-empty (20-40 steals a run), and it kept
//! 99.6-100% exclusivity either way.

use crate::balance::{Group, Part, relative_loads};

/// Relative load above which a partition counts as over-full.
pub const ENTER: f64 = 1.15;
/// Relative load under which an over-full partition stops counting so.
pub const LEAVE: f64 = 1.0;

/// Whether a partition at relative load `rel` is over-full, given
/// whether it was.
pub fn overfull(rel: f64, was: bool) -> bool {
    if was { rel >= LEAVE } else { rel > ENTER }
}

/// Every partition's relative load as the groups live now (groups not
/// placed yet count nowhere: their load is in the background where they
/// ran).
pub fn relative_demand(parts: &[Part], groups: &[Group]) -> Vec<f64> {
    let placed: Vec<Group> = groups
        .iter()
        .filter(|g| g.home.is_some_and(|h| h < parts.len()))
        .copied()
        .collect();
    let assign: Vec<usize> = placed.iter().filter_map(|g| g.home).collect();
    relative_loads(parts, &placed, &assign)
}

/// Every partition's over-full flag, from its relative demand (as
/// `relative_demand` gives it) and the flags of the period before.
pub fn overfull_flags(rel: &[f64], was: &[bool]) -> Vec<bool> {
    rel.iter()
        .enumerate()
        .map(|(p, &r)| overfull(r, was.get(p).copied().unwrap_or(false)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn part(capacity: f64, background: f64) -> Part {
        Part {
            capacity,
            background,
        }
    }

    fn group(load: f64, home: Option<usize>) -> Group {
        Group { load, home }
    }

    /// The flags as the balancer takes them: from the groups as they live.
    fn overfull_parts(parts: &[Part], groups: &[Group], was: &[bool]) -> Vec<bool> {
        overfull_flags(&relative_demand(parts, groups), was)
    }

    #[test]
    fn enters_above_capacity_and_leaves_well_below() {
        assert!(!overfull(1.05, false));
        assert!(overfull(1.16, false));
        assert!(overfull(1.05, true));
        assert!(!overfull(0.99, true));
        assert!(!overfull(1.1, false));
    }

    #[test]
    fn a_fitting_load_is_not_overfull() {
        // The balancer's fitting hackbench cell: one group of ~2.9 CPUs' demand
        // per 4-CPU partition.
        let parts = vec![part(4.0, 0.1); 4];
        let groups: Vec<Group> = (0..4).map(|p| group(2.9, Some(p))).collect();
        assert_eq!(overfull_parts(&parts, &groups, &[false; 4]), vec![false; 4]);
    }

    #[test]
    fn a_load_at_capacity_is_not_overfull() {
        let parts = vec![part(4.0, 0.1); 4];
        let groups: Vec<Group> = (0..4).map(|p| group(4.0, Some(p))).collect();
        assert_eq!(overfull_parts(&parts, &groups, &[false; 4]), vec![false; 4]);
    }

    #[test]
    fn a_full_machine_is_overfull_where_the_demand_is() {
        // Two hackbench groups' worth per partition (5.4 on 4), but the
        // last partition holds only one.
        let parts = vec![part(4.0, 0.0); 4];
        let mut groups: Vec<Group> = (0..3).map(|p| group(5.4, Some(p))).collect();
        groups.push(group(2.7, Some(3)));
        assert_eq!(
            overfull_parts(&parts, &groups, &[false; 4]),
            vec![true, true, true, false]
        );
    }

    #[test]
    fn background_counts_and_unplaced_groups_do_not() {
        let parts = vec![part(4.0, 3.0), part(4.0, 0.0)];
        let groups = vec![group(2.0, Some(0)), group(9.0, None)];
        assert_eq!(
            overfull_parts(&parts, &groups, &[false, false]),
            vec![true, false]
        );
    }

    #[test]
    fn steady_load_near_capacity_does_not_flap() {
        // A load swinging between 1.02 and 1.2 of capacity, as the wait
        // it causes comes and goes, stays over-full once it got there.
        let parts = vec![part(4.0, 0.0)];
        let mut was = vec![false];
        let mut flips = 0;
        for i in 0..40 {
            let load = if i % 2 == 0 { 4.8 } else { 4.1 };
            let now = overfull_parts(&parts, &[group(load, Some(0))], &was);
            flips += (now != was) as u32;
            was = now;
        }
        assert_eq!(flips, 1);
    }

    proptest! {
        /// Over periods of any loads: a flag is set only above ENTER, is
        /// kept only at LEAVE or more, and every partition is judged by
        /// its own groups and background alone.
        #[test]
        fn flags_follow_each_partitions_own_demand(
            periods in prop::collection::vec(
                prop::collection::vec((0.0f64..8.0, 0usize..4), 1..8), 1..20),
            background in prop::collection::vec(0.0f64..2.0, 4),
        ) {
            let parts: Vec<Part> = background.iter().map(|&b| part(4.0, b)).collect();
            let mut was = vec![false; 4];
            for loads in periods {
                let groups: Vec<Group> =
                    loads.iter().map(|&(l, p)| group(l, Some(p))).collect();
                let now = overfull_parts(&parts, &groups, &was);
                for p in 0..4 {
                    let rel = (background[p]
                        + loads.iter().filter(|g| g.1 == p).map(|g| g.0).sum::<f64>())
                        / 4.0;
                    if now[p] && !was[p] {
                        prop_assert!(rel > ENTER);
                    }
                    if now[p] {
                        prop_assert!(rel >= LEAVE);
                    } else {
                        prop_assert!(rel <= ENTER || was[p] && rel < LEAVE);
                    }
                }
                was = now;
            }
        }
    }
}
