/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Per-CPU scheduling state, one cache line per CPU in two tables: what
 * other CPUs read (struct sp_cpu_ctx: higher classes, kthreads queued,
 * idle since), and what a CPU writes at every stop and tick (struct
 * sp_cpu_local: its busy time, when its owners last used it), so that
 * those writes do not take lines other CPUs read. Which CPUs run visitors
 * is visitor.bpf.h's.
 */
#ifndef __SOFTPART_CPU_BPF_H
#define __SOFTPART_CPU_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"

struct sp_cpu_ctx cpu_ctxs[SP_MAX_CPUS] __attribute__((aligned(64)));
struct sp_cpu_local cpu_locals[SP_MAX_CPUS] __attribute__((aligned(64)));

static __always_inline struct sp_cpu_ctx *cpu_ctx(s32 cpu)
{
	u32 c = cpu;

	if (c >= SP_MAX_CPUS)
		return NULL;
	barrier_var(c);
	return &cpu_ctxs[c];
}

static __always_inline struct sp_cpu_local *cpu_local(s32 cpu)
{
	u32 c = cpu;

	if (c >= SP_MAX_CPUS)
		return NULL;
	barrier_var(c);
	return &cpu_locals[c];
}

/*
 * Marks @cpu as held by a higher class (@taken) or given back; written
 * only by @cpu itself (cpu_release/cpu_acquire, or its sched_switch).
 */
static __always_inline void set_taken(s32 cpu, u32 taken)
{
	struct sp_cpu_ctx *cc = cpu_ctx(cpu);

	if (cc && cc->taken != taken)
		cc->taken = taken;
}

/* Does a higher class hold @cpu? Its local queue is then no place to wait. */
static __always_inline bool cpu_taken(s32 cpu)
{
	struct sp_cpu_ctx *cc = cpu_ctx(cpu);

	return cc && cc->taken;
}

/*
 * Whether @cpu defers its steals: only if its own partition's homed tasks
 * ran on it within the steal wait, so that they, and not the other
 * partition's, are likely to want it next. Owners that sleep a few
 * milliseconds at a time (pipe partners) leave their CPU idle for longer
 * than a slice and still want it back. A CPU that serves no owners (a node
 * left idle by a single instance, or one running visitors) steals at once:
 * deferring there only leaves it idle, and the instance bursting into it
 * loses the time.
 */
static __always_inline bool owners_recent(s32 cpu, u64 now)
{
	struct sp_cpu_local *cl = cpu_local(cpu);
	u64 at;

	if (!cl)
		return false;
	at = cl->owner_stopped_at;
	return at && time_before(now, at + steal_defer_ns);
}

/* @cpu went idle at @at (0: it is busy again). Written by @cpu only. */
static __noinline void set_idle_since(s32 cpu, u64 at)
{
	struct sp_cpu_ctx *cc = cpu_ctx(cpu);

	if (cc)
		cc->idle_since = at;
}

/* Has @cpu been idle since at least @lasted ago? */
static __always_inline bool idle_lasted(s32 cpu, u64 now, u64 lasted)
{
	struct sp_cpu_ctx *cc = cpu_ctx(cpu);
	u64 at;

	if (!cc)
		return false;
	at = cc->idle_since;
	return at && !time_before(now, at + lasted);
}

/*
 * Not inlined: inlined into enqueue(), the compiler indexed with an
 * unchecked copy of the CPU.
 */
static __noinline void count_kthread_queued(s32 cpu)
{
	struct sp_cpu_ctx *cc = cpu_ctx(cpu);

	/*
	 * No check of the local queue here: an insert from enqueue() lands
	 * there only after enqueue() returns. The enqueuing CPU may be
	 * another than @cpu, hence the atomic.
	 */
	if (cc)
		__sync_fetch_and_add(&cc->kthreads_queued, 1);
}

/*
 * @cpu starts a task, @counted if it is a kthread count_kthread_queued()
 * counted. With the local queue then empty, any count left is stale (a
 * kthread dequeued without running, e.g. an affinity change) and dropped,
 * so that a task is never kept behind what it takes for kthreads.
 */
static __noinline void count_kthread_ran(s32 cpu, bool counted)
{
	struct sp_cpu_ctx *cc = cpu_ctx(cpu);

	if (!cc || !cc->kthreads_queued)
		return;
	if (counted)
		__sync_fetch_and_sub(&cc->kthreads_queued, 1);
	if (!scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu))
		cc->kthreads_queued = 0;
}

/*
 * Is all @cpu has queued to run next per-CPU kthreads woken there, with no
 * task waiting at its partition? Then a task @cpu puts back (a slice end,
 * a yield, a kthread's turn) is best left to wait the kthreads' few
 * microseconds on @cpu, as under EEVDF: sent to an idle CPU instead, it
 * would move, and wait for that CPU to wake, while @cpu ran the kthread
 * and went idle.
 */
static __noinline bool kthreads_only_ahead(s32 cpu, u32 part)
{
	struct sp_cpu_ctx *cc = cpu_ctx(cpu);
	u32 ahead;
	s32 queued;

	if (!cc)
		return false;
	ahead = cc->kthreads_queued;
	if (!ahead || scx_bpf_dsq_nr_queued(part_dsq(part)))
		return false;
	queued = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu);
	return queued > 0 && queued <= ahead;
}

#endif /* __SOFTPART_CPU_BPF_H */
