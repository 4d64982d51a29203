/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Each partition's shared state: its vtime clock, the slices started on
 * its CPUs (--diag), and the marks its queue rules leave. Its own CPUs
 * write it, the others read it: one cache line per partition, so that one
 * partition's writes do not take another's line.
 */
#ifndef __SOFTPART_PART_BPF_H
#define __SOFTPART_PART_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"

struct part_state {
	/*
	 * The vtime clock: the largest vtime a task queued here started a
	 * slice with (running(), or a slice refilled at dispatch()).
	 */
	u64 vtime_now;
	/* --diag: slices started on its CPUs, the rounds a waiting task counts */
	u64 rounds;
	/* when a task homed here last queued here (note_owner_queued()) */
	u64 owner_queued_at;
	/* when it last took a head from another partition (pull_behind()) */
	u64 pulled_at;
	/* when the clock last moved */
	u64 clock_at;
	u64 pad[3];
};

_Static_assert(sizeof(struct part_state) == 64, "one cache line per partition");

struct part_state part_states[SP_MAX_PARTS] __attribute__((aligned(64)));

static __always_inline struct part_state *part_state(u32 part)
{
	if (part >= SP_MAX_PARTS)
		return NULL;
	barrier_var(part);
	return &part_states[part];
}

/*
 * One clock per partition, as EEVDF keeps one per runqueue: a task waiting
 * in one queue is clamped against that queue's progress only. With one
 * clock for all, the partition whose tasks progress fastest would set it,
 * and every task of a slower partition would be clamped to the same point
 * behind it, forgetting the weights that put them apart. Written by the
 * partition's CPUs only, without atomics: a lost update lowers the clock
 * by a slice at most, and the next slice start raises it.
 */
static __always_inline u64 part_clock(u32 part)
{
	struct part_state *ps = part_state(part);

	return ps ? ps->vtime_now : 0;
}

/* A task of @part's queue starts a slice at @vtime. */
static __always_inline void advance_part_clock(u32 part, u64 vtime)
{
	struct part_state *ps = part_state(part);

	if (ps && time_before(ps->vtime_now, vtime)) {
		ps->vtime_now = vtime;
		ps->clock_at = now_ns();
	}
}

/*
 * A task of @part's queue at @vtime keeps its CPU for another slice: the
 * clock moves up to it, but no faster than the wall clock since it last
 * moved. A task that keeps its CPU is one the queue's head is not ahead of
 * yet; running on, it may get ahead of its share (up to the head's vtime),
 * and a clock that followed it there would lift every task queued after
 * to its lead, forgiving the waiting tenants what they are behind, and a
 * light tenant beside a heavy one would get more than its weight gives
 * it. At the wall clock's rate the clock goes on as a partition at its
 * entitlement does, and still advances while no task passes running().
 */
static __always_inline void advance_part_clock_kept(u32 part, u64 vtime)
{
	struct part_state *ps = part_state(part);
	u64 now = now_ns(), top;

	if (!ps || !time_before(ps->vtime_now, vtime))
		return;
	top = ps->vtime_now + (time_before(ps->clock_at, now) ? now - ps->clock_at : 0);
	if (time_before(top, vtime))
		vtime = top;
	if (time_before(ps->vtime_now, vtime)) {
		ps->vtime_now = vtime;
		ps->clock_at = now;
	}
}

/*
 * --diag: a slice starts on a CPU of @part (a task starts running there, or
 * keeps its CPU for another slice). Returns the count before it. Atomic:
 * the figure is an upper bound's evidence and must not undercount.
 */
static __always_inline u64 count_round(u32 part)
{
	struct part_state *ps = part_state(part);

	if (!diag || !ps)
		return 0;
	return __sync_fetch_and_add(&ps->rounds, 1);
}

static __always_inline u64 part_rounds(u32 part)
{
	struct part_state *ps = part_state(part);

	return ps ? ps->rounds : 0;
}

#endif /* __SOFTPART_PART_BPF_H */
