/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The cgroup CPU contract: each cgroup of the cpu controller gets a slot
 * (ops.cgroup_init), where the fast path keeps what the kernel hands over
 * (cpu.weight, cpu.max) and, per NUMA node, the weight of its runnable
 * tasks and the CPU time they ran. The
 * control plane turns that into each cgroup's charge rate (softpart_core::
 * shares): tasks are charged on the vtime clock at
 *
 *     ran * rate / weight,   rate = runnable weight / entitlement (CPUs),
 *
 * so that a cgroup at its entitlement advances the clock at the rate of
 * the wall clock, whatever its number of tasks, and one queue ordered by
 * vtime gives each cgroup its share and, inside it, each task its share
 * by nice. The hierarchy is flattened by the control plane, not here.
 */
#ifndef __SOFTPART_CGROUP_BPF_H
#define __SOFTPART_CGROUP_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"

/* The slot table, written here, read by the control plane. */
struct sp_cgroup cgroups[SP_MAX_CGROUPS];
/* Per slot, what the control plane derives (each rate, cap_up, idle_under). */
struct sp_cg_ctl cg_ctl[SP_MAX_CGROUPS];

struct cg_ctx {
	u32 slot;
};

struct {
	__uint(type, BPF_MAP_TYPE_CGRP_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cg_ctx);
} cg_ctxs SEC(".maps");

/*
 * Bumped after every change the cgroup callbacks make to the slot table
 * (a slot taken or freed, a weight, cpu.max or cpu.idle written): the
 * control plane copies the table again only when it moved. Written by
 * cgroup callbacks only, never on a scheduling path.
 */
u64 cgroups_changed;
/* One past the highest slot ever taken: the control plane copies that much. */
u32 cgroups_used;

/*
 * Bumped at every mkdir, rmdir and rename in the cgroup tree, of any
 * controller (counted by tracepoints in main.bpf.c): the control
 * plane walks the tree for new and removed cgroups only when it moved.
 */
u64 cgroup_tree_changes;

/*
 * The load of each cgroup slot, per load domain (index: domain *
 * SP_MAX_CGROUPS + slot), read by the control plane at its contract
 * refresh: a few bytes a slot and domain, where per-CPU counters would be
 * a few bytes a slot and CPU. The CPU time is apart, read once a second.
 */
/*
 * In a section (a map) of their own: a map's value is at most 4 MB
 * (KMALLOC_MAX_SIZE), and with the slot table beside them .bss would pass it.
 */
struct sp_cg_load cg_loads[SP_LOAD_DOMAINS * SP_MAX_CGROUPS]
	__attribute__((section(".bss.cg_load"), aligned(64)));
u64 cg_run_ns[SP_LOAD_DOMAINS * SP_MAX_CGROUPS] __attribute__((section(".bss.cg_load"), aligned(64)));

static __always_inline struct sp_cgroup *cgroup_at(u32 slot)
{
	if (slot >= SP_MAX_CGROUPS)
		return NULL;
	barrier_var(slot);
	return &cgroups[slot];
}

/*
 * The control plane's view of @slot, if it is of the cgroup in the slot
 * now (its generation is the slot's); NULL until the control plane has
 * written one for it. The generation is read before the fields it covers,
 * and the control plane writes it after them: on x86, where loads are not
 * reordered with each other, a matching generation means fields of this
 * cgroup. A weakly ordered CPU would need a load-acquire of slot_gen here.
 */
static __always_inline struct sp_cg_ctl *ctl_of(u32 slot)
{
	struct sp_cgroup *cg = cgroup_at(slot);
	struct sp_cg_ctl *c;

	if (!cg)
		return NULL;
	c = &cg_ctl[slot];
	if (READ_ONCE(c->slot_gen) != READ_ONCE(cg->slot_gen) || !(c->slot_gen & 1))
		return NULL;
	barrier();
	return c;
}

/*
 * A task's cgroup slot, as kept in its context (@slot, taken with
 * generation @gen): SP_NO_CGROUP once that cgroup exited, so that a task
 * still running after its cgroup went (an exiting one) is never charged
 * to, counted in or parked for the slot's next cgroup.
 */
static __always_inline u32 live_slot(u32 slot, u32 gen)
{
	struct sp_cgroup *cg = cgroup_at(slot);

	return cg && READ_ONCE(cg->slot_gen) == gen ? slot : SP_NO_CGROUP;
}

/* @cgrp's slot; SP_NO_CGROUP if it has none (the table was full). */
static u32 slot_of(struct cgroup *cgrp)
{
	struct cg_ctx *cgc;

	if (!cgrp)
		return SP_NO_CGROUP;
	cgc = bpf_cgrp_storage_get(&cg_ctxs, cgrp, 0, 0);
	return cgc ? cgc->slot : SP_NO_CGROUP;
}

/*
 * Raises cgroups_used past @slot. cgroup_init runs under the kernel's
 * cgroup mutex, so the exchange meets no other writer; the bounded retry
 * is for the verifier.
 */
static __always_inline void note_slot_used(u32 slot)
{
	u32 was, i;

	bpf_for(i, 0, 16) {
		was = READ_ONCE(cgroups_used);
		if (was > slot || __sync_bool_compare_and_swap(&cgroups_used, was, slot + 1))
			return;
	}
}

/*
 * No slot below this one is free: claims start their scan here and every
 * release lowers it, so that n cgroups made one after another take n
 * steps, not n * n / 2 (at 16,384 cgroups, 134 million). Written only by
 * the cgroup callbacks, which the kernel runs one at a time.
 */
u32 slots_free_from;

/*
 * A free slot for @cgid. The kernel announces cgroups one at a time
 * (under its cgroup lock), so a plain scan would do; the compare-and-swap
 * keeps a slot from being given twice even if it did not.
 */
static u32 claim_slot(u64 cgid)
{
	u32 i;

	bpf_for(i, READ_ONCE(slots_free_from), SP_MAX_CGROUPS) {
		struct sp_cgroup *cg = cgroup_at(i);

		if (cg && !cg->cgid && __sync_bool_compare_and_swap(&cg->cgid, 0, cgid)) {
			note_slot_used(i);
			WRITE_ONCE(slots_free_from, i + 1);
			return i;
		}
	}
	return SP_NO_CGROUP;
}

/* Frees @slot (its cgroup's id last, @cg being the slot's entry). */
static __always_inline void release_slot(u32 slot, struct sp_cgroup *cg)
{
	__sync_lock_test_and_set(&cg->cgid, 0);
	if (slot < READ_ONCE(slots_free_from))
		WRITE_ONCE(slots_free_from, slot);
}

/* cpu.max as the kernel hands it over: quota ~0 ("max") or in µs. */
static __always_inline void set_bandwidth(struct sp_cgroup *cg, u64 period_us, u64 quota_us,
					  u64 burst_us)
{
	cg->period_us = period_us;
	cg->quota_us = quota_us;
	cg->burst_us = burst_us;
}

/*
 * What one ns run by @p costs on the vtime clock, times 100 * SP_RATE_ONE:
 * its cgroup's rate, or a plain task's (100 per CPU) until the control
 * plane has given one.
 */
static __always_inline u64 charge_rate(u32 slot)
{
	struct sp_cg_ctl *c = ctl_of(slot);
	u32 rate = c ? c->rate : 0;

	return rate ? rate : 100 * SP_RATE_ONE;
}

/* @ns run by @p (weight @weight) in cgroup @slot, on the vtime clock. */
static __always_inline u64 vtime_cost(u64 ns, u32 slot, u32 weight)
{
	return ns * charge_rate(slot) / ((weight ? weight : 1) * SP_RATE_ONE);
}

static __always_inline void cgroups_changed_now(void)
{
	__sync_fetch_and_add(&cgroups_changed, 1);
}

/* This CPU's entry of @slot in a per-domain table; SP_LOAD_DOMAINS * SP_MAX_CGROUPS if none. */
static __always_inline u32 load_index(u32 slot)
{
	u32 domain = cpu_attr(cpu_node, bpf_get_smp_processor_id()) % SP_LOAD_DOMAINS;

	if (slot >= SP_MAX_CGROUPS)
		return SP_LOAD_DOMAINS * SP_MAX_CGROUPS;
	return domain * SP_MAX_CGROUPS + slot;
}

/*
 * Adds (@sign 1) or takes away (-1) a runnable task's weight, in this
 * CPU's domain: atomically, as the other CPUs of the node share the line.
 */
static __always_inline void count_runnable(u32 slot, u32 weight, s32 sign)
{
	u32 i = load_index(slot);

	if (i >= SP_LOAD_DOMAINS * SP_MAX_CGROUPS)
		return;
	barrier_var(i);
	__sync_fetch_and_add(&cg_loads[i].weight, sign * (s32)weight);
	__sync_fetch_and_add(&cg_loads[i].nr, sign);
}

/* @ns run by a task of cgroup @slot on this CPU, for the statistics. */
static __always_inline void count_cgroup_run(u32 slot, u64 ns)
{
	u32 i = load_index(slot);

	if (i >= SP_LOAD_DOMAINS * SP_MAX_CGROUPS)
		return;
	barrier_var(i);
	__sync_fetch_and_add(&cg_run_ns[i], ns);
}

#endif /* __SOFTPART_CGROUP_BPF_H */
