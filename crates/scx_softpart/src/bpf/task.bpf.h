/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Each task's context, and its home: its own (set by the control plane,
 * inherited at fork), else its cgroup's or the nearest ancestor's, always
 * intersected with its allowed CPUs (softpart never widens affinity).
 */
#ifndef __SOFTPART_TASK_BPF_H
#define __SOFTPART_TASK_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "config.bpf.h"
#include "verify.bpf.h"
#include "stats.bpf.h"
#include "cgroup.bpf.h"
#include "part.bpf.h"

#ifndef PF_EXITING
#define PF_EXITING 0x00000004 /* include/linux/sched.h */
#endif

/* Furthest a task is queued ahead of the vtime clock (see task_vtime()). */
#define SP_MAX_LEAD_NS 250000000ULL
/*
 * The same for a task under a cgroup with cpu.idle: a slice per 2 s at
 * least (the kernel gives an idle cgroup a weight of 3/1024 of a nice-0
 * task's), still far from the 30 s watchdog.
 */
#define SP_MAX_LEAD_IDLE_NS 2000000000ULL

struct home_ctx {
	struct bpf_cpumask __kptr *cpus;
	/* The home's NUMA node(s): where to spill first. */
	struct bpf_cpumask __kptr *near;
	/* The nodes its CPUs are on (bit n: node n), for per-node lookups. */
	u64 nodes;
	/*
	 * Bumped after each redefinition of its CPUs (set_home): its tasks
	 * take them again, and no other task does.
	 */
	u64 gen;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_MAX_HOMES);
	__type(key, u32);
	__type(value, struct home_ctx);
} homes SEC(".maps");

/* tid -> home id. Written by the control plane, and here at fork. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_MAX_TASK_HOMES);
	__type(key, u32);
	__type(value, u32);
} task_homes SEC(".maps");

/* cgroup v2 id -> home id. Written by the control plane. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_MAX_CGROUP_HOMES);
	__type(key, u64);
	__type(value, u32);
} cgroup_homes SEC(".maps");

/*
 * Where a homed task last started running, against its home then
 * (task_ctx.where.ran; left as it was while the task has no home).
 */
enum sp_ran {
	SP_RAN_AWAY,		/* outside its home: a visitor there */
	SP_RAN_HOME,		/* inside its home */
	SP_RAN_NOT_YET,		/* not run since it was created */
};

/*
 * A task's context, one part per concept, with the header whose rules use
 * it named beside it; main.bpf.c's callbacks write the transitions (a
 * wakeup, a run's start and end, a queue left).
 */

/* Its home as resolved (this file). */
struct task_home {
	u32 id;			/* home ∩ allowed is usable: SP_NO_HOME if not */
	/*
	 * The home id it found (usable or not: wholly outside its allowed
	 * CPUs, or none online), and that home's home_ctx.gen then
	 */
	u32 found;
	u64 found_gen;
	u64 resolved_at;	/* homes_gen the home was resolved at */
	/* changed while it ran at home: its next cross-node move is that */
	u32 rehomed;
};

/* Where it runs against its home (place.bpf.h, visitor.bpf.h, home.bpf.h). */
struct task_where {
	s32 last_cpu;		/* where it last ran; -1 before its first run */
	u32 ran;		/* enum sp_ran */
	/* first of the checks in a row that saw room at home while away; 0: none */
	u64 room_since;
	/* what put it where it runs next (enum sp_via), for SP_STAT_XNODE_* */
	u32 via;
	/* a visitor its CPU switches out for a task with no home: hold it there */
	u32 hold_away;
	/* --diag: the CPU that passed this visitor for a homeless task, + 1 */
	u32 passed_cpu;
};

/* Its place in a queue (part_queue.bpf.h). */
struct task_queue {
	u64 runnable_at;	/* when it last began to wait; 0 if not waiting */
	/* queued in a partition queue, not yet run: that partition + 1; 0: not */
	u32 part;
	/* put back in its CPU's partition queue: held for put_back_cpu; 0: not */
	s32 put_back_cpu;
	u64 put_back_at;
	/* gave up its CPU with sched_yield() to a waiting task; cleared when it runs */
	u32 yielded;
	/*
	 * queued at its queue's lead cap (clock + lead_cap()): its start does
	 * not move the clock (running())
	 */
	u32 at_lead;
	/* --diag: its queue's rounds (part_state.rounds) when it was queued */
	u64 round;
	/* a per-CPU kthread counted in kthreads_queued, not yet run */
	u32 kthread;
};

/* Its runs, as charged (running() and stopping(), part.bpf.h's clock). */
struct task_run {
	u64 started_ns;		/* last charged */
	u64 exec_ns;		/* its se.sum_exec_runtime when last charged */
	u64 stopped_at;		/* when it last stopped running; 0 before its first run */
	u64 vtime;		/* vtime it last started running with */
};

/* Its cgroup in the CPU contract (cgroup.bpf.h). */
struct task_cgroup {
	/* its cgroup's slot, and that slot's generation then; read through task_slot() */
	u32 slot;
	u32 gen;
	/* counted runnable in cg_loads: in this slot, with this weight */
	u32 counted_slot;
	u32 counted_weight;
};

struct task_ctx {
	/* home ∩ allowed, valid while home.id != SP_NO_HOME */
	struct bpf_cpumask __kptr *home_mask;
	/* scratch: partition ∩ allowed, near ∩ allowed */
	struct bpf_cpumask __kptr *scratch;
	struct task_home home;
	struct task_where where;
	struct task_queue queue;
	struct task_run run;
	struct task_cgroup cg;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

static __always_inline struct task_ctx *lookup_tctx(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, p, 0, 0);
}

/* The cgroup slot @tctx's task is charged to now; SP_NO_CGROUP if none. */
static __always_inline u32 task_slot(struct task_ctx *tctx)
{
	return tctx ? live_slot(tctx->cg.slot, tctx->cg.gen) : SP_NO_CGROUP;
}

/* @tctx's task is in @cgrp from now on. */
static __always_inline void set_task_cgroup(struct task_ctx *tctx, struct cgroup *cgrp)
{
	struct sp_cgroup *cg;

	tctx->cg.slot = slot_of(cgrp);
	cg = cgroup_at(tctx->cg.slot);
	tctx->cg.gen = cg ? READ_ONCE(cg->slot_gen) : 0;
}

/*
 * The home of the task's cgroup or of its nearest ancestor that has one.
 * The default hierarchy's cgroup, not scx_bpf_task_cgroup()'s: that one is
 * the cpu controller's, which is the root unless the controller is enabled
 * down to the task.
 */
static u32 cgroup_home(struct task_struct *p)
{
	struct cgroup *cg, *anc;
	u32 home = SP_NO_HOME, *h;
	int level, i;

	cg = p->cgroups->dfl_cgrp;
	if (!cg)
		return SP_NO_HOME;
	level = cg->level;
	bpf_for(i, 0, SP_MAX_CGROUP_DEPTH) {
		u64 id;

		if (level - i < 0)
			break;
		anc = bpf_cgroup_ancestor(cg, level - i);
		if (!anc)
			break;
		id = anc->kn->id;
		bpf_cgroup_release(anc);
		h = bpf_map_lookup_elem(&cgroup_homes, &id);
		if (h) {
			home = *h;
			break;
		}
	}
	return home;
}

/* The CPUs of the task's home were redefined since it took them. */
static __always_inline bool home_redefined(struct task_ctx *tctx)
{
	u32 id = tctx->home.found;
	struct home_ctx *h;

	if (id >= nr_homes)
		return false;
	h = bpf_map_lookup_elem(&homes, &id);
	return h && READ_ONCE(h->gen) != tctx->home.found_gen;
}

/*
 * Looks the task's home up again if which home is whose changed since it
 * last did (homes_gen: a task's or a cgroup's home set or cleared), or
 * its own home's CPUs did (home_ctx.gen: a balancer move, a redefinition).
 */
static void refresh_home(struct task_struct *p, struct task_ctx *tctx)
{
	u32 tid = p->pid, home, *th;
	struct bpf_cpumask *mask;
	struct home_ctx *h;
	u64 gen;

	if (tctx->home.resolved_at == homes_gen && !home_redefined(tctx))
		return;
	tctx->home.resolved_at = homes_gen;
	tctx->home.id = SP_NO_HOME;
	tctx->home.found = SP_NO_HOME;
	stat_inc(SP_STAT_HOME_RESOLVE);

	th = bpf_map_lookup_elem(&task_homes, &tid);
	home = th ? *th : cgroup_home(p);
	if (home >= nr_homes)
		return;
	h = bpf_map_lookup_elem(&homes, &home);
	if (!h)
		return;
	/* Before the CPUs: a redefinition meanwhile is seen at the next call. */
	gen = READ_ONCE(h->gen);
	barrier();
	tctx->home.found = home;
	tctx->home.found_gen = gen;
	if (!h->cpus || !tctx->home_mask)
		return;
	/* A home wholly outside the allowed set is ignored. */
	if (!bpf_cpumask_and(tctx->home_mask, cast_mask(h->cpus), p->cpus_ptr))
		return;
	tctx->home.id = home;
	/* Loaded once, so that the verifier sees the pointer it checked. */
	mask = tctx->home_mask;
	if (mask && tctx->where.ran == SP_RAN_HOME && tctx->where.last_cpu >= 0 &&
	    !bpf_cpumask_test_cpu(tctx->where.last_cpu, cast_mask(mask)))
		tctx->home.rehomed = 1;
}

static __always_inline bool homed(struct task_ctx *tctx)
{
	return tctx->home.id < SP_MAX_HOMES && tctx->home_mask;
}

/* The partition whose queue a homed task waits in: its home's first CPU's. */
static __always_inline u32 home_part(const struct cpumask *home)
{
	return part_of_cpu(bpf_cpumask_first(home));
}

/*
 * The task's home ∩ allowed, or NULL without one. Loaded once, so that the
 * verifier sees the very pointer that was checked.
 */
static __always_inline const struct cpumask *home_of(struct task_ctx *tctx)
{
	struct bpf_cpumask *home = tctx->home_mask;

	if (tctx->home.id >= SP_MAX_HOMES || !home)
		return NULL;
	return cast_mask(home);
}

/*
 * Does home @hid hold @cpu? Its CPUs as the control plane set them, not
 * intersected with any task's allowed set: for a task known by its home
 * id only (a partition's published queue head), on a CPU where, if it
 * may not run, nothing moves it. Verified alone (verify.bpf.h): the queue
 * rules ask it up to four times on one path of dispatch().
 */
__verified_alone bool home_holds(u32 hid, s32 cpu)
{
	struct home_ctx *h;
	struct bpf_cpumask *cpus;

	if (hid >= nr_homes)
		return false;
	h = bpf_map_lookup_elem(&homes, &hid);
	if (!h)
		return false;
	cpus = h->cpus;
	return cpus && bpf_cpumask_test_cpu(cpu, cast_mask(cpus));
}

/*
 * The NUMA nodes (bit n: node n) of @cpus, the task's home (∩ allowed)
 * or, for a task without one (@tctx NULL or homeless), a partition's CPUs
 * (∩ allowed): the home's nodes, else the node of @cpus' first CPU (a
 * partition is a node, or an LLC within one). For the per-node masks.
 */
static __always_inline u64 nodes_of(struct task_ctx *tctx, const struct cpumask *cpus)
{
	struct home_ctx *h;
	u32 hid, node;

	if (tctx && homed(tctx)) {
		hid = tctx->home.id;
		h = bpf_map_lookup_elem(&homes, &hid);
		if (h)
			return h->nodes;
	}
	node = cpu_attr(cpu_node, bpf_cpumask_first(cpus));
	return node < SP_MAX_NODES ? 1ULL << node : 0;
}

/* The homed task runs on @cpu away from its home: a visitor there. */
static __always_inline bool away_on(struct task_ctx *tctx, s32 cpu)
{
	const struct cpumask *home = home_of(tctx);

	return home && !bpf_cpumask_test_cpu(cpu, home);
}

/* Scratch := a ∩ allowed; NULL if that cannot be built or is empty. */
static const struct cpumask *and_allowed(struct task_struct *p, struct task_ctx *tctx,
					 const struct cpumask *a)
{
	if (!a || !tctx->scratch)
		return NULL;
	if (!bpf_cpumask_and(tctx->scratch, a, p->cpus_ptr))
		return NULL;
	return cast_mask(tctx->scratch);
}

static __always_inline u64 lead_cap(struct task_ctx *tctx)
{
	struct sp_cg_ctl *c = ctl_of(task_slot(tctx));

	return c && c->idle_under ? SP_MAX_LEAD_IDLE_NS : SP_MAX_LEAD_NS;
}

/*
 * Where a task queues on @part's vtime clock: a sleeper keeps at most
 * slice_lag_ns of credit, and no task is put further ahead than what its
 * last run cost it (at least a whole slice's cost; a task of a low weight,
 * or of a cgroup far above its entitlement, pays more per ns run), nor
 * than SP_MAX_LEAD_NS. The first bound is EEVDF's on a request's virtual
 * deadline. The second leaves a task put back after its run where that
 * run put it, however far a late tick let the slice run over, and brings
 * one that comes from a partition whose clock is ahead to this clock plus
 * that run. The third keeps the vtimes of one queue within SP_MAX_LEAD_NS
 * of its clock; the wait itself is bounded by age (head_overdue(),
 * queue.bpf.h), which no ordering overrides: a task gets at least a slice
 * per SP_MAX_LEAD_NS however low its weight (a task under cpu.idle: per
 * SP_MAX_LEAD_IDLE_NS).
 */
static __always_inline u64 clamp_vtime(u64 vtime, struct task_struct *p, struct task_ctx *tctx,
					u32 part)
{
	u64 vtime_now = part_clock(part);
	u64 ahead = vtime_cost(slice_ns, task_slot(tctx), p->scx.weight);

	if (tctx && time_before(tctx->run.vtime + ahead, vtime))
		ahead = vtime - tctx->run.vtime;
	if (ahead > lead_cap(tctx))
		ahead = lead_cap(tctx);

	if (time_before(vtime, vtime_now - slice_lag_ns))
		vtime = vtime_now - slice_lag_ns;
	else if (time_before(vtime_now + ahead, vtime))
		vtime = vtime_now + ahead;
	return vtime;
}

/*
 * Was @vtime, where a task of @tctx queues in @part, put at the lead cap?
 * Such a task (a cgroup charged far above its entitlement: a weight of 1
 * beside 10,000) is SP_MAX_LEAD_NS ahead of the clock, and when it runs
 * (the wait bound, an idle CPU) it runs out of the clock's order: were its
 * start to move the clock, the clock would jump by the lead, every task
 * behind would be lifted level with it, and the next task waiting at the
 * lead cap would run that much sooner: a weight of 1 would get turns far
 * more often than one per SP_MAX_LEAD_NS.
 */
static __always_inline bool at_lead_cap(struct task_ctx *tctx, u32 part, u64 vtime)
{
	return !time_before(vtime, part_clock(part) + lead_cap(tctx));
}

static __always_inline u64 task_vtime(struct task_struct *p, struct task_ctx *tctx, u32 part)
{
	return clamp_vtime(p->scx.dsq_vtime, p, tctx, part);
}

/*
 * Keeps cg_loads' count of @p right: counted once while runnable, in
 * the slot and with the weight it was counted with, whatever changed since.
 */
static __always_inline void runnable_on(struct task_struct *p, struct task_ctx *tctx)
{
	if (tctx->cg.counted_slot != SP_NO_CGROUP)
		return;
	tctx->cg.counted_slot = task_slot(tctx);
	tctx->cg.counted_weight = p->scx.weight;
	count_runnable(tctx->cg.counted_slot, tctx->cg.counted_weight, 1);
}

static __always_inline void runnable_off(struct task_ctx *tctx)
{
	if (tctx->cg.counted_slot == SP_NO_CGROUP)
		return;
	count_runnable(tctx->cg.counted_slot, tctx->cg.counted_weight, -1);
	tctx->cg.counted_slot = SP_NO_CGROUP;
}

/*
 * When a task homed in @part last queued there (an owner waiting):
 * visitors then wait at their own homes (queue_part_away()). Written by the
 * partition's CPUs with plain stores, at most once per eighth of a slice,
 * so that the line is not bounced at every enqueue.
 */
static __always_inline void note_owner_queued(struct task_ctx *tctx, u32 part)
{
	const struct cpumask *home = home_of(tctx);
	struct part_state *ps = part_state(part);
	u64 now;

	if (!home || home_part(home) != part || !ps)
		return;
	now = now_ns();
	if (!time_before(now, ps->owner_queued_at + slice_ns / 8))
		ps->owner_queued_at = now;
}

/* Has a task homed in @part queued there within the last slice? */
static __always_inline bool owner_queued_lately(u32 part)
{
	struct part_state *ps = part_state(part);

	return ps && time_before(now_ns(), ps->owner_queued_at + slice_ns);
}

/*
 * @p may not leave its CPU for now (migrate_disable()). Read from the task
 * itself, not through the scx library's helper, which needs the kernel's
 * config file (CONFIG_PREEMPT_RCU) at load: hosts and images without
 * /boot/config-* could not load the scheduler at all. For the current
 * task a count of 1 may be this program's own prolog (kernels with
 * PREEMPT_RCU, or before 6.18): taken as "may migrate". If it was a
 * real migrate_disable(), the kernel still keeps the task on its CPU:
 * no other CPU may move it to its local queue, so it waits in the
 * partition's queue for its own CPU instead of in that CPU's local one.
 */
static __always_inline bool migration_held(struct task_struct *p)
{
	if (!bpf_core_field_exists(p->migration_disabled))
		return false;
	if (p == bpf_get_current_task_btf())
		return p->migration_disabled > 1;
	return p->migration_disabled;
}

#endif /* __SOFTPART_TASK_BPF_H */
