/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Visitors: homed tasks running on a CPU outside their home. Each CPU's
 * sp_cpu_ctx.visitor says whose (its home's partition + 1, or 0), and a
 * mask per NUMA node holds the CPUs of that node that run one, so that a
 * home finds its visitors in the masks of its own nodes: a lookup that
 * reads no CPU's state but the candidates', whatever the host's size.
 * A node's mask is written by that node's CPUs, as their visitor changes,
 * and by an owner that claims one of them back (claim_visitor_cpu()).
 */
#ifndef __SOFTPART_VISITOR_BPF_H
#define __SOFTPART_VISITOR_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"
#include "stats.bpf.h"
#include "cpu.bpf.h"
#include "idle.bpf.h"

/*
 * How many visitors a home looks at before it gives up taking one back:
 * the masks say which CPUs run one, and each look reads that CPU's line.
 */
#define SP_VISITOR_PROBES 4

struct node_ctx {
	/* The node's CPUs that run a visitor. */
	struct bpf_cpumask __kptr *visitors;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_MAX_NODES);
	__type(key, u32);
	__type(value, struct node_ctx);
} node_ctxs SEC(".maps");

/* Allocates each node's visitor mask; from init. */
static s32 init_visitor_masks(void)
{
	struct bpf_cpumask *mask;
	struct node_ctx *nc;
	u32 node;

	bpf_for(node, 0, SP_MAX_NODES) {
		nc = bpf_map_lookup_elem(&node_ctxs, &node);
		if (!nc)
			return -ENOENT;
		mask = bpf_cpumask_create();
		if (!mask)
			return -ENOMEM;
		mask = bpf_kptr_xchg(&nc->visitors, mask);
		if (mask)
			bpf_cpumask_release(mask);
	}
	return 0;
}

static __always_inline struct bpf_cpumask *node_visitors(u32 node)
{
	struct node_ctx *nc = bpf_map_lookup_elem(&node_ctxs, &node);

	return nc ? nc->visitors : NULL;
}

/* @cpu's bit in its node's visitor mask, set or cleared. */
static void mark_visitor(s32 cpu, bool on)
{
	struct bpf_cpumask *mask = node_visitors(cpu_attr(cpu_node, cpu));

	if (!mask)
		return;
	if (on)
		bpf_cpumask_set_cpu(cpu, mask);
	else
		bpf_cpumask_clear_cpu(cpu, mask);
}

/*
 * Another CPU than @cpu clears @cpu's mark: @cc->visitor read 0, or was
 * claimed. Marked again if @cpu took a new visitor meanwhile.
 */
static void unmark_visitor(s32 cpu, struct sp_cpu_ctx *cc)
{
	mark_visitor(cpu, false);
	if (cc->visitor)
		mark_visitor(cpu, true);
}

/* @cpu runs a visitor whose home is partition @val - 1 (0: it does not). */
static __always_inline void set_visitor(s32 cpu, u32 val)
{
	struct sp_cpu_ctx *cc = cpu_ctx(cpu);
	u32 old;

	if (!cc || cc->visitor == val)
		return;
	old = cc->visitor;
	cc->visitor = val;
	if (!old != !val)
		mark_visitor(cpu, val);
}

/*
 * A CPU of @cpus (on @nodes) that runs a visitor, by the masks, spread
 * over them; or -1. The mask may be a moment behind the CPU's own mark:
 * the caller reads that.
 */
static s32 visitor_candidate(const struct cpumask *cpus, u64 nodes)
{
	struct bpf_cpumask *mask;
	u32 n, cpu;
	s32 found = -1;

	bpf_for(n, 0, SP_MAX_NODES) {
		if (!(nodes >> n))
			break;
		if (!(nodes & (1ULL << n)))
			continue;
		mask = node_visitors(n);
		if (!mask)
			continue;
		cpu = bpf_cpumask_any_and_distribute(cpus, cast_mask(mask));
		if (cpu < nr_cpus) {
			found = cpu;
			break;
		}
	}
	return found;
}

/* Does a CPU of @cpus (on @nodes) run a visitor? */
static bool visitors_in(const struct cpumask *cpus, u64 nodes)
{
	return visitor_candidate(cpus, nodes) >= 0;
}

/*
 * A CPU of @home (on @nodes) running a visitor, claimed (so that two
 * owners do not pick the same one), or -1. Only a visitor whose own home
 * partition has an idle CPU is taken: evicted, it goes to that CPU, or
 * queues at home with that CPU kicked to serve the queue. With no idle
 * CPU there it could only queue at home, and the owner gets this CPU
 * anyway at the visitor's slice end (dispatch() serves its own queue
 * first); at a full machine such swaps cost CPU time and buy no locality
 * (docs/decisions.md). Up to SP_VISITOR_PROBES candidates are looked at.
 */
static s32 claim_visitor_cpu(const struct cpumask *home, u64 nodes)
{
	struct sp_cpu_ctx *cc;
	const struct cpumask *vhome;
	u32 i, v;
	s32 cpu;

	bpf_for(i, 0, SP_VISITOR_PROBES) {
		cpu = visitor_candidate(home, nodes);
		if (cpu < 0)
			return -1;
		cc = cpu_ctx(cpu);
		if (!cc)
			return -1;
		diag_inc(SP_STAT_CPU_LINES_READ);
		v = cc->visitor;
		if (!v) {
			/* Claimed by another owner, its mark not cleared yet. */
			unmark_visitor(cpu, cc);
			continue;
		}
		vhome = part_cpus(v - 1);
		if (!vhome || !any_idle(vhome))
			continue;
		if (__sync_val_compare_and_swap(&cc->visitor, v, 0) == v) {
			unmark_visitor(cpu, cc);
			return cpu;
		}
	}
	return -1;
}

#endif /* __SOFTPART_VISITOR_BPF_H */
