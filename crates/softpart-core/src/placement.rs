//! A model of scx_softpart's wakeup placement (`pick_idle_cpu()` in
//! crates/scx_softpart/src/bpf/main.bpf.c), step for step, so that the
//! order and its invariants are specified and tested without a kernel:
//!
//! A homed task that last ran away from home (on prev, outside it) first
//! keeps to where it went, until its home has had room for a while:
//!
//! a. a home CPU idle for a while (3/4 of a slice in the BPF version)
//! b. prev, if idle
//! c. an idle CPU of prev's partition
//!
//! then, as any wakeup:
//!
//! 1. prev, if idle and at home
//! 2. an idle whole core at home (SMT only)
//! 3. prev's SMT sibling, if idle and at home
//! 4. an idle CPU at home
//! 5. a home CPU running a visitor (homed tasks only): owners first; only
//!    a visitor whose own home has an idle CPU to go to
//! 6. prev, if idle (away from home)
//! 7. an idle CPU in the home's node(s)
//! 8. an idle whole core, then any idle CPU, in the allowed set
//!
//! With the softness flag set, steps 1-7 are skipped. A task without a home
//! uses the partition it last ran in as its home and never evicts.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    RoomLasted,
    StayAway,
    PrevHome,
    CoreHome,
    Sibling,
    CpuHome,
    Evict,
    PrevAway,
    Near,
    CoreAny,
    CpuAny,
}

/// What the fast path sees at a wakeup.
#[derive(Debug, Clone)]
pub struct Wakeup<'a> {
    /// SMT sibling of each CPU (itself if none).
    pub sibling: &'a [usize],
    pub smt: bool,
    pub allowed: &'a BTreeSet<usize>,
    /// Home ∩ allowed (already intersected), and whether it is a real home
    /// (false: the partition of prev, for a task without a home).
    pub home: &'a BTreeSet<usize>,
    pub homed: bool,
    /// The home's node(s).
    pub near: &'a BTreeSet<usize>,
    pub prev: usize,
    pub idle: &'a BTreeSet<usize>,
    /// CPUs running a homed task away from its home, each with that
    /// task's home (in the fast path, its home's partition).
    pub visitors: &'a BTreeMap<usize, BTreeSet<usize>>,
    pub allowed_first: bool,
    /// A homed task that last ran away from home: the partition of prev,
    /// where it ran. None for a task at home or without one.
    pub away_part: Option<&'a BTreeSet<usize>>,
    /// The idle CPUs that have been idle for a while.
    pub lasted: &'a BTreeSet<usize>,
}

impl Wakeup<'_> {
    fn idle_core_in(&self, set: &BTreeSet<usize>) -> Option<usize> {
        set.iter().copied().find(|&c| {
            self.idle.contains(&c) && self.idle.contains(&self.sibling[c]) && set.contains(&c)
        })
    }

    fn idle_in(&self, set: &BTreeSet<usize>) -> Option<usize> {
        set.iter().copied().find(|c| self.idle.contains(c))
    }

    pub fn pick(&self) -> Option<(usize, Step)> {
        let inter = |a: &BTreeSet<usize>| -> BTreeSet<usize> {
            a.intersection(self.allowed).copied().collect()
        };
        if !self.allowed_first
            && self.homed
            && let Some(part) = self.away_part
            && !self.home.contains(&self.prev)
        {
            let home = inter(self.home);
            if let Some(c) = home
                .iter()
                .copied()
                .find(|c| self.idle.contains(c) && self.lasted.contains(c))
            {
                return Some((c, Step::RoomLasted));
            }
            if self.allowed.contains(&self.prev) && self.idle.contains(&self.prev) {
                return Some((self.prev, Step::PrevAway));
            }
            if let Some(c) = self.idle_in(&inter(part)) {
                return Some((c, Step::StayAway));
            }
        }
        if !self.allowed_first {
            let home = inter(self.home);
            if home.contains(&self.prev) && self.idle.contains(&self.prev) {
                return Some((self.prev, Step::PrevHome));
            }
            if self.smt {
                if let Some(c) = self.idle_core_in(&home) {
                    return Some((c, Step::CoreHome));
                }
                let s = self.sibling[self.prev];
                if s != self.prev && home.contains(&s) && self.idle.contains(&s) {
                    return Some((s, Step::Sibling));
                }
            }
            if let Some(c) = self.idle_in(&home) {
                return Some((c, Step::CpuHome));
            }
            if self.homed
                && let Some(&c) = home.iter().find(|c| {
                    self.visitors
                        .get(c)
                        .is_some_and(|vhome| self.idle_in(vhome).is_some())
                })
            {
                return Some((c, Step::Evict));
            }
            if self.allowed.contains(&self.prev) && self.idle.contains(&self.prev) {
                return Some((self.prev, Step::PrevAway));
            }
            if self.homed
                && let Some(c) = self.idle_in(&inter(self.near))
            {
                return Some((c, Step::Near));
            }
        }
        if self.smt
            && let Some(c) = self.idle_core_in(self.allowed)
        {
            return Some((c, Step::CoreAny));
        }
        self.idle_in(self.allowed).map(|c| (c, Step::CpuAny))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SIB: [usize; 8] = [1, 0, 3, 2, 5, 4, 7, 6];

    fn set(bits: u8) -> BTreeSet<usize> {
        (0..8).filter(|c| bits & (1 << c) != 0).collect()
    }

    #[test]
    fn order_on_2n2c2t() {
        let allowed = set(0xff);
        let home = set(0x0f);
        let near = set(0x0f);
        let none = BTreeMap::new();
        // CPU 2 runs a visitor from node 1 (CPUs 4-7).
        let visitor = BTreeMap::from([(2, set(0xf0))]);
        let lasted = BTreeSet::new();
        let mk = |prev,
                  idle: &'static str,
                  visitors: &BTreeMap<usize, BTreeSet<usize>>|
         -> Option<(usize, Step)> {
            let idle: BTreeSet<usize> = idle
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            Wakeup {
                sibling: &SIB,
                smt: true,
                allowed: &allowed,
                home: &home,
                homed: true,
                near: &near,
                prev,
                idle: &idle,
                visitors,
                allowed_first: false,
                away_part: None,
                lasted: &lasted,
            }
            .pick()
        };
        assert_eq!(mk(1, "1,2,3", &none), Some((1, Step::PrevHome)));
        assert_eq!(mk(0, "1,2,3", &none), Some((2, Step::CoreHome)));
        assert_eq!(mk(0, "1,3", &none), Some((1, Step::Sibling)));
        assert_eq!(mk(4, "3", &none), Some((3, Step::CpuHome)));
        assert_eq!(mk(4, "4,6,7", &visitor), Some((2, Step::Evict)));
        // No idle CPU in the visitor's home: no eviction, spill instead.
        let visitor_home_full = BTreeMap::from([(2, set(0x30))]);
        assert_eq!(mk(4, "6,7", &visitor_home_full), Some((6, Step::CoreAny)));
        assert_eq!(mk(4, "4,6,7", &none), Some((4, Step::PrevAway)));
        assert_eq!(mk(4, "6,7", &none), Some((6, Step::CoreAny)));
        assert_eq!(mk(4, "", &none), None);
    }

    #[test]
    fn a_task_away_keeps_to_where_it_went() {
        let allowed = set(0xff);
        let home = set(0x0f);
        let node1 = set(0xf0);
        let none = BTreeMap::new();
        let pick = |prev, idle: u8, lasted: u8| {
            let (idle, lasted) = (set(idle), set(lasted));
            Wakeup {
                sibling: &SIB,
                smt: true,
                allowed: &allowed,
                home: &home,
                homed: true,
                near: &home,
                prev,
                idle: &idle,
                visitors: &none,
                allowed_first: false,
                away_part: Some(&node1),
                lasted: &lasted,
            }
            .pick()
        };
        // A home CPU idle for an instant: stay, on prev or beside it.
        assert_eq!(pick(5, 0x22, 0), Some((5, Step::PrevAway)));
        assert_eq!(pick(5, 0x42, 0), Some((6, Step::StayAway)));
        // Idle for a while: back home.
        assert_eq!(pick(5, 0x22, 0x02), Some((1, Step::RoomLasted)));
        // Nothing idle where it runs: home, as any wakeup.
        assert_eq!(pick(5, 0x02, 0), Some((1, Step::CpuHome)));
    }

    #[allow(clippy::type_complexity)]
    fn wakeup_strategy()
    -> impl Strategy<Value = (u8, u8, u8, u8, u8, usize, bool, bool, bool, bool, u8)> {
        (
            1u8..=255,
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
            0usize..8,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<u8>(),
        )
    }

    proptest! {
        #[test]
        fn invariants((a, h, i, v, vh, prev, smt, homed, af, ran_away, l) in wakeup_strategy()) {
            let allowed = set(a);
            let prev = if allowed.contains(&prev) { prev } else { *allowed.iter().next().unwrap() };
            let home: BTreeSet<usize> = set(h).intersection(&allowed).copied().collect();
            let idle = set(i);
            // Visitors from one other home, `vh`.
            let visitors: BTreeMap<usize, BTreeSet<usize>> =
                set(v).into_iter().map(|c| (c, set(vh))).collect();
            let near = home.clone();
            // prev's partition: its node of four CPUs.
            let prev_part = set(if prev < 4 { 0x0f } else { 0xf0 });
            let away = homed && ran_away && !home.contains(&prev);
            let lasted: BTreeSet<usize> = set(l).intersection(&idle).copied().collect();
            let w = Wakeup { sibling: &SIB, smt, allowed: &allowed, home: &home, homed, near: &near,
                             prev, idle: &idle, visitors: &visitors,
                             allowed_first: af,
                             away_part: ran_away.then_some(&prev_part),
                             lasted: &lasted };
            let pick = w.pick();
            // Never outside the allowed set: softpart never widens affinity.
            if let Some((c, _)) = pick {
                prop_assert!(allowed.contains(&c));
            }
            // Work conservation: an idle allowed CPU is always found.
            if allowed.iter().any(|c| idle.contains(c)) {
                prop_assert!(pick.is_some());
            }
            // A task away goes back to a home CPU idle for a while first.
            if !af && away && home.iter().any(|c| lasted.contains(c)) {
                prop_assert_eq!(pick.map(|(_, s)| s), Some(Step::RoomLasted));
            }
            // It stays where it went while an idle CPU is there.
            let stays = away && allowed.iter().any(|c| prev_part.contains(c) && idle.contains(c));
            // Home first: with an idle CPU at home, the pick is at home.
            if !af && !stays && home.iter().any(|c| idle.contains(c)) {
                let (c, _) = pick.unwrap();
                prop_assert!(home.contains(&c), "picked {} outside home {:?}", c, home);
            }
            // Evictions only for homed tasks, only of visitors at home, only
            // when home has no idle CPU.
            // And only of a visitor whose own home
            // has an idle CPU to go to.
            if let Some((c, Step::Evict)) = pick {
                prop_assert!(homed && visitors.contains_key(&c) && home.contains(&c));
                prop_assert!(!home.iter().any(|x| idle.contains(x)));
                prop_assert!(visitors[&c].iter().any(|x| idle.contains(x)));
            }
            // A visitor whose home has room is always the one taken back
            // over spilling (owners first), with or without the rule; a
            // task away that has an idle CPU where it runs stays there.
            if !af && homed && !stays && !home.iter().any(|x| idle.contains(x))
                && home.iter().any(|x| visitors.get(x).is_some_and(|vh| vh.iter().any(|y| idle.contains(y))))
            {
                prop_assert_eq!(pick.map(|(_, s)| s), Some(Step::Evict));
            }
            // Anything but an eviction lands on an idle CPU.
            if let Some((c, s)) = pick && s != Step::Evict {
                prop_assert!(idle.contains(&c));
            }
        }
    }
}
