//! A home for a tenant nobody gave one, from its memory: the pure half of
//! what NUMA balancing would do for it under the fair class (task to its
//! memory, memory to its tasks), which under sched_ext nothing does.
//!
//! - Where most of its memory lies on one node, it prefers that node: its
//!   threads go to their memory.
//! - Where its memory is spread and its threads have settled on one node,
//!   it prefers that node: its memory follows its threads (the mover brings
//!   it, as for any home).
//! - Otherwise it keeps no home: nothing is gained by pulling a spread
//!   tenant whose threads are spread too onto one node.

/// Under this much memory that can move (anonymous and shared), a tenant
/// gets no home from it: its remote accesses cost less than the home id
/// and the reads it would take, and the many small cgroups of a host
/// (services, sessions) stay out of the home table.
pub const MIN_TENANT_BYTES: u64 = 64 << 20;

/// The share of its memory one node must hold to be its home: "mostly on
/// one node". At 2/3 the home changes only when another node holds twice
/// what the home node holds, which memory following the home makes rare.
pub const MOSTLY: f64 = 2.0 / 3.0;

/// The share of a tenant's sampled threads that must have last run on one
/// node, at two looks in a row, for them to have settled there.
pub const SETTLED: f64 = 0.8;

/// Why a tenant has the home it has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reason {
    /// Its memory is mostly on the node: the share it holds there.
    Memory(f64),
    /// Its memory is spread and its threads settled on the node.
    Threads,
}

/// Its home node, and why; None: no home. `per_node` is what it holds that
/// can move, per node; `current` the node it has now from this rule;
/// `settled` the node its threads settled on, if any.
pub fn choose(
    per_node: &[u64],
    current: Option<usize>,
    settled: Option<usize>,
) -> Option<(usize, Reason)> {
    let total: u64 = per_node.iter().sum();
    if total < MIN_TENANT_BYTES {
        return None;
    }
    let share = |n: usize| per_node.get(n).copied().unwrap_or(0) as f64 / total as f64;
    let most = (0..per_node.len()).max_by_key(|&n| (per_node[n], std::cmp::Reverse(n)))?;
    if share(most) >= MOSTLY {
        return Some((most, Reason::Memory(share(most))));
    }
    // Spread: a home kept while its node holds the most (its memory is
    // coming), else the node its threads settled on.
    if let Some(c) = current
        && c < per_node.len()
        && per_node[c] >= per_node[most]
    {
        return Some((c, reason_of(share(c))));
    }
    settled
        .filter(|&n| n < per_node.len())
        .map(|n| (n, reason_of(share(n))))
}

fn reason_of(share: f64) -> Reason {
    if share >= MOSTLY {
        Reason::Memory(share)
    } else {
        Reason::Threads
    }
}

/// The node its threads settled on: where at least SETTLED of the CPU time
/// they ran since the last look was, by the node each last ran on
/// (`(node, run ns)` per thread). Threads that did not run say nothing
/// (a parent waiting for its workers, a shell): counting them as where
/// they last slept would keep a tenant from ever settling.
pub fn settled_on(runs: &[(usize, u64)]) -> Option<usize> {
    let mut per_node = std::collections::BTreeMap::new();
    for &(n, ns) in runs {
        *per_node.entry(n).or_insert(0u64) += ns;
    }
    let total: u64 = per_node.values().sum();
    let (&n, &ns) = per_node.iter().max_by_key(|(_, ns)| **ns)?;
    (total > 0 && ns as f64 >= SETTLED * total as f64).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn mostly_on_one_node_is_a_home_there() {
        assert_eq!(
            choose(&[10 * MB, 150 * MB], None, None).map(|h| h.0),
            Some(1)
        );
        assert!(matches!(
            choose(&[10 * MB, 150 * MB], None, Some(0)),
            Some((1, Reason::Memory(s))) if s > 0.9
        ));
    }

    #[test]
    fn spread_memory_follows_settled_threads_only() {
        let spread = [80 * MB, 80 * MB];
        assert_eq!(choose(&spread, None, None), None);
        assert_eq!(choose(&spread, None, Some(1)), Some((1, Reason::Threads)));
        // Kept while its node holds the most, threads or not.
        assert_eq!(
            choose(&[70 * MB, 90 * MB], Some(1), None).map(|h| h.0),
            Some(1)
        );
        assert_eq!(choose(&[90 * MB, 70 * MB], Some(1), None), None);
    }

    #[test]
    fn small_tenants_get_none() {
        assert_eq!(choose(&[0, 60 * MB], None, Some(1)), None);
        assert_eq!(choose(&[], None, Some(0)), None);
    }

    #[test]
    fn threads_settle_where_four_fifths_of_their_time_ran() {
        assert_eq!(settled_on(&[(1, 80), (0, 20)]), Some(1));
        assert_eq!(settled_on(&[(1, 79), (0, 21)]), None);
        // Threads asleep since the last look weigh nothing.
        assert_eq!(settled_on(&[(1, 100), (0, 0), (0, 0)]), Some(1));
        assert_eq!(settled_on(&[(0, 0)]), None);
        assert_eq!(settled_on(&[]), None);
    }

    proptest! {
        /// The home is a node there is; a node holding 2/3 is always the
        /// home; and the same memory and threads give the same home again
        /// once it is given (no flapping between looks that saw the same).
        #[test]
        fn homes_are_stable_and_memory_wins(
            per_node in proptest::collection::vec(0u64..(512 * MB), 1..8),
            current in proptest::option::of(0usize..8),
            settled in proptest::option::of(0usize..8),
        ) {
            let got = choose(&per_node, current, settled);
            if let Some((n, _)) = got {
                prop_assert!(n < per_node.len());
                prop_assert_eq!(choose(&per_node, Some(n), settled).map(|h| h.0), Some(n));
            }
            let total: u64 = per_node.iter().sum();
            if total >= MIN_TENANT_BYTES {
                for (n, &b) in per_node.iter().enumerate() {
                    if b as f64 >= MOSTLY * total as f64 {
                        prop_assert_eq!(got.map(|h| h.0), Some(n));
                    }
                }
            } else {
                prop_assert_eq!(got, None);
            }
        }
    }
}
