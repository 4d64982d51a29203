//! The homes the fast path knows: each distinct CPU set gets a small id
//! (the BPF side keeps a cpumask per id). Ids are never reused while the
//! scheduler runs, so a task or cgroup entry always means what it meant.

use anyhow::{Result, bail};
use std::collections::{BTreeMap, BTreeSet};

use crate::bpf_intf;

#[derive(Debug, Default)]
pub struct HomeTable {
    ids: BTreeMap<BTreeSet<usize>, u32>,
    sets: Vec<BTreeSet<usize>>,
}

pub const MAX_HOMES: usize = bpf_intf::softpart_consts_SP_MAX_HOMES as usize;

impl HomeTable {
    /// The id of this CPU set, and whether it is new (then the caller must
    /// hand it to the fast path before using it).
    pub fn intern(&mut self, cpus: &BTreeSet<usize>) -> Result<(u32, bool)> {
        if let Some(&id) = self.ids.get(cpus) {
            return Ok((id, false));
        }
        if self.sets.len() >= MAX_HOMES {
            bail!("too many distinct homes (at most {MAX_HOMES})");
        }
        let id = self.sets.len() as u32;
        self.ids.insert(cpus.clone(), id);
        self.sets.push(cpus.clone());
        Ok((id, true))
    }

    pub fn cpus(&self, id: u32) -> Option<&BTreeSet<usize>> {
        self.sets.get(id as usize)
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

    #[test]
    fn interns_and_dedupes() {
        let mut t = HomeTable::default();
        let a: BTreeSet<usize> = (0..4).collect();
        let b: BTreeSet<usize> = (4..8).collect();
        assert_eq!(t.intern(&a).unwrap(), (0, true));
        assert_eq!(t.intern(&b).unwrap(), (1, true));
        assert_eq!(t.intern(&a).unwrap(), (0, false));
        assert_eq!(t.cpus(1), Some(&b));
        for i in 2..MAX_HOMES {
            t.intern(&[i + 100].into()).unwrap();
        }
        assert!(t.intern(&[5000].into()).is_err());
    }

    #[test]
    fn bitmap_words() {
        let w = words(&[0, 63, 64, 130].into());
        assert_eq!(w[0], 1 | 1 << 63);
        assert_eq!(w[1], 1);
        assert_eq!(w[2], 1 << 2);
    }
}
