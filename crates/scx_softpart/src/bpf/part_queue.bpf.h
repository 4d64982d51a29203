/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Which partition queues hold tasks, so that a CPU looking for work in
 * other partitions (a steal, a pull, an idle recheck) visits only those,
 * nearest first, instead of every partition: a count per partition of
 * the tasks queued there, in a line of its own, and a summary word per
 * NUMA node with a bit per partition whose count is above zero.
 *
 * The count goes up where a task is put in a partition queue and down
 * where it leaves, as its task_ctx.part_queued says: when it starts
 * running, when it is dequeued (quiescent(): a sleep, or an affinity,
 * cgroup or priority change that takes it off the queue), and at its next
 * enqueue if neither was seen. Put in before the kernel has inserted it
 * (an insert from enqueue() lands when enqueue() returns) and taken out
 * only once it has left, the count is never below the queue's length: a
 * bit is never clear while the queue holds a counted task, so no CPU
 * misses work it may take. A task with no context is counted and never
 * taken out; its partition's bit then stays set, which costs a visit.
 */
#ifndef __SOFTPART_PART_QUEUE_BPF_H
#define __SOFTPART_PART_QUEUE_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"
#include "verify.bpf.h"

struct part_queued {
	s64 nr;
	u64 pad[7];
};

struct queued_word {
	u64 parts;
	u64 pad[7];
};

_Static_assert(sizeof(struct part_queued) == 64, "one cache line per partition");
_Static_assert(sizeof(struct queued_word) == 64, "one cache line per node");

struct part_queued part_queued[SP_MAX_PARTS] __attribute__((aligned(64)));
struct queued_word queued_words[SP_MAX_NODES] __attribute__((aligned(64)));

static __always_inline struct queued_word *queued_word_of(u32 part)
{
	u32 w = part < SP_MAX_PARTS ? part_word[part] : SP_MAX_NODES;

	if (w >= SP_MAX_NODES)
		return NULL;
	barrier_var(w);
	return &queued_words[w];
}

/*
 * A task was put in @part's queue. The bit is set after the count rises
 * (both atomics order), so a count_unqueued() that saw the count fall to
 * zero and cleared the bit sees this count when it looks again.
 */
static void count_queued(u32 part)
{
	struct queued_word *qw = queued_word_of(part);
	u64 bit = 1ULL << (part & 63);

	if (part >= SP_MAX_PARTS || !qw)
		return;
	barrier_var(part);
	__sync_fetch_and_add(&part_queued[part].nr, 1);
	if (!(qw->parts & bit))
		__sync_fetch_and_or(&qw->parts, bit);
}

/* A task counted in @part's queue left it. */
static void count_unqueued(u32 part)
{
	struct queued_word *qw = queued_word_of(part);
	u64 bit = 1ULL << (part & 63);

	if (part >= SP_MAX_PARTS || !qw)
		return;
	barrier_var(part);
	if (__sync_fetch_and_add(&part_queued[part].nr, -1) != 1)
		return;
	__sync_fetch_and_and(&qw->parts, ~bit);
	/* Counted again since: set it back, or that task's queue goes unseen. */
	if (part_queued[part].nr > 0)
		__sync_fetch_and_or(&qw->parts, bit);
}

/* Index of the lowest set bit of @x, which is not 0. */
static __always_inline u32 lowest_bit(u64 x)
{
	u32 n = 0;

	if (!(x & 0xffffffffULL)) {
		n += 32;
		x >>= 32;
	}
	if (!(x & 0xffff)) {
		n += 16;
		x >>= 16;
	}
	if (!(x & 0xff)) {
		n += 8;
		x >>= 8;
	}
	if (!(x & 0xf)) {
		n += 4;
		x >>= 4;
	}
	if (!(x & 0x3)) {
		n += 2;
		x >>= 2;
	}
	if (!(x & 0x1))
		n += 1;
	return n;
}

/*
 * A walk over the other partitions that have tasks queued, nearest first:
 * by ring (partitions at one NUMA distance, part_rings[]), by id within
 * one, as part_order would give them.
 */
struct part_walk {
	u64 queued;	/* partitions with tasks queued, not visited yet */
	u64 ring;	/* of those, the current ring's */
	u32 own;
	u32 next_ring;
};

static __always_inline void part_walk_start(struct part_walk *w, u32 own)
{
	u64 queued = 0;
	u32 i;

	bpf_for(i, 0, nr_part_words) {
		if (i >= SP_MAX_NODES)
			break;
		queued |= queued_words[i].parts;
	}
	w->queued = queued & ~(1ULL << (own & 63));
	w->ring = 0;
	w->own = own;
	w->next_ring = 0;
}

/*
 * The next partition of the walk, or -1 when none is left. Verified
 * alone (verify.bpf.h): the callers call it in a loop.
 */
__verified_alone s32 part_walk_next(struct part_walk *w)
{
	u32 r, idx;
	u64 bit;

	if (!w)
		return -1;
	bpf_for(r, 0, SP_PART_RINGS) {
		if (w->ring || w->next_ring >= SP_PART_RINGS)
			break;
		idx = w->own * SP_PART_RINGS + w->next_ring;
		if (idx >= SP_MAX_PARTS * SP_PART_RINGS)
			return -1;
		w->ring = w->queued & part_rings[idx];
		w->next_ring++;
	}
	if (!w->ring)
		return -1;
	bit = lowest_bit(w->ring);
	w->ring &= w->ring - 1;
	return bit;
}

#endif /* __SOFTPART_PART_QUEUE_BPF_H */
