/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The partition queues' rules: tasks held for the CPU that put them back,
 * visitors' turns, and steals by idle CPUs of other partitions, deferred
 * on CPUs their owners just used with a per-CPU timer bounding the wait.
 */
#ifndef __SOFTPART_QUEUE_BPF_H
#define __SOFTPART_QUEUE_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"
#include "verify.bpf.h"
#include "stats.bpf.h"
#include "part.bpf.h"
#include "part_queue.bpf.h"
#include "task.bpf.h"
#include "place.bpf.h"

/*
 * One timer per CPU, for deferred steals (see head_stealable()): it kicks
 * its CPU, if still idle, when the head it passed over may be taken.
 */
struct steal_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_MAX_CPUS);
	__type(key, u32);
	__type(value, struct steal_timer);
} steal_timers SEC(".maps");

static int steal_timer_fired(void *map, u32 *key, struct steal_timer *st)
{
	scx_bpf_kick_cpu(*key, SCX_KICK_IDLE);
	stat_inc(SP_STAT_STEAL_TIMER);
	return 0;
}

static s32 init_steal_timers(void)
{
	struct steal_timer *st;
	u32 cpu;
	s32 ret;

	bpf_for(cpu, 0, nr_cpus) {
		u32 key = cpu;

		st = bpf_map_lookup_elem(&steal_timers, &key);
		if (!st)
			break;
		ret = bpf_timer_init(&st->timer, &steal_timers, CLOCK_MONOTONIC);
		if (ret) {
			scx_bpf_error("failed to init the steal timer of CPU %u: %d", cpu, ret);
			return ret;
		}
		bpf_timer_set_callback(&st->timer, steal_timer_fired);
	}
	return 0;
}

/* Kick @cpu (the calling CPU, going idle) at @ready_at. */
static void arm_steal_timer(s32 cpu, u64 now, u64 ready_at)
{
	struct steal_timer *st;
	u32 key = cpu;

	st = bpf_map_lookup_elem(&steal_timers, &key);
	if (!st)
		return;
	/* Pinned: the timer's interrupt wakes the CPU it kicks. */
	bpf_timer_start(&st->timer, time_before(now, ready_at) ? ready_at - now : 1,
			BPF_F_TIMER_CPU_PIN);
}

/*
 * Is a queued task @v held for the CPU that put it back (for up to a
 * slice)? held_for_other(): for a CPU other than @cpu.
 */
static __always_inline bool held_now(const struct queue_view *v)
{
	return v->found && v->put_back_at && time_before(now_ns(), v->put_back_at + slice_ns);
}

static __always_inline bool held_for_other(const struct queue_view *v, s32 cpu)
{
	return held_now(v) && v->put_back_cpu != cpu;
}

/*
 * Is the queue head @qh a task another CPU put back there less than
 * a slice ago? That CPU takes it back when its turn ends; a CPU still busy
 * with its own task (@cpu) leaves it, instead of displacing its task into
 * the queue, where the next CPU to reach a slice end would take that one,
 * and so on: one extra runnable task would move every task it passed on
 * its way. EEVDF queues the displaced task on its own CPU. A CPU about to
 * go idle does not ask, so no CPU idles while a held task waits.
 */
static __always_inline bool head_held_elsewhere(const struct queue_view *qh, s32 cpu)
{
	return held_for_other(qh, cpu);
}

/*
 * The queue of a task away from home that waits (it last ran on @task_cpu,
 * outside @home): the partition it runs in, unless a task homed there
 * queued there within the last slice or waits at that queue's head; else
 * its home's. Queued at home, a CPU there takes it and it crosses back, to
 * leave again at the next steal: the moves EEVDF's per-CPU queues do not
 * make. Owners queueing say they want their partition's CPUs: visitors
 * then wait at home, and do not take turns from the owners there.
 */
/*
 * Is @v a homed task whose home holds @cpu (@holds) or does not (!@holds)?
 * A task without a home is neither.
 */
static __always_inline bool homed_by(const struct queue_view *v, s32 cpu, bool holds)
{
	return v->found && v->home_id != SP_NO_HOME && home_holds(v->home_id, cpu) == holds;
}

static __always_inline bool homed_on(const struct queue_view *v, s32 cpu)
{
	return homed_by(v, cpu, true);
}

static __always_inline bool homed_outside(const struct queue_view *v, s32 cpu)
{
	return homed_by(v, cpu, false);
}

/*
 * Does the cgroup contract let @visitor, a task homed away from @cpu,
 * compete by vtime with @owner, a task homed on @cpu? Only when the
 * visitor's home is entitled beyond its CPUs and the owner's is not
 * (entitled_beyond[]): homes decide where a tenant runs first, and an
 * owner keeps its home's CPUs from visitors, but not from a tenant the
 * contract entitles to more than its own home has while the owner's
 * tenants fit in theirs. Then the vtime clock, which charges each cgroup
 * at its entitlement's rate, decides: an owner within its entitlement is
 * ahead on it and still runs first.
 */
static __always_inline bool contract_reaches(const struct queue_view *visitor,
					     const struct queue_view *owner, s32 cpu)
{
	return visitor->has_ctx && owner->has_ctx && home_entitled_beyond(visitor->home_id) &&
	       !home_entitled_beyond(owner->home_id) && homed_outside(visitor, cpu) &&
	       homed_on(owner, cpu);
}

static u32 queue_part_away(struct task_struct *p, struct task_ctx *tctx,
			   const struct cpumask *home, s32 task_cpu)
{
	u32 part = part_of_cpu(task_cpu);
	struct queue_view qh;

	if (!bpf_cpumask_test_cpu(task_cpu, p->cpus_ptr))
		return home_part(home);
	/* Entitled beyond its home: it waits where it runs, by vtime with the owners. */
	if (home_entitled_beyond(tctx->home.id)) {
		stat_inc(SP_STAT_QUEUE_AWAY);
		return part;
	}
	if (owner_queued_lately(part))
		return home_part(home);
	queue_head(part, &qh);
	if (qh.found && qh.home_part == part)
		return home_part(home);
	stat_inc(SP_STAT_QUEUE_AWAY);
	return part;
}

/*
 * May a CPU of another partition take @part's head now? With @defer (see
 * owners_recent()), only once the head has not run for steal_defer_ns:
 * until then its own partition's CPUs, where its cache is, are likely to
 * free up first, and the thief's own tasks to want it back. EEVDF's
 * balancer defers a pull the same way (task_hot()). A head that may not
 * be taken yet lowers *@ready_at (0: none yet) to when it may; the caller
 * arms its CPU's timer for then, so "if there is idle, we use it" holds
 * within steal_defer_ns. A balanced group's head in a partition its groups
 * over-fill is taken at once (steal_now[], from softpart_core::overfull):
 * that partition's CPUs do not get through its queue within the wait. So
 * is a head held for @cpu (a visitor it switched out for a passing task),
 * and a head homed on @cpu: a task of this CPU's own that waits away from
 * home (queue_part_away()) is the very task its owners would want it for.
 * Verified alone (verify.bpf.h): the walks over partitions call it in a
 * loop.
 */
__verified_alone bool head_stealable(u32 part, s32 cpu, u64 now, bool defer, u64 *ready_at)
{
	struct queue_view qh;
	u64 at;

	if (!ready_at)
		return false;
	queue_head(part, &qh);
	if (!qh.found)
		return false;
	at = qh.stopped_at;
	if (!defer || !at || !time_before(now, at + steal_defer_ns) ||
	    home_steals_now(qh.home_id) || homed_on(&qh, cpu) ||
	    (held_now(&qh) && qh.put_back_cpu == cpu))
		return true;
	if (!*ready_at || time_before(at + steal_defer_ns, *ready_at))
		*ready_at = at + steal_defer_ns;
	return false;
}

/*
 * Busy @cpu is about to switch @pv, a task homed on it, out for its
 * partition's head @qh, a visitor (a task homed elsewhere that waits
 * here): no. A visitor gets a partition's CPUs its owners leave, not
 * turns taken from them: homes decide where a tenant runs, and its CPU
 * time beyond its home comes from CPUs nobody else there wants. Its own
 * home's CPUs take it back if it waits long (pull_behind()).
 */
static __always_inline bool owner_keeps_cpu(const struct queue_view *pv,
					    const struct queue_view *qh, s32 cpu)
{
	return homed_outside(qh, cpu) && !contract_reaches(qh, pv, cpu) && homed_on(pv, cpu);
}

/*
 * The wait bound: has the queue head @qh waited longer than any task may
 * (lead_cap(): SP_MAX_LEAD_NS, under cpu.idle SP_MAX_LEAD_IDLE_NS) since
 * it became runnable? Then it takes the CPU over every rule that would
 * keep another task there (a hold, an owner, a task ahead of it on the
 * clock) or take one from another partition. The vtime clock alone bounds
 * the wait only as far as the clocks advance and ties hand over; this
 * bound rests on nothing but time.
 */
static __always_inline bool head_overdue(const struct queue_view *qh, u64 now)
{
	return qh->found && qh->overdue_at && !time_before(now, qh->overdue_at);
}

/*
 * Busy @cpu's prev @pv (at @prev_vtime), at its slice end, is not behind
 * its partition's head @qh on the vtime clock: it runs on, as EEVDF
 * keeps the current task while it is eligible with the earliest deadline. Handed over whatever the
 * vtimes, a task that is owed CPU time waits in the queue for the next
 * slice end among the partition's CPUs, or for a slice where it is held
 * for its CPU (head_held_elsewhere()): a CPU-bound task then gets a share
 * of a CPU well under what its cgroup is entitled to. A task that yielded
 * to a waiting task hands over: that is what sched_yield() asks. So does a
 * visitor (a task homed away from @cpu): it gets the CPUs this partition's
 * tasks leave, not turns it keeps from them (owner_keeps_cpu() is the
 * other half), and what it is owed comes from its home's CPUs
 * (pull_behind()).
 */
static __always_inline bool prev_not_behind(const struct queue_view *pv,
					    const struct queue_view *qh, s32 cpu, u64 prev_vtime)
{
	if (!qh->found)
		return false;
	if (pv->has_ctx && (pv->yielded || (homed_outside(pv, cpu) && !contract_reaches(pv, qh, cpu))))
		return false;
	return !time_before(qh->vtime, prev_vtime);
}

/*
 * Busy @cpu's prev (@pv; @prev_vtime: its vtime on its partition's
 * clock, task_vtime()) at its slice end, against its partition's head
 * @qh, which is not overdue: held for another CPU (SP_KEEP_HELD), an
 * owner keeping its CPU from a visitor (SP_KEEP_OWNER), not behind the
 * head (SP_KEEP_AHEAD), or handed over (SP_KEEP_NONE). Verified alone
 * (verify.bpf.h): the head's and prev's fields are many independent
 * branches, which walked again on each of dispatch()'s paths took its
 * verification past any bound.
 */
__verified_alone int prev_keeps_cpu(const struct queue_view *qh, const struct queue_view *pv,
				    s32 cpu, u64 prev_vtime)
{
	if (!qh || !pv)
		return SP_KEEP_NONE;
	if (head_held_elsewhere(qh, cpu))
		return SP_KEEP_HELD;
	if (owner_keeps_cpu(pv, qh, cpu))
		return SP_KEEP_OWNER;
	if (prev_not_behind(pv, qh, cpu, prev_vtime))
		return SP_KEEP_AHEAD;
	return SP_KEEP_NONE;
}

/*
 * Is @part's head a task pull_behind() may take to @cpu: behind @vtime by
 * more than half the sleeper credit, not held for another CPU, and homed
 * on @cpu or without a home, unless the contract reaches (@owner_here:
 * what @cpu would run is an owner there whose home is not entitled
 * beyond its CPUs)? Verified alone (verify.bpf.h), as head_stealable().
 */
__verified_alone bool head_behind(u32 part, s32 cpu, u64 vtime, bool owner_here)
{
	struct queue_view qh;

	queue_head(part, &qh);
	if (!qh.found || held_for_other(&qh, cpu))
		return false;
	if (homed_outside(&qh, cpu) && !(owner_here && home_entitled_beyond(qh.home_id)))
		return false;
	return time_before(qh.vtime + slice_lag_ns / 2, vtime);
}

/*
 * contract_reaches()'s half that is @next's (what @cpu would run): an
 * owner on @cpu whose home is not entitled beyond its CPUs.
 */
static __always_inline bool owner_here(const struct queue_view *next, s32 cpu)
{
	return next->has_ctx && !home_entitled_beyond(next->home_id) && homed_on(next, cpu);
}

/*
 * Fairness across partitions: a queue head of another partition behind
 * @vtime (what @cpu would run next) by more than half the sleeper credit
 * is taken instead, nearest partition first. Each partition's CPUs serve
 * its own queue first; without this, the tenants of a partition with few
 * tasks per CPU would keep it while another partition's tenants, entitled
 * to as much, waited: a task at its entitlement advances in vtime at the
 * wall clock's rate whatever its partition (cgroup.bpf.h), so a head that
 * far behind is owed CPU time its own CPUs do not give it.
 * Half the credit: below it, so that a deficit shows before the queue's
 * clamp (task_vtime()) forgives it; well above the slice or two partitions
 * progressing at the same rate drift apart by, so that they do not trade
 * tasks. Never a homed head onto a CPU outside its home, unless the
 * contract reaches there (contract_reaches(): its home is entitled beyond
 * its CPUs, and what @cpu would run is an owner of a home that is not:
 * @owner_here, see owner_here()): homes decide where a tenant runs, and
 * otherwise its CPU time beyond them comes from idle CPUs
 * (steal_or_idle()); pulling it out would move the instance off its node
 * whenever its home is the busier one.
 * One pull per partition per half the credit (part_state.pulled_at): a
 * pulled task speeds up the partition it left by its share only, so that
 * partition's clock closes the gap over the following slices; pulling at
 * every dispatch until then would take every head of a queue that far
 * behind, and the overshoot would send tasks back the other way.
 * Verified alone (verify.bpf.h), as head_stealable().
 */
__verified_alone bool pull_behind(s32 cpu, u32 own, u64 vtime, bool owner_here)
{
	struct part_state *ps = part_state(own);
	struct part_walk walk;
	u64 now;
	u32 i;

	if (!ps)
		return false;
	now = now_ns();
	/* Written on a pull only; read by the partition's own CPUs. */
	if (ps->pulled_at && time_before(now, ps->pulled_at + slice_lag_ns / 2))
		return false;
	part_walk_start(&walk, own);
	bpf_for(i, 0, SP_PART_VISITS) {
		s32 part = part_walk_next(&walk);

		if (part < 0)
			break;
		if (!head_behind(part, cpu, vtime, owner_here))
			continue;
		if (take_head(part)) {
			ps->pulled_at = now;
			stat_inc(SP_STAT_PULL_BEHIND);
			return true;
		}
	}
	return false;
}

/*
 * @prev, a visitor on @cpu, is about to be switched out at its slice end
 * for @qh, the head of @cpu's partition queue. A head with no home (a
 * daemon, an unbound kthread, the scheduler's own thread) passes through:
 * @prev is held in its home's queue for @cpu, which takes it back when
 * that task is done, as it would its own partition's task. Unheld, the
 * next home CPU to reach a slice end took it and put its own task in the
 * queue in its place, and so on round the nodes, while CPUs of the node
 * it left went idle. Not while its home runs a visitor
 * (home_hosts_visitor()). Returns @prev's context if it was marked, for
 * dispatch() to unmark if nothing moved.
 */
static struct task_ctx *hold_visitor_for_passing(struct task_struct *prev,
						 const struct queue_view *qh, s32 cpu)
{
	struct task_ctx *tctx = lookup_tctx(prev);
	const struct cpumask *home;

	if (!tctx)
		return NULL;
	home = home_of(tctx);
	if (!home || bpf_cpumask_test_cpu(cpu, home))
		return NULL;
	if (!qh->has_ctx || qh->home_id != SP_NO_HOME || home_hosts_visitor(tctx, home))
		return NULL;
	tctx->where.hold_away = 1;
	if (diag)
		tctx->where.passed_cpu = cpu + 1;
	return tctx;
}

/*
 * The CPU's last runnable task keeps running there. The kernel leaves the
 * follow-up to us (SCX_ENQ_LAST): without the kick the CPU would idle with
 * the task sitting in its local DSQ.
 */
static __always_inline void keep_last(struct task_struct *p, s32 cpu, u64 enq_flags)
{
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, enq_flags);
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

#endif /* __SOFTPART_QUEUE_BPF_H */
