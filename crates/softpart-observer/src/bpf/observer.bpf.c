/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * softpart observer: per-cgroup scheduling figures under ANY scheduler
 * (EEVDF, scx_softpart, another sched_ext scheduler), from the scheduler
 * tracepoints alone. It never reads scx_softpart's own accounting.
 *
 * - CPU time per cgroup and CPU: charged at every switch-out.
 * - Run delay: from the moment a task becomes runnable (the start of its
 *   wakeup, or preemption while runnable) to the moment it runs, as a
 *   histogram.
 * - Migrations per cgroup, by distance (SMT sibling, LLC, node, cross-node).
 * - Per CPU: idle time, and the part of it during which some task, on any
 *   CPU, was waiting to run. A "wait clock" advances only while at least one
 *   task waits; an idle period's waiting share is the clock's advance.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

const volatile u32 cpu_core[OBS_MAX_CPUS];
const volatile u32 cpu_llc[OBS_MAX_CPUS];
const volatile u32 cpu_node[OBS_MAX_CPUS];

struct obs_cpu cpus[OBS_MAX_CPUS];

/* The wait clock (see above). Lock-free: a race costs nanoseconds. */
s64 nr_waiting;
u64 wait_since_ns;
u64 wait_total_ns;
u64 groups_full;

static struct obs_group zero_group;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OBS_MAX_GROUPS);
	__type(key, u64);
	__type(value, struct obs_group);
} groups SEC(".maps");

struct task_obs {
	u64 wait_start_ns;
	u32 waiting;
	u32 running;
	/* the wait began at a switch-out while runnable, not a wakeup */
	u32 preempted;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_obs);
} task_obs SEC(".maps");

static __always_inline u64 task_cgid(struct task_struct *p)
{
	return BPF_CORE_READ(p, cgroups, dfl_cgrp, kn, id);
}

static struct obs_group *group_of(u64 cgid)
{
	struct obs_group *g = bpf_map_lookup_elem(&groups, &cgid);

	if (g)
		return g;
	if (bpf_map_update_elem(&groups, &cgid, &zero_group, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&groups, &cgid)) {
		__sync_fetch_and_add(&groups_full, 1);
		return NULL;
	}
	return bpf_map_lookup_elem(&groups, &cgid);
}

static __always_inline u64 wait_clock(u64 now)
{
	u64 total = wait_total_ns;

	if (nr_waiting > 0 && now > wait_since_ns)
		total += now - wait_since_ns;
	return total;
}

static __always_inline void wait_begin(u64 now)
{
	if (__sync_fetch_and_add(&nr_waiting, 1) == 0)
		wait_since_ns = now;
}

static __always_inline void wait_end(u64 now)
{
	if (__sync_fetch_and_add(&nr_waiting, -1) == 1 && now > wait_since_ns)
		__sync_fetch_and_add(&wait_total_ns, now - wait_since_ns);
}

static __always_inline void record_delay(u64 cgid, u64 delay, bool from_idle, bool preempted)
{
	struct obs_group *g = group_of(cgid);
	u32 idx = sp_hist_bucket(delay);

	if (!g || idx >= OBS_NR_BUCKETS)
		return;
	__sync_fetch_and_add(&g->delay_hist[idx], 1);
	if (from_idle)
		__sync_fetch_and_add(&g->idle_end_hist[idx], 1);
	if (preempted) {
		__sync_fetch_and_add(&g->preempted_hist[idx], 1);
		__sync_fetch_and_add(&g->preempted_delay_ns, delay);
	}
	__sync_fetch_and_add(&g->delay_ns, delay);
	__sync_fetch_and_add(&g->nr_delays, 1);
	/* Racy max: a lost update only loses a near-equal value. */
	if (delay > g->max_delay_ns)
		g->max_delay_ns = delay;
}

/* Is @cpu outside @p's allowed set, with @p free to migrate? */
static __always_inline bool outside_allowed(struct task_struct *p, u32 cpu)
{
	const struct cpumask *allowed = BPF_CORE_READ(p, cpus_ptr);
	unsigned long word = 0;

	if (BPF_CORE_READ(p, migration_disabled))
		return false;
	if (bpf_probe_read_kernel(&word, sizeof(word), &allowed->bits[cpu / 64]))
		return false;
	return !(word & (1UL << (cpu % 64)));
}

static __always_inline void mark_waiting(struct task_obs *t, u64 now, bool preempted)
{
	if (t->running || t->waiting)
		return;
	t->waiting = 1;
	t->preempted = preempted;
	t->wait_start_ns = now;
	wait_begin(now);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(obs_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	u64 now = bpf_ktime_get_ns();
	u32 cpu = bpf_get_smp_processor_id();
	struct obs_cpu *c;
	struct task_obs *t;

	if (cpu >= OBS_MAX_CPUS)
		return 0;
	c = &cpus[cpu];

	if (prev->pid) {
		if (c->run_start_ns && now > c->run_start_ns) {
			struct obs_group *g = group_of(c->run_cgid);

			if (g) {
				__sync_fetch_and_add(&g->cpu_ns[cpu], now - c->run_start_ns);
				if (c->run_outside)
					__sync_fetch_and_add(&g->outside_ns,
							     now - c->run_start_ns);
			}
		}
		t = bpf_task_storage_get(&task_obs, prev, 0,
					 BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (t) {
			t->running = 0;
			/* Still runnable after switching out: it waits. */
			if (preempt || BPF_CORE_READ(prev, __state) == 0)
				mark_waiting(t, now, true);
		}
	} else if (c->idle_since_ns && now > c->idle_since_ns) {
		c->idle_ns += now - c->idle_since_ns;
		c->idle_waiting_ns += wait_clock(now) - c->idle_wclock0;
	}

	if (next->pid) {
		u64 cgid = task_cgid(next);

		c->run_start_ns = now;
		c->run_cgid = cgid;
		c->idle_since_ns = 0;
		c->run_outside = outside_allowed(next, cpu);
		if (c->run_outside) {
			struct obs_group *g = group_of(cgid);

			if (g)
				__sync_fetch_and_add(&g->nr_outside, 1);
		}
		t = bpf_task_storage_get(&task_obs, next, 0,
					 BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (t) {
			if (t->waiting) {
				t->waiting = 0;
				if (now > t->wait_start_ns)
					record_delay(cgid, now - t->wait_start_ns, !prev->pid,
						     t->preempted);
				wait_end(now);
			}
			t->running = 1;
		}
	} else {
		c->run_start_ns = 0;
		c->run_outside = 0;
		c->idle_since_ns = now;
		c->idle_wclock0 = wait_clock(now);
	}
	return 0;
}

static __always_inline int on_wakeup(struct task_struct *p)
{
	struct task_obs *t;

	t = bpf_task_storage_get(&task_obs, p, 0, 0);
	if (!t) {
		t = bpf_task_storage_get(&task_obs, p, 0,
					 BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t)
			return 0;
		/* First sight of p: it may be on a CPU right now. */
		t->running = BPF_CORE_READ(p, on_cpu);
	}
	mark_waiting(t, bpf_ktime_get_ns(), false);
	return 0;
}

/*
 * The wait starts where the wakeup starts, on the waker's CPU, under every
 * scheduler. sched_wakeup is no common start: EEVDF queues a wakeup for an
 * idle CPU on that CPU's wake list (ttwu_queue_wakelist()) and sched_wakeup
 * fires there, once the IPI has woken it; sched_ext turns that path off
 * unless the scheduler asks for it (SCX_OPS_ALLOW_QUEUED_WAKEUP), so its
 * sched_wakeup fires on the waker before the IPI. Timed from sched_wakeup,
 * EEVDF's waits left out the time an idle CPU takes to wake, and
 * sched_ext's did not (docs/design.md, Observer).
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(obs_waking, struct task_struct *p)
{
	return on_wakeup(p);
}

/*
 * Second chance: at sched_waking a task still switching out (on its CPU,
 * already dequeued) is not waiting yet; by sched_wakeup it is. A wait
 * already started is left alone.
 */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(obs_wakeup, struct task_struct *p)
{
	return on_wakeup(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(obs_wakeup_new, struct task_struct *p)
{
	return on_wakeup(p);
}

static __always_inline u32 classify(u32 from, u32 to)
{
	/*
	 * Separate checks with a barrier between them: the compiler would
	 * otherwise merge them into one test the verifier cannot follow.
	 */
	if (from >= OBS_MAX_CPUS)
		return OBS_DIST_XNODE;
	barrier_var(from);
	if (to >= OBS_MAX_CPUS)
		return OBS_DIST_XNODE;
	barrier_var(to);
	if (cpu_core[from] == cpu_core[to])
		return OBS_DIST_SMT;
	if (cpu_llc[from] == cpu_llc[to])
		return OBS_DIST_LLC;
	if (cpu_node[from] == cpu_node[to])
		return OBS_DIST_NODE;
	return OBS_DIST_XNODE;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(obs_migrate, struct task_struct *p, int dest_cpu)
{
	u32 from = BPF_CORE_READ(p, thread_info.cpu);
	struct obs_group *g;
	u32 dist;

	if (from == (u32)dest_cpu)
		return 0;
	g = group_of(task_cgid(p));
	dist = classify(from, dest_cpu);
	if (g && dist < OBS_NR_DIST)
		__sync_fetch_and_add(&g->migrations[dist], 1);
	return 0;
}
