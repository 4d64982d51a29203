/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A partition's queue, as every CPU sees it: which queues hold tasks, and
 * what each queue's head says of itself.
 *
 * Which queues hold tasks, so that a CPU looking for work in other
 * partitions (a steal, a pull, an idle recheck) visits only those,
 * nearest first, instead of every partition: a count per partition of
 * the tasks queued there, in a line of its own, and a summary word per
 * NUMA node with a bit per partition whose count is above zero.
 *
 * The count goes up where a task is put in a partition queue and down
 * where it leaves, as its task_ctx.queue.part says: when it starts
 * running, when it is dequeued (quiescent(): a sleep, or an affinity,
 * cgroup or priority change that takes it off the queue), and at its next
 * enqueue if neither was seen. Put in before the kernel has inserted it
 * (an insert from enqueue() lands when enqueue() returns) and taken out
 * only once it has left, the count is never below the queue's length: a
 * bit is never clear while the queue holds a counted task, so no CPU
 * misses work it may take. A task with no context is counted and never
 * taken out; its partition's bit then stays set, which costs a visit.
 *
 * The head: before 7.1 the kernel peeks at a queue's head only through
 * the queue's iterator, which takes the queue's lock. A CPU of another
 * partition weighing that head (a steal, a pull, where to queue a task
 * away from home) reads instead a copy published in the partition's own
 * line (struct published_head): written where the head changes, at an
 * insert ahead of it, and by whoever takes a task from the queue or peeks
 * at it under the lock anyway (the partition's own CPUs at every
 * dispatch). The copy is a hint and may be stale, and where it is used
 * nothing depends on it being exact: a steal or a pull takes whatever
 * the queue's head is then, and publishes the next; a head that the copy
 * says must wait (deferred, held) is waited for at most a slice, then
 * looked at again; the wait bound is judged by the queue's own CPUs on
 * the head itself. When the published head is known to have left (the
 * kernel took it off without a consume: a dequeue, or an affinity,
 * cgroup or priority change, for which 6.17 calls no ops.dequeue) the
 * copy is marked stale, and the next reader peeks under the lock and
 * publishes what it finds. From 7.1 the kernel's own peek is lockless,
 * and nothing is published.
 */
#ifndef __SOFTPART_PART_QUEUE_BPF_H
#define __SOFTPART_PART_QUEUE_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"
#include "verify.bpf.h"
#include "stats.bpf.h"
#include "part.bpf.h"
#include "task.bpf.h"

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

/*
 * What the queue rules know of a task, copied so that it can be weighed
 * without the task: a partition's queue head (queue_head()), or the task
 * a CPU runs (task_view()). @found false: no task (an empty queue).
 */
struct queue_view {
	u64 vtime;
	u64 stopped_at;		/* when it last stopped; 0: never, or no context */
	u64 put_back_at;	/* held for put_back_cpu from then, for a slice; 0: not held */
	u64 overdue_at;		/* past the wait bound from then (head_overdue()); 0: not waiting */
	s32 put_back_cpu;
	u32 home_id;		/* SP_NO_HOME: no home, or no context */
	u32 home_part;		/* its home's partition (home_part()); SP_MAX_PARTS: no home */
	s32 pid;
	bool found;
	bool has_ctx;
	bool yielded;		/* a running task that gave its CPU up with sched_yield() */
};

/*
 * A partition's head as published for the other partitions' CPUs, in the
 * partition's own line. @stale: the head left and nobody has looked at
 * the queue since (see the top of this file).
 */
/* What dispatch() does with a busy CPU's task at its slice end (prev_keeps_cpu()). */
enum sp_keep {
	SP_KEEP_NONE,		/* hand the CPU over */
	SP_KEEP_HELD,		/* the head is held for another CPU */
	SP_KEEP_OWNER,		/* an owner keeps its CPU from a visitor */
	SP_KEEP_AHEAD,		/* not behind the head */
};

struct published_head {
	struct queue_view head;
	u32 stale;
	u32 pad;
};

_Static_assert(sizeof(struct published_head) == 64, "one cache line per partition");

struct published_head published_heads[SP_MAX_PARTS] __attribute__((aligned(64)));

/*
 * Does the kernel peek at a queue's head without the queue's lock? The
 * same test as __COMPAT_scx_bpf_dsq_peek()'s: the kfunc came with 6.19,
 * and could miss a head before 7.1. Resolved at load.
 */
static __always_inline bool peek_is_lockless(void)
{
	return bpf_ksym_exists(scx_bpf_dsq_peek) &&
	       LINUX_KERNEL_VERSION >= KERNEL_VERSION(7, 1, 0);
}

/*
 * @p (context @tctx, NULL if none) as the queue rules see it, at @vtime.
 * @queued: as a queue's head, with what only a waiting task has (its
 * hold, its wait bound, its home's partition); else as the task a CPU
 * runs, with its home only, which keeps the many paths of dispatch()
 * that weigh it short for the verifier.
 */
static __always_inline struct queue_view view_of(struct task_struct *p, struct task_ctx *tctx,
						 u64 vtime, bool queued)
{
	struct queue_view v = {
		.vtime = vtime,
		.home_id = SP_NO_HOME,
		.home_part = SP_MAX_PARTS,
		.pid = p->pid,
		.found = true,
	};
	const struct cpumask *home;

	if (!tctx)
		return v;
	v.has_ctx = true;
	home = home_of(tctx);
	if (home)
		v.home_id = tctx->home.id;
	if (!queued) {
		v.yielded = tctx->queue.yielded;
		return v;
	}
	v.stopped_at = tctx->run.stopped_at;
	v.put_back_at = tctx->queue.put_back_at;
	v.put_back_cpu = tctx->queue.put_back_cpu;
	v.overdue_at = tctx->queue.runnable_at ? tctx->queue.runnable_at + lead_cap(tctx) : 0;
	if (home)
		v.home_part = home_part(home);
	return v;
}

/* The task @p that runs on a CPU, as the queue rules see it. */
static __always_inline struct queue_view task_view(struct task_struct *p)
{
	return view_of(p, lookup_tctx(p), p->scx.dsq_vtime, false);
}

static __always_inline struct published_head *published_head(u32 part)
{
	if (part >= SP_MAX_PARTS)
		return NULL;
	barrier_var(part);
	return &published_heads[part];
}

/*
 * @part's head is @v, as seen under the queue's lock: written only if it
 * differs from the copy, so that the partition's CPUs, which see it at
 * every dispatch, do not take the line from its readers for nothing.
 * Verified alone (verify.bpf.h), as peek_head().
 */
__verified_alone int publish_head(u32 part, const struct queue_view *v)
{
	struct published_head *ph = published_head(part);

	if (!ph || !v || peek_is_lockless())
		return 0;
	if (!ph->stale && ph->head.found == v->found && ph->head.pid == v->pid &&
	    ph->head.vtime == v->vtime && ph->head.put_back_at == v->put_back_at &&
	    ph->head.home_id == v->home_id)
		return 0;
	ph->head = *v;
	ph->stale = 0;
	return 0;
}

/*
 * @part's head, peeked at (under the queue's lock before 7.1), into @v.
 * Verified alone (verify.bpf.h): queue_head() and take_head() both peek,
 * and each copy of the queue's iterator and of the head's fields costs
 * the verifier thousands of instructions.
 */
__verified_alone int peek_head(u32 part, struct queue_view *v)
{
	struct task_struct *p;

	if (!v)
		return -EINVAL;
	*v = (struct queue_view){};
	p = __COMPAT_scx_bpf_dsq_peek(part_dsq(part));
	if (p)
		*v = view_of(p, lookup_tctx(p), p->scx.dsq_vtime, true);
	return 0;
}

/*
 * @part's queue head, for a CPU of any partition, into @v. The
 * partition's own CPUs (and every CPU from 7.1) peek at it, and publish
 * what they see; another partition's CPU reads the published copy, and
 * peeks under the lock only when that copy is marked stale. Verified
 * alone (verify.bpf.h): dispatch() and the walks over partitions read
 * heads on many paths, and the three ways to read one, walked again at
 * each, more than tripled dispatch()'s verification.
 */
__verified_alone int queue_head(u32 part, struct queue_view *v)
{
	struct published_head *ph;

	if (!v)
		return -EINVAL;
	if (part == part_of_cpu(bpf_get_smp_processor_id()) || peek_is_lockless()) {
		peek_head(part, v);
		publish_head(part, v);
		return 0;
	}
	diag_inc(SP_STAT_PART_HEADS_READ);
	ph = published_head(part);
	if (!ph) {
		*v = (struct queue_view){};
		return 0;
	}
	if (!ph->stale) {
		*v = ph->head;
		return 0;
	}
	diag_inc(SP_STAT_PART_HEADS_LOCKED);
	peek_head(part, v);
	publish_head(part, v);
	return 0;
}

/*
 * Moves @part's head to this CPU's local queue, and publishes the next
 * head: the lock the move took is this CPU's already. True if it moved.
 * Verified alone (verify.bpf.h), as queue_head().
 */
__verified_alone bool take_head(u32 part)
{
	struct queue_view v;

	if (!scx_bpf_dsq_move_to_local(part_dsq(part), 0))
		return false;
	if (!peek_is_lockless()) {
		if (part != part_of_cpu(bpf_get_smp_processor_id()))
			diag_inc(SP_STAT_PART_HEADS_LOCKED);
		peek_head(part, &v);
		publish_head(part, &v);
	}
	return true;
}

/*
 * @p (context @tctx) was put in @part's queue at @vtime (its insert lands
 * when the calling callback returns): counted, and published if it is
 * now the head.
 */
static void note_queued(struct task_struct *p, struct task_ctx *tctx, u32 part, u64 vtime)
{
	struct published_head *ph = published_head(part);

	count_queued(part);
	if (tctx) {
		tctx->queue.part = part + 1;
		if (diag)
			tctx->queue.round = part_rounds(part);
	}
	if (!ph || peek_is_lockless())
		return;
	if (ph->head.found && !ph->stale && !time_before(vtime, ph->head.vtime))
		return;
	ph->head = view_of(p, tctx, vtime, true);
	ph->stale = 0;
}

/*
 * @p (context @tctx), counted in a partition queue (part_queued), has
 * left it: it runs, or was dequeued, or is being queued again. If it was
 * the published head and nobody has published since, the copy is stale.
 */
static __always_inline void note_left_queue(struct task_struct *p, struct task_ctx *tctx)
{
	struct published_head *ph;
	u32 part;

	if (!tctx->queue.part)
		return;
	part = tctx->queue.part - 1;
	count_unqueued(part);
	tctx->queue.part = 0;
	ph = published_head(part);
	if (ph && !peek_is_lockless() && ph->head.found && ph->head.pid == p->pid &&
	    !ph->stale)
		ph->stale = 1;
}

/* Queue @p in @part's queue by vtime, remembering where it waits. */
static __always_inline void queue_in_part(struct task_struct *p, struct task_ctx *tctx,
					  u32 part, u64 enq_flags)
{
	u64 vtime = task_vtime(p, tctx, part);

	scx_bpf_dsq_insert_vtime(p, part_dsq(part), slice_ns, vtime, enq_flags);
	note_queued(p, tctx, part, vtime);
	if (tctx) {
		tctx->queue.at_lead = at_lead_cap(tctx, part, vtime);
		note_owner_queued(tctx, part);
	}
}

#endif /* __SOFTPART_PART_QUEUE_BPF_H */
