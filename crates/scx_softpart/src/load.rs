//! Loading the fast path: the partitions of this attachment, the ops
//! flags and the read-only data the BPF program is given before load, and
//! what the log says once it is attached.

use crate::bpf_intf;
use crate::bpf_skel::*;
use crate::cli::{Opts, steal_defer_us};
use crate::machine::Machine;
use crate::partitions;
use anyhow::{Context, Result, bail};
use libbpf_rs::OpenObject;
use log::{info, warn};
use scx_utils::{Topology, scx_ops_open};
use std::collections::BTreeSet;
use std::mem::MaybeUninit;

/// The machine as this attachment sees it.
pub(crate) struct Layout<'m> {
    pub(crate) topo: &'m Topology,
    pub(crate) machine: &'m Machine,
    pub(crate) parts: &'m [BTreeSet<usize>],
    pub(crate) nr_cpu_ids: usize,
    /// Home ids (the homes map's size); stats slots are one more.
    pub(crate) nr_homes: usize,
}

/// This attachment's partitions: the ones given (--partitions or the
/// config), less the CPUs offline now, or one per node or LLC from the
/// topology.
pub(crate) fn partitions(
    explicit: Option<&[BTreeSet<usize>]>,
    topo: &Topology,
    machine: &Machine,
) -> Result<Vec<BTreeSet<usize>>> {
    Ok(match explicit {
        // Offline CPUs leave their partitions; a partition with none
        // online is left out until they return.
        Some(parts) => parts
            .iter()
            .map(|p| {
                p.intersection(&machine.cpus)
                    .copied()
                    .collect::<BTreeSet<_>>()
            })
            .filter(|p| !p.is_empty())
            .collect(),
        None => partitions::from_topology(topo, None)?,
    })
}

/// Opens the BPF skeleton with its ops flags and read-only data set.
/// Returns it, and whether the kernel's per-node idle masks are used.
pub(crate) fn open_skel<'a>(
    opts: &Opts,
    open_object: &'a mut MaybeUninit<OpenObject>,
    layout: &Layout,
    hotplug_seq: Option<u64>,
) -> Result<(OpenBpfSkel<'a>, bool)> {
    // No obj_builder.debug(): it would replace the libbpf logger set
    // up in main().
    let builder = BpfSkelBuilder::default();
    let mut skel = scx_ops_open!(builder, open_object, softpart_ops, None)?;
    skel.struct_ops.softpart_ops_mut().exit_dump_len = opts.exit_dump_len;
    if let Some(seq) = hotplug_seq {
        skel.struct_ops.softpart_ops_mut().hotplug_seq = seq;
    }
    // Slice ends of a CPU's last runnable task reach enqueue(), where a
    // task away from home can go back.
    skel.struct_ops.softpart_ops_mut().flags = *scx_utils::compat::SCX_OPS_ENQ_LAST;
    // update_idle() only re-checks the queues; the kernel's idle masks,
    // which every pick uses, must stay on.
    skel.struct_ops.softpart_ops_mut().flags |= *scx_utils::compat::SCX_OPS_KEEP_BUILTIN_IDLE;
    // Exiting and migration-disabled tasks reach enqueue() too, rather
    // than the kernel's local queue, so that none is left behind a
    // higher class (enqueue_kernel_local()); the scheduler finds no task
    // by pid, which is what the kernel's default guards against.
    skel.struct_ops.softpart_ops_mut().flags |= *scx_utils::compat::SCX_OPS_ENQ_EXITING
        | *scx_utils::compat::SCX_OPS_ENQ_MIGRATION_DISABLED;
    // Test-only (guest tests): cgroups of this name fail at creation as if
    // their park queue could not be allocated.
    if let Some(name) = std::env::var_os("SOFTPART_TEST_FAIL_PARK_DSQ") {
        let name = name.as_encoded_bytes();
        let dst = &mut skel
            .maps
            .rodata_data
            .as_mut()
            .context("no rodata")?
            .fail_park_dsq_for;
        if name.is_empty() || name.len() >= dst.len() {
            bail!(
                "SOFTPART_TEST_FAIL_PARK_DSQ={:?}: expected a cgroup name of 1 to {} bytes",
                String::from_utf8_lossy(name),
                dst.len() - 1
            );
        }
        for (d, &b) in dst.iter_mut().zip(name) {
            *d = b as _;
        }
        warn!(
            "test-only SOFTPART_TEST_FAIL_PARK_DSQ: cgroups named {name:?} are refused",
            name = String::from_utf8_lossy(name)
        );
    }
    // Tasks queued on a CPU an RT or deadline task takes go elsewhere:
    // through ops.cpu_release up to 6.18; from 6.19, which deprecates it
    // (and logs so at load), a sched_switch program re-enqueues instead.
    let reenq_anywhere = scx_utils::compat::ksym_exists("scx_bpf_reenqueue_local___v2")
        .unwrap_or(false)
        || scx_utils::compat::ksym_exists("scx_bpf_dsq_reenq").unwrap_or(false);
    if reenq_anywhere {
        skel.struct_ops.softpart_ops_mut().cpu_release = std::ptr::null_mut();
        skel.struct_ops.softpart_ops_mut().cpu_acquire = std::ptr::null_mut();
    } else {
        skel.progs.softpart_class_switch.set_autoload(false);
    }
    // cpu.max changes reach the scheduler through ops.cgroup_set_bandwidth
    // (6.17 and later); without it the kernel would refuse the whole ops.
    if !scx_utils::compat::struct_has_field("sched_ext_ops", "cgroup_set_bandwidth")
        .unwrap_or(false)
    {
        skel.struct_ops.softpart_ops_mut().cgroup_set_bandwidth = std::ptr::null_mut();
        warn!(
            "this kernel hands no cpu.max to sched_ext schedulers (6.17 and later do): \
             each cgroup with a cpu.max quota is named as it is found"
        );
    }
    // cpu.idle: ops.cgroup_set_idle (6.19 and later), the same way.
    if !scx_utils::compat::struct_has_field("sched_ext_ops", "cgroup_set_idle").unwrap_or(false) {
        skel.struct_ops.softpart_ops_mut().cgroup_set_idle = std::ptr::null_mut();
        warn!(
            "this kernel hands no cpu.idle to sched_ext schedulers (6.19 and later do): \
             each cgroup with cpu.idle set is named as it is found"
        );
    }
    let per_node_flag = *scx_utils::compat::SCX_OPS_BUILTIN_IDLE_PER_NODE;
    let max_nodes = bpf_intf::softpart_consts_SP_MAX_NODES as usize;
    let idle_nodes = layout
        .machine
        .idle_nodes()
        .filter(|_| per_node_flag != 0)
        .filter(|nodes| {
            let fits = nodes.iter().all(|&n| n < max_nodes);
            if !fits {
                warn!(
                    "NUMA node ids {nodes:?} go past the {max_nodes} scx_softpart tracks: \
                     one machine-wide idle mask instead of one per node"
                );
            }
            fits
        });
    if idle_nodes.is_some() {
        skel.struct_ops.softpart_ops_mut().flags |= per_node_flag;
    }

    let rodata = skel.maps.rodata_data.as_mut().context("no rodata")?;
    rodata.nr_cpus = layout.nr_cpu_ids as u32;
    rodata.nr_homes = layout.nr_homes as u32;
    rodata.nr_parts = layout.parts.len() as u32;
    rodata.slice_ns = opts.slice_us * 1000;
    rodata.slice_lag_ns = opts.slice_lag_us * 1000;
    rodata.smt_enabled = layout.topo.smt_enabled && !opts.no_idle_core;
    // The kernel's pick always tries whole idle cores first: with
    // --no-idle-core (SIS_CORE off) our own search must run instead.
    rodata.kernel_pick = !opts.no_idle_core;
    let steal_defer_us = steal_defer_us(opts);
    rodata.steal_defer_ns = steal_defer_us * 1000;
    rodata.diag = opts.diag;
    if let Some(nodes) = &idle_nodes {
        // Distinct ids below max_nodes: they fit idle_nodes[].
        rodata.idle_per_node = true;
        rodata.nr_idle_nodes = nodes.len() as u32;
        for (i, &n) in nodes.iter().enumerate() {
            rodata.idle_nodes[i] = n as u32;
        }
    }
    for (cpu, part) in softpart_core::partition::cpu_to_part(layout.parts, layout.nr_cpu_ids)
        .into_iter()
        .enumerate()
    {
        rodata.cpu_part[cpu] = part;
    }
    for (cpu, &sib) in layout.machine.sibling.iter().enumerate() {
        if cpu < rodata.cpu_sibling.len() {
            rodata.cpu_sibling[cpu] = sib as u32;
            rodata.cpu_core[cpu] = layout.machine.core[cpu] as u32;
            // CPUs of no known LLC or node get ids of their own.
            rodata.cpu_llc[cpu] = layout.machine.llc_of(cpu).unwrap_or(1 << 16 | cpu) as u32;
            rodata.cpu_node[cpu] = cpu_node_id(layout.machine, cpu);
        }
    }
    let rings = bpf_intf::softpart_consts_SP_PART_RINGS as usize;
    for (a, mine) in layout
        .machine
        .part_rings(layout.parts, rings)
        .iter()
        .enumerate()
    {
        for (r, &mask) in mine.iter().enumerate() {
            rodata.part_rings[a * rings + r] = mask;
        }
    }
    let (words, nr_words) = layout.machine.part_words(layout.parts);
    for (part, w) in words.into_iter().enumerate() {
        rodata.part_word[part] = w;
    }
    rodata.nr_part_words = nr_words as u32;
    let hist_domains = layout
        .machine
        .load_domains(bpf_intf::softpart_consts_SP_LOAD_DOMAINS as usize)
        as u32;
    rodata.hist_domains = hist_domains;
    let slots = layout.nr_homes as u32 + 1;
    skel.maps
        .homes
        .set_max_entries(layout.nr_homes as u32)
        .context("sizing homes")?;
    // A cgroup with a home holds an id of its own: room for one each.
    skel.maps
        .cgroup_homes
        .set_max_entries(bpf_intf::softpart_consts_SP_MAX_CGROUP_HOMES.max(layout.nr_homes as u32))
        .context("sizing cgroup_homes")?;
    skel.maps
        .group_hists
        .set_max_entries(slots * hist_domains)
        .context("sizing group_hists")?;
    skel.maps
        .group_stats
        .set_max_entries(slots * layout.nr_cpu_ids as u32)
        .context("sizing group_stats")?;
    Ok((skel, idle_nodes.is_some()))
}

/// The attachment's log line: what the fast path was given and chose.
/// The node id the fast path is given for @cpu: a CPU offline at the
/// attachment has no known node, and gets an id of its own past any node.
pub(crate) fn cpu_node_id(machine: &Machine, cpu: usize) -> u32 {
    machine.node_of(cpu).unwrap_or(1 << 16 | cpu) as u32
}

pub(crate) fn log_attached(opts: &Opts, kernel_pick: bool, idle_per_node: bool) {
    info!(
        "attached at uptime {:.2} s; softness {}; steals deferred up to {} us \
         on CPUs their owners used within that time, not for balanced groups in over-full \
         partitions; away from home: {}; idle masks: {}{}; control socket {}",
        crate::uptime_s(),
        opts.softness,
        steal_defer_us(opts),
        if kernel_pick {
            "the kernel's scx_bpf_select_cpu_and()"
        } else {
            "our own idle search"
        },
        if idle_per_node {
            "per node"
        } else {
            "machine-wide"
        },
        if opts.diag {
            "; diagnostic events on"
        } else {
            ""
        },
        opts.control_socket.display()
    );
}

#[cfg(test)]
mod tests {
    /// The BPF object as the skeleton embeds it.
    const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bpf.bpf.o"));

    fn u16_at(b: &[u8], at: usize) -> usize {
        u16::from_le_bytes(b[at..at + 2].try_into().unwrap()) as usize
    }
    fn u32_at(b: &[u8], at: usize) -> usize {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
    }
    fn u64_at(b: &[u8], at: usize) -> usize {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
    }

    /// The names of the object's undefined symbols (what libbpf resolves
    /// at load: kfuncs, ksyms, kconfig values), from its ELF64 symbol table.
    fn undefined_symbols(elf: &[u8]) -> Vec<String> {
        assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
        let (shoff, shentsize, shnum) = (u64_at(elf, 0x28), u16_at(elf, 0x3a), u16_at(elf, 0x3c));
        let section = |i: usize| shoff + i * shentsize;
        let mut out = Vec::new();
        for i in 0..shnum {
            let sh = section(i);
            // SHT_SYMTAB
            if u32_at(elf, sh + 4) != 2 {
                continue;
            }
            let (off, size, entsize) = (
                u64_at(elf, sh + 0x18),
                u64_at(elf, sh + 0x20),
                u64_at(elf, sh + 0x38),
            );
            let strtab = u64_at(elf, section(u32_at(elf, sh + 0x28)) + 0x18);
            for sym in (off..off + size).step_by(entsize) {
                // st_shndx SHN_UNDEF
                if u16_at(elf, sym + 6) != 0 {
                    continue;
                }
                let name = strtab + u32_at(elf, sym);
                let end = elf[name..].iter().position(|&c| c == 0).unwrap() + name;
                out.push(String::from_utf8_lossy(&elf[name..end]).into_owned());
            }
        }
        out
    }

    #[test]
    fn the_scheduler_needs_no_kernel_config_file() {
        let undefined = undefined_symbols(OBJECT);
        assert!(
            undefined.iter().any(|s| s == "scx_bpf_create_dsq"),
            "the symbol table was not read: {undefined:?}"
        );
        // libbpf reads /boot/config-* or /proc/config.gz for any CONFIG_*
        // extern and fails the load when neither is there.
        let kconfig: Vec<_> = undefined
            .iter()
            .filter(|s| s.starts_with("CONFIG_"))
            .collect();
        assert!(kconfig.is_empty(), "kconfig externs: {kconfig:?}");
    }
}
