/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the control plane sets before load (the machine's topology and the
 * options), and what it writes at run time; the clock every timestamp
 * uses; bounded accessors for the per-CPU tables.
 */
#ifndef __SOFTPART_CONFIG_BPF_H
#define __SOFTPART_CONFIG_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"

/* Set by the control plane before load. */
const volatile u32 nr_cpus = 1;
/* Home ids the control plane may give (the homes map's size), at most SP_MAX_HOMES. */
const volatile u32 nr_homes = 1;
const volatile u32 nr_parts = 1;
const volatile u64 slice_ns = 3000000ULL;
const volatile u64 slice_lag_ns = 20000000ULL;
const volatile bool smt_enabled = true;
/*
 * Spill through the kernel's scx_bpf_select_cpu_and() where it has one
 * (6.16 and later); off with --no-idle-core, as the kernel's pick always
 * looks for whole idle cores first.
 */
const volatile bool kernel_pick = true;
/*
 * How long a CPU its owners just used waits before it takes another
 * partition's task that ran within that time, and how recently its owners
 * must have used it for it to wait (see owners_recent()).
 */
const volatile u64 steal_defer_ns = 12000000ULL;
/* Count the "diag" events and keep what they need (--diag). */
const volatile bool diag;
/*
 * The kernel's per-node idle masks (SCX_OPS_BUILTIN_IDLE_PER_NODE, 6.15 and
 * later), set by the control plane where the kernel has them and the
 * machine has several nodes: each node's idle mask sits in its own cache
 * lines, so wakeups on one node do not contend with another's. The kernel
 * then refuses the machine-wide idle kfuncs, so every lookup goes through
 * pick_idle() and any_idle().
 */
const volatile bool idle_per_node;
/* The nodes that have CPUs (any_idle() looks only at those). */
const volatile u32 nr_idle_nodes;
const volatile u32 idle_nodes[SP_MAX_NODES];
const volatile u32 cpu_part[SP_MAX_CPUS];
/* One SMT sibling of each CPU (itself if none). */
const volatile u32 cpu_sibling[SP_MAX_CPUS];
/* Core, LLC and NUMA node ids of each CPU, to class migrations. */
const volatile u32 cpu_core[SP_MAX_CPUS];
const volatile u32 cpu_llc[SP_MAX_CPUS];
const volatile u32 cpu_node[SP_MAX_CPUS];
/*
 * part_rings[p * SP_PART_RINGS + r]: the partitions (bit b: partition b)
 * at p's r-th nearest NUMA distance, p itself in none; the farthest
 * share the last ring when there are more distances.
 */
const volatile u64 part_rings[SP_MAX_PARTS * SP_PART_RINGS];
/* The summary word of each partition's "tasks queued" bit: one per node. */
const volatile u32 part_word[SP_MAX_PARTS];
const volatile u32 nr_part_words = 1;

/* What this load decided (kernel_pick and the kfunc present), for Rust. */
bool kernel_pick_used;

/* Written by the control plane at run time. */
u64 homes_gen = 1;			/* bumped on every change of homes */
u32 allowed_first[SP_MAX_HOMES];	/* softness: search the allowed set first */
/* A balanced home whose partition is over-full: no steal wait (head_stealable()). */
u32 steal_now[SP_MAX_HOMES];
/*
 * A home whose tenants' cgroups are entitled to more CPU time than its CPUs
 * give (softpart_core::home_contract): its tasks compete by vtime with the
 * owners of other homes on their CPUs (contract_reaches()).
 */
u32 entitled_beyond[SP_MAX_HOMES];

/*
 * The clock of every timestamp here: the CPU's run-queue clock
 * (scx_bpf_now(), 6.14 and later; the compat header falls back to
 * bpf_ktime_get_ns()). bpf_ktime_get_ns() reads the clocksource at each
 * call, which where the TSC is unstable is a device read (the HPET), slow
 * enough to dominate a callback. Timestamps are compared only with others
 * of this clock, across CPUs to within a tick; the comparisons tolerate
 * that.
 */
static __always_inline u64 now_ns(void)
{
	return scx_bpf_now();
}

/*
 * Array indexes are checked, then passed through barrier_var() so that the
 * compiler indexes with the very register the verifier saw checked (it may
 * otherwise index through an unchecked copy).
 */
static __always_inline u32 cpu_attr(const volatile u32 *attr, s32 cpu)
{
	u32 c = cpu;

	if (c >= SP_MAX_CPUS)
		return 0;
	barrier_var(c);
	return attr[c];
}

static __always_inline u32 part_of_cpu(s32 cpu)
{
	return cpu_attr(cpu_part, cpu);
}

/* One SMT sibling of @cpu (itself if none, or out of range). */
static __always_inline s32 sibling_of(s32 cpu)
{
	return (u32)cpu < SP_MAX_CPUS ? cpu_attr(cpu_sibling, cpu) : cpu;
}

static __always_inline u32 home_flag(u32 *flags, u32 hid)
{
	if (hid >= SP_MAX_HOMES)
		return 0;
	barrier_var(hid);
	return flags[hid];
}

/* Softness: search the allowed set before the home (the ratio is exceeded). */
static __always_inline bool softness_says_allowed_first(u32 hid)
{
	return home_flag(allowed_first, hid);
}

/* A balanced group in an over-full partition: its queued tasks are stolen at once. */
static __always_inline bool home_steals_now(u32 hid)
{
	return home_flag(steal_now, hid);
}

/* The home's tenants are entitled beyond its CPUs. */
static __always_inline bool home_entitled_beyond(u32 hid)
{
	return home_flag(entitled_beyond, hid);
}

static __always_inline u64 part_dsq(u32 part)
{
	return SP_PART_DSQ_BASE + part;
}

#endif /* __SOFTPART_CONFIG_BPF_H */
