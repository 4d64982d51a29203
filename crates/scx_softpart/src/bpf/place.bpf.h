/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Where a waking task runs (select_cpu): at home first (prev, a whole idle
 * core, prev's SMT sibling, any idle CPU, a CPU taken back from a
 * visitor), then away from home, nearest first. softpart_core::placement
 * models these steps and tests their order.
 */
#ifndef __SOFTPART_PLACE_BPF_H
#define __SOFTPART_PLACE_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"
#include "stats.bpf.h"
#include "cpu.bpf.h"
#include "idle.bpf.h"
#include "visitor.bpf.h"
#include "task.bpf.h"
#include "part_queue.bpf.h"

/*
 * How long room at home must have lasted before a task away from it goes
 * back: 3/4 of a slice. At a slice end, room seen at every check in a row
 * for that long (should_go_home()), so that a slice-bound task goes at its
 * second slice end with room (ticks make those a slice or more apart), and
 * a task that yields thousands of times per slice does not chase a CPU
 * idle for an instant at its second yield. At a wakeup, a home CPU idle
 * that long (pick_lasting_room()).
 */
#define SP_ROOM_LASTED_NS (slice_ns * 3 / 4)

/*
 * How many of a home's idle CPUs a task away from it looks at for one idle
 * SP_ROOM_LASTED_NS or more: the kernel's idle masks say which are idle,
 * and each look reads that CPU's line.
 */
#define SP_ROOM_PROBES 4

/*
 * A CPU of @home (on @nodes) idle for SP_ROOM_LASTED_NS or more, claimed,
 * or -1. A home CPU idle for less is most often one whose tasks sleep
 * between messages and want it back within microseconds: a task away from
 * home that took it would cross nodes twice (there, and away again once
 * the owners wake), each time to cold caches.
 */
static s32 pick_lasting_room(const struct cpumask *home, u64 nodes)
{
	u64 now = now_ns();
	s32 cpu;
	u32 i;

	bpf_for(i, 0, SP_ROOM_PROBES) {
		cpu = idle_candidate(home, nodes);
		if (cpu < 0)
			return -1;
		diag_inc(SP_STAT_CPU_LINES_READ);
		if (idle_lasted(cpu, now, SP_ROOM_LASTED_NS) && scx_bpf_test_and_clear_cpu_idle(cpu))
			return cpu;
	}
	return -1;
}

/*
 * A task away from home (it last ran on @prev, outside @home) keeps to the
 * partition it runs in until its home has had room for a while: back home
 * to a CPU idle there for SP_ROOM_LASTED_NS, else prev if idle, else an
 * idle CPU of prev's partition; -1 if none (the wakeup then goes on as any:
 * home first). Returning at the first wakeup that saw a home CPU idle made
 * a task stolen by an idle CPU elsewhere cross back at once, and a task
 * that outgrew its home cross nodes twice per steal.
 */
static s32 pick_while_away(struct task_struct *p, struct task_ctx *tctx,
			   const struct cpumask *home, s32 prev)
{
	const struct cpumask *here;
	s32 cpu;

	cpu = pick_lasting_room(home, nodes_of(tctx, home));
	if (cpu >= 0) {
		stat_inc(SP_STAT_PICK_ROOM_LASTED);
		return cpu;
	}
	if (bpf_cpumask_test_cpu(prev, p->cpus_ptr) && scx_bpf_test_and_clear_cpu_idle(prev)) {
		stat_inc(SP_STAT_PICK_PREV_AWAY);
		return prev;
	}
	here = and_allowed(p, tctx, part_cpus(part_of_cpu(prev)));
	if (!here)
		return -1;
	cpu = pick_idle(here, prev, 0);
	if (cpu >= 0)
		stat_inc(SP_STAT_PICK_STAY_AWAY);
	return cpu;
}

/*
 * Does a CPU of @home run another partition's task? Then @home's queue is
 * a visitor's way back: a home CPU reaching a slice end takes it, so its
 * own visitor goes to its home's queue in turn, and two groups each
 * running in the other's partition swap back. A visitor of such a home is
 * not held where it is (hold_visitor_for_passing(), waiting behind
 * kthreads): held, it kept swapped groups apart.
 */
static bool home_hosts_visitor(struct task_ctx *tctx, const struct cpumask *home)
{
	return visitors_in(home, nodes_of(tctx, home));
}

/*
 * An idle CPU away from home: in @near (the home's node(s), allowed part)
 * first, then anywhere allowed; @allowed_first skips @near (softness).
 * Where the kernel has scx_bpf_select_cpu_and() (6.16 and later), its
 * topology-aware pick does this (prev, prev's SMT sibling, LLC, node, with
 * the per-node idle masks when enabled); elsewhere, or with --no-idle-core
 * (the kernel's pick always prefers whole idle cores), our own: prev, then
 * @near, then whole cores, then any.
 */
static __always_inline s32 pick_away(struct task_struct *p, s32 prev, u64 wake_flags,
				     const struct cpumask *near, bool is_homed,
				     bool allowed_first)
{
	s32 cpu;

	/*
	 * Without SCX_WAKE_SYNC: with it the kernel may return the waker's
	 * busy CPU, and the wakee would wait there while other CPUs idle.
	 */
	wake_flags &= ~SCX_WAKE_SYNC;
	if (kernel_pick && __COMPAT_HAS_scx_bpf_select_cpu_and) {
		if (near && !allowed_first) {
			cpu = scx_bpf_select_cpu_and(p, prev, wake_flags, near, 0);
			if (cpu >= 0) {
				stat_inc(SP_STAT_PICK_KERNEL);
				stat_inc(SP_STAT_PICK_NEAR);
				return cpu;
			}
		}
		cpu = scx_bpf_select_cpu_and(p, prev, wake_flags, p->cpus_ptr, 0);
		if (cpu >= 0) {
			stat_inc(SP_STAT_PICK_KERNEL);
			stat_inc(SP_STAT_PICK_CPU_ANY);
		}
		return cpu;
	}

	if (!allowed_first) {
		if (bpf_cpumask_test_cpu(prev, p->cpus_ptr) &&
		    scx_bpf_test_and_clear_cpu_idle(prev)) {
			stat_inc(is_homed ? SP_STAT_PICK_PREV_AWAY : SP_STAT_PICK_PREV);
			return prev;
		}
		if (near) {
			cpu = pick_idle(near, prev, 0);
			if (cpu >= 0) {
				stat_inc(SP_STAT_PICK_NEAR);
				return cpu;
			}
		}
	}
	if (smt_enabled) {
		cpu = pick_idle(p->cpus_ptr, prev, SCX_PICK_IDLE_CORE);
		if (cpu >= 0) {
			stat_inc(SP_STAT_PICK_CORE_ANY);
			return cpu;
		}
	}
	cpu = pick_idle(p->cpus_ptr, prev, 0);
	if (cpu >= 0)
		stat_inc(SP_STAT_PICK_CPU_ANY);
	return cpu;
}

/*
 * An idle CPU of @home, claimed: prev, a whole idle core, prev's SMT
 * sibling (it shares prev's L1/L2), then any; or -1.
 */
static __always_inline s32 pick_at_home(const struct cpumask *home, s32 prev)
{
	s32 cpu;

	if (bpf_cpumask_test_cpu(prev, home) && scx_bpf_test_and_clear_cpu_idle(prev)) {
		stat_inc(SP_STAT_PICK_PREV);
		return prev;
	}
	if (smt_enabled) {
		cpu = pick_idle(home, prev, SCX_PICK_IDLE_CORE);
		if (cpu >= 0) {
			stat_inc(SP_STAT_PICK_CORE_HOME);
			return cpu;
		}
		cpu = sibling_of(prev);
		if (cpu != prev && bpf_cpumask_test_cpu(cpu, home) &&
		    scx_bpf_test_and_clear_cpu_idle(cpu)) {
			stat_inc(SP_STAT_PICK_SIBLING);
			return cpu;
		}
	}
	cpu = pick_idle(home, prev, 0);
	if (cpu >= 0)
		stat_inc(SP_STAT_PICK_CPU_HOME);
	return cpu;
}

/*
 * The CPU a waking task goes to, claimed, or -1 (nothing idle: it queues).
 * *@evict: the CPU was taken back from a visitor, to be preempted. A task
 * without a home treats the partition prev is in as one.
 */
static s32 pick_idle_cpu(struct task_struct *p, s32 prev, u64 wake_flags,
			 struct task_ctx *tctx, bool *evict)
{
	const struct cpumask *home = NULL, *near = NULL;
	struct home_ctx *h;
	u32 hid = tctx->home.id;
	s32 cpu;

	if (homed(tctx)) {
		home = home_of(tctx);
		h = bpf_map_lookup_elem(&homes, &hid);
		if (h && h->near)
			near = cast_mask(h->near);
		if (softness_says_allowed_first(hid))
			return pick_away(p, prev, wake_flags, NULL, true, true);
		if (home && tctx->where.ran == SP_RAN_AWAY && !bpf_cpumask_test_cpu(prev, home)) {
			cpu = pick_while_away(p, tctx, home, prev);
			if (cpu >= 0)
				return cpu;
		}
	} else {
		home = and_allowed(p, tctx, part_cpus(part_of_cpu(prev)));
	}

	if (home) {
		cpu = pick_at_home(home, prev);
		if (cpu >= 0)
			return cpu;
		if (homed(tctx)) {
			cpu = claim_visitor_cpu(home, nodes_of(tctx, home));
			if (cpu >= 0) {
				stat_inc(SP_STAT_EVICT);
				*evict = true;
				return cpu;
			}
		}
	}

	/* Home full: spill, nearest first. */
	near = and_allowed(p, tctx, near);
	return pick_away(p, prev, wake_flags, near, homed(tctx), false);
}

/*
 * A direct dispatch the kernel left on the task. Kernels without the
 * upstream fix "sched_ext: Fix stale direct dispatch state in ddsp_dsq_id"
 * (in 7.0, backported to 6.12.y and 6.18.y) can leave the verdict that an
 * earlier scheduler's select_cpu gave on a task whose queued wakeup
 * outlived that scheduler. Any insert from select_cpu would then trip the
 * kernel's WARN_ON_ONCE in mark_direct_dispatch(), a kernel warning (a
 * crash where panic_on_warn is set). Left alone, the verdict is carried
 * out once, at this wakeup's enqueue, and cleared (docs/reliability.md).
 * One load from the task being woken: no cost on kernels that are fixed.
 */
static __always_inline bool direct_dispatch_left(const struct task_struct *p)
{
	return p->scx.ddsp_dsq_id != SCX_DSQ_INVALID;
}

/*
 * A spill (a wakeup bound for idle @cpu away from home) waits in its
 * home's queue instead, with @cpu kicked, when the waker says it is about
 * to sleep (SCX_WAKE_SYNC, a pipe or socket write) on a CPU that serves
 * that queue: that CPU is sure to free up soon and look there first, and
 * whichever comes first, it or the kicked CPU, runs the task. Handed to
 * @cpu's local queue, nothing else could take the task while @cpu wakes
 * up. Other spills go straight to @cpu: tasks that wake each other by
 * futex or yield would take a queued task back at home while the kicked
 * CPU woke to nothing (docs/decisions.md).
 */
static bool queue_spill(struct task_struct *p, struct task_ctx *tctx, s32 prev, s32 cpu,
			u64 wake_flags)
{
	s32 this_cpu = bpf_get_smp_processor_id();
	u32 part;

	if (!(wake_flags & SCX_WAKE_SYNC) ||
	    (bpf_get_current_task_btf()->flags & PF_EXITING))
		return false;
	if (homed(tctx)) {
		const struct cpumask *home = home_of(tctx);

		if (!home || bpf_cpumask_test_cpu(cpu, home))
			return false;
		part = home_part(home);
	} else {
		/* Its partition is prev's; one it may run in (as in enqueue()). */
		part = part_of_cpu(prev);
		if (part_of_cpu(cpu) == part || !bpf_cpumask_test_cpu(prev, p->cpus_ptr))
			return false;
	}
	if (part_of_cpu(this_cpu) != part || !bpf_cpumask_test_cpu(this_cpu, p->cpus_ptr))
		return false;
	queue_in_part(p, tctx, part, 0);
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	stat_inc(SP_STAT_SPILL_QUEUED);
	return true;
}

#endif /* __SOFTPART_PLACE_BPF_H */
