//! Each group slot's counters, per CPU (src/bpf/stats.bpf.h's
//! `group_stats`): an array the fast path writes, entry slot x nr_cpus +
//! CPU, which the control plane maps, so that reading a slot's CPUs takes
//! no system call and only the slots it asks for are read.

use crate::bpf_intf::sp_group_stats;
use anyhow::{Result, bail};
use libbpf_rs::MapCore;
use std::os::fd::AsRawFd;

pub(crate) struct GroupStats {
    base: *mut sp_group_stats,
    len: usize,
    entries: usize,
    nr_cpus: usize,
}

impl GroupStats {
    /// Maps `map` (an array of `slots` x `nr_cpus` entries, BPF_F_MMAPABLE).
    pub(crate) fn map(map: &impl MapCore, nr_cpus: usize) -> Result<GroupStats> {
        let entries = map.max_entries() as usize;
        if map.value_size() as usize != size_of::<sp_group_stats>() || nr_cpus == 0 {
            bail!(
                "group_stats: values of {} bytes for {} CPUs, expected {}",
                map.value_size(),
                nr_cpus,
                size_of::<sp_group_stats>()
            );
        }
        // The map's own memory, of the size the kernel allocated (rounded
        // to pages by mmap); the fd stays open as long as the skeleton,
        // which outlives this.
        Self::mapped(entries, nr_cpus, libc::MAP_SHARED, map.as_fd().as_raw_fd())
    }

    /// A table of `entries` mapped with `flags` from `fd` (-1: anonymous).
    fn mapped(entries: usize, nr_cpus: usize, flags: i32, fd: i32) -> Result<GroupStats> {
        let len = entries * size_of::<sp_group_stats>();
        // SAFETY: a new mapping, unmapped by Drop.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            bail!("mapping group_stats: {}", std::io::Error::last_os_error());
        }
        Ok(GroupStats {
            base: base.cast(),
            len,
            entries,
            nr_cpus,
        })
    }

    /// The entries of `slot`, one per CPU id (none past the table).
    fn range(&self, slot: u32) -> std::ops::Range<usize> {
        let first = (slot as usize * self.nr_cpus).min(self.entries);
        first..(first + self.nr_cpus).min(self.entries)
    }

    /// `slot`'s counters, one per CPU id.
    pub(crate) fn per_cpu(&self, slot: u32) -> Vec<sp_group_stats> {
        self.range(slot)
            // SAFETY: i < entries, within the mapping; the fast path writes
            // these counters as it runs, so a read may see a value being
            // updated (each u64 whole: aligned), as with any map lookup.
            .map(|i| unsafe { std::ptr::read_volatile(self.base.add(i)) })
            .collect()
    }

    /// `slot`'s run time and wait, one per CPU id: three counters of the
    /// first line of each CPU's entry, so a reading pulls one line per CPU
    /// where the whole entry is three.
    pub(crate) fn run_and_wait(&self, slot: u32) -> Vec<RunAndWait> {
        self.range(slot)
            .map(|i| {
                // SAFETY: as in per_cpu(); fields of an entry in the mapping.
                unsafe {
                    let g = self.base.add(i);
                    RunAndWait {
                        run_ns: std::ptr::read_volatile(&raw const (*g).run_home_ns)
                            + std::ptr::read_volatile(&raw const (*g).run_away_ns),
                        wait_ns: std::ptr::read_volatile(&raw const (*g).delay_ns),
                    }
                }
            })
            .collect()
    }

    /// `slot`'s run time at home and away, summed over its CPUs (two
    /// counters of each CPU's first line).
    pub(crate) fn home_and_away(&self, slot: u32) -> (u64, u64) {
        self.range(slot)
            .map(|i| {
                // SAFETY: as in per_cpu(); fields of an entry in the mapping.
                unsafe {
                    let g = self.base.add(i);
                    (
                        std::ptr::read_volatile(&raw const (*g).run_home_ns),
                        std::ptr::read_volatile(&raw const (*g).run_away_ns),
                    )
                }
            })
            .fold((0, 0), |(h, a), (dh, da)| (h + dh, a + da))
    }

    /// Zeroes `slot`'s counters, for a slot taken by a new group.
    pub(crate) fn reset(&self, slot: u32) {
        for i in self.range(slot) {
            // SAFETY: as in per_cpu(); plain data, all zero is valid.
            unsafe { std::ptr::write_volatile(self.base.add(i), std::mem::zeroed()) };
        }
    }

    /// CPU ids per slot: the entries a slot's read takes.
    pub(crate) fn nr_cpus(&self) -> usize {
        self.nr_cpus
    }
}

/// A group's CPU time (at home and away) and time waiting on one CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RunAndWait {
    pub run_ns: u64,
    pub wait_ns: u64,
}

/// Bytes a RunAndWait reading takes from an entry.
pub(crate) const RUN_AND_WAIT_BYTES: usize = 3 * size_of::<u64>();

// What run_and_wait() reads lies in an entry's first cache line.
const _: () = assert!(
    std::mem::offset_of!(sp_group_stats, run_home_ns) < 64
        && std::mem::offset_of!(sp_group_stats, run_away_ns) < 64
        && std::mem::offset_of!(sp_group_stats, delay_ns) < 64
);

impl Drop for GroupStats {
    fn drop(&mut self) {
        // SAFETY: the mapping made in map(), unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of `slots` x `nr_cpus` zeroed entries in anonymous memory.
    fn table(slots: usize, nr_cpus: usize) -> GroupStats {
        GroupStats::mapped(
            slots * nr_cpus,
            nr_cpus,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
        )
        .unwrap()
    }

    #[test]
    fn run_and_wait_reads_the_slots_own_cpus() {
        let t = table(3, 4);
        for slot in 0..3u32 {
            for cpu in 0..4usize {
                let i = slot as usize * 4 + cpu;
                let n = (slot as u64 + 1) * 100 + cpu as u64;
                // SAFETY: an entry of the table.
                unsafe {
                    let g = t.base.add(i);
                    (*g).run_home_ns = n;
                    (*g).run_away_ns = 1_000 * n;
                    (*g).delay_ns = 7 * n;
                    (*g).spills = 99;
                }
            }
        }
        let got = t.run_and_wait(1);
        let want: Vec<RunAndWait> = (0..4u64)
            .map(|cpu| RunAndWait {
                run_ns: 1_001 * (200 + cpu),
                wait_ns: 7 * (200 + cpu),
            })
            .collect();
        assert_eq!(got, want);
        // The whole entries say the same.
        let whole: Vec<RunAndWait> = t
            .per_cpu(1)
            .iter()
            .map(|g| RunAndWait {
                run_ns: g.run_home_ns + g.run_away_ns,
                wait_ns: g.delay_ns,
            })
            .collect();
        assert_eq!(got, whole);
    }
}
