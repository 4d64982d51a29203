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
        let len = entries * size_of::<sp_group_stats>();
        // SAFETY: a new shared mapping of the map's own memory, of the
        // size the kernel allocated (rounded to pages by mmap); the fd
        // stays open as long as the skeleton, which outlives this.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
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

impl Drop for GroupStats {
    fn drop(&mut self) {
        // SAFETY: the mapping made in map(), unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
