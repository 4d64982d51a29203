/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The way home for a task running away from it: when its home has room
 * (an idle CPU, nobody queued) and has had it for most of a slice.
 */
#ifndef __SOFTPART_HOME_BPF_H
#define __SOFTPART_HOME_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"
#include "stats.bpf.h"
#include "idle.bpf.h"
#include "visitor.bpf.h"
#include "task.bpf.h"
#include "place.bpf.h"

static __always_inline bool room_lasted(const struct task_ctx *tctx, u64 now)
{
	return tctx->where.room_since &&
	       !time_before(now, tctx->where.room_since + SP_ROOM_LASTED_NS);
}

/* An idle CPU at home and nothing queued there; claims nothing. */
static bool home_has_room(const struct cpumask *home)
{
	if (scx_bpf_dsq_nr_queued(part_dsq(home_part(home))) > 0)
		return false;
	return any_idle(home);
}

/*
 * At the end of a slice with nothing else to run on @cpu: is @p away from
 * home with room there, seen at every such check for SP_ROOM_LASTED_NS?
 * Time, not a count of checks: a task that yields in a loop makes two
 * checks microseconds apart, and would go home at every blink of an idle
 * home CPU.
 */
static bool should_go_home(struct task_struct *p, s32 cpu)
{
	struct task_ctx *tctx = lookup_tctx(p);
	const struct cpumask *home;
	u64 now;

	if (!tctx)
		return false;
	refresh_home(p, tctx);
	home = home_of(tctx);
	if (!home)
		return false;
	if (bpf_cpumask_test_cpu(cpu, home) || !home_has_room(home)) {
		tctx->where.room_since = 0;
		return false;
	}
	now = now_ns();
	if (!tctx->where.room_since) {
		tctx->where.room_since = now;
		return false;
	}
	return room_lasted(tctx, now);
}

/*
 * enqueue() of a task away from home (@home: its home ∩ allowed): back to
 * an idle CPU there when the home has room (at a slice end only once the
 * room has lasted, see room_lasted(): chasing a CPU idle for an instant
 * costs two migrations), else to a home CPU taken back from a visitor.
 * True if it was placed.
 */
static bool send_home(struct task_struct *p, struct task_ctx *tctx,
		      const struct cpumask *home, s32 task_cpu, u64 enq_flags)
{
	s32 cpu = -1;

	if (home_has_room(home) &&
	    (!(enq_flags & SCX_ENQ_LAST) || room_lasted(tctx, now_ns())))
		cpu = pick_idle(home, task_cpu, 0);
	if (cpu >= 0) {
		tctx->where.room_since = 0;
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		stat_inc(SP_STAT_RETURN_IDLE);
		tctx->where.via = (enq_flags & SCX_ENQ_WAKEUP) ? SP_VIA_RETURN : SP_VIA_RETURN_SLICE;
		return true;
	}
	cpu = claim_visitor_cpu(home, nodes_of(tctx, home));
	if (cpu >= 0) {
		tctx->where.via = SP_VIA_EVICT;
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
		stat_inc(SP_STAT_EVICT);
		return true;
	}
	return false;
}

#endif /* __SOFTPART_HOME_BPF_H */
