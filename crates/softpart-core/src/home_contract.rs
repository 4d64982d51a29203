//! Homes against the cgroup CPU contract: which homes' tenants are
//! entitled to more CPU time than their homes' CPUs can give.
//!
//! A home decides where its tenant runs first; the contract (`cpu.weight`,
//! `cpu.max`, water-filled over the whole machine by [`crate::shares`])
//! decides how much each tenant gets when tenants contend. The two
//! disagree when the tenants homed on some CPUs are entitled to more than
//! those CPUs: a weight-300 tenant homed on a node of 4 CPUs and entitled
//! to 5.25 cannot get its 5.25 there, however its home's queue is ordered.
//! Such a home is *short*, and the fast path then lets its tasks compete by
//! vtime with the owners of other homes on their CPUs, so that the
//! contract holds machine-wide. A home that is not short keeps its
//! owners first on its CPUs, as without a contract.
//!
//! Homes may overlap (a home of a whole node beside one of two of its
//! CPUs): each home's entitled demand is spread over its CPUs evenly, and
//! a home is short when the demand that lands on its CPUs, its own and
//! that of the homes overlapping it, exceeds them.

use std::collections::BTreeSet;

/// One home as the contract sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct HomeDemand {
    /// Its CPUs (home ∩ online).
    pub cpus: BTreeSet<usize>,
    /// What the cgroups homed there are entitled to, in CPUs, summed.
    pub entitled: f64,
}

/// A home becomes short when the demand on its CPUs is above this share
/// of them, and stops being short at or below [`SHORT_OFF`]. The gap keeps
/// a tenant whose entitlement sits at its home's size from switching the
/// rule on and off with every reading; 5% of a 4-CPU home is a fifth of a
/// CPU, well above the smoothed load's noise.
pub const SHORT_ON: f64 = 1.05;
/// See [`SHORT_ON`].
pub const SHORT_OFF: f64 = 1.0;

/// For each home, whether it is short: the entitled demand landing on
/// its CPUs exceeds them by [`SHORT_ON`] (or, if it was short before, is
/// still above [`SHORT_OFF`] of them). `was` gives last period's answer
/// per home (missing entries: not short).
pub fn short_homes(homes: &[HomeDemand], was: &[bool]) -> Vec<bool> {
    // Each home's demand spread over its CPUs: what lands on one CPU from
    // every home holding it. A home's demand is then the sum over its own
    // CPUs, in one pass over each home's CPUs rather than over every pair.
    let mut on_cpu: std::collections::HashMap<usize, f64> = std::collections::HashMap::new();
    for h in homes
        .iter()
        .filter(|h| !h.cpus.is_empty() && h.entitled > 0.0)
    {
        let each = h.entitled / h.cpus.len() as f64;
        for &c in &h.cpus {
            *on_cpu.entry(c).or_default() += each;
        }
    }
    homes
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let size = h.cpus.len() as f64;
            if size == 0.0 {
                return false;
            }
            let demand: f64 = h.cpus.iter().filter_map(|c| on_cpu.get(c)).sum();
            let line = if was.get(i).copied().unwrap_or(false) {
                SHORT_OFF
            } else {
                SHORT_ON
            };
            demand > line * size
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn home(cpus: std::ops::Range<usize>, entitled: f64) -> HomeDemand {
        HomeDemand {
            cpus: cpus.collect(),
            entitled,
        }
    }

    #[test]
    fn a_tenant_entitled_beyond_its_node_is_short() {
        // Weight 100 (16 threads) on node 0, weight 300 (8 threads) on
        // node 1, a capped homeless tenant taking 1 CPU: 1.75 and 5.25.
        let homes = [home(0..4, 1.75), home(4..8, 5.25)];
        assert_eq!(short_homes(&homes, &[]), vec![false, true]);
    }

    #[test]
    fn tenants_sharing_a_node_add_up() {
        // Three tenants of equal weight on 8 CPUs, two homed on node 0:
        // each entitled to 8/3, neither alone more than node 0's 4.
        let homes = [
            home(0..4, 8.0 / 3.0),
            home(0..4, 8.0 / 3.0),
            home(4..8, 8.0 / 3.0),
        ];
        assert_eq!(short_homes(&homes, &[]), vec![true, true, false]);
    }

    #[test]
    fn a_home_within_a_larger_one_carries_its_share_of_it() {
        // A whole-machine home entitled to 4 of 8 CPUs puts 1 on CPUs 0-1;
        // with 1.5 of its own there, 2.5 on 2 CPUs: short. The machine
        // home itself carries 5.5 on 8: not.
        let homes = [home(0..8, 4.0), home(0..2, 1.5)];
        assert_eq!(short_homes(&homes, &[]), vec![false, true]);
    }

    #[test]
    fn the_rule_turns_on_above_the_margin_and_off_at_the_size() {
        let at = |e| [home(0..4, e)];
        assert_eq!(short_homes(&at(4.1), &[false]), vec![false]);
        assert_eq!(short_homes(&at(4.3), &[false]), vec![true]);
        assert_eq!(short_homes(&at(4.1), &[true]), vec![true]);
        assert_eq!(short_homes(&at(4.0), &[true]), vec![false]);
        // No CPUs, nothing entitled: never short.
        assert_eq!(short_homes(&[home(0..0, 3.0)], &[true]), vec![false]);
        assert_eq!(short_homes(&[home(0..4, 0.0)], &[true]), vec![false]);
    }

    proptest! {
        /// Entitlements never sum past the machine: on disjoint homes that
        /// cover it, not every home can be short, and a home is short only
        /// if its own tenants are entitled beyond it.
        #[test]
        fn disjoint_homes_are_short_only_by_their_own_demand(
            parts in proptest::collection::vec((1usize..8, 0.0f64..1.0), 1..6),
        ) {
            let total: usize = parts.iter().map(|p| p.0).sum();
            let raw: f64 = parts.iter().map(|p| p.1).sum::<f64>().max(1e-9);
            let mut homes = Vec::new();
            let mut at = 0;
            for &(n, w) in &parts {
                homes.push(home(at..at + n, w / raw * total as f64));
                at += n;
            }
            let short = short_homes(&homes, &[]);
            for (h, s) in homes.iter().zip(&short) {
                prop_assert_eq!(*s, h.entitled > SHORT_ON * h.cpus.len() as f64);
            }
            prop_assert!(short.iter().any(|s| !s));
        }
    }
}
