//! The fast path's home maps: defining a group's home in BPF, pointing
//! threads and cgroups at it, and putting things back when a change fails
//! half-way, so that a refused request changes nothing.

use crate::Scheduler;
use crate::bpf_intf;
use crate::bpf_skel::BpfMaps;
use crate::counters;
use crate::homes::{self, Home};
use anyhow::{Result, bail};
use libbpf_rs::{MapCore, MapFlags, ProgramInput};
use softpart_core::softness::Softness;
use std::collections::BTreeSet;

impl Scheduler<'_> {
    /// The fast path's id for a group's home, defining or redefining it
    /// there when needed.
    pub(crate) fn define_home(
        &mut self,
        label: String,
        cpus: &BTreeSet<usize>,
        softness: Option<Softness>,
    ) -> Result<u32> {
        let maps = &self.skel.maps;
        let assigned = self.homes.assign(
            Home {
                label,
                cpus: cpus.clone(),
                softness,
            },
            || referenced_homes(maps, &mut self.traffic),
        )?;
        let id = assigned.id;
        if assigned.new
            && let Err(e) = counters::reset_group(&self.skel.maps, &self.group_stats, id)
        {
            bail!("resetting the statistics of home id {id}: {e:#}");
        }
        if assigned.redefine {
            // The fast path sees the CPUs online now: after a hotplug, a
            // home with none of them is ignored until they return.
            let online: BTreeSet<usize> = cpus.intersection(&self.machine.cpus).copied().collect();
            let mut args = bpf_intf::sp_home_args {
                id,
                pad: 0,
                cpus: homes::words(&online),
                near: homes::words(&self.machine.near(&online)),
            };
            // SAFETY: the program reads exactly one sp_home_args from its
            // context, which lives on this stack frame for the call.
            let ctx = unsafe {
                std::slice::from_raw_parts_mut(
                    &mut args as *mut _ as *mut u8,
                    std::mem::size_of_val(&args),
                )
            };
            let out = self.skel.progs.set_home.test_run(ProgramInput {
                context_in: Some(ctx),
                ..Default::default()
            })?;
            if out.return_value != 0 {
                bail!(
                    "defining home {id} in BPF failed: {}",
                    out.return_value as i32
                );
            }
        }
        Ok(id)
    }

    /// After a failed change, a group's home as it was (or no group).
    pub(crate) fn restore_home(&mut self, label: &str, before: Option<Home>) {
        match before {
            Some(h) => {
                let _ = self.define_home(h.label, &h.cpus, h.softness);
            }
            None => self.homes.release(label),
        }
    }

    /// Points every thread at home `id`, or, if the map refuses one, puts
    /// back what each had before and fails.
    pub(crate) fn set_task_homes(&mut self, tids: &[u32], id: u32) -> Result<()> {
        let map = &self.skel.maps.task_homes;
        let mut done: Vec<(u32, Option<u32>)> = Vec::with_capacity(tids.len());
        for &tid in tids {
            let old = Self::lookup_u32(map, &tid.to_ne_bytes());
            if let Err(e) = map.update(&tid.to_ne_bytes(), &id.to_ne_bytes(), MapFlags::ANY) {
                for (t, old) in done.into_iter().rev() {
                    let _ = match old {
                        Some(o) => map.update(&t.to_ne_bytes(), &o.to_ne_bytes(), MapFlags::ANY),
                        None => map.delete(&t.to_ne_bytes()),
                    };
                }
                bail!("setting the home of thread {tid}: {e} (nothing changed)");
            }
            done.push((tid, old));
        }
        Ok(())
    }

    /// Gives a (checked) cgroup its group's home.
    pub(crate) fn set_cgroup_home(
        &mut self,
        cgid: u64,
        label: String,
        cpus: &BTreeSet<usize>,
        softness: Option<Softness>,
    ) -> Result<()> {
        // Whoever sets it now owns it; a rule's home and an origin are
        // marked again by the caller.
        self.rule_homes.remove(&cgid);
        self.origins.remove(&cgid);
        self.memory_homes.forget(cgid);
        let before = self
            .homes
            .find(&label)
            .and_then(|id| self.homes.get(id).cloned());
        let id = self.define_home(label.clone(), cpus, softness)?;
        let had = Self::lookup_u32(&self.skel.maps.cgroup_homes, &cgid.to_ne_bytes());
        if had == Some(id) {
            // Only its CPUs changed (a balancer move): set_home told the
            // tasks of this home, and no other task needs to look again.
            self.cgroup_groups.insert(cgid, label);
            return Ok(());
        }
        if let Err(e) = self.skel.maps.cgroup_homes.update(
            &cgid.to_ne_bytes(),
            &id.to_ne_bytes(),
            MapFlags::ANY,
        ) {
            self.restore_home(&label, before);
            bail!("setting the home of cgroup {label}: {e} (nothing changed)");
        }
        self.cgroup_groups.insert(cgid, label);
        self.bump_gen();
        Ok(())
    }

    pub(crate) fn clear_cgroup_home(&mut self, cgid: u64) {
        self.rule_homes.remove(&cgid);
        self.origins.remove(&cgid);
        self.memory_homes.forget(cgid);
        self.balancer.groups.remove(&cgid);
        let _ = self.skel.maps.cgroup_homes.delete(&cgid.to_ne_bytes());
        if let Some(label) = homes::forget_cgroup(&mut self.cgroup_groups, cgid) {
            self.homes.release(&label);
        }
        self.bump_gen();
    }

    pub(crate) fn bump_gen(&mut self) {
        if let Some(data) = self.skel.maps.data_data.as_mut() {
            data.homes_gen += 1;
        }
    }

    pub(crate) fn lookup_u32(map: &libbpf_rs::Map, key: &[u8]) -> Option<u32> {
        map.lookup(key, MapFlags::ANY).ok().flatten().and_then(|v| {
            v.get(..4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        })
    }
}

/// Home ids some task or cgroup entry in the fast path still refers to.
pub(crate) fn referenced_homes(
    maps: &BpfMaps,
    traffic: &mut crate::traffic::MapTraffic,
) -> BTreeSet<u32> {
    // A system call per 4,096 entries, not two per entry.
    const BATCH: u32 = 4096;
    let mut used = BTreeSet::new();
    for map in [&maps.task_homes, &maps.cgroup_homes] {
        let Ok(entries) = map.lookup_batch(BATCH, MapFlags::ANY, MapFlags::ANY) else {
            continue;
        };
        for (key, value) in entries {
            traffic.read::<u8>(key.len() + value.len());
            if let Ok(b) = <[u8; 4]>::try_from(&value[..4.min(value.len())]) {
                used.insert(u32::from_ne_bytes(b));
            }
        }
    }
    used
}
