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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
}
