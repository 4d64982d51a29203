//! The group balancer's decision, without a kernel: given each
//! partition's capacity and the load nobody balances there, and each
//! balanced group's load and current home, where should groups live, and
//! which one group moves this period?
//!
//! Loads are in CPUs' worth (1.0 = one CPU busy for the whole period). A
//! partition's *relative load* is its load over its capacity; the
//! *imbalance* of an assignment is its largest relative load (the busiest
//! partition decides how much any group must burst out of its home). The
//! target assignment minimises it exactly (branch and bound) for up to
//! `EXACT_MAX_GROUPS` groups, preferring, among equally good ones, the one
//! that moves fewest groups; larger instances use largest-first greedy
//! placement improved by single moves.

/// Exact search up to this many groups.
pub const EXACT_MAX_GROUPS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part {
    /// CPUs in the partition.
    pub capacity: f64,
    /// Load on it that no balanced group accounts for (tasks without a
    /// home, groups with an explicit home).
    pub background: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Group {
    pub load: f64,
    /// Partition index; None for a group not placed yet.
    pub home: Option<usize>,
}

/// Relative load of every partition when group `i` lives in `assign[i]`.
pub fn relative_loads(parts: &[Part], groups: &[Group], assign: &[usize]) -> Vec<f64> {
    part_loads(parts, groups, assign)
        .iter()
        .zip(parts)
        .map(|(l, p)| l / p.capacity.max(1e-9))
        .collect()
}

pub fn imbalance(parts: &[Part], groups: &[Group], assign: &[usize]) -> f64 {
    relative_loads(parts, groups, assign)
        .into_iter()
        .fold(0.0, f64::max)
}

fn moves(groups: &[Group], assign: &[usize]) -> usize {
    groups
        .iter()
        .zip(assign)
        .filter(|(g, p)| g.home.is_some_and(|h| h != **p))
        .count()
}

/// Tolerance under which two imbalances count as equal.
const EPS: f64 = 1e-9;

struct Search<'a> {
    parts: &'a [Part],
    groups: &'a [Group],
    order: Vec<usize>,
    load: Vec<f64>,
    assign: Vec<usize>,
    best: Option<(f64, usize, Vec<usize>)>,
    /// Partitions that are some group's current home.
    is_home: Vec<bool>,
    /// None: least imbalance, then fewest moves. Some(cap): fewest moves
    /// among assignments whose imbalance is at most cap, then least
    /// imbalance.
    cap: Option<f64>,
    /// Search nodes left; at 0 the best answer so far stands.
    budget: u64,
}

impl Search<'_> {
    fn better(&self, imb: f64, mv: usize) -> bool {
        if let Some(cap) = self.cap {
            if imb > cap + EPS {
                return false;
            }
            return match &self.best {
                None => true,
                Some((b, bm, _)) => mv < *bm || (mv == *bm && imb < b - EPS),
            };
        }
        match &self.best {
            None => true,
            Some((b, bm, _)) => imb < b - EPS || (imb <= b + EPS && mv < *bm),
        }
    }

    fn go(&mut self, k: usize, imb: f64, mv: usize) {
        if self.budget == 0 || !self.better(imb, mv) {
            return;
        }
        self.budget -= 1;
        if k == self.order.len() {
            self.best = Some((imb, mv, self.assign.clone()));
            return;
        }
        let g = self.order[k];
        let grp = self.groups[g];
        // Partitions that are nobody's home and equal in capacity and load
        // so far are interchangeable: try one of each kind.
        let mut tried: Vec<(u64, u64)> = Vec::new();
        for p in 0..self.parts.len() {
            if !self.is_home[p] {
                let kind = (self.parts[p].capacity.to_bits(), self.load[p].to_bits());
                if tried.contains(&kind) {
                    continue;
                }
                tried.push(kind);
            }
            let before = self.load[p];
            self.load[p] += grp.load;
            self.assign[g] = p;
            let rel = self.load[p] / self.parts[p].capacity.max(1e-9);
            let extra = usize::from(grp.home.is_some_and(|h| h != p));
            self.go(k + 1, imb.max(rel), mv + extra);
            self.load[p] = before;
        }
    }
}

/// Branch and bound over every assignment, largest group first, from
/// `best` (a known answer to beat, or None) under `cap`'s objective.
fn exact_search(
    parts: &[Part],
    groups: &[Group],
    best: Option<(f64, usize, Vec<usize>)>,
    cap: Option<f64>,
    budget: u64,
) -> Option<Vec<usize>> {
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by(|&a, &b| groups[b].load.total_cmp(&groups[a].load));
    let load: Vec<f64> = parts.iter().map(|p| p.background).collect();
    let start = load
        .iter()
        .zip(parts)
        .map(|(l, p)| l / p.capacity.max(1e-9))
        .fold(0.0, f64::max);
    let mut is_home = vec![false; parts.len()];
    for h in groups.iter().filter_map(|g| g.home) {
        if h < parts.len() {
            is_home[h] = true;
        }
    }
    let mut s = Search {
        parts,
        groups,
        order,
        load,
        is_home,
        assign: vec![0; groups.len()],
        best,
        cap,
        budget,
    };
    s.go(0, start, 0);
    s.best.map(|b| b.2)
}

/// The best assignment (index = group, value = partition).
pub fn target(parts: &[Part], groups: &[Group]) -> Vec<usize> {
    if parts.is_empty() {
        return vec![];
    }
    if groups.len() > EXACT_MAX_GROUPS {
        return greedy(parts, groups);
    }
    // Seed the bound with the greedy answer so that pruning starts early.
    let seed = greedy(parts, groups);
    let best = (
        imbalance(parts, groups, &seed) + EPS,
        moves(groups, &seed) + 1,
        seed,
    );
    exact_search(parts, groups, Some(best), None, TARGET_BUDGET).unwrap_or_default()
}

/// Search nodes the target may visit: past them it is the best found, at
/// worst the greedy answer it started from. 16 groups all in one of 8
/// partitions, the hardest start the tests know, finds its optimum within
/// it (`the_target_search_is_bounded`).
const TARGET_BUDGET: u64 = 1_000_000;

/// Search nodes the move plan may visit: 16 groups all in one of 8
/// partitions took seconds unbounded (the target itself a fraction).
const PLAN_BUDGET: u64 = 200_000;

/// The assignment that moves fewest placed groups while keeping the
/// imbalance within `cap` (or the fewest found within PLAN_BUDGET nodes),
/// or None if there are too many groups for an exact search. `known` is
/// one within `cap` (the target), the answer to beat.
fn fewest_moves_within(
    parts: &[Part],
    groups: &[Group],
    cap: f64,
    known: &[usize],
) -> Option<Vec<usize>> {
    if parts.is_empty() || groups.len() > EXACT_MAX_GROUPS {
        return None;
    }
    let best = (
        imbalance(parts, groups, known),
        moves(groups, known),
        known.to_vec(),
    );
    exact_search(parts, groups, Some(best), Some(cap), PLAN_BUDGET)
}

/// Each partition's load (not relative) when group `i` lives in `assign[i]`.
fn part_loads(parts: &[Part], groups: &[Group], assign: &[usize]) -> Vec<f64> {
    let mut load: Vec<f64> = parts.iter().map(|p| p.background).collect();
    for (g, &p) in groups.iter().zip(assign) {
        load[p] += g.load;
    }
    load
}

/// The largest relative load of `loads`, with `moved` CPUs' worth taken
/// from partition `from` and added to `to`: one move's imbalance in time
/// proportional to the partitions, not to the groups.
fn imbalance_moved(parts: &[Part], loads: &[f64], moved: f64, from: usize, to: usize) -> f64 {
    let moved = if from == to { 0.0 } else { moved };
    loads
        .iter()
        .zip(parts)
        .enumerate()
        .map(|(p, (&l, part))| {
            let l = if p == from {
                l - moved
            } else if p == to {
                l + moved
            } else {
                l
            };
            l / part.capacity.max(1e-9)
        })
        .fold(0.0, f64::max)
}

/// Largest group first onto the partition it leaves least loaded
/// (relative, its load added), staying at home on ties; then single moves
/// while they lower the imbalance. Each candidate move is weighed against
/// the partitions' loads kept up to date, not by summing every group
/// again: a pass over 4,096 groups and 8 partitions weighs 32,768 moves.
pub fn greedy(parts: &[Part], groups: &[Group]) -> Vec<usize> {
    improve_by_single_moves(parts, groups, place_largest_first(parts, groups))
}

/// Largest group first onto the partition it leaves least loaded, staying
/// at home on ties.
fn place_largest_first(parts: &[Part], groups: &[Group]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by(|&a, &b| groups[b].load.total_cmp(&groups[a].load));
    let mut load: Vec<f64> = parts.iter().map(|p| p.background).collect();
    let mut assign = vec![0; groups.len()];
    for g in order {
        let after = |p: usize| (load[p] + groups[g].load) / parts[p].capacity.max(1e-9);
        let mut best = groups[g].home.filter(|&h| h < parts.len()).unwrap_or(0);
        for p in 0..parts.len() {
            if after(p) < after(best) - EPS {
                best = p;
            }
        }
        assign[g] = best;
        load[best] += groups[g].load;
    }
    assign
}

/// Single moves of any group while one lowers the imbalance: the first
/// found each time, groups and partitions in index order.
fn improve_by_single_moves(parts: &[Part], groups: &[Group], mut assign: Vec<usize>) -> Vec<usize> {
    let mut load = part_loads(parts, groups, &assign);
    loop {
        let now = imbalance_moved(parts, &load, 0.0, 0, 0);
        let mut improved = false;
        'search: for g in 0..groups.len() {
            let old = assign[g];
            for p in 0..parts.len() {
                if p == old {
                    continue;
                }
                if imbalance_moved(parts, &load, groups[g].load, old, p) < now - EPS {
                    load[old] -= groups[g].load;
                    load[p] += groups[g].load;
                    assign[g] = p;
                    improved = true;
                    break 'search;
                }
            }
        }
        if !improved {
            return assign;
        }
    }
}

/// What the balancer does in one period.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Groups not placed before, with their new home.
    pub placed: Vec<(usize, usize)>,
    /// At most one group moved: (group, from, to).
    pub moved: Option<(usize, usize, usize)>,
}

/// One period: new groups go where the target puts them; then, if the
/// target is better than the current assignment by more than `hysteresis`
/// (in relative load; over capacity, in proportion to the current
/// imbalance), plus `hysteresis` for every further group the plan moves,
/// one group moves towards it.
///
/// The plan is not the exact target itself but, among assignments within
/// half the hysteresis of it, the one that moves fewest groups: two
/// partitions whose background loads differ by a few hundredths made the
/// exact optimum the mirror image of a one-move answer, and a group
/// doubling its load cost three moves instead of one (CI's phase-change
/// test, 3.3 periods). Of the groups the plan moves, the one whose move
/// leaves the least imbalance now goes first (then the larger), so that
/// the states in between are no worse than they must be: moving the
/// largest first had put the doubled group in with two others.
pub fn step(parts: &[Part], groups: &[Group], hysteresis: f64) -> Decision {
    step_with_memory(parts, groups, &[], hysteresis)
}

/// A group's memory share in partition `p` (0 where unknown).
fn share(memory: &[Vec<f64>], g: usize, p: usize) -> f64 {
    memory.get(g).and_then(|m| m.get(p)).copied().unwrap_or(0.0)
}

/// `step`, weighing where each group's memory is: `memory[g][p]` is the
/// share of group `g`'s memory on partition `p`'s nodes (an empty or
/// missing row: not known, weighs nothing).
///
/// - A new group goes where its memory is when that costs no more
///   imbalance than a plan may (half the hysteresis): of the partitions
///   within that margin, the one holding most of its memory, if that is at
///   least half of it. Its load decides first; among near-equal places,
///   its memory does.
/// - A move asks, on top of its gain, the hysteresis again times the share
///   of the group's memory it would leave behind (what lies in the
///   partition it leaves): a group with all its memory where it is needs
///   twice the gain to move, since its memory then has to follow it
///   (bytes moved at a bounded rate, remote accesses meanwhile). Only
///   stricter than without memory, so groups still cannot cycle.
pub fn step_with_memory(
    parts: &[Part],
    groups: &[Group],
    memory: &[Vec<f64>],
    hysteresis: f64,
) -> Decision {
    let mut d = Decision {
        placed: vec![],
        moved: None,
    };
    if parts.is_empty() || groups.is_empty() {
        return d;
    }
    let want = target(parts, groups);
    let home_of = |g: &Group| g.home.filter(|&h| h < parts.len());
    // New groups are placed around the placed ones as they are: by the
    // target of the rest, with the placed groups' loads as background. The
    // whole target may want placed groups elsewhere too, and those move one
    // per period; new groups put where it wants them shared a partition
    // with a group that had yet to leave (three 2-CPU groups in a 4-CPU
    // partition, a move or two in steady load).
    let fresh: Vec<usize> = (0..groups.len())
        .filter(|&g| home_of(&groups[g]).is_none())
        .collect();
    let mut around = parts.to_vec();
    for g in groups {
        if let Some(h) = home_of(g) {
            around[h].background += g.load;
        }
    }
    let fresh_groups: Vec<Group> = fresh.iter().map(|&g| groups[g]).collect();
    let mut fresh_want = target(&around, &fresh_groups);
    if !memory.is_empty() && !fresh.is_empty() {
        let base = imbalance(&around, &fresh_groups, &fresh_want);
        let room = base + hysteresis / 2.0 * base.max(1.0);
        for (i, &g) in fresh.iter().enumerate() {
            let here = fresh_want[i];
            let loads = part_loads(&around, &fresh_groups, &fresh_want);
            let better = (0..parts.len())
                .filter(|&p| {
                    share(memory, g, p) >= 0.5 && share(memory, g, p) > share(memory, g, here)
                })
                .filter(|&p| {
                    imbalance_moved(&around, &loads, fresh_groups[i].load, here, p) <= room + EPS
                })
                .max_by(|&a, &b| share(memory, g, a).total_cmp(&share(memory, g, b)));
            if let Some(p) = better {
                fresh_want[i] = p;
            }
        }
    }
    let mut now: Vec<usize> = groups.iter().map(|g| home_of(g).unwrap_or(0)).collect();
    for (i, &g) in fresh.iter().enumerate() {
        d.placed.push((g, fresh_want[i]));
        now[g] = fresh_want[i];
    }
    // New groups are placed: from here on every group has a home.
    let placed: Vec<Group> = groups
        .iter()
        .zip(&now)
        .map(|(g, &p)| Group {
            load: g.load,
            home: Some(p),
        })
        .collect();
    let best = imbalance(parts, groups, &want);
    let cap = best + hysteresis / 2.0 * best.max(1.0);
    let plan = fewest_moves_within(parts, &placed, cap, &want).unwrap_or(want);
    // Over capacity a group's load is mostly the waiting its placement
    // causes, and it follows the group: a gain of a fixed 10% of capacity
    // is within that swing, and the group went back and forth every
    // period in the overload test (6-25 moves in 60 s). There, ask for 10% of
    // the load itself.
    // The margin is against the optimum, not the plan, and every move of
    // the plan after the first adds the hysteresis again (of capacity: a
    // move costs the same however full the partitions are). Each move
    // sends a whole group's tasks to cold caches, away from the memory
    // they allocated, and the states in between can be worse than now:
    // the mirror image of a settled assignment, a little better because
    // the control plane's answers to one group's polls load that group's
    // partition, is four moves away, and the first of them takes 1.29x to
    // 1.54x (the unit test below). Settled, the imbalance stays within
    // those margins of the optimum. Every plan that passes is better than
    // now (it is within half the margin of the optimum), and the moves it
    // has left only shrink, so groups cannot cycle.
    let cur = imbalance(parts, groups, &now);
    let further_moves = moves(&placed, &plan).saturating_sub(1) as f64;
    if cur - best <= hysteresis * (cur.max(1.0) + further_moves) {
        return d;
    }
    let loads_now = part_loads(parts, groups, &now);
    let after = |g: usize| imbalance_moved(parts, &loads_now, groups[g].load, now[g], plan[g]);
    d.moved = (0..groups.len())
        .filter(|&g| now[g] != plan[g])
        .min_by(|&a, &b| {
            after(a)
                .total_cmp(&after(b))
                .then(groups[b].load.total_cmp(&groups[a].load))
        })
        .map(|g| (g, now[g], plan[g]))
        // The memory it would leave behind raises the gain it must bring.
        .filter(|&(g, from, _)| {
            cur - best > hysteresis * (cur.max(1.0) + further_moves + share(memory, g, from))
        });
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The target's search stops at TARGET_BUDGET nodes and still finds
    /// the optimum of the hardest start the tests know; a budget of one
    /// node gives back the greedy seed.
    #[test]
    fn the_target_search_is_bounded() {
        let p = parts(8, 6.0);
        let g: Vec<Group> = (0..16)
            .map(|i| Group {
                load: 2.0 + (i % 5) as f64,
                home: Some(0),
            })
            .collect();
        let seed = greedy(&p, &g);
        let seed_best = (
            imbalance(&p, &g, &seed) + EPS,
            moves(&g, &seed) + 1,
            seed.clone(),
        );
        let unbounded = exact_search(&p, &g, Some(seed_best.clone()), None, u64::MAX).unwrap();
        let bounded = target(&p, &g);
        assert!(
            (imbalance(&p, &g, &bounded) - imbalance(&p, &g, &unbounded)).abs() < EPS,
            "bounded {:?} vs unbounded {:?}",
            bounded,
            unbounded
        );
        assert_eq!(exact_search(&p, &g, Some(seed_best), None, 1), Some(seed));
    }

    /// greedy() as it was before it weighed moves against kept loads:
    /// every candidate summed over every group.
    fn greedy_summing(parts: &[Part], groups: &[Group]) -> Vec<usize> {
        improve_summing(parts, groups, place_largest_first(parts, groups))
    }

    fn improve_summing(parts: &[Part], groups: &[Group], mut assign: Vec<usize>) -> Vec<usize> {
        loop {
            let now = imbalance(parts, groups, &assign);
            let mut improved = false;
            'search: for g in 0..groups.len() {
                for p in 0..parts.len() {
                    let old = assign[g];
                    if p == old {
                        continue;
                    }
                    assign[g] = p;
                    if imbalance(parts, groups, &assign) < now - EPS {
                        improved = true;
                        break 'search;
                    }
                    assign[g] = old;
                }
            }
            if !improved {
                return assign;
            }
        }
    }

    /// Partitions and groups whose loads are 64ths of a CPU: every sum of
    /// them is exact, so that two ways of adding them agree to the bit.
    fn dyadic_instance() -> impl Strategy<Value = (Vec<Part>, Vec<Group>)> {
        (
            prop::collection::vec((1u32..16, 0u32..256), 1..6),
            prop::collection::vec((1u32..512, prop::option::of(0usize..6)), 0..40),
        )
            .prop_map(|(ps, gs)| {
                let parts: Vec<Part> = ps
                    .iter()
                    .map(|&(c, b)| Part {
                        capacity: c as f64,
                        background: b as f64 / 64.0,
                    })
                    .collect();
                let groups = gs
                    .iter()
                    .map(|&(l, h)| Group {
                        load: l as f64 / 64.0,
                        home: h.filter(|&h| h < parts.len()),
                    })
                    .collect();
                (parts, groups)
            })
    }

    proptest! {
        #[test]
        fn greedy_weighs_moves_as_summing_every_group_does((p, g) in dyadic_instance()) {
            prop_assert_eq!(greedy(&p, &g), greedy_summing(&p, &g));
        }

        #[test]
        fn single_moves_improve_as_summing_every_group_does(
            (p, g) in dyadic_instance(),
            seed in any::<u64>(),
        ) {
            let start: Vec<usize> =
                (0..g.len()).map(|i| (seed as usize).wrapping_add(i * 13) % p.len()).collect();
            prop_assert_eq!(
                improve_by_single_moves(&p, &g, start.clone()),
                improve_summing(&p, &g, start)
            );
        }

        #[test]
        fn one_moves_imbalance_is_the_summed_one(
            (p, g) in dyadic_instance(),
            seed in any::<u64>(),
        ) {
            prop_assume!(!g.is_empty());
            let assign: Vec<usize> =
                (0..g.len()).map(|i| (seed as usize).wrapping_add(i * 7) % p.len()).collect();
            let who = seed as usize % g.len();
            let to = (seed >> 32) as usize % p.len();
            let mut moved = assign.clone();
            moved[who] = to;
            let loads = part_loads(&p, &g, &assign);
            prop_assert_eq!(
                imbalance_moved(&p, &loads, g[who].load, assign[who], to),
                imbalance(&p, &g, &moved)
            );
        }
    }

    /// The least imbalance, and the fewest moves that reach it.
    fn brute(parts: &[Part], groups: &[Group]) -> (f64, usize) {
        let n = groups.len();
        let mut assign = vec![0; n];
        let mut best = (f64::INFINITY, usize::MAX);
        loop {
            let (imb, mv) = (imbalance(parts, groups, &assign), moves(groups, &assign));
            if imb < best.0 - EPS || (imb <= best.0 + EPS && mv < best.1) {
                best = (imb, mv);
            }
            let mut i = 0;
            while i < n {
                assign[i] += 1;
                if assign[i] < parts.len() {
                    break;
                }
                assign[i] = 0;
                i += 1;
            }
            if i == n {
                return best;
            }
        }
    }

    /// At equal load a new group goes where its memory is; where that
    /// partition is busier than the margin allows, its load decides.
    #[test]
    fn a_new_group_goes_where_its_memory_is_at_similar_load() {
        let p = parts(2, 4.0);
        let g = unplaced(&[2.0]);
        assert_eq!(step(&p, &g, 0.1).placed, vec![(0, 0)]);
        let on_1 = vec![vec![0.1, 0.9]];
        assert_eq!(step_with_memory(&p, &g, &on_1, 0.1).placed, vec![(0, 1)]);
        // Partition 1 busy: its memory does not outweigh the load.
        let mut busy = parts(2, 4.0);
        busy[1].background = 2.0;
        assert_eq!(step_with_memory(&busy, &g, &on_1, 0.1).placed, vec![(0, 0)]);
        // Memory spread (no node holds half): the load's choice stands.
        let spread = vec![vec![0.4, 0.45]];
        assert_eq!(step_with_memory(&p, &g, &spread, 0.1).placed, vec![(0, 0)]);
    }

    /// A move whose gain passes the hysteresis but not with the memory
    /// it leaves behind waits when all the group's memory is where it is,
    /// and goes when none is.
    #[test]
    fn memory_left_behind_raises_the_gain_a_move_needs() {
        // 5.5 CPUs on partition 0 of 4 (relative 1.375), nothing on 1: the
        // 2.5 group's move brings it to 0.75, a gain of 0.625, past 0.3 x
        // 1.375 (0.41) and short of 0.3 x (1.375 + 1) (0.71).
        let mut bg = parts(2, 4.0);
        bg[0].background = 1.5;
        let g = homed(&[(2.5, 0), (1.5, 0)]);
        let free = step(&bg, &g, 0.3);
        assert_eq!(free.moved, Some((0, 0, 1)), "{free:?}");
        let mut mem = vec![vec![]; 2];
        mem[0] = vec![0.0, 1.0];
        assert_eq!(step_with_memory(&bg, &g, &mem, 0.3).moved, free.moved);
        mem[0] = vec![1.0, 0.0];
        assert_eq!(step_with_memory(&bg, &g, &mem, 0.3).moved, None);
    }

    proptest! {
        /// Memory only holds moves back: among placed groups a move made
        /// with it is the one made without it; new groups land on real
        /// partitions (where they land may differ, and so the moves after).
        #[test]
        fn memory_never_adds_a_move(
            caps in prop::collection::vec(1.0f64..8.0, 2..4),
            groups in prop::collection::vec((0.1f64..4.0, prop::option::of(0usize..4)), 1..6),
            shares in prop::collection::vec(prop::collection::vec(0.0f64..1.0, 4), 6),
        ) {
            let parts: Vec<Part> = caps.iter().map(|&c| Part { capacity: c, background: 0.0 }).collect();
            let groups: Vec<Group> = groups
                .iter()
                .map(|&(load, h)| Group { load, home: h.map(|h| h % parts.len()) })
                .collect();
            let with = step_with_memory(&parts, &groups, &shares, 0.1);
            let without = step(&parts, &groups, 0.1);
            if with.moved.is_some() && groups.iter().all(|g| g.home.is_some()) {
                prop_assert_eq!(with.moved, without.moved);
            }
            for &(_, p) in &with.placed {
                prop_assert!(p < parts.len());
            }
        }
    }

    fn parts(n: usize, cap: f64) -> Vec<Part> {
        vec![
            Part {
                capacity: cap,
                background: 0.0
            };
            n
        ]
    }

    fn unplaced(loads: &[f64]) -> Vec<Group> {
        loads
            .iter()
            .map(|&load| Group { load, home: None })
            .collect()
    }

    /// Groups placed already: (load, partition).
    fn homed(loads: &[(f64, usize)]) -> Vec<Group> {
        loads
            .iter()
            .map(|&(load, h)| Group {
                load,
                home: Some(h),
            })
            .collect()
    }

    /// Runs periods until nothing moves; returns the settled homes and the
    /// number of periods that moved a group.
    fn settle(parts: &[Part], groups: &mut [Group], h: f64) -> usize {
        let mut moved = 0;
        for _ in 0..=groups.len() * 2 + 2 {
            let d = step(parts, groups, h);
            for (g, p) in d.placed {
                groups[g].home = Some(p);
            }
            match d.moved {
                Some((g, _, to)) => {
                    groups[g].home = Some(to);
                    moved += 1;
                }
                None => return moved,
            }
        }
        panic!("did not settle: {groups:?}");
    }

    #[test]
    fn four_groups_four_partitions_one_each() {
        let p = parts(4, 4.0);
        let mut g = unplaced(&[3.0, 3.0, 3.0, 3.0]);
        assert_eq!(settle(&p, &mut g, 0.05), 0);
        let homes: std::collections::BTreeSet<_> = g.iter().map(|g| g.home.unwrap()).collect();
        assert_eq!(homes.len(), 4, "{g:?}");
    }

    /// Groups whose loads settle at different times are placed in waves:
    /// the later ones go around those placed, and nothing has to move.
    #[test]
    fn groups_placed_in_waves_need_no_moves() {
        let p = parts(4, 4.0);
        // Two busy threads each, as measured: a few hundredths apart.
        let loads = [2.05, 1.92, 1.96, 2.01, 1.98, 2.04, 1.99, 1.93];
        for first in 1..8 {
            let mut g = unplaced(&loads);
            // The first wave is placed on its own.
            let d = step(&p, &g[..first], 0.1);
            for (i, part) in d.placed {
                g[i].home = Some(part);
            }
            let d = step(&p, &g, 0.1);
            for (i, part) in d.placed {
                g[i].home = Some(part);
            }
            let mut per = [0; 4];
            for x in &g {
                per[x.home.unwrap()] += 1;
            }
            assert_eq!(per, [2, 2, 2, 2], "first wave {first}: {g:?}");
            assert_eq!(step(&p, &g, 0.1).moved, None);
        }
    }

    #[test]
    fn steady_load_never_moves_and_phase_change_resettles() {
        let p = parts(2, 4.0);
        let mut g = unplaced(&[1.0, 1.0, 2.0, 2.0]);
        settle(&p, &mut g, 0.1);
        let settled: Vec<_> = g.iter().map(|g| g.home).collect();
        // Loads jitter by 5%: no move.
        for jitter in [0.95, 1.05, 1.0, 0.97] {
            let mut j = g.clone();
            j[0].load *= jitter;
            j[2].load *= 2.0 - jitter;
            assert_eq!(step(&p, &j, 0.1).moved, None);
        }
        // One group's load doubles: re-settled within 3 periods.
        g[2].load = 4.0;
        let moved = settle(&p, &mut g, 0.1);
        assert!((1..=3).contains(&moved), "{moved} moves");
        assert_ne!(settled, g.iter().map(|g| g.home).collect::<Vec<_>>());
        assert!(
            imbalance(
                &p,
                &g,
                &g.iter().map(|g| g.home.unwrap()).collect::<Vec<_>>()
            ) <= 1.0 + 0.1
        );
    }

    #[test]
    fn over_capacity_the_gain_must_be_in_proportion() {
        let p = parts(2, 4.0);
        // Twice over capacity: moving the 2.0 group gains 0.175, under 10%
        // of the imbalance (0.2): stay.
        let g = homed(&[(6.0, 0), (2.0, 0), (5.3, 1)]);
        assert_eq!(step(&p, &g, 0.1).moved, None);
        // A gain of 0.25 at the same level moves it.
        let g = homed(&[(6.0, 0), (2.0, 0), (5.0, 1)]);
        assert_eq!(step(&p, &g, 0.1).moved, Some((1, 0, 1)));
        // Under capacity the hysteresis stays 10% of capacity: 0.12 moves.
        let g = homed(&[(2.0, 0), (1.2, 0), (1.52, 1)]);
        assert_eq!(step(&p, &g, 0.1).moved, Some((1, 0, 1)));
    }

    #[test]
    fn a_mirror_image_is_not_worth_three_moves() {
        // CI's phase change: a doubled (3.94) next to c; b and d in the
        // other partition; a little more background load in partition 0.
        let p = vec![
            Part {
                capacity: 4.0,
                background: 0.2,
            },
            Part {
                capacity: 4.0,
                background: 0.1,
            },
        ];
        let mut g = vec![
            Group {
                load: 3.94,
                home: Some(1),
            },
            Group {
                load: 2.0,
                home: Some(0),
            },
            Group {
                load: 0.97,
                home: Some(1),
            },
            Group {
                load: 0.99,
                home: Some(0),
            },
        ];
        // The exact optimum is a alone in partition 0: three moves for
        // 0.005 less than moving c alone.
        assert_eq!(moves(&g, &target(&p, &g)), 3);
        assert_eq!(step(&p, &g, 0.1).moved, Some((2, 1, 0)));
        g[2].home = Some(0);
        assert_eq!(step(&p, &g, 0.1).moved, None);
    }

    #[test]
    fn the_gain_pays_for_every_move_of_the_plan() {
        // The doubled group a alone in partition 1, with 0.54 CPU of
        // background there (the control plane answering its polls); b, c
        // and d in partition 0. The mirror image is 0.135 better, in four
        // moves, the first of which (d beside a) would make 1.54x of
        // 1.29x: stay.
        let p = vec![
            Part {
                capacity: 4.0,
                background: 0.0,
            },
            Part {
                capacity: 4.0,
                background: 0.54,
            },
        ];
        let g = homed(&[(4.63, 1), (2.0, 0), (1.0, 0), (1.0, 0)]);
        assert_eq!(moves(&g, &target(&p, &g)), 4);
        assert_eq!(step(&p, &g, 0.1).moved, None);
        // Two groups to swap for 0.4 (1.4x to 1.0x) is worth the two
        // moves (0.14 + 0.1).
        let p = parts(2, 5.0);
        let g = homed(&[(3.5, 0), (3.5, 0), (1.5, 1), (1.5, 1)]);
        let (gi, from, _) = step(&p, &g, 0.1).moved.expect("a move");
        assert_eq!(from, g[gi].home.unwrap());
        // For 0.2 (1.2x to 1.0x) it is not (0.12 + 0.1).
        let g = homed(&[(3.0, 0), (3.0, 0), (2.0, 1), (2.0, 1)]);
        assert_eq!(step(&p, &g, 0.1).moved, None);
    }

    #[test]
    fn a_bounded_plan_still_moves_a_group_that_helps() {
        // 16 groups all in one of 8 partitions, where the plan search runs
        // out of budget (an unbounded one took seconds): the best plan
        // found still gives a move, and it lowers the imbalance.
        let p: Vec<Part> = (0..8)
            .map(|i| Part {
                capacity: 4.0,
                background: 0.1 * i as f64,
            })
            .collect();
        let g: Vec<Group> = (0..16)
            .map(|i| Group {
                load: 0.3 + (i as f64 * 0.37) % 2.1,
                home: Some(0),
            })
            .collect();
        let (gi, from, to) = step(&p, &g, 0.1).moved.expect("a move");
        let mut a = vec![0; 16];
        a[gi] = to;
        assert_eq!(from, 0);
        assert!(imbalance(&p, &g, &a) < imbalance(&p, &g, &[0; 16]));
    }

    #[test]
    fn background_load_counts() {
        let p = vec![
            Part {
                capacity: 4.0,
                background: 3.0,
            },
            Part {
                capacity: 4.0,
                background: 0.0,
            },
        ];
        let mut g = unplaced(&[2.0]);
        settle(&p, &mut g, 0.05);
        assert_eq!(g[0].home, Some(1));
    }

    proptest! {
        #[test]
        fn settles_to_the_brute_force_optimum(
            loads in prop::collection::vec(0.1f64..4.0, 1..=7),
            nparts in 1usize..=4,
            caps in prop::collection::vec(1u32..=4, 4),
            bg in prop::collection::vec(0.0f64..2.0, 4),
            start in prop::collection::vec(prop::option::of(0usize..4), 7),
        ) {
            let p: Vec<Part> = (0..nparts)
                .map(|i| Part { capacity: caps[i] as f64 * 2.0, background: bg[i] })
                .collect();
            let mut g: Vec<Group> = loads
                .iter()
                .zip(&start)
                .map(|(&load, &h)| Group { load, home: h.filter(|&h| h < nparts) })
                .collect();
            let (opt, fewest) = brute(&p, &g);
            let exact = target(&p, &g);
            prop_assert!((imbalance(&p, &g, &exact) - opt).abs() < 1e-6);
            // Among the best, one that moves fewest groups.
            prop_assert_eq!(moves(&g, &exact), fewest);
            let h = 0.05;
            settle(&p, &mut g, h);
            let homes: Vec<usize> = g.iter().map(|g| g.home.unwrap()).collect();
            let settled = imbalance(&p, &g, &homes);
            let further = moves(&g, &target(&p, &g)).saturating_sub(1) as f64;
            prop_assert!(settled <= opt + h * (settled.max(1.0) + further) + 1e-9);
        }
    }

    /// Exhaustive search over identical partitions: every way to split the
    /// groups into at most `nparts` unlabelled blocks (restricted growth
    /// strings), the largest block load over the capacity.
    fn brute_identical(loads: &[f64], nparts: usize, cap: f64) -> f64 {
        fn go(loads: &[f64], i: usize, blocks: &mut Vec<f64>, max: usize, best: &mut f64) {
            if i == loads.len() {
                *best = best.min(blocks.iter().copied().fold(0.0, f64::max));
                return;
            }
            for b in 0..blocks.len() {
                blocks[b] += loads[i];
                go(loads, i + 1, blocks, max, best);
                blocks[b] -= loads[i];
            }
            if blocks.len() < max {
                blocks.push(loads[i]);
                go(loads, i + 1, blocks, max, best);
                blocks.pop();
            }
        }
        let mut best = f64::INFINITY;
        go(loads, 0, &mut Vec::new(), nparts, &mut best);
        best / cap
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]
        /// The bound: up to 12 groups on up to 8 partitions.
        #[test]
        fn twelve_groups_eight_partitions_optimal(
            loads in prop::collection::vec(0.1f64..4.0, 9..=12),
            nparts in 5usize..=8,
        ) {
            let p = parts(nparts, 2.0);
            let mut g = unplaced(&loads);
            let opt = brute_identical(&loads, nparts, 2.0);
            let t = target(&p, &g);
            prop_assert!((imbalance(&p, &g, &t) - opt).abs() < 1e-6);
            settle(&p, &mut g, 0.05);
            let homes: Vec<usize> = g.iter().map(|g| g.home.unwrap()).collect();
            prop_assert!(imbalance(&p, &g, &homes) <= opt + 0.05 + 1e-9);
        }
    }
}
