//! Whether, where and how much of a tenant's memory to move to its home's
//! nodes: the pure half of "memory follows the home" (the control plane
//! reads the counters and makes the calls).

use std::collections::VecDeque;

/// Bytes per second host-wide, held over every window of one second: what
/// was granted in the last second is remembered, and a request gets what
/// is left of the second's allowance. A token bucket would let up to twice
/// the rate through a window that straddles a full bucket and its refill.
#[derive(Debug, Clone)]
pub struct Rate {
    bytes_per_s: u64,
    /// (when, bytes) granted in the last second, oldest first.
    granted: VecDeque<(u64, u64)>,
    in_window: u64,
}

const SECOND_NS: u64 = 1_000_000_000;

impl Rate {
    pub fn new(bytes_per_s: u64) -> Rate {
        Rate {
            bytes_per_s,
            granted: VecDeque::new(),
            in_window: 0,
        }
    }

    pub fn bytes_per_s(&self) -> u64 {
        self.bytes_per_s
    }

    fn expire(&mut self, now_ns: u64) {
        while let Some(&(at, bytes)) = self.granted.front() {
            if now_ns.saturating_sub(at) < SECOND_NS {
                break;
            }
            self.granted.pop_front();
            self.in_window -= bytes;
        }
    }

    /// What may be moved now of `want` bytes, counted as moved: at most
    /// what the last second's grants left of the rate.
    pub fn take(&mut self, now_ns: u64, want: u64) -> u64 {
        self.expire(now_ns);
        let grant = want.min(self.bytes_per_s.saturating_sub(self.in_window));
        if grant > 0 {
            self.granted.push_back((now_ns, grant));
            self.in_window += grant;
        }
        grant
    }

    /// Gives back what a grant did not use (pages that were already home,
    /// or refused), so that the rate counts bytes moved, not asked for.
    pub fn give_back(&mut self, unused: u64) {
        let mut left = unused;
        while left > 0 {
            let Some(last) = self.granted.back_mut() else {
                break;
            };
            let back = left.min(last.1);
            last.1 -= back;
            self.in_window -= back;
            left -= back;
            if last.1 == 0 {
                self.granted.pop_back();
            }
        }
    }

    /// Bytes granted (less what was given back) over the second before
    /// `now_ns`: never above the rate.
    pub fn used(&mut self, now_ns: u64) -> u64 {
        self.expire(now_ns);
        self.in_window
    }

    /// When the next byte may be granted (now if some are left).
    pub fn next_at(&mut self, now_ns: u64) -> u64 {
        self.expire(now_ns);
        if self.in_window < self.bytes_per_s {
            return now_ns;
        }
        self.granted
            .front()
            .map_or(now_ns, |&(at, _)| at + SECOND_NS)
    }
}

/// What the next batch of a move may take of `want` bytes: no more than
/// its job has left (`left`: the room its decision found) nor than the
/// target node has free above `floor` (its high watermark plus the
/// reserve) as read just before the batch: other allocations fill a node
/// too while a move of hundreds of MB goes on.
pub fn batch_allowance(want: u64, left: u64, free: u64, floor: u64) -> u64 {
    want.min(left).min(free.saturating_sub(floor))
}

/// A tenant's move that moved nothing while pages were refused (pinned for
/// DMA, mapped by another process, kept by a policy, on a node it may not
/// use: all refused again at once) waits before the next: 10 s, doubling
/// up to 320 s, until a move moves something or its home changes. Without
/// it such a tenant would have its mappings walked and its pages asked for
/// every second, forever.
pub const BACKOFF_FIRST_S: u64 = 10;
pub const BACKOFF_MAX_S: u64 = 320;

/// The wait after a move, from the last wait (0: none): `moved`, whether it
/// moved anything; `refused`, whether pages were refused for a cause that
/// does not pass by itself (anything but the rate).
pub fn backoff_after(last_s: u64, moved: bool, refused: bool) -> u64 {
    if moved || !refused {
        0
    } else {
        (last_s * 2).clamp(BACKOFF_FIRST_S, BACKOFF_MAX_S)
    }
}

/// Why a tenant's memory is not moved now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wait {
    /// It has no home, so no node to move to (a home of any CPUs lies on
    /// the nodes of those CPUs: `Tenant::home_nodes`).
    NoHomeNode,
    /// It does not live at home: its CPU time there over the last window
    /// is under the threshold, so its memory would follow a place it
    /// keeps leaving.
    NotAtHome,
    /// Under `min_bytes` of it lies off its home's nodes.
    NothingAway,
    /// Every home node is at or under its reserve of free memory.
    Reserve,
}

/// One tenant as the control plane sees it this period.
#[derive(Debug, Clone)]
pub struct Tenant<'a> {
    /// The nodes its home's CPUs are on.
    pub home_nodes: &'a [usize],
    /// Share of its CPU time on its home's CPUs over the last window.
    pub locality: f64,
    /// What it holds that can move, per node (memstat::resident_per_node).
    pub resident_per_node: &'a [u64],
}

/// A node's free memory against what must stay free on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRoom {
    pub free: u64,
    /// The kernel's high watermark on the node plus a margin: moving past
    /// it would wake reclaim there.
    pub reserve: u64,
}

/// The thresholds of the decision.
#[derive(Debug, Clone, Copy)]
pub struct Follow {
    pub min_locality: f64,
    pub min_bytes: u64,
}

/// Where to move a tenant's memory and how much of it at most: to the
/// home node with the most room above its reserve, no more than lies
/// away or than that room.
pub fn decide(t: &Tenant, nodes: &[NodeRoom], f: &Follow) -> Result<(usize, u64), Wait> {
    if t.home_nodes.is_empty() {
        return Err(Wait::NoHomeNode);
    }
    if t.locality < f.min_locality {
        return Err(Wait::NotAtHome);
    }
    let away: u64 = t
        .resident_per_node
        .iter()
        .enumerate()
        .filter(|(n, _)| !t.home_nodes.contains(n))
        .map(|(_, b)| b)
        .sum();
    if away < f.min_bytes.max(1) {
        return Err(Wait::NothingAway);
    }
    let best = t
        .home_nodes
        .iter()
        .filter_map(|&n| Some((n, nodes.get(n)?)))
        .map(|(n, r)| (n, r.free.saturating_sub(r.reserve)))
        .max_by_key(|&(n, room)| (room, std::cmp::Reverse(n)));
    match best {
        Some((n, room)) if room > 0 => Ok((n, away.min(room))),
        _ => Err(Wait::Reserve),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const F: Follow = Follow {
        min_locality: 0.8,
        min_bytes: 4 << 20,
    };
    const MB: u64 = 1 << 20;

    fn rooms(free_mb: &[u64], reserve_mb: u64) -> Vec<NodeRoom> {
        free_mb
            .iter()
            .map(|&f| NodeRoom {
                free: f * MB,
                reserve: reserve_mb * MB,
            })
            .collect()
    }

    #[test]
    fn memory_goes_home_while_the_tenant_lives_there() {
        let t = Tenant {
            home_nodes: &[0],
            locality: 0.95,
            resident_per_node: &[10 * MB, 150 * MB],
        };
        assert_eq!(decide(&t, &rooms(&[400, 400], 64), &F), Ok((0, 150 * MB)));
        // Only the room above the reserve.
        assert_eq!(decide(&t, &rooms(&[164, 400], 64), &F), Ok((0, 100 * MB)));
        assert_eq!(decide(&t, &rooms(&[64, 400], 64), &F), Err(Wait::Reserve));
        let away = Tenant {
            locality: 0.5,
            ..t.clone()
        };
        assert_eq!(
            decide(&away, &rooms(&[400, 400], 64), &F),
            Err(Wait::NotAtHome)
        );
        let home = Tenant {
            resident_per_node: &[150 * MB, 3 * MB],
            ..t.clone()
        };
        assert_eq!(
            decide(&home, &rooms(&[400, 400], 64), &F),
            Err(Wait::NothingAway)
        );
        let none = Tenant {
            home_nodes: &[],
            ..t
        };
        assert_eq!(
            decide(&none, &rooms(&[400, 400], 64), &F),
            Err(Wait::NoHomeNode)
        );
    }

    #[test]
    fn a_home_of_two_nodes_fills_the_roomier_first() {
        let t = Tenant {
            home_nodes: &[0, 1],
            locality: 1.0,
            resident_per_node: &[0, 0, 50 * MB, 50 * MB],
        };
        assert_eq!(
            decide(&t, &rooms(&[200, 300, 0, 0], 64), &F),
            Ok((1, 100 * MB))
        );
    }

    proptest! {
        #[test]
        fn a_move_never_passes_the_room_nor_what_lies_away(
            res in prop::collection::vec(0u64..1 << 32, 1..5),
            free in prop::collection::vec(0u64..1 << 32, 1..5),
            reserve in 0u64..1 << 31,
            home in 0usize..5,
            locality in 0.0f64..1.0,
        ) {
            let nodes: Vec<NodeRoom> = free.iter().map(|&f| NodeRoom { free: f, reserve }).collect();
            let t = Tenant { home_nodes: &[home], locality, resident_per_node: &res };
            if let Ok((n, bytes)) = decide(&t, &nodes, &F) {
                prop_assert_eq!(n, home);
                prop_assert!(bytes <= nodes[n].free - nodes[n].reserve);
                let away: u64 = res.iter().enumerate().filter(|(i, _)| *i != home).map(|(_, b)| b).sum();
                prop_assert!(bytes <= away && bytes > 0);
                prop_assert!(locality >= F.min_locality);
            }
        }
    }

    #[test]
    fn a_second_gets_the_rate_and_no_more() {
        let mut r = Rate::new(100);
        assert_eq!(r.take(0, 60), 60);
        assert_eq!(r.take(500_000_000, 60), 40);
        assert_eq!(r.take(900_000_000, 1), 0);
        assert_eq!(r.next_at(900_000_000), SECOND_NS);
        // The first grant leaves the window at 1 s: its 60 come back.
        assert_eq!(r.take(SECOND_NS, 100), 60);
    }

    #[test]
    fn what_a_grant_did_not_use_comes_back() {
        let mut r = Rate::new(100);
        assert_eq!(r.take(0, 100), 100);
        r.give_back(30);
        assert_eq!(r.take(1, 50), 30);
    }

    proptest! {
        /// Over every window of one second, what was granted (less what
        /// was given back) stays within the rate.
        #[test]
        fn no_one_second_window_passes_the_rate(
            rate in 1u64..10_000,
            steps in prop::collection::vec((0u64..400_000_000, 0u64..5_000, 0u64..5_000), 1..60),
        ) {
            let mut r = Rate::new(rate);
            let mut now = 0u64;
            let mut log: Vec<(u64, u64)> = Vec::new();
            for (dt, want, unused) in steps {
                now += dt;
                let g = r.take(now, want);
                prop_assert!(g <= want);
                let back = unused.min(g);
                r.give_back(back);
                log.push((now, g - back));
                let last: u64 = log
                    .iter()
                    .filter(|&&(at, _)| at + SECOND_NS > now)
                    .map(|&(_, b)| b)
                    .sum();
                prop_assert_eq!(r.used(now), last);
                for &(start, _) in &log {
                    let in_window: u64 = log
                        .iter()
                        .filter(|&&(at, _)| at >= start && at < start + SECOND_NS)
                        .map(|&(_, b)| b)
                        .sum();
                    prop_assert!(in_window <= rate, "{in_window} > {rate} in [{start}, +1 s)");
                }
            }
        }
    }

    #[test]
    fn moves_that_move_nothing_back_off() {
        assert_eq!(backoff_after(0, false, true), BACKOFF_FIRST_S);
        assert_eq!(backoff_after(10, false, true), 20);
        assert_eq!(backoff_after(BACKOFF_MAX_S, false, true), BACKOFF_MAX_S);
        assert_eq!(backoff_after(80, true, true), 0, "something moved");
        assert_eq!(
            backoff_after(80, false, false),
            0,
            "nothing refused: only the rate"
        );
    }

    #[test]
    fn a_batch_stops_at_the_floor_and_the_jobs_room() {
        const MB: u64 = 1 << 20;
        assert_eq!(
            batch_allowance(16 * MB, 100 * MB, 500 * MB, 300 * MB),
            16 * MB
        );
        assert_eq!(batch_allowance(16 * MB, 4 * MB, 500 * MB, 300 * MB), 4 * MB);
        assert_eq!(
            batch_allowance(16 * MB, 100 * MB, 310 * MB, 300 * MB),
            10 * MB
        );
        assert_eq!(batch_allowance(16 * MB, 100 * MB, 290 * MB, 300 * MB), 0);
    }
}
