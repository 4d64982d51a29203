/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cpu.max: the kernel hands the setting over (ops.cgroup_set_bandwidth),
 * the throttling is ours. Each capped cgroup has a budget of CPU time per
 * period. The CPU time its tasks and its descendants' run is taken from
 * it as it is charged (at every tick and when a task stops), and a task
 * starts with a slice no longer than the budget left. A cgroup whose
 * budget ran out is throttled: its tasks are switched out at the next tick
 * and wait in the cgroup's own queue (its park DSQ), which no CPU serves,
 * so they neither run nor count as work an idle CPU must take.
 *
 * A timer per capped cgroup refills the budget every period, by the quota
 * times the periods since the last refill (a timer that fires late does
 * not shorten the cgroup's time), up to quota + burst. A run that overshoots (a slice ends at a tick, not
 * to the ns) leaves a debt that the next refill pays first, as the kernel
 * carries a cfs_rq's negative runtime: over periods the cgroup gets its
 * quota, not its quota plus the overshoots. The timer stops when a whole
 * period passed with nothing charged and nothing waiting; the next charge
 * starts it again.
 *
 * A refill that ends a throttle hands the cgroup's slot to the CPUs
 * (parks_released) and kicks the CPU the timer fired on: the next CPU to
 * dispatch moves up to SP_RELEASE_BATCH parked tasks back to their
 * partitions' queues and kicks idle CPUs there, and hands the rest on to
 * the next dispatch. So a release runs within a slice on a busy machine,
 * and at once on an idle one, where every task may be parked and nothing
 * else would call dispatch. The timer does not move them itself: moving
 * tasks between DSQs is certain only from ops.dispatch on every kernel we
 * run on.
 *
 * Charged locally: a charge adds to the cgroup's count for the CPU's NUMA
 * node (cg_unfolded[], lines written by that node's CPUs only up to
 * SP_LOAD_DOMAINS nodes; past that, nodes that many apart share them), and
 * the count is folded into the shared budget, one atomic on its line,
 * once it reaches a sixteenth of the quota (at most 5 ms, the fair
 * class's bandwidth slice) or what the budget has left, and at every
 * refill. So the budget's line is written once per fold instead of at
 * every tick and stop of every task under the cap: for a tenant across
 * two sockets, its only cross-socket writes. What a CPU sees left is the
 * budget less its own node's unfolded count; the other nodes' counts,
 * each under a fold's worth, are unseen until they fold, and a period
 * they overshoot is paid back at the next refill as any debt is.
 *
 * A task in no capped cgroup costs a read of its slot's contract and of
 * its parent's cap_up.
 */
#ifndef __SOFTPART_BANDWIDTH_BPF_H
#define __SOFTPART_BANDWIDTH_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"
#include "stats.bpf.h"
#include "idle.bpf.h"
#include "cgroup.bpf.h"
#include "part.bpf.h"
#include "part_queue.bpf.h"
#include "task.bpf.h"

/*
 * Parked tasks one dispatch moves back at most, over all the cgroups it
 * releases: each is a move and an idle-CPU pick under the run-queue lock.
 */
#define SP_RELEASE_BATCH 32
#define SP_S64_MAX ((s64)(~0ULL >> 1))
#define SP_TEST_NAME_LEN 32

/*
 * A fold at most this much charge: the fair class's bandwidth slice
 * (sched_cfs_bandwidth_slice_us), and at most 1/SP_FOLD_SHARE of the quota.
 */
#define SP_FOLD_MAX_NS (5 * 1000 * 1000LL)
#define SP_FOLD_SHARE 16

_Static_assert(sizeof(struct sp_cg_budget) == 64, "one cache line per budget");

/* Budgets, per slot; read by the control plane for the statistics. */
struct sp_cg_budget cg_budgets[SP_MAX_CGROUPS] __attribute__((aligned(64)));

/*
 * CPU time charged to a capped cgroup on a node and not yet folded into
 * its budget, per node modulo SP_LOAD_DOMAINS (load_index()).
 * In a map of its own, as cg_loads (a map's value is at most 4 MB).
 */
s64 cg_unfolded[SP_LOAD_DOMAINS * SP_MAX_CGROUPS] __attribute__((section(".bss.cg_charge"), aligned(64)));

struct cg_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_MAX_CGROUPS);
	__type(key, u32);
	__type(value, struct cg_timer);
} cg_timers SEC(".maps");

/* Slots whose throttle a refill ended, for the next dispatch to release. */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 2 * SP_MAX_CGROUPS);
	__type(value, u32);
} parks_released SEC(".maps");

/*
 * What is left of this CPU's release batch (release_throttled()). Kept in
 * a map, not a local: a counter the verifier tracks exactly would make
 * each turn of the queue's loop a state of its own, and the loops would
 * not converge.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} release_left SEC(".maps");

/*
 * Set after a push to parks_released; read at every dispatch. Global, not
 * static: the compiler would shrink a static 0/1 to a byte the BTF of .bss
 * does not describe, and the kernel would refuse the program.
 */
u32 release_pending;

static __always_inline u64 park_dsq(u32 slot)
{
	return SP_PARK_DSQ_BASE + slot;
}

/*
 * Test-only: the name of cgroups whose park queue is not made, as if the
 * kernel had failed to allocate it (set from SOFTPART_TEST_FAIL_PARK_DSQ
 * at load, never from an option). Empty: none.
 */
const volatile char fail_park_dsq_for[SP_TEST_NAME_LEN];

static bool park_dsq_fails_for(struct cgroup *cgrp)
{
	char name[SP_TEST_NAME_LEN] = {};
	u32 i;

	if (!fail_park_dsq_for[0])
		return false;
	if (bpf_probe_read_kernel_str(name, sizeof(name), BPF_CORE_READ(cgrp, kn, name)) < 0)
		return false;
	bpf_for(i, 0, SP_TEST_NAME_LEN) {
		if (name[i] != fail_park_dsq_for[i])
			return false;
		if (!name[i])
			return true;
	}
	return true;
}

/* @cgrp's park queue, in @slot. */
static s32 create_park_dsq(struct cgroup *cgrp, u32 slot)
{
	if (park_dsq_fails_for(cgrp))
		return -ENOMEM;
	return scx_bpf_create_dsq(park_dsq(slot), -1);
}

static __always_inline struct sp_cg_budget *budget_at(u32 slot)
{
	if (slot >= SP_MAX_CGROUPS)
		return NULL;
	barrier_var(slot);
	return &cg_budgets[slot];
}

static __always_inline bool capped(const struct sp_cgroup *cg)
{
	return cg->quota_us != ~0ULL && cg->period_us;
}

static __always_inline s64 quota_ns(const struct sp_cgroup *cg)
{
	return cg->quota_us * 1000;
}

/* The budget a refill tops up to: the quota, plus what burst lets it save. */
static __always_inline s64 budget_cap_ns(const struct sp_cgroup *cg)
{
	return (cg->quota_us + cg->burst_us) * 1000;
}

/*
 * The nearest capped cgroup at or above @cg's parent; SP_NO_CGROUP if none:
 * the control plane's view of the parent while it holds, else what the
 * parent's own cgroup_init or cpu.max write found.
 */
static __always_inline u32 cap_above(const struct sp_cgroup *cg)
{
	struct sp_cgroup *up = cgroup_at(cg->parent);
	struct sp_cg_ctl *c;

	if (!up)
		return SP_NO_CGROUP;
	c = ctl_of(cg->parent);
	return c ? c->cap_up : up->cap_up;
}

/* The first capped cgroup at or above @slot; SP_NO_CGROUP if none. */
static __always_inline u32 first_cap(u32 slot)
{
	struct sp_cgroup *cg = cgroup_at(slot);

	if (!cg)
		return SP_NO_CGROUP;
	return capped(cg) ? slot : cap_above(cg);
}

/*
 * The clock refills are measured on: the timer's own (CLOCK_MONOTONIC).
 * Not now_ns(): the timer fires from an interrupt, often on an idle CPU,
 * whose run-queue clock may not have been updated since it went idle, and
 * a refill measured on it would find less time since the last than has
 * passed, and add less than the quota for it.
 */
static __always_inline u64 refill_clock(void)
{
	return bpf_ktime_get_ns();
}

/*
 * The most debt a refill carries: what the quota repays in
 * SP_DEBT_REPAY_NS. A debt is the overshoot of runs that a tick ended
 * after the budget ran out, at most a tick per CPU running the cgroup's
 * tasks; paid back in full, a tiny cap over hundreds of CPUs (0.05 CPU,
 * 400 threads on 400 CPUs: 1.6 s of debt, 32 s to repay) would keep its
 * tasks parked past the kernel's watchdog (30 s), which ends the scheduler
 * for every tenant. Beyond the floor the debt is forgiven
 * (debt_forgiven): the cap is then exceeded by that much, once.
 */
#define SP_DEBT_REPAY_NS (10ULL * 1000 * 1000 * 1000)

static __always_inline s64 debt_floor_ns(const struct sp_cgroup *cg)
{
	u64 periods = SP_DEBT_REPAY_NS / (cg->period_us * 1000);

	return -(s64)((periods ? periods : 1) * cg->quota_us * 1000);
}

/*
 * What a refill @since ns after the last adds to @cg's budget: the quota
 * for the time that passed, however late the timer fired (a timer that
 * fires late does not shorten the cgroup's time, nor lengthen a debt's
 * repayment: at a quota per refill, a debt at the floor took three times
 * SP_DEBT_REPAY_NS to repay where timers fired three periods apart, and
 * its tasks stayed parked past the kernel's watchdog). No more than
 * @span, what lifts the deepest debt to a full budget: beyond it the
 * time makes no difference, and the products stay within 64 bits for
 * any cap up to SP_MAX_CPUS CPUs.
 */
static __always_inline s64 refill_add(const struct sp_cgroup *cg, u64 since, s64 span)
{
	u64 period = cg->period_us * 1000, whole;
	s64 quota = quota_ns(cg);

	if (!period || quota <= 0)
		return quota;
	whole = since / period;
	if (whole > (u64)(span / quota) + 1)
		return span;
	/* The part period in us: a cap of SP_MAX_CPUS CPUs for a period of 1 s fits. */
	return quota * whole + quota * (s64)((since % period) / 1000) / (s64)cg->period_us;
}

/* A fold's worth of charge for @cg: a share of its quota, at most SP_FOLD_MAX_NS. */
static __always_inline s64 fold_ns(const struct sp_cgroup *cg)
{
	s64 share = quota_ns(cg) / SP_FOLD_SHARE;

	return share < SP_FOLD_MAX_NS ? share : SP_FOLD_MAX_NS;
}

/* Domain @d's unfolded charge to @slot; NULL if either is none. */
static __always_inline s64 *unfolded_in(u32 slot, u32 d)
{
	u32 i = d * SP_MAX_CGROUPS + slot;

	if (slot >= SP_MAX_CGROUPS || d >= SP_LOAD_DOMAINS ||
	    i >= SP_LOAD_DOMAINS * SP_MAX_CGROUPS)
		return NULL;
	barrier_var(i);
	return &cg_unfolded[i];
}

/* This CPU's node's unfolded charge to @slot; NULL if @slot is none. */
static __always_inline s64 *unfolded_here(u32 slot)
{
	u32 i = load_index(slot);

	if (i >= SP_LOAD_DOMAINS * SP_MAX_CGROUPS)
		return NULL;
	barrier_var(i);
	return &cg_unfolded[i];
}

/*
 * @ns charged to @slot's budget @b, in one atomic on its line; the run
 * that takes the last of it marks the throttle.
 */
static void budget_take(struct sp_cg_budget *b, s64 ns)
{
	s64 old;

	if (ns <= 0)
		return;
	diag_inc(SP_STAT_CAP_FOLDS);
	old = __sync_fetch_and_add(&b->left_ns, -ns);
	if (old > 0 && old <= ns) {
		b->throttled_at = now_ns();
		b->nr_throttled++;
	}
}

/*
 * Every node's unfolded charge to @slot, emptied: into its budget @b at a
 * refill, so that it tops up what was really used; forgotten (@b NULL)
 * at a new contract. A loop over the SP_LOAD_DOMAINS counts, per capped
 * cgroup and period, on its timer or a cgroup callback: no scheduling
 * event runs it.
 */
static void unfolded_drain(u32 slot, struct sp_cg_budget *b)
{
	s64 *unfolded;
	u32 d;

	bpf_for(d, 0, SP_LOAD_DOMAINS) {
		unfolded = unfolded_in(slot, d);
		if (!unfolded)
			break;
		if (!*unfolded)
			continue;
		if (b)
			budget_take(b, __sync_lock_test_and_set(unfolded, 0));
		else
			*unfolded = 0;
	}
}

/*
 * A new contract for @slot (at cgroup_init and cpu.max writes): its own cap
 * or the one above it heads its chain at once; its descendants' chains
 * follow at the control plane's next period (sp_cg_ctl.cap_up). A fresh budget of one quota; tasks parked
 * under the old setting are released.
 */
static void budget_reset(u32 slot, struct sp_cgroup *cg, bool release)
{
	struct sp_cg_budget *b = budget_at(slot);

	cg->cap_up = capped(cg) ? slot : cap_above(cg);
	if (!b)
		return;
	unfolded_drain(slot, NULL);
	b->left_ns = capped(cg) ? quota_ns(cg) : 0;
	b->refilled_at = refill_clock();
	if (b->throttled_at) {
		b->throttled_ns += now_ns() - b->throttled_at;
		b->throttled_at = 0;
	}
	if (release) {
		if (bpf_map_push_elem(&parks_released, &slot, 0))
			limit_hit(SP_LIMIT_RELEASES, SP_STAT_RELEASE_NOT_QUEUED, slot);
		else
			release_pending = 1;
	}
}

/* A new cgroup in @slot: its statistics start from zero. */
static void budget_clear_counts(u32 slot)
{
	struct sp_cg_budget *b = budget_at(slot);

	if (!b)
		return;
	b->throttled_ns = 0;
	b->nr_throttled = 0;
}

static int budget_refill(void *map, u32 *key, struct cg_timer *t);

/*
 * Hands @slot's parked tasks to the CPUs (release_throttled()) and kicks
 * this CPU if it is idle, so that a dispatch comes even when nothing else
 * would: on a machine whose only runnable tasks are parked, every CPU is
 * idle and no wakeup may come for a whole period or more.
 */
static void hand_release(u32 slot)
{
	if (bpf_map_push_elem(&parks_released, &slot, 0)) {
		limit_hit(SP_LIMIT_RELEASES, SP_STAT_RELEASE_NOT_QUEUED, slot);
		return;
	}
	release_pending = 1;
	scx_bpf_kick_cpu(bpf_get_smp_processor_id(), SCX_KICK_IDLE);
}

/* Starts @slot's refill timer if it is not running. */
static void budget_arm(u32 slot, struct sp_cgroup *cg, struct sp_cg_budget *b)
{
	struct cg_timer *t;
	u32 key = slot;

	if (b->armed || !__sync_bool_compare_and_swap(&b->armed, 0, 1))
		return;
	t = bpf_map_lookup_elem(&cg_timers, &key);
	if (!t) {
		b->armed = 0;
		return;
	}
	/* -EBUSY: set up for an earlier cgroup of this slot, still good. */
	bpf_timer_init(&t->timer, &cg_timers, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&t->timer, budget_refill);
	if (bpf_timer_start(&t->timer, cg->period_us * 1000, 0))
		b->armed = 0;
}

/*
 * The period's end for one capped cgroup: top its budget up (paying a debt
 * first) and, if that ends its throttle, hand it to the CPUs to release.
 * A cgroup gone or no longer capped releases what waits and stops.
 */
static int budget_refill(void *map, u32 *key, struct cg_timer *t)
{
	u32 slot = *key;
	struct sp_cgroup *cg = cgroup_at(slot);
	struct sp_cg_budget *b = budget_at(slot);
	s64 old, new, top, add, floor;
	u64 now = now_ns(), period, at, since;
	bool parked;
	u32 i;

	if (!cg || !b)
		return 0;
	parked = scx_bpf_dsq_nr_queued(park_dsq(slot)) > 0;
	if (!cg->cgid || !capped(cg)) {
		b->armed = 0;
		if (parked)
			hand_release(slot);
		return 0;
	}
	unfolded_drain(slot, b);
	top = budget_cap_ns(cg);
	floor = debt_floor_ns(cg);
	period = cg->period_us * 1000;
	at = refill_clock();
	since = b->refilled_at && time_before(b->refilled_at, at) ? at - b->refilled_at : period;
	add = refill_add(cg, since, top - floor);
	b->refilled_at = at;
	if (b->left_ns + add < floor)
		stat_inc(SP_STAT_DEBT_FORGIVEN);
	old = b->left_ns;
	new = old;
	bpf_for(i, 0, 4) {
		old = b->left_ns;
		new = old + add;
		if (new > top)
			new = top;
		if (new < floor)
			new = floor;
		if (__sync_bool_compare_and_swap(&b->left_ns, old, new))
			break;
	}
	if (old <= 0 && new > 0) {
		at = b->throttled_at;

		b->throttled_at = 0;
		if (at && time_before(at, now))
			b->throttled_ns += now - at;
		hand_release(slot);
	} else if (parked && old > 0) {
		/*
		 * Tasks parked with budget left: enqueue() saw the throttle
		 * before the last refill ended it, and put them in after the
		 * release had emptied the queue. Nothing else would move them:
		 * hand them over now, a period late at most.
		 */
		stat_inc(SP_STAT_LATE_PARKS);
		hand_release(slot);
	}
	/*
	 * Idle for a whole period: stop. Disarm first, then look again, so
	 * that a charge that raced with us either arms the timer itself or
	 * shows here.
	 */
	if (old >= top && !parked) {
		b->armed = 0;
		if (b->left_ns >= top || !__sync_bool_compare_and_swap(&b->armed, 0, 1))
			return 0;
	}
	bpf_timer_start(&t->timer, cg->period_us * 1000, 0);
	return 0;
}

/*
 * Charges @ns run by a task of cgroup @slot to every capped cgroup at or
 * above it (SP_CAP_DEPTH deep), starting their timers: to this node's
 * count, folded into the budget once it reaches a fold's worth or what the
 * budget has left (so the node that takes the last of it throttles at once).
 */
static void budget_charge(u32 slot, u64 ns)
{
	struct sp_cgroup *cg;
	u32 cap = first_cap(slot), i;

	bpf_for(i, 0, SP_CAP_DEPTH) {
		struct sp_cg_budget *b = budget_at(cap);
		s64 *here, acc;

		cg = cgroup_at(cap);
		if (!cg || !b)
			return;
		here = unfolded_here(cap);
		if (capped(cg) && here) {
			diag_inc(SP_STAT_CAP_CHARGES);
			acc = __sync_add_and_fetch(here, (s64)ns);
			if (acc >= fold_ns(cg) || acc >= b->left_ns)
				budget_take(b, __sync_lock_test_and_set(here, 0));
			budget_arm(cap, cg, b);
		}
		cap = cap_above(cg);
	}
}

/*
 * The least budget left among the capped cgroups at or above @slot, as
 * this CPU sees it (less its node's unfolded charge; SP_S64_MAX if none),
 * and in *@at the slot that has it.
 */
static s64 budget_left(u32 slot, u32 *at)
{
	struct sp_cgroup *cg;
	u32 cap = first_cap(slot), i;
	s64 least = SP_S64_MAX;

	*at = SP_NO_CGROUP;
	bpf_for(i, 0, SP_CAP_DEPTH) {
		struct sp_cg_budget *b = budget_at(cap);
		s64 *here, left;

		cg = cgroup_at(cap);
		if (!cg || !b)
			break;
		here = unfolded_here(cap);
		left = b->left_ns - (here ? *here : 0);
		if (capped(cg) && left < least) {
			least = left;
			*at = cap;
		}
		cap = cap_above(cg);
	}
	return least;
}

/* The slot whose budget throttles @slot's tasks now; SP_NO_CGROUP if none. */
static __always_inline u32 throttled_by(u32 slot)
{
	u32 at;

	return budget_left(slot, &at) <= 0 ? at : SP_NO_CGROUP;
}

/*
 * @p starts running: no longer a slice than the least budget left above
 * it, so that CPUs starting a capped cgroup's tasks together overshoot its
 * quota by what a tick lets a slice run over, not by a slice each.
 */
static __always_inline void cap_slice(struct task_struct *p, struct task_ctx *tctx)
{
	u32 at;
	s64 left = budget_left(task_slot(tctx), &at);

	if (left < (s64)p->scx.slice)
		p->scx.slice = left > 0 ? left : 1;
}

/*
 * @p, of a throttled cgroup, waits in the park DSQ of @by, in vtime order:
 * the release keeps the parked tasks' places relative to each other.
 */
static __always_inline void park(struct task_struct *p, u32 by, u64 enq_flags)
{
	scx_bpf_dsq_insert_vtime(p, park_dsq(by), slice_ns, p->scx.dsq_vtime, enq_flags);
	stat_inc(SP_STAT_PARKED);
}

/*
 * @slot's throttle ended: its parked tasks go to the queue of the partition
 * of the CPU they last ran on (always one they may run on), where they
 * would have queued, and an idle CPU there is kicked for each. A task
 * still throttled by a cgroup further up moves to that one's park DSQ.
 *
 * While parked they fell behind the clock; clamped one by one to the
 * sleeper credit, they would all land on one point and the weights among
 * them (children of a capped parent) would be forgotten. So all move up
 * by the same amount, the first (least vtime) to the credit's edge, as
 * the kernel unthrottles a cfs_rq with its entities' vruntimes as they
 * were; the queue's bounds (task_vtime()) then apply to each.
 */
static void release_parked(u32 slot, u32 *left)
{
	struct task_struct *p;
	u64 shift = 0;
	bool first = true;

	bpf_for_each(scx_dsq, p, park_dsq(slot), 0) {
		struct task_ctx *tctx = lookup_tctx(p);
		u32 by = throttled_by(task_slot(tctx)), part;
		const struct cpumask *cpus;
		u64 vtime;
		s32 cpu;

		if (!*left)
			break;
		(*left)--;
		/*
		 * Still throttled further up: to that cgroup's park queue, by
		 * vtime like every park (a FIFO move into a queue ordered by
		 * vtime is an error that ends the scheduler).
		 */
		if (by != SP_NO_CGROUP) {
			if (by != slot) {
				scx_bpf_dsq_move_set_vtime(BPF_FOR_EACH_ITER, p->scx.dsq_vtime);
				scx_bpf_dsq_move_vtime(BPF_FOR_EACH_ITER, p, park_dsq(by), 0);
			}
			continue;
		}
		part = part_of_cpu(scx_bpf_task_cpu(p));
		if (first) {
			u64 floor = part_clock(part) - slice_lag_ns;

			first = false;
			if (time_before(p->scx.dsq_vtime, floor))
				shift = floor - p->scx.dsq_vtime;
		}
		vtime = clamp_vtime(p->scx.dsq_vtime + shift, p, tctx, part);
		scx_bpf_dsq_move_set_vtime(BPF_FOR_EACH_ITER, vtime);
		if (!scx_bpf_dsq_move_vtime(BPF_FOR_EACH_ITER, p, part_dsq(part), 0))
			continue;
		note_queued(p, tctx, part, vtime);
		stat_inc(SP_STAT_UNPARKED);
		cpus = part_cpus(part);
		cpu = cpus ? pick_idle(cpus, scx_bpf_task_cpu(p), 0) : -1;
		if (cpu >= 0)
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	}
}

/*
 * At a dispatch, when a refill ended a throttle (release_pending): move
 * back up to SP_RELEASE_BATCH parked tasks of the cgroups handed over, in
 * the order they were; a cgroup with more left goes to the back of the
 * line for the next dispatch, which the CPUs kicked for the tasks moved
 * make soon even on an idle machine.
 */
static void release_throttled(void)
{
	u32 zero = 0, slot, i, *left;

	left = bpf_map_lookup_elem(&release_left, &zero);
	if (!left)
		return;
	*left = SP_RELEASE_BATCH;
	release_pending = 0;
	bpf_for(i, 0, 8) {
		if (bpf_map_pop_elem(&parks_released, &slot))
			return;
		release_parked(slot, left);
		if (scx_bpf_dsq_nr_queued(park_dsq(slot)) > 0 &&
		    throttled_by(slot) == SP_NO_CGROUP &&
		    !bpf_map_push_elem(&parks_released, &slot, 0))
			release_pending = 1;
		if (!*left)
			break;
	}
	if (!bpf_map_peek_elem(&parks_released, &slot))
		release_pending = 1;
}

#endif /* __SOFTPART_BANDWIDTH_BPF_H */
