/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_softpart: the BPF fast path, its callbacks from top to bottom.
 *
 * CPUs are grouped into partitions (by default one per NUMA node, or per LLC
 * when a node has several); each partition has one vtime-ordered queue. A
 * task may have a home (preferred CPUs, always intersected with its allowed
 * set), from its own setting, inherited at fork, or from its cgroup or an
 * ancestor's. A task without a home treats the partition it last ran in as
 * one.
 *
 * - select_cpu: an idle CPU at home, then a home CPU taken back from a
 *   visitor (a homed task running away from its own home), then an idle
 *   CPU away from home, nearest first (place.bpf.h).
 * - enqueue: a task away from home goes back when its home has room; one
 *   that found no idle CPU queues at home, and any idle CPU that may run it
 *   is kicked: no CPU stays idle while work it may run waits.
 * - dispatch: a CPU serves its own partition, unless another partition's
 *   queue head is far behind in vtime; only when it would
 *   otherwise go idle does it take any work from the others, nearest first
 *   (queue.bpf.h).
 * - CPU time is charged in vtime at each cgroup's rate, so that cgroups
 *   get what cpu.weight entitles them to (cgroup.bpf.h); each partition
 *   keeps its own vtime clock (part.bpf.h).
 *
 * Everything that needs history (softness, group balancing) lives in the
 * Rust control plane; this file reads what it was given. The helpers are
 * by topic: config (options, topology), stats (per-CPU counters), cpu
 * (per-CPU state), idle (idle lookups), visitor (which CPUs run
 * visitors), cgroup (the cgroup CPU contract), part (per-partition state,
 * the vtime clocks), part_queue (a partition's queue: which hold tasks,
 * each head as published for the others), task (task context, homes),
 * place (wakeups), queue (holds, steals, fairness across partitions),
 * home (the way home).
 */
#include <scx/common.bpf.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

#include "config.bpf.h"
#include "verify.bpf.h"
#include "stats.bpf.h"
#include "cpu.bpf.h"
#include "idle.bpf.h"
#include "visitor.bpf.h"
#include "cgroup.bpf.h"
#include "part.bpf.h"
#include "part_queue.bpf.h"
#include "task.bpf.h"
#include "bandwidth.bpf.h"
#include "place.bpf.h"
#include "queue.bpf.h"
#include "home.bpf.h"

s32 BPF_STRUCT_OPS(softpart_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	struct task_ctx *tctx = lookup_tctx(p);
	bool evict = false;
	s32 cpu;

	diag_inc(SP_STAT_CALLS_SELECT_CPU);
	if (!tctx)
		return prev_cpu;
	/* Out of cpu.max budget: enqueue() parks it. */
	if (throttled_by(task_slot(tctx)) != SP_NO_CGROUP)
		return prev_cpu;
	refresh_home(p, tctx);
	cpu = pick_idle_cpu(p, prev_cpu, wake_flags, tctx, &evict);
	if (cpu < 0) {
		stat_inc(SP_STAT_PICK_NONE);
		return prev_cpu;
	}
	if (direct_dispatch_left(p)) {
		stat_inc(SP_STAT_STALE_DIRECT_DISPATCH);
		return cpu;
	}
	if (!evict && queue_spill(p, tctx, prev_cpu, cpu, wake_flags))
		return prev_cpu;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
	if (evict) {
		tctx->where.via = SP_VIA_EVICT;
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	} else {
		tctx->where.via = away_on(tctx, cpu) ? SP_VIA_WAKE_AWAY : SP_VIA_WAKE_HOME;
	}
	return cpu;
}

static __always_inline bool is_percpu_kthread(const struct task_struct *p)
{
	return (p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1;
}

/*
 * A task that may run only on a CPU this attachment left out of every
 * partition: a CPU coming online, whose hotplug thread must run there
 * before the kernel detaches us for it. No partition queue is served by
 * that CPU, so the task goes straight to its local queue; queued, it would
 * wait until the watchdog ended the scheduler (docs/reliability.md).
 */
static bool enqueue_outside_partitions(struct task_struct *p, s32 task_cpu, u32 part,
				       u64 enq_flags)
{
	const struct cpumask *part_mask;

	if (p->nr_cpus_allowed != 1)
		return false;
	part_mask = part_cpus(part);
	if (!part_mask || bpf_cpumask_test_cpu(task_cpu, part_mask))
		return false;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | task_cpu, slice_ns, enq_flags);
	scx_bpf_kick_cpu(task_cpu, SCX_KICK_IDLE);
	return true;
}

/*
 * A per-CPU kthread's wakeup: it can run nowhere else, so it goes straight
 * to its CPU's local queue, ahead of the partition queue (which other CPUs
 * would only look through), and counts there for kthreads_only_ahead().
 * Its later slice ends queue as any task's, so a kthread that keeps
 * running shares the CPU by vtime.
 */
static bool enqueue_kthread_wakeup(struct task_struct *p, struct task_ctx *tctx,
				   s32 task_cpu, u64 enq_flags)
{
	if (!is_percpu_kthread(p) || !(enq_flags & SCX_ENQ_WAKEUP) ||
	    !bpf_cpumask_test_cpu(task_cpu, p->cpus_ptr))
		return false;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | task_cpu, slice_ns, enq_flags);
	if (!tctx->queue.kthread) {
		tctx->queue.kthread = 1;
		count_kthread_queued(task_cpu);
	}
	scx_bpf_kick_cpu(task_cpu, SCX_KICK_IDLE);
	return true;
}

/*
 * A task put back (not a wakeup) with only per-CPU kthreads queued ahead
 * of it on its CPU waits for them there. A visitor too, as long as its
 * home runs only its own tasks: queued there, it would start a chain of
 * swaps (hold_visitor_for_passing()).
 */
static bool wait_behind_kthreads(struct task_struct *p, struct task_ctx *tctx,
				 const struct cpumask *home, u32 part, s32 task_cpu, u64 enq_flags)
{
	u32 cpu_part = part_of_cpu(task_cpu);

	if ((enq_flags & SCX_ENQ_WAKEUP) || !bpf_cpumask_test_cpu(task_cpu, p->cpus_ptr) ||
	    cpu_taken(task_cpu) || !kthreads_only_ahead(task_cpu, cpu_part))
		return false;
	if (part != cpu_part && home && home_hosts_visitor(tctx, home))
		return false;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, enq_flags);
	stat_inc(SP_STAT_KTHREAD_WAIT);
	return true;
}

/*
 * Room at home (an idle CPU, nobody queued): straight onto that CPU.
 * Queued and kicked instead, the task could be taken by a CPU of another
 * partition going idle before the kicked one wakes, and run away from a
 * home with room.
 */
static __always_inline bool enqueue_to_idle_home(struct task_struct *p, struct task_ctx *tctx,
					  const struct cpumask *home, u32 part, s32 task_cpu,
					  u64 enq_flags)
{
	s32 cpu;

	if (scx_bpf_dsq_nr_queued(part_dsq(part)))
		return false;
	cpu = pick_idle(home, task_cpu, 0);
	if (cpu < 0)
		return false;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	stat_inc(SP_STAT_ENQUEUE_IDLE);
	if (tctx)
		tctx->where.via = SP_VIA_ENQUEUE_IDLE;
	return true;
}

/*
 * Queue in @part. A task its CPU puts back (slice end, yield, another
 * task's turn), or a visitor passed over by a homeless task (@hold_away),
 * is held for that CPU for a slice (head_held_elsewhere()). Then, "if there
 * is idle, we use it": an idle CPU that may run the task is kicked, at
 * home first.
 */
static __always_inline void enqueue_and_kick(struct task_struct *p, struct task_ctx *tctx,
					      const struct cpumask *home, u32 part,
					      s32 task_cpu, u64 enq_flags, bool hold_away)
{
	s32 cpu = -1;

	if (tctx) {
		if (!(enq_flags & SCX_ENQ_WAKEUP) &&
		    (part == part_of_cpu(task_cpu) || hold_away)) {
			tctx->queue.put_back_cpu = task_cpu;
			tctx->queue.put_back_at = now_ns();
			stat_inc(SP_STAT_PUT_BACK_HELD);
			if (away_on(tctx, task_cpu))
				stat_inc(SP_STAT_PUT_BACK_HELD_AWAY);
		} else {
			tctx->queue.put_back_at = 0;
		}
	}
	queue_in_part(p, tctx, part, enq_flags);
	stat_inc(SP_STAT_ENQUEUE);

	if (home)
		cpu = pick_idle(home, task_cpu, 0);
	if (cpu < 0)
		cpu = pick_idle(p->cpus_ptr, task_cpu, 0);
	if (cpu >= 0) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		stat_inc(SP_STAT_KICK);
	}
}

/*
 * @p waited in the local queue of @task_cpu, which a higher class (an RT
 * or deadline task) took: the kernel hands it back (reenqueue_local()).
 * Or it is queued while that class holds @task_cpu. It goes to its
 * partition's queue, never to that CPU's local queue, and an
 * idle CPU it may run on is kicked for it; a busy CPU of the partition
 * takes it by vtime at its next slice end. A task that may run only on
 * @task_cpu has nowhere else to go: the usual path puts it back.
 */
static bool requeue_taken(struct task_struct *p, struct task_ctx *tctx, s32 task_cpu,
			  u32 part, u64 enq_flags)
{
	s32 cpu;

	if (p->nr_cpus_allowed == 1 || migration_held(p))
		return false;
	queue_in_part(p, tctx, part, enq_flags);
	stat_inc(SP_STAT_REENQUEUED);
	cpu = pick_idle(p->cpus_ptr, task_cpu, 0);
	if (cpu >= 0)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	return true;
}

/*
 * Tasks the kernel would put straight into their CPU's local queue without
 * asking (SCX_OPS_ENQ_EXITING, SCX_OPS_ENQ_MIGRATION_DISABLED): an exiting
 * task, and one held on its CPU by migrate_disable(). There they go, as the
 * kernel would put them, unless a higher class holds that CPU and the task
 * may leave it: left there, it would wait for as long as that class runs,
 * and the kernel calls nothing when a task lands behind it. The kernel
 * judges "held" by the count alone, which inside this program includes the
 * prolog's own migrate_disable() for the current task; migration_held()
 * does not, so such a task takes the usual path.
 */
static __always_inline bool enqueue_kernel_local(struct task_struct *p, struct task_ctx *tctx, s32 task_cpu,
						  u32 part, u64 enq_flags)
{
	if (!(p->flags & PF_EXITING) && !migration_held(p))
		return false;
	if (((enq_flags & SCX_ENQ_REENQ) || cpu_taken(task_cpu)) &&
	    requeue_taken(p, tctx, task_cpu, part, enq_flags))
		return true;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, enq_flags);
	return true;
}

void BPF_STRUCT_OPS(softpart_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = lookup_tctx(p);
	s32 task_cpu = scx_bpf_task_cpu(p);
	const struct cpumask *home = NULL;
	u32 part = part_of_cpu(task_cpu);
	bool hold_away = false;

	diag_inc(SP_STAT_CALLS_ENQUEUE);
	/* Not in any queue while it is being queued. */
	if (tctx)
		note_left_queue(p, tctx);
	if (enqueue_outside_partitions(p, task_cpu, part, enq_flags))
		return;
	if (tctx && enqueue_kthread_wakeup(p, tctx, task_cpu, enq_flags))
		return;
	if (enqueue_kernel_local(p, tctx, task_cpu, part, enq_flags))
		return;
	if (tctx) {
		u32 by = throttled_by(task_slot(tctx));

		if (by != SP_NO_CGROUP) {
			park(p, by, enq_flags);
			return;
		}
	}

	if (((enq_flags & SCX_ENQ_REENQ) || cpu_taken(task_cpu)) &&
	    requeue_taken(p, tctx, task_cpu, part, enq_flags))
		return;

	if (tctx) {
		hold_away = tctx->where.hold_away;
		tctx->where.hold_away = 0;
		refresh_home(p, tctx);
		if (homed(tctx)) {
			home = home_of(tctx);
			if (home && !bpf_cpumask_test_cpu(task_cpu, home)) {
				if (send_home(p, tctx, home, task_cpu, enq_flags))
					return;
				/* Nothing else wants this CPU: keep running here. */
				if (enq_flags & SCX_ENQ_LAST) {
					keep_last(p, task_cpu, enq_flags);
					return;
				}
				part = queue_part_away(p, tctx, home, task_cpu);
			}
		} else {
			home = and_allowed(p, tctx, part_cpus(part));
		}
	}

	/* The last runnable task on its CPU, at home or homeless: keep it. */
	if (enq_flags & SCX_ENQ_LAST) {
		keep_last(p, task_cpu, enq_flags);
		return;
	}
	if (wait_behind_kthreads(p, tctx, home, part, task_cpu, enq_flags))
		return;
	if (home && enqueue_to_idle_home(p, tctx, home, part, task_cpu, enq_flags))
		return;
	enqueue_and_kick(p, tctx, home, part, task_cpu, enq_flags, hold_away);
}

/*
 * About to go idle: take waiting work from the other partitions, nearest
 * first, deferring heads that just ran on a CPU its owners just used (see
 * head_stealable()); the timer brings the CPU back for them. Verified
 * alone (verify.bpf.h), as the walk's step and check it calls.
 */
__verified_alone int steal_or_idle(s32 cpu, u32 own)
{
	u64 now = now_ns(), ready_at = 0;
	bool defer = owners_recent(cpu, now);
	struct part_walk walk;
	s32 part;
	u32 i;

	part_walk_start(&walk, own);
	bpf_for(i, 0, SP_PART_VISITS) {
		part = part_walk_next(&walk);
		if (part < 0)
			break;
		if (!head_stealable(part, cpu, now, defer, &ready_at))
			continue;
		if (take_head(part)) {
			stat_inc(SP_STAT_DISPATCH_STEAL);
			count_steal();
			return 0;
		}
	}
	if (ready_at) {
		arm_steal_timer(cpu, now, ready_at);
		stat_inc(SP_STAT_STEAL_DEFERRED);
	}
	stat_inc(SP_STAT_DISPATCH_IDLE);
	return 0;
}

/* @p's cgroup, or one above it, is out of cpu.max budget. */
static __always_inline bool task_throttled(struct task_struct *p)
{
	struct task_ctx *tctx = lookup_tctx(p);

	return tctx && throttled_by(task_slot(tctx)) != SP_NO_CGROUP;
}

/*
 * @prev keeps @cpu for another slice without a pass through running(): a
 * slice starts all the same, and the partition's clock advances with it,
 * at most at the wall clock's rate (advance_part_clock_kept()). Without
 * this, with every CPU of a partition running such tasks, the clock would
 * stand still while they ran on, until the queue's bounds (task_vtime())
 * put them level with the tasks waiting. A visitor leaves the clock alone:
 * its vtime is its home's.
 */
static __always_inline void refill_started(struct task_struct *prev, s32 cpu, u32 own)
{
	struct task_ctx *tctx = lookup_tctx(prev);

	count_round(own);
	if (tctx && !away_on(tctx, cpu))
		advance_part_clock_kept(own, prev->scx.dsq_vtime);
}

void BPF_STRUCT_OPS(softpart_dispatch, s32 cpu, struct task_struct *prev)
{
	u32 own = part_of_cpu(cpu);
	struct queue_view qh;
	int keep = SP_KEEP_NONE;
	bool busy;

	diag_inc(SP_STAT_CALLS_DISPATCH);
	if (release_pending)
		release_throttled();
	/* A throttled prev is parked by enqueue(): the CPU is as good as free. */
	busy = prev && (prev->scx.flags & SCX_TASK_QUEUED) && !task_throttled(prev);
	queue_head(own, &qh);

	/*
	 * What runs next here, unless another partition is owed the CPU.
	 * Past the wait bound, the head runs next: no rule keeps it waiting
	 * (counted where the bound decides: a free CPU takes the head anyway).
	 */
	if (head_overdue(&qh, now_ns())) {
		if (busy)
			stat_inc(SP_STAT_WAIT_BOUND);
	} else if (busy) {
		/* Only here: one view of prev, dead past this block for the verifier. */
		struct queue_view pv = task_view(prev);

		keep = prev_keeps_cpu(&qh, &pv, cpu, task_vtime(prev, lookup_tctx(prev), own));
		if (qh.found && keep == SP_KEEP_NONE) {
			if (pull_behind(cpu, own, qh.vtime, owner_here(&qh, cpu)))
				return;
		} else if (pull_behind(cpu, own, pv.vtime, owner_here(&pv, cpu))) {
			return;
		}
	} else if (qh.found && pull_behind(cpu, own, qh.vtime, owner_here(&qh, cpu))) {
		return;
	}
	if (keep != SP_KEEP_NONE) {
		stat_inc(keep == SP_KEEP_HELD	? SP_STAT_HELD_SKIP :
			 keep == SP_KEEP_AHEAD	? SP_STAT_PREV_AHEAD :
						  SP_STAT_OWNER_KEPT);
	} else {
		struct task_ctx *passed = busy ? hold_visitor_for_passing(prev, &qh, cpu) : NULL;

		if (take_head(own)) {
			stat_inc(SP_STAT_DISPATCH_OWN);
			return;
		}
		if (passed) {
			passed->where.hold_away = 0;
			passed->where.passed_cpu = 0;
		}
	}
	if (!busy) {
		steal_or_idle(cpu, own);
		return;
	}
	/*
	 * Still busy with prev: not idle, so nothing to take from others.
	 * Refilling prev's slice keeps it running without a trip through
	 * enqueue(); only a task away from home with room there is let go, so
	 * that enqueue() (SCX_ENQ_LAST) sends it back. A visitor keeps the CPU
	 * it went to otherwise: handing it to a task waiting at its home for
	 * fairness among a group's tasks cost two cross-node moves per turn
	 * (docs/decisions.md).
	 */
	if (!should_go_home(prev, cpu)) {
		prev->scx.slice = slice_ns;
		refill_started(prev, cpu, own);
	}
}

/*
 * sched_yield() with nobody waiting for this CPU (its local queue and its
 * partition's queue empty): the task keeps its slice, and the kernel keeps
 * it running without calling dispatch(). Without this callback the kernel
 * ends the slice, and dispatch() found nothing to hand over and refilled
 * it: a call per yield, for tasks that yield in a loop. A task away from
 * home keeps it too; whether it should give its CPU to its home's queue or
 * go home is decided at the slice's end. yield_to() and a task waiting end
 * the slice as before.
 */
bool BPF_STRUCT_OPS(softpart_yield, struct task_struct *from,
		    struct task_struct *to)
{
	s32 cpu = scx_bpf_task_cpu(from);
	struct task_ctx *tctx;

	tctx = lookup_tctx(from);
	if (to || scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) ||
	    scx_bpf_dsq_nr_queued(part_dsq(part_of_cpu(cpu)))) {
		from->scx.slice = 0;
		if (tctx)
			tctx->queue.yielded = 1;
		return false;
	}
	if (tctx && homed(tctx) && tctx->where.ran != SP_RAN_HOME)
		stat_inc(SP_STAT_YIELD_KEPT_AWAY);
	stat_inc(SP_STAT_YIELD_KEPT);
	return false;
}

/*
 * A CPU is going idle: look again at the partition queues. dispatch()
 * found them empty, but enqueue() on another CPU may have queued a task
 * since, before this CPU's idle bit was set, and then found no idle CPU to
 * kick. The kernel sets the idle bit before calling this (6.16 and later),
 * so either enqueue() saw the bit or this sees the task. Kicking itself
 * sends the CPU back through dispatch(); if the task may not run here the
 * CPU goes idle again without a second call.
 */
void BPF_STRUCT_OPS(softpart_update_idle, s32 cpu, bool idle)
{
	u32 own = part_of_cpu(cpu), i;
	struct part_walk walk;
	u64 now, ready_at = 0;
	bool defer;
	s32 part;

	if (!idle) {
		set_idle_since(cpu, 0);
		return;
	}
	now = now_ns();
	set_idle_since(cpu, now);
	defer = owners_recent(cpu, now);
	if (scx_bpf_dsq_nr_queued(part_dsq(own))) {
		scx_bpf_kick_cpu(cpu, 0);
		stat_inc(SP_STAT_IDLE_RECHECK);
		return;
	}
	part_walk_start(&walk, own);
	bpf_for(i, 0, SP_PART_VISITS) {
		part = part_walk_next(&walk);
		if (part < 0)
			break;
		if (!head_stealable(part, cpu, now, defer, &ready_at))
			continue;
		if (scx_bpf_dsq_nr_queued(part_dsq(part))) {
			scx_bpf_kick_cpu(cpu, 0);
			stat_inc(SP_STAT_IDLE_RECHECK);
			return;
		}
	}
	/*
	 * A head dispatch() would pass over: the timer brings this CPU back
	 * when it may be taken. Kicking now would only pass it over again.
	 */
	if (ready_at)
		arm_steal_timer(cpu, now, ready_at);
}

void BPF_STRUCT_OPS(softpart_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = lookup_tctx(p);

	if (tctx) {
		tctx->queue.runnable_at = now_ns();
		/* A sleep ends the checks in a row (see room_lasted()). */
		tctx->where.room_since = 0;
		runnable_on(p, tctx);
	}
}

void BPF_STRUCT_OPS(softpart_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx *tctx = lookup_tctx(p);

	if (tctx) {
		runnable_off(tctx);
		note_left_queue(p, tctx);
	}
}

/* The task's nice changed: count it runnable with its new weight. */
void BPF_STRUCT_OPS(softpart_set_weight, struct task_struct *p, u32 weight)
{
	struct task_ctx *tctx = lookup_tctx(p);

	if (tctx && tctx->cg.counted_slot != SP_NO_CGROUP) {
		runnable_off(tctx);
		runnable_on(p, tctx);
	}
}

/* --diag: where a held put-back or a passed visitor ran next. */
static void count_diag_on_run(struct task_ctx *tctx, s32 cpu)
{
	if (tctx->queue.put_back_at)
		stat_inc(tctx->queue.put_back_cpu == cpu ? SP_STAT_PUT_BACK_SAME : SP_STAT_PUT_BACK_MOVED);
	if (tctx->where.passed_cpu) {
		s32 passed = tctx->where.passed_cpu - 1;

		if (passed == cpu)
			stat_inc(SP_STAT_PASSED_SAME_CPU);
		else if (cpu_attr(cpu_node, passed) == cpu_attr(cpu_node, cpu))
			stat_inc(SP_STAT_PASSED_SAME_NODE);
		else
			stat_inc(SP_STAT_PASSED_CROSSED);
		tctx->where.passed_cpu = 0;
	}
}

/*
 * The task starts on this CPU: the wait that ended, the move it made (by
 * distance, and a homed task's cross-node moves by the decision that made
 * them), spills and returns, and whether this CPU now hosts a visitor.
 */
static void count_run_start(struct task_ctx *tctx, s32 cpu, u64 now)
{
	struct sp_group_stats *gs = group_stats_of(tctx->home.id);
	const struct cpumask *home = home_of(tctx);
	bool in;

	if (tctx->queue.runnable_at && now > tctx->queue.runnable_at)
		record_delay(tctx->home.id, gs, now - tctx->queue.runnable_at);
	tctx->queue.runnable_at = 0;
	if (tctx->where.last_cpu >= 0 && tctx->where.last_cpu != cpu) {
		u32 d = migration_dist(tctx->where.last_cpu, cpu);

		if (gs && d < SP_NR_DIST)
			gs->migrations[d]++;
		if (d == SP_DIST_XNODE && homed(tctx)) {
			u32 via = tctx->home.rehomed ? SP_VIA_REHOME : tctx->where.via;

			if (via >= SP_NR_VIA)
				via = SP_VIA_OTHER;
			stat_inc(SP_XNODE_OF(via));
			if (gs)
				gs->xnode[via]++;
		}
	}
	tctx->where.via = SP_VIA_OTHER;
	tctx->home.rehomed = 0;
	tctx->where.last_cpu = cpu;
	if (!home) {
		set_visitor(cpu, 0);
		return;
	}
	in = bpf_cpumask_test_cpu(cpu, home);
	if (gs && in && tctx->where.ran == SP_RAN_AWAY)
		gs->returns++;
	else if (gs && !in && tctx->where.ran == SP_RAN_HOME)
		gs->spills++;
	tctx->where.ran = in ? SP_RAN_HOME : SP_RAN_AWAY;
	/* Away: the visitor's home partition + 1 (claim_visitor_cpu()). */
	set_visitor(cpu, in ? 0 : home_part(home) + 1);
}

void BPF_STRUCT_OPS(softpart_running, struct task_struct *p)
{
	struct task_ctx *tctx = lookup_tctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	u64 now;

	if (!tctx || !tctx->queue.at_lead)
		advance_part_clock(tctx && tctx->queue.part ? tctx->queue.part - 1 :
							     part_of_cpu(cpu),
				   p->scx.dsq_vtime);
	count_round(part_of_cpu(cpu));
	count_kthread_ran(cpu, tctx && tctx->queue.kthread);
	if (!tctx)
		return;
	tctx->queue.kthread = 0;
	tctx->queue.yielded = 0;
	tctx->queue.at_lead = 0;
	tctx->run.vtime = p->scx.dsq_vtime;
	cap_slice(p, tctx);
	now = now_ns();
	if (diag) {
		count_diag_on_run(tctx, cpu);
		if (tctx->queue.part)
			record_wait_rounds(part_rounds(tctx->queue.part - 1) - tctx->queue.round -
					   (tctx->queue.part - 1 == part_of_cpu(cpu)));
	}
	tctx->queue.put_back_at = 0;
	if (tctx->queue.part)
		tctx->where.via = tctx->queue.part - 1 == part_of_cpu(cpu) ? SP_VIA_QUEUE_OWN :
			    home_of(tctx) && !away_on(tctx, cpu)	      ? SP_VIA_QUEUE_HOME :
									SP_VIA_QUEUE_STEAL;
	note_left_queue(p, tctx);
	tctx->run.started_ns = now;
	tctx->run.exec_ns = p->se.sum_exec_runtime;
	count_run_start(tctx, cpu, now);
}

/*
 * Charges the time since the task started (or was last charged): to this
 * CPU's utilisation, the group's counters and, at its cgroup's rate over
 * its weight, the task's vtime. Called at every tick too, so a task whose slice dispatch()
 * keeps refilling is charged as it runs, and its vtime compares fairly
 * with the waiting tasks'.
 */
static void account_run(struct task_struct *p, struct task_ctx *tctx, s32 cpu)
{
	struct sp_cpu_local *cl = cpu_local(cpu);
	const struct cpumask *home;
	struct sp_group_stats *gs;
	u64 now = now_ns(), ran, exec = p->se.sum_exec_runtime;
	u32 slot = task_slot(tctx);

	/*
	 * cpu.max is charged what cpu.stat counts: the kernel's own run time
	 * (the task clock, which leaves out interrupt time), as the fair
	 * class charges its bandwidth. The wall time since the task started
	 * also holds the interrupts it sat through; charged that, a group
	 * on CPUs that take many of them got a fraction of its quota.
	 */
	if (exec > tctx->run.exec_ns) {
		budget_charge(slot, exec - tctx->run.exec_ns);
		tctx->run.exec_ns = exec;
	}
	if (!tctx->run.started_ns || now <= tctx->run.started_ns)
		return;
	ran = now - tctx->run.started_ns;
	tctx->run.started_ns = now;
	p->scx.dsq_vtime += vtime_cost(ran, slot, p->scx.weight);
	count_cgroup_run(slot, ran);
	if (cl)
		cl->busy_ns += ran;
	gs = group_stats_of(tctx->home.id);
	if (!gs)
		return;
	/* Tasks without a home count as at home, so that their time shows. */
	home = home_of(tctx);
	if (!home || tctx->where.ran == SP_RAN_HOME) {
		gs->run_home_ns += ran;
		return;
	}
	gs->run_away_ns += ran;
	/*
	 * Bursting out of a full home is the design; time away while the
	 * home had room is placement lag. Sampled at each charge (slice end,
	 * sleep, tick), to tell the two apart in the balancer's report.
	 */
	if (any_idle(home))
		gs->run_away_room_ns += ran;
	count_foreign(ran);
}

void BPF_STRUCT_OPS(softpart_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *tctx = lookup_tctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	struct sp_cpu_local *cl = cpu_local(cpu);

	set_visitor(cpu, 0);
	if (!tctx)
		return;
	account_run(p, tctx, cpu);
	tctx->run.stopped_at = now_ns();
	/* Homeless tasks (kthreads, daemons) leave the mark as it is. */
	if (cl && homed(tctx))
		cl->owner_stopped_at = tctx->where.ran == SP_RAN_HOME ? tctx->run.stopped_at : 0;
	/* Preempted or out of slice: it waits again from now. */
	if (runnable)
		tctx->queue.runnable_at = tctx->run.stopped_at;
}

/*
 * A task whose slice dispatch() refills never stops: account its running
 * time at every tick too, so per-CPU utilisation sees it.
 */
void BPF_STRUCT_OPS(softpart_tick, struct task_struct *p)
{
	struct task_ctx *tctx = lookup_tctx(p);

	if (!tctx)
		return;
	account_run(p, tctx, scx_bpf_task_cpu(p));
	/* Its cgroup ran out of cpu.max budget: off the CPU, to be parked. */
	if (p->scx.slice && throttled_by(task_slot(tctx)) != SP_NO_CGROUP) {
		p->scx.slice = 0;
		stat_inc(SP_STAT_THROTTLE_PREEMPT);
	}
}

void BPF_STRUCT_OPS(softpart_enable, struct task_struct *p)
{
	p->scx.dsq_vtime = part_clock(part_of_cpu(scx_bpf_task_cpu(p)));
}

/* Affinity or cgroup changed: look the home up again at the next wakeup. */
void BPF_STRUCT_OPS(softpart_set_cpumask, struct task_struct *p,
		    const struct cpumask *cpumask)
{
	struct task_ctx *tctx = lookup_tctx(p);

	if (tctx)
		tctx->home.resolved_at = 0;
}

void BPF_STRUCT_OPS(softpart_cgroup_move, struct task_struct *p,
		    struct cgroup *from, struct cgroup *to)
{
	struct task_ctx *tctx = lookup_tctx(p);

	if (!tctx)
		return;
	tctx->home.resolved_at = 0;
	set_task_cgroup(tctx, to);
	/* Runnable: counted in the new cgroup from now on. */
	if (tctx->cg.counted_slot != SP_NO_CGROUP) {
		runnable_off(tctx);
		runnable_on(p, tctx);
	}
}

/*
 * A cgroup of the cpu controller appears (or is there when softpart
 * attaches, parents first): give it a slot with its contract. A full table
 * leaves the cgroup's tasks charged as plain tasks, counted in
 * cgroup_no_slot; failing would fail the cgroup's creation. A park queue
 * that cannot be made fails it: nothing of the slot is left set, and the
 * cgroup's storage says it has none, so no task of it is ever charged to
 * another cgroup's slot.
 */
s32 BPF_STRUCT_OPS_SLEEPABLE(softpart_cgroup_init, struct cgroup *cgrp,
			    struct scx_cgroup_init_args *args)
{
	u32 slot = claim_slot(cgrp->kn->id), parent = SP_NO_CGROUP;
	struct sp_cgroup *cg = cgroup_at(slot);
	struct cg_ctx *cgc;
	s32 ret;

	if (!cg) {
		limit_hit(SP_LIMIT_CGROUP_SLOTS, SP_STAT_CGROUP_NO_SLOT, cgrp->kn->id);
		return 0;
	}
	cgc = bpf_cgrp_storage_get(&cg_ctxs, cgrp, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!cgc) {
		release_slot(slot, cg);
		limit_hit(SP_LIMIT_CGROUP_STORAGE, SP_STAT_CGROUP_NO_STORAGE, cgrp->kn->id);
		return 0;
	}
	cgc->slot = SP_NO_CGROUP;
	/* Where its tasks wait while it is throttled; -EEXIST: kept from a predecessor. */
	ret = create_park_dsq(cgrp, slot);
	if (ret && ret != -EEXIST) {
		release_slot(slot, cg);
		limit_hit(SP_LIMIT_PARK_QUEUE, SP_STAT_CGROUP_REFUSED, cgrp->kn->id);
		return ret;
	}
	cgc->slot = slot;
	if (cgrp->level > 0) {
		struct cgroup *up = bpf_cgroup_ancestor(cgrp, cgrp->level - 1);

		if (up) {
			parent = slot_of(up);
			bpf_cgroup_release(up);
		}
	}
	cg->parent = parent;
	cg->weight = args->weight;
	cg->idle = 0;
	if (bpf_core_field_exists(args->sched_idle))
		cg->idle = args->sched_idle;
	if (bpf_core_field_exists(args->bw_quota_us))
		set_bandwidth(cg, args->bw_period_us, args->bw_quota_us, args->bw_burst_us);
	else
		set_bandwidth(cg, 100000, ~0ULL, 0);
	budget_reset(slot, cg, false);
	budget_clear_counts(slot);
	/* Last: the slot is this cgroup's once its generation is odd (it was even). */
	barrier();
	WRITE_ONCE(cg->slot_gen, cg->slot_gen + 1);
	cgroups_changed_now();
	return 0;
}

/*
 * The cgroup is gone. Its park queue is destroyed only when empty: a task
 * that left it may still have been parked there by a stale view of its
 * chain, and destroying a queue with tasks on it is an error that ends
 * the scheduler. A queue kept is released at the next dispatch (its tasks
 * go where their cgroups now say) and serves the slot's next cgroup.
 */
void BPF_STRUCT_OPS(softpart_cgroup_exit, struct cgroup *cgrp)
{
	u32 slot = slot_of(cgrp);
	struct sp_cgroup *cg = cgroup_at(slot);

	if (!cg)
		return;
	/* First: nothing kept of this cgroup applies to the slot from now on. */
	WRITE_ONCE(cg->slot_gen, cg->slot_gen + 1);
	barrier();
	set_bandwidth(cg, 100000, ~0ULL, 0);
	budget_reset(slot, cg, false);
	if (scx_bpf_dsq_nr_queued(park_dsq(slot)))
		hand_release(slot);
	else
		scx_bpf_destroy_dsq(park_dsq(slot));
	cg->parent = SP_NO_CGROUP;
	/* Last: the slot is free once its id is 0. */
	release_slot(slot, cg);
	cgroups_changed_now();
}

void BPF_STRUCT_OPS(softpart_cgroup_set_weight, struct cgroup *cgrp, u32 weight)
{
	struct sp_cgroup *cg = cgroup_at(slot_of(cgrp));

	if (!cg)
		return;
	cg->weight = weight;
	cgroups_changed_now();
}

/* cpu.idle written (6.19 and later). */
void BPF_STRUCT_OPS(softpart_cgroup_set_idle, struct cgroup *cgrp, bool idle)
{
	struct sp_cgroup *cg = cgroup_at(slot_of(cgrp));

	if (!cg)
		return;
	cg->idle = idle;
	cgroups_changed_now();
}

/* cpu.max or cpu.max.burst written (6.17 and later). */
void BPF_STRUCT_OPS(softpart_cgroup_set_bandwidth, struct cgroup *cgrp, u64 period_us,
		    u64 quota_us, u64 burst_us)
{
	u32 slot = slot_of(cgrp);
	struct sp_cgroup *cg = cgroup_at(slot);

	if (!cg)
		return;
	set_bandwidth(cg, period_us, quota_us, burst_us);
	budget_reset(slot, cg, true);
	cgroups_changed_now();
}

static s32 new_mask(struct bpf_cpumask __kptr **slot)
{
	struct bpf_cpumask *mask = bpf_cpumask_create();

	if (!mask)
		return -ENOMEM;
	mask = bpf_kptr_xchg(slot, mask);
	if (mask)
		bpf_cpumask_release(mask);
	return 0;
}

s32 BPF_STRUCT_OPS(softpart_init_task, struct task_struct *p,
		   struct scx_init_task_args *args)
{
	struct task_ctx *tctx;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	tctx->home.id = SP_NO_HOME;
	tctx->home.found = SP_NO_HOME;
	tctx->where.ran = SP_RAN_NOT_YET;
	tctx->where.last_cpu = -1;
	tctx->cg.counted_slot = SP_NO_CGROUP;
	tctx->cg.slot = SP_NO_CGROUP;
	if (bpf_core_field_exists(args->cgroup))
		set_task_cgroup(tctx, args->cgroup);
	if (new_mask(&tctx->home_mask) || new_mask(&tctx->scratch))
		return -ENOMEM;

	/* Like affinity, a home is inherited at fork (exec keeps it). */
	if (args->fork) {
		struct task_struct *parent = bpf_get_current_task_btf();
		u32 ptid = parent->pid, ctid = p->pid, *h;

		h = bpf_map_lookup_elem(&task_homes, &ptid);
		if (h) {
			u32 home = *h;

			/* The map full: the child runs without the home, said out loud. */
			if (bpf_map_update_elem(&task_homes, &ctid, &home, BPF_ANY))
				limit_hit(SP_LIMIT_TASK_HOMES, SP_STAT_TASK_HOME_NOT_KEPT, ctid);
		}
	}
	return 0;
}

/*
 * Only a thread that ends gives up its home. Detaching the scheduler (CPU
 * hotplug, before the control plane attaches again) calls this for every
 * task; the control plane carries the map's entries over.
 */
void BPF_STRUCT_OPS(softpart_exit_task, struct task_struct *p,
		    struct scx_exit_task_args *args)
{
	u32 tid = p->pid;

	if (p->flags & PF_EXITING)
		bpf_map_delete_elem(&task_homes, &tid);
}

/* Called by the control plane (BPF_PROG_RUN) to define or redefine a home. */
SEC("syscall")
int set_home(struct sp_home_args *args)
{
	struct bpf_cpumask *cpus, *near;
	struct home_ctx *h;
	u32 id = args->id, w;
	u64 nodes = 0;

	if (id >= nr_homes)
		return -EINVAL;
	h = bpf_map_lookup_elem(&homes, &id);
	if (!h)
		return -ENOENT;
	cpus = bpf_cpumask_create();
	if (!cpus)
		return -ENOMEM;
	near = bpf_cpumask_create();
	if (!near) {
		bpf_cpumask_release(cpus);
		return -ENOMEM;
	}
	/*
	 * The words that hold CPU ids below nr_cpus, at most SP_CPU_WORDS.
	 * The verifier takes no variable offset into a program's context:
	 * each word is read from its address.
	 */
	bpf_for(w, 0, (nr_cpus + 63) / 64) {
		u64 c = 0, n = 0;
		u32 b;

		if (w >= SP_CPU_WORDS)
			break;
		bpf_probe_read_kernel(&c, sizeof(c), (void *)((u64)args->cpus + w * sizeof(c)));
		bpf_probe_read_kernel(&n, sizeof(n), (void *)((u64)args->near + w * sizeof(n)));
		if (!c && !n)
			continue;
		bpf_for(b, 0, 64) {
			if (c & (1ULL << b)) {
				u32 node = cpu_attr(cpu_node, w * 64 + b);

				bpf_cpumask_set_cpu(w * 64 + b, cpus);
				if (node < SP_MAX_NODES)
					nodes |= 1ULL << node;
			}
			if (n & (1ULL << b))
				bpf_cpumask_set_cpu(w * 64 + b, near);
		}
	}
	cpus = bpf_kptr_xchg(&h->cpus, cpus);
	if (cpus)
		bpf_cpumask_release(cpus);
	near = bpf_kptr_xchg(&h->near, near);
	if (near)
		bpf_cpumask_release(near);
	h->nodes = nodes;
	/* After the CPUs: a task that sees the new generation sees them. */
	barrier();
	WRITE_ONCE(h->gen, h->gen + 1);
	return 0;
}

/* One queue per partition, and its CPU mask. */
static s32 init_partitions(void)
{
	u32 part, cpu;
	s32 ret;

	bpf_for(part, 0, nr_parts) {
		struct part_ctx *pctx;
		struct bpf_cpumask *mask;

		ret = scx_bpf_create_dsq(part_dsq(part), -1);
		if (ret) {
			scx_bpf_error("failed to create DSQ for partition %u: %d", part, ret);
			return ret;
		}
		pctx = bpf_map_lookup_elem(&parts, &part);
		if (!pctx)
			return -ENOENT;
		mask = bpf_cpumask_create();
		if (!mask)
			return -ENOMEM;
		bpf_for(cpu, 0, nr_cpus) {
			if (part_of_cpu(cpu) == part)
				bpf_cpumask_set_cpu(cpu, mask);
		}
		mask = bpf_kptr_xchg(&pctx->cpus, mask);
		if (mask)
			bpf_cpumask_release(mask);
	}
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(softpart_init)
{
	s32 ret;

	kernel_pick_used = kernel_pick && __COMPAT_HAS_scx_bpf_select_cpu_and;
	ret = init_steal_timers();
	if (ret)
		return ret;
	ret = init_visitor_masks();
	if (ret)
		return ret;
	return init_partitions();
}

/*
 * A higher class takes @cpu: what waits in its local queue goes back
 * through enqueue() (requeue_taken()), to run elsewhere. The kernels that
 * deprecate this callback (6.19 and later) get class_switch() instead; the
 * control plane loads one or the other.
 */
void BPF_STRUCT_OPS(softpart_cpu_release, s32 cpu, struct scx_cpu_release_args *args)
{
	set_taken(cpu, 1);
	scx_bpf_reenqueue_local();
}

/* The higher class gave @cpu back. */
void BPF_STRUCT_OPS(softpart_cpu_acquire, s32 cpu, struct scx_cpu_acquire_args *args)
{
	set_taken(cpu, 0);
}

#ifndef MAX_RT_PRIO
#define MAX_RT_PRIO 100
#endif

/*
 * The same where the kernel re-enqueues from anywhere (6.19 and later): a
 * switch to a task of a higher class (prio below MAX_RT_PRIO: RT,
 * deadline, stop) with tasks waiting in this CPU's local queue.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(softpart_class_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	s32 cpu = bpf_get_smp_processor_id();

	if (next->prio >= MAX_RT_PRIO) {
		set_taken(cpu, 0);
		return 0;
	}
	set_taken(cpu, 1);
	if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL))
		scx_bpf_reenqueue_local_from_anywhere();
	return 0;
}

/* The cgroup tree changed (cgroup_tree_changes). */
SEC("tp_btf/cgroup_mkdir")
int BPF_PROG(softpart_cgroup_mkdir, struct cgroup *cgrp, const char *path)
{
	__sync_fetch_and_add(&cgroup_tree_changes, 1);
	return 0;
}

SEC("tp_btf/cgroup_rmdir")
int BPF_PROG(softpart_cgroup_rmdir, struct cgroup *cgrp, const char *path)
{
	__sync_fetch_and_add(&cgroup_tree_changes, 1);
	return 0;
}

SEC("tp_btf/cgroup_rename")
int BPF_PROG(softpart_cgroup_rename, struct cgroup *cgrp, const char *path)
{
	__sync_fetch_and_add(&cgroup_tree_changes, 1);
	return 0;
}

void BPF_STRUCT_OPS(softpart_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(softpart_ops,
	       .select_cpu	= (void *)softpart_select_cpu,
	       .enqueue		= (void *)softpart_enqueue,
	       .dispatch	= (void *)softpart_dispatch,
	       .update_idle	= (void *)softpart_update_idle,
	       .yield		= (void *)softpart_yield,
	       .runnable	= (void *)softpart_runnable,
	       .quiescent	= (void *)softpart_quiescent,
	       .set_weight	= (void *)softpart_set_weight,
	       .running		= (void *)softpart_running,
	       .stopping	= (void *)softpart_stopping,
	       .tick		= (void *)softpart_tick,
	       .enable		= (void *)softpart_enable,
	       .set_cpumask	= (void *)softpart_set_cpumask,
	       .cgroup_init	= (void *)softpart_cgroup_init,
	       .cgroup_exit	= (void *)softpart_cgroup_exit,
	       .cgroup_move	= (void *)softpart_cgroup_move,
	       .cgroup_set_weight = (void *)softpart_cgroup_set_weight,
	       .cgroup_set_bandwidth = (void *)softpart_cgroup_set_bandwidth,
	       .cgroup_set_idle	= (void *)softpart_cgroup_set_idle,
	       .init_task	= (void *)softpart_init_task,
	       .exit_task	= (void *)softpart_exit_task,
	       .cpu_release	= (void *)softpart_cpu_release,
	       .cpu_acquire	= (void *)softpart_cpu_acquire,
	       .init		= (void *)softpart_init,
	       .exit		= (void *)softpart_exit,
	       /* The kernel's watchdog, explicit: see docs/decisions.md. */
	       .timeout_ms	= 30000,
	       .name		= "softpart");
