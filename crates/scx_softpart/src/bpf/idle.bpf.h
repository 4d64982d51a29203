/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Partitions' CPU masks and idle CPU lookups, through the kernel's idle
 * masks: machine-wide, or one per NUMA node where the kernel has them.
 */
#ifndef __SOFTPART_IDLE_BPF_H
#define __SOFTPART_IDLE_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"

struct part_ctx {
	struct bpf_cpumask __kptr *cpus;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_MAX_PARTS);
	__type(key, u32);
	__type(value, struct part_ctx);
} parts SEC(".maps");

static __always_inline const struct cpumask *part_cpus(u32 part)
{
	struct part_ctx *pctx = bpf_map_lookup_elem(&parts, &part);

	if (!pctx || !pctx->cpus)
		return NULL;
	return cast_mask(pctx->cpus);
}

/* An idle CPU of @cpus, claimed, searching @near_cpu's node first; or -1. */
static __always_inline s32 pick_idle(const struct cpumask *cpus, s32 near_cpu, u64 flags)
{
	u32 node;

	if (!idle_per_node)
		return scx_bpf_pick_idle_cpu(cpus, flags);
	/*
	 * A CPU that was offline when we attached has no known node: its
	 * cpu_node[] entry is an id of its own, past any node (main.rs), and
	 * the kernel ends the scheduler on a node id it does not have. Such a
	 * CPU runs tasks for a moment when it comes back, before the kernel
	 * detaches us for the hotplug.
	 */
	node = cpu_attr(cpu_node, near_cpu);
	if (node >= SP_MAX_NODES)
		node = idle_nodes[0];
	return __COMPAT_scx_bpf_pick_idle_cpu_node(cpus, node, flags);
}

/* Is a CPU of @cpus idle? Claims nothing. */
static bool any_idle(const struct cpumask *cpus)
{
	const struct cpumask *idle;
	bool found = false;
	u32 i;

	if (!idle_per_node) {
		idle = scx_bpf_get_idle_cpumask();
		found = bpf_cpumask_intersects(cpus, idle);
		scx_bpf_put_idle_cpumask(idle);
		return found;
	}
	bpf_for(i, 0, nr_idle_nodes) {
		if (i >= SP_MAX_NODES)
			break;
		idle = __COMPAT_scx_bpf_get_idle_cpumask_node(idle_nodes[i]);
		found = bpf_cpumask_intersects(cpus, idle);
		scx_bpf_put_idle_cpumask(idle);
		if (found)
			break;
	}
	return found;
}

/*
 * A CPU of @cpus that the kernel's idle masks show idle, spread over them
 * (bpf_cpumask_any_and_distribute()), not claimed; or -1. @nodes: the
 * nodes @cpus spans, whose per-node masks are looked at. A lookup in the
 * masks: no CPU's own state is read, and an idle CPU is found in a word
 * per 64 CPUs.
 */
static s32 idle_candidate(const struct cpumask *cpus, u64 nodes)
{
	const struct cpumask *idle;
	u32 cpu = nr_cpus, n;

	if (!idle_per_node) {
		idle = scx_bpf_get_idle_cpumask();
		cpu = bpf_cpumask_any_and_distribute(cpus, idle);
		scx_bpf_put_idle_cpumask(idle);
		return cpu < nr_cpus ? cpu : -1;
	}
	bpf_for(n, 0, SP_MAX_NODES) {
		if (!(nodes >> n))
			break;
		if (!(nodes & (1ULL << n)))
			continue;
		idle = __COMPAT_scx_bpf_get_idle_cpumask_node(n);
		cpu = bpf_cpumask_any_and_distribute(cpus, idle);
		scx_bpf_put_idle_cpumask(idle);
		if (cpu < nr_cpus)
			return cpu;
	}
	return -1;
}

#endif /* __SOFTPART_IDLE_BPF_H */
