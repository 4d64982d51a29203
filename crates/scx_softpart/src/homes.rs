//! The homes the fast path knows. Each group (a cgroup, or the processes
//! one `prefer --pid` named) gets a small id of its own, so that the fast
//! path's per-home counters are per group and a group can have its own
//! softness. The BPF side keeps a cpumask per id.
//!
//! An id is reused only once nothing in the fast path's maps refers to it
//! any more (the caller says which ids are still referenced).

use anyhow::{Result, bail};
use softpart_core::softness::Softness;
use std::collections::BTreeSet;

use crate::bpf_intf;

/// The most home ids the fast path takes (`--max-homes` up to this).
pub const MAX_HOMES: usize = bpf_intf::softpart_consts_SP_MAX_HOMES as usize;

#[derive(Debug, Clone, PartialEq)]
pub struct Home {
    /// Who it is for: a cgroup path, or "pid N".
    pub label: String,
    pub cpus: BTreeSet<usize>,
    /// None: the scheduler's --softness.
    pub softness: Option<Softness>,
}

#[derive(Debug)]
pub struct HomeTable {
    slots: Vec<Option<Home>>,
    /// Ids there are (the fast path's table, sized at load).
    capacity: usize,
    /// Groups turned away with every id taken, and the latest.
    refused: u64,
    last_refused: String,
}

/// What `assign` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assigned {
    pub id: u32,
    /// The CPUs behind the id changed: the fast path must be told.
    pub redefine: bool,
    /// The id was free before: its counters belong to a previous group.
    pub new: bool,
}

/// Forgets cgroup `cgid` in `groups` (cgroup id -> its group's label) and
/// returns the label whose id may now be freed: none while another cgroup
/// still has it. A cgroup removed and made again at the same path (a
/// service restarted, a benchmark's next run) gets the same label and so
/// the same id; when the scan then finds the old cgroup gone, freeing the
/// label would free the id the new cgroup uses, and the next group to get
/// a home would take it over, new cgroup and all.
pub fn forget_cgroup(
    groups: &mut std::collections::BTreeMap<u64, String>,
    cgid: u64,
) -> Option<String> {
    let label = groups.remove(&cgid)?;
    (!groups.values().any(|l| *l == label)).then_some(label)
}

impl HomeTable {
    /// A table of `capacity` ids (at most MAX_HOMES).
    pub fn new(capacity: usize) -> HomeTable {
        HomeTable {
            slots: Vec::new(),
            capacity: capacity.min(MAX_HOMES),
            refused: 0,
            last_refused: String::new(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Groups turned away so far for want of an id, and the latest.
    pub fn refused(&self) -> (u64, &str) {
        (self.refused, &self.last_refused)
    }

    /// The id of `home.label`'s group, updated to `home`. A new group takes
    /// a free id; when there is none, ids that `referenced()` does not list
    /// are freed first.
    pub fn assign(
        &mut self,
        home: Home,
        referenced: impl FnOnce() -> BTreeSet<u32>,
    ) -> Result<Assigned> {
        if let Some(id) = self.find(&home.label) {
            let slot = &mut self.slots[id as usize];
            let redefine = slot.as_ref().is_none_or(|h| h.cpus != home.cpus);
            *slot = Some(home);
            return Ok(Assigned {
                id,
                redefine,
                new: false,
            });
        }
        let id = match self.free_slot() {
            Some(id) => id,
            None => {
                let used = referenced();
                for (id, slot) in self.slots.iter_mut().enumerate() {
                    if !used.contains(&(id as u32)) {
                        *slot = None;
                    }
                }
                match self.free_slot() {
                    Some(id) => id,
                    None => {
                        self.refused += 1;
                        self.last_refused = home.label.clone();
                        bail!(
                            "too many groups with a home (home_ids: {} entries, --max-homes); clear some first",
                            self.capacity
                        )
                    }
                }
            }
        };
        if id as usize == self.slots.len() {
            self.slots.push(None);
        }
        self.slots[id as usize] = Some(home);
        Ok(Assigned {
            id,
            redefine: true,
            new: true,
        })
    }

    fn free_slot(&self) -> Option<u32> {
        match self.slots.iter().position(Option::is_none) {
            Some(i) => Some(i as u32),
            None if self.slots.len() < self.capacity => Some(self.slots.len() as u32),
            None => None,
        }
    }

    pub fn find(&self, label: &str) -> Option<u32> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|h| h.label == label))
            .map(|i| i as u32)
    }

    /// Forgets a group; its id is free once nothing refers to it (the
    /// caller removes the map entries).
    pub fn release(&mut self, label: &str) {
        if let Some(id) = self.find(label) {
            self.slots[id as usize] = None;
        }
    }

    /// Forgets the groups nothing refers to any more (threads that all
    /// ended); returns how many.
    pub fn release_unreferenced(&mut self, referenced: &BTreeSet<u32>) -> usize {
        let mut n = 0;
        for (id, slot) in self.slots.iter_mut().enumerate() {
            if slot.is_some() && !referenced.contains(&(id as u32)) {
                *slot = None;
                n += 1;
            }
        }
        n
    }

    pub fn get(&self, id: u32) -> Option<&Home> {
        self.slots.get(id as usize).and_then(Option::as_ref)
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, &Home)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|h| (i as u32, h)))
    }
}

/// Bitmap words for the set_home program's arguments.
pub fn words(cpus: &BTreeSet<usize>) -> [u64; bpf_intf::softpart_consts_SP_CPU_WORDS as usize] {
    let mut w = [0u64; bpf_intf::softpart_consts_SP_CPU_WORDS as usize];
    for &c in cpus {
        if c / 64 < w.len() {
            w[c / 64] |= 1 << (c % 64);
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(label: &str, cpus: std::ops::Range<usize>) -> Home {
        Home {
            label: label.into(),
            cpus: cpus.collect(),
            softness: None,
        }
    }

    #[test]
    fn one_id_per_group() {
        let mut t = HomeTable::new(MAX_HOMES);
        let none = BTreeSet::new;
        let a = t.assign(home("/db1", 0..4), none).unwrap();
        let b = t.assign(home("/db2", 0..4), none).unwrap();
        assert_eq!((a.id, a.redefine, a.new), (0, true, true));
        assert_eq!((b.id, b.redefine, b.new), (1, true, true));
        // Same group, same CPUs: nothing to redefine.
        let again = t.assign(home("/db1", 0..4), none).unwrap();
        assert_eq!((again.id, again.redefine, again.new), (0, false, false));
        // Same group, new CPUs: same id, redefined.
        let moved = t.assign(home("/db1", 4..8), none).unwrap();
        assert_eq!((moved.id, moved.redefine, moved.new), (0, true, false));
        assert_eq!(t.get(0).unwrap().cpus, (4..8).collect());
        t.release("/db1");
        assert_eq!(t.get(0), None);
        assert_eq!(t.assign(home("/db3", 0..2), none).unwrap().id, 0);
    }

    #[test]
    fn a_cgroup_made_again_keeps_its_id_when_the_old_one_goes() {
        let mut groups = std::collections::BTreeMap::new();
        let mut t = HomeTable::new(MAX_HOMES);
        let a = t.assign(home("/bench/a", 0..2), BTreeSet::new).unwrap().id;
        groups.insert(10, "/bench/a".to_string());
        // Removed and made again at the same path: same label, same id.
        let again = t.assign(home("/bench/a", 0..2), BTreeSet::new).unwrap();
        assert_eq!(again.id, a);
        groups.insert(11, "/bench/a".to_string());
        // The scan finds the old cgroup gone: the label stays.
        assert_eq!(forget_cgroup(&mut groups, 10), None);
        // So a new group takes another id, and /bench/a keeps its CPUs.
        let b = t.assign(home("/bench/b", 4..6), BTreeSet::new).unwrap().id;
        assert_ne!(a, b);
        assert_eq!(t.get(a).unwrap().cpus, BTreeSet::from([0, 1]));
        // The last cgroup with the label frees it.
        assert_eq!(forget_cgroup(&mut groups, 11), Some("/bench/a".to_string()));
        assert_eq!(forget_cgroup(&mut groups, 11), None);
    }

    #[test]
    fn unreferenced_groups_are_released() {
        let mut t = HomeTable::new(MAX_HOMES);
        for label in ["pid 1", "/db", "pid 2"] {
            t.assign(home(label, 0..2), BTreeSet::new).unwrap();
        }
        let used: BTreeSet<u32> = [1].into();
        assert_eq!(t.release_unreferenced(&used), 2);
        assert_eq!(
            t.iter().map(|(_, h)| h.label.as_str()).collect::<Vec<_>>(),
            ["/db"]
        );
        assert_eq!(t.release_unreferenced(&used), 0);
        // A freed id is taken by the next new group.
        assert_eq!(t.assign(home("pid 3", 0..2), BTreeSet::new).unwrap().id, 0);
    }

    #[test]
    fn max_homes_option_reaches_the_fast_paths_table() {
        // cli.rs: --max-homes takes 1..=16384.
        assert_eq!(MAX_HOMES, 16384);
    }

    #[test]
    fn reuses_only_unreferenced_ids_when_full() {
        const MAX_HOMES: usize = 300;
        let mut t = HomeTable::new(MAX_HOMES);
        for i in 0..MAX_HOMES {
            t.assign(home(&format!("pid {i}"), 0..1), BTreeSet::new)
                .unwrap();
        }
        let all: BTreeSet<u32> = (0..MAX_HOMES as u32).collect();
        let e = t
            .assign(home("/late", 0..1), || all.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains("too many groups"), "{e}");
        assert!(e.contains("home_ids: 300 entries"), "{e}");
        assert_eq!(t.refused(), (1, "/late"));
        // Everything still there after a failed attempt.
        assert_eq!(t.iter().count(), MAX_HOMES);
        let mut some = all.clone();
        some.remove(&7);
        let got = t.assign(home("/late", 0..1), || some).unwrap();
        assert_eq!(got.id, 7);
        assert_eq!(t.find("pid 7"), None);
        assert_eq!(t.find("pid 8"), Some(8));
    }

    #[test]
    fn bitmap_words() {
        let w = words(&[0, 63, 64, 130].into());
        assert_eq!(w[0], 1 | 1 << 63);
        assert_eq!(w[1], 1);
        assert_eq!(w[2], 1 << 2);
    }
}
