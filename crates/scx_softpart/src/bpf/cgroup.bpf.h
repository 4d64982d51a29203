/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The cgroup CPU contract: each cgroup of the cpu controller gets a slot
 * (ops.cgroup_init), where the fast path keeps what the kernel hands over
 * (cpu.weight, cpu.max) and per CPU the weight of its runnable tasks. The
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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SP_MAX_CGROUPS);
	__type(key, u32);
	__type(value, struct sp_cg_runnable);
} cg_runnable SEC(".maps");

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
 * A free slot for @cgid. The kernel announces cgroups one at a time
 * (under its cgroup lock), so a plain scan would do; the compare-and-swap
 * keeps a slot from being given twice even if it did not.
 */
static u32 claim_slot(u64 cgid)
{
	u32 i;

	bpf_for(i, 0, SP_MAX_CGROUPS) {
		struct sp_cgroup *cg = cgroup_at(i);

		if (cg && !cg->cgid && __sync_bool_compare_and_swap(&cg->cgid, 0, cgid))
			return i;
	}
	return SP_NO_CGROUP;
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

/* Adds (@sign 1) or takes away (-1) a runnable task's weight, on this CPU. */
static __always_inline void count_runnable(u32 slot, u32 weight, s64 sign)
{
	struct sp_cg_runnable *cr;

	if (slot >= SP_MAX_CGROUPS)
		return;
	cr = bpf_map_lookup_elem(&cg_runnable, &slot);
	if (!cr)
		return;
	cr->weight += sign * weight;
	cr->nr += sign;
}

/* @ns run by a task of cgroup @slot on this CPU, for the statistics. */
static __always_inline void count_cgroup_run(u32 slot, u64 ns)
{
	struct sp_cg_runnable *cr;

	if (slot >= SP_MAX_CGROUPS)
		return;
	cr = bpf_map_lookup_elem(&cg_runnable, &slot);
	if (cr)
		cr->run_ns += ns;
}

#endif /* __SOFTPART_CGROUP_BPF_H */
