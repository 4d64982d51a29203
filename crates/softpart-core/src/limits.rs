//! Limits said out loud: every fixed-size table or map the scheduler can
//! fill is counted each time it turns something away, logged the first
//! time with what it turned away named, and listed by `softpart stat`.
//! One mechanism for all of them: the fast path counts (an event counter)
//! and leaves the latest subject; the control plane reads both and asks
//! `Limits` what to say.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One limit: a table of `size` entries (`None`: an allocation the
/// kernel can refuse, of no fixed size) and what is lost when it is hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The table, as operators see it named (`cgroup_slots`).
    pub name: &'static str,
    pub size: Option<usize>,
    /// What happens to the subject turned away, as a clause
    /// ("its tasks are charged as plain tasks").
    pub lost: &'static str,
}

/// Home ids a scheduler takes by default: enough for a 500-VM host's
/// cgroups or a 250-pod node's containers, with room.
pub const HOMES_DEFAULT: usize = 1024;
/// Never fewer by default: what every earlier build had.
pub const HOMES_DEFAULT_MIN: usize = 256;
/// Most memory the default lets the homes' per-CPU counters take.
pub const HOMES_DEFAULT_BYTES: usize = 64 << 20;

/// The home ids to make room for on `nr_cpu_ids` CPU ids when each home
/// costs `per_home_cpu` bytes per CPU id: HOMES_DEFAULT, fewer where
/// that would pass HOMES_DEFAULT_BYTES, never fewer than
/// HOMES_DEFAULT_MIN.
pub fn default_homes(nr_cpu_ids: usize, per_home_cpu: usize) -> usize {
    (HOMES_DEFAULT_BYTES / (per_home_cpu.max(1) * nr_cpu_ids.max(1)))
        .clamp(HOMES_DEFAULT_MIN, HOMES_DEFAULT)
}

/// " (N entries)" for a table of a fixed size, "" for an allocation.
pub fn entries(size: Option<usize>) -> String {
    size.map_or(String::new(), |n| format!(" ({n} entries)"))
}

/// What `softpart stat` lists of one limit that was hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitView {
    pub limit: String,
    /// Its entries; `None` for an allocation of no fixed size.
    pub size: Option<usize>,
    /// Times it turned something away since the scheduler started.
    pub hits: u64,
    /// The latest subject turned away, named (a thread, a cgroup path).
    pub last: String,
}

#[derive(Debug, Default)]
struct Seen {
    hits: u64,
    last: String,
}

/// Per limit, the hits seen so far and the latest subject.
#[derive(Debug, Default)]
pub struct Limits {
    seen: BTreeMap<&'static str, Seen>,
}

impl Limits {
    /// `limit` has turned something away `hits` times in all (a count
    /// that only grows); `subject` names the latest. Returns the line to
    /// log at warning level when this is the limit's first hit, `None`
    /// when nothing new happened or it was said already.
    pub fn observe(
        &mut self,
        limit: &Limit,
        hits: u64,
        subject: impl FnOnce() -> String,
        counted_as: &str,
    ) -> Option<String> {
        let seen = self.seen.entry(limit.name).or_default();
        if hits <= seen.hits {
            return None;
        }
        let first = seen.hits == 0;
        seen.hits = hits;
        seen.last = subject();
        first.then(|| {
            format!(
                "limit reached: {}{} turned away {}: {}; further cases are counted in {counted_as} and listed by softpart stat",
                limit.name,
                entries(limit.size),
                seen.last,
                limit.lost
            )
        })
    }

    /// Times `limit` turned something away, as last observed.
    pub fn hits(&self, limit: &str) -> u64 {
        self.seen.get(limit).map_or(0, |s| s.hits)
    }

    /// The limits hit so far, by name.
    pub fn view(&self, limits: &[Limit]) -> Vec<LimitView> {
        limits
            .iter()
            .filter_map(|l| {
                let s = self.seen.get(l.name).filter(|s| s.hits > 0)?;
                Some(LimitView {
                    limit: l.name.to_string(),
                    size: l.size,
                    hits: s.hits,
                    last: s.last.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOTS: Limit = Limit {
        name: "cgroup_slots",
        size: Some(2048),
        lost: "its tasks are charged as plain tasks",
    };
    const HOMES: Limit = Limit {
        name: "task_homes",
        size: Some(65536),
        lost: "the home it inherited at fork is not kept",
    };

    #[test]
    fn default_homes_fit_the_memory_they_take() {
        // 192 bytes of counters per home per CPU id.
        assert_eq!(default_homes(8, 192), 1024);
        assert_eq!(default_homes(192, 192), 1024);
        assert_eq!(default_homes(512, 192), 682);
        assert_eq!(default_homes(4096, 192), 256);
        for cpus in [1, 64, 341, 342, 1000, 4096] {
            let n = default_homes(cpus, 192);
            assert!(
                n == HOMES_DEFAULT_MIN || n * cpus * 192 <= HOMES_DEFAULT_BYTES,
                "{cpus}: {n}"
            );
        }
    }

    #[test]
    fn an_allocation_is_not_said_to_have_entries() {
        let queues = Limit {
            name: "park_queues",
            size: None,
            lost: "its creation was refused",
        };
        let line = Limits::default()
            .observe(&queues, 1, || "cgroup id 9".into(), "m")
            .unwrap();
        assert!(
            line.contains("park_queues turned away cgroup id 9"),
            "{line}"
        );
    }

    #[test]
    fn a_limit_is_said_once_named_then_counted_and_listed() {
        let mut l = Limits::default();
        assert_eq!(l.observe(&SLOTS, 0, || unreachable!(), "m"), None);
        assert!(l.view(&[SLOTS, HOMES]).is_empty());
        let line = l
            .observe(
                &SLOTS,
                1,
                || "cgroup /a/b".into(),
                "softpart_events_total{event=\"cgroup_no_slot\"}",
            )
            .expect("the first hit is said");
        assert!(
            line.contains("cgroup_slots (2048 entries) turned away cgroup /a/b: its tasks"),
            "{line}"
        );
        assert!(line.contains("charged as plain tasks"), "{line}");
        assert!(line.contains("cgroup_no_slot"), "{line}");
        // No new hit: the subject is not even asked for.
        assert_eq!(l.observe(&SLOTS, 1, || unreachable!(), "m"), None);
        // More hits: counted, the latest named, not said again.
        assert_eq!(l.observe(&SLOTS, 5, || "cgroup /a/c".into(), "m"), None);
        // Another limit is said on its own first hit.
        assert!(
            l.observe(&HOMES, 2, || "thread 7 (sh)".into(), "m")
                .is_some()
        );
        let v = l.view(&[SLOTS, HOMES]);
        assert_eq!(
            v,
            vec![
                LimitView {
                    limit: "cgroup_slots".into(),
                    size: Some(2048),
                    hits: 5,
                    last: "cgroup /a/c".into()
                },
                LimitView {
                    limit: "task_homes".into(),
                    size: Some(65536),
                    hits: 2,
                    last: "thread 7 (sh)".into()
                },
            ]
        );
    }
}
