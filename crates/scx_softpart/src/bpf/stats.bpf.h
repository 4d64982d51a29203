/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Statistics: the event counters and each group's run time, waits and
 * migrations per CPU (a CPU writes only its own copy, with plain adds;
 * the control plane sums the CPUs), and each group's run-delay histogram
 * per NUMA node (group_hists).
 */
#ifndef __SOFTPART_STATS_BPF_H
#define __SOFTPART_STATS_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sp_cpu_stats);
} cpu_stats SEC(".maps");

/*
 * Per group slot (home id, or SP_NO_HOME for the tasks without one), per
 * CPU: entry slot * nr_cpus + cpu, three cache lines of its own, in an
 * array sized at load to the CPU ids there are (a per-CPU map would take
 * an entry for every possible one), which the control plane maps.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SP_NR_GROUP_SLOTS);
	__type(key, u32);
	__type(value, struct sp_group_stats);
} group_stats SEC(".maps");

/*
 * Run-delay histograms per group slot and load domain, not per CPU (a
 * histogram is 2.5 KB: per CPU it would be that times every possible CPU
 * for every home). Entry slot * hist_domains + domain; a CPU's domain is
 * its node id modulo hist_domains (at most SP_LOAD_DOMAINS, set at load
 * with max_entries), so the CPUs adding to one entry are a node's, never
 * another socket's, and they add atomically.
 */
const volatile u32 hist_domains = 1;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_NR_GROUP_SLOTS);
	__type(key, u32);
	__type(value, struct sp_hist);
} group_hists SEC(".maps");

static __always_inline struct sp_cpu_stats *this_cpu_stats(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&cpu_stats, &zero);
}

static __always_inline void stat_inc(enum sp_stat idx)
{
	struct sp_cpu_stats *cs = this_cpu_stats();

	if (cs && idx < SP_NR_STATS)
		cs->events[idx]++;
}

/* A "diag" event: counted only with --diag. */
static __always_inline void diag_inc(enum sp_stat idx)
{
	if (diag)
		stat_inc(idx);
}

/*
 * The latest subject each limit turned away (enum sp_limit): written only
 * when a table is full, so the line it shares stays out of the way of
 * every scheduling event.
 */
u64 limit_subject[SP_NR_LIMITS];
/*
 * The same limits' hits, beside their event counts: what the control
 * plane reads each second, a few bytes where the events are per CPU.
 */
u64 limit_hits[SP_NR_LIMITS];

/* @limit turned @subject away: counted as @event, @subject kept to be named. */
static __always_inline void limit_hit(enum sp_limit limit, enum sp_stat event, u64 subject)
{
	stat_inc(event);
	if (limit < SP_NR_LIMITS) {
		limit_subject[limit] = subject;
		__sync_fetch_and_add(&limit_hits[limit], 1);
	}
}

/* A home id's stats slot: its own, or the no-home one. */
static __always_inline u32 stats_slot(u32 hid)
{
	return hid < nr_homes ? hid : nr_homes;
}

/* This CPU's counters of @hid's group slot. */
static __always_inline struct sp_group_stats *group_stats_of(u32 hid)
{
	u32 cpu = bpf_get_smp_processor_id();
	u32 key = stats_slot(hid) * nr_cpus + cpu;

	if (cpu >= nr_cpus)
		return NULL;
	return bpf_map_lookup_elem(&group_stats, &key);
}

static __always_inline void hist_add(struct sp_hist *h, u64 v)
{
	u32 idx = sp_hist_bucket(v);

	if (h && idx < SP_HIST_NR_BUCKETS)
		h->buckets[idx]++;
}

/* Adds @v to @slot's histogram of this CPU's node (shared with its CPUs). */
static __always_inline void group_hist_add(u32 slot, u64 v)
{
	u32 domain = cpu_attr(cpu_node, bpf_get_smp_processor_id()) % hist_domains;
	u32 key = slot * hist_domains + domain, idx = sp_hist_bucket(v);
	struct sp_hist *h = bpf_map_lookup_elem(&group_hists, &key);

	if (h && idx < SP_HIST_NR_BUCKETS)
		__sync_fetch_and_add(&h->buckets[idx], 1);
}

static __always_inline enum sp_dist migration_dist(s32 from, s32 to)
{
	if (cpu_attr(cpu_core, from) == cpu_attr(cpu_core, to))
		return SP_DIST_SMT;
	if (cpu_attr(cpu_llc, from) == cpu_attr(cpu_llc, to))
		return SP_DIST_LLC;
	if (cpu_attr(cpu_node, from) == cpu_attr(cpu_node, to))
		return SP_DIST_NODE;
	return SP_DIST_XNODE;
}

/* A wait of @delay that ended with a task of @hid starting on this CPU. */
static void record_delay(u32 hid, struct sp_group_stats *gs, u64 delay)
{
	struct sp_cpu_stats *cs = this_cpu_stats();
	u32 slot = stats_slot(hid);

	if (gs) {
		gs->delay_ns += delay;
		gs->nr_delays++;
	}
	group_hist_add(slot, delay);
	if (cs) {
		cs->delay_ns += delay;
		cs->nr_delays++;
		if (delay > cs->max_delay_ns)
			cs->max_delay_ns = delay;
		hist_add(&cs->delay_hist, delay);
	}
}

/* --diag: a task waited @rounds slices of its partition's CPUs in its queue. */
static __always_inline void record_wait_rounds(u64 rounds)
{
	struct sp_cpu_stats *cs = this_cpu_stats();

	if (cs && rounds > cs->max_wait_rounds)
		cs->max_wait_rounds = rounds;
}

static __always_inline void count_steal(void)
{
	struct sp_cpu_stats *cs = this_cpu_stats();

	if (cs)
		cs->steals++;
}

static __always_inline void count_foreign(u64 ran)
{
	struct sp_cpu_stats *cs = this_cpu_stats();

	if (cs)
		cs->foreign_ns += ran;
}

#endif /* __SOFTPART_STATS_BPF_H */
