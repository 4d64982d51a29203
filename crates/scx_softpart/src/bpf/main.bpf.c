/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_softpart: the BPF fast path.
 *
 * CPUs are grouped into partitions (by default one per NUMA node, or per LLC
 * when a node has several); each partition has one vtime-ordered DSQ. A task
 * may have a home (preferred CPUs, always intersected with its allowed set:
 * softpart never widens affinity), from its own setting, inherited at fork,
 * or from its cgroup or an ancestor's. A task without a home treats the
 * partition it last ran in as one.
 *
 * - select_cpu: prev if idle and at home, an idle whole core at home, an
 *   idle SMT sibling of prev (seed 002), an idle CPU at home (optionally a
 *   bounded scan, seed 003), then away from home nearest first (seed 001):
 *   prev, the home's node(s), anything allowed. With the softness flag set
 *   for the home (seed 000's ratio, computed by the control plane) the
 *   allowed set is searched first.
 * - Owners first: a homed task with no idle CPU at home takes a home CPU
 *   from a visitor (a homed task running away from its own home) before it
 *   spills; the visitor, preempted, goes the same way towards its own home.
 *   A task running away from home returns at its next slice end when its
 *   home has an idle CPU or a visitor.
 * - enqueue: a task that found no idle CPU queues at home (its home's
 *   partition) and any idle CPU that may run it is kicked: no CPU stays
 *   idle while work it may run waits.
 * - dispatch: a CPU serves its own partition; only when it would
 *   otherwise go idle does it take work from the others, nearest first (a
 *   busy CPU pulling remote work would only import visitors).
 * - slice end of the last runnable task (SCX_OPS_ENQ_LAST): a task away
 *   from home goes back when its home has room, else keeps its CPU.
 *
 * Everything that needs history (softness, group balancing) lives in the
 * Rust control plane; this file reads what it was given.
 */
#include <scx/common.bpf.h>
#include "intf.h"

/* Most slices a task is queued ahead of the vtime clock (see task_vtime). */
#define SP_MAX_LEAD 10

#ifndef PF_EXITING
#define PF_EXITING 0x00000004 /* include/linux/sched.h */
#endif

char _license[] SEC("license") = "GPL";

/*
 * The clock of every timestamp here: the CPU's run-queue clock where the
 * kernel has scx_bpf_now() (6.14 and later), else bpf_ktime_get_ns().
 * bpf_ktime_get_ns() reads the machine's clocksource each call; where the
 * TSC is marked unstable, as on QEMU TCG guests, that is the HPET, whose
 * every read leaves the translated code for the emulator's device model,
 * and the callbacks that read it took tens of microseconds of guest time
 * per call
 * (docs/experiments.md, "The scheduler's clock"). The run-queue clock
 * comes from sched_clock: the TSC where there is one. Every timestamp is
 * compared only with another of this clock (across CPUs to within a tick
 * where the TSC is unstable; the comparisons tolerate that).
 */
static __always_inline u64 now_ns(void)
{
	return scx_bpf_now();
}

UEI_DEFINE(uei);

/* Set by the control plane before load. */
const volatile u32 nr_cpus = 1;
const volatile u32 nr_parts = 1;
const volatile u64 slice_ns = 3000000ULL;
const volatile u64 slice_lag_ns = 20000000ULL;
const volatile bool smt_enabled = true;
/* 0: search the whole home for an idle CPU; N: look at most at N cores. */
const volatile u32 scan_cores = 0;
/* Spill through the kernel's scx_bpf_select_cpu_and() where it has one. */
const volatile bool kernel_pick = true;
/* update_idle() looks at the queues again (off: --no-idle-recheck). */
const volatile bool idle_recheck = true;
/* A CPU going idle takes other partitions' waiting tasks (off: --no-steal). */
const volatile bool steal = true;
/*
 * ... but a CPU its owners just used takes only a head that has not run
 * for this long (owners_recent()); 0: any head at once (--steal-defer-us).
 */
const volatile u64 steal_defer_ns = 12000000ULL;
/*
 * How recently its owners must have used a CPU for it to defer: the steal
 * wait, or a slice without one (owner_window_us() in cli.rs).
 */
const volatile u64 owner_window_ns = 12000000ULL;
/* A task put back behind per-CPU kthreads waits for them (off: --no-wait-behind-kthreads). */
const volatile bool wait_behind_kthreads = true;
/* How long a task put back in its partition's queue is held for its CPU; 0: not (--no-hold-put-back). */
const volatile u64 hold_put_back_ns = 3000000ULL;
/* A task away from home may keep its slice at a yield (off: --yield-away-ends-slice). */
const volatile bool yield_away_keeps = true;
/* A sync wakeup may go onto the waker's CPU (--wake-sync). */
const volatile bool wake_sync;
/* Which wakeups spilling to an idle CPU wait in their home's queue (enum sp_queued_spill). */
const volatile u32 queued_spill = SP_QSPILL_SYNC;
/* A wakeup with no idle CPU may preempt a task that has run this long (--wakeup-preempt US; 0: never). */
const volatile u64 wakeup_preempt_ns;
/* Evict only a visitor whose own home has an idle CPU (off: --evict-always). */
const volatile bool evict_to_room = true;
/* A visitor switched out for a passing task waits for its CPU (off: --no-hold-visitors). */
const volatile bool hold_visitors = true;
/* What this load decided (kernel_pick and the kfunc present), for Rust. */
bool kernel_pick_used;
/*
 * The kernel's per-node idle masks (SCX_OPS_BUILTIN_IDLE_PER_NODE, 6.15 and
 * later), set by the control plane where the kernel has them and the
 * machine has several nodes: each node's idle mask sits in its own cache
 * lines, so wakeups on one node do not contend with another's, and a pick
 * starts in the given node and goes on by distance. The kernel then
 * refuses the machine-wide idle kfuncs, so every lookup below goes through
 * pick_idle() and any_idle().
 */
const volatile bool idle_per_node;
/* The nodes that have CPUs (any_idle() looks only at those). */
const volatile u32 nr_idle_nodes;
const volatile u32 idle_nodes[SP_MAX_NODES];
const volatile u32 threads_per_core = 1;
const volatile u32 cpu_part[SP_MAX_CPUS];
/* One SMT sibling of each CPU (itself if none). */
const volatile u32 cpu_sibling[SP_MAX_CPUS];
/* Core, LLC and NUMA node ids of each CPU, to class migrations. */
const volatile u32 cpu_core[SP_MAX_CPUS];
const volatile u32 cpu_llc[SP_MAX_CPUS];
const volatile u32 cpu_node[SP_MAX_CPUS];
/* part_order[p * SP_MAX_PARTS + i]: i-th nearest partition to p (i=0: p). */
const volatile u32 part_order[SP_MAX_PARTS * SP_MAX_PARTS];

/* Written by the control plane at run time. */
u64 homes_gen = 1;			/* bumped on every change of homes */
u32 allowed_first[SP_MAX_HOMES];	/* softness: search allowed set first */
/* A balanced home whose partition is over-full: no steal wait (head_stealable()). */
u32 steal_now[SP_MAX_HOMES];

/* Read by the control plane. */
u64 stats[SP_NR_STATS];
struct sp_group_stats group_stats[SP_NR_GROUP_SLOTS];
struct sp_part_stats part_stats[SP_MAX_PARTS];
/* CPU time of each group slot on each partition: [slot * SP_MAX_PARTS + part]. */
u64 group_part_ns[SP_NR_GROUP_SLOTS * SP_MAX_PARTS];
u64 cpu_busy_ns[SP_MAX_CPUS];
u32 scan_cursor[SP_MAX_CPUS];
/* While the CPU runs a homed task away from its home: that home's partition + 1; else 0. */
u32 cpu_visitor[SP_MAX_CPUS];
/*
 * The task each CPU runs: its vtime and the time it started (0: none, or
 * already chosen to be preempted), for --wakeup-preempt.
 */
u64 cpu_run_vtime[SP_MAX_CPUS];
u64 cpu_run_since[SP_MAX_CPUS];
/*
 * When the CPU was last handed a task while idle (select_cpu's pick, or
 * enqueue() sending a task to it); 0 once it runs a task or goes idle
 * again. A wakeup that spills while a home CPU has such a claim pending
 * found the home full only because that CPU had not yet woken up
 * (SP_STAT_SPILL_CLAIMED).
 */
u64 cpu_claimed_at[SP_MAX_CPUS];
/*
 * Per-CPU kthreads woken into the CPU's local queue (wait_behind_kthreads)
 * that have not run yet: while its local queue holds only these, a task
 * the CPU puts back waits there for them instead of moving.
 */
u32 cpu_kthreads_queued[SP_MAX_CPUS];
/*
 * When the CPU last stopped running a homed task at home (an owner of its
 * partition); 0 after a visitor. Steals are deferred only on a CPU whose
 * own partition's tasks used it this recently (see owners_recent()).
 */
u64 cpu_owner_stopped_at[SP_MAX_CPUS];

/* Global vtime clock: the largest vtime a task has started running with. */
static u64 vtime_now;

/* Run-delay histograms: group slots, then partitions (SP_NR_HISTS). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_NR_HISTS);
	__type(key, u32);
	__type(value, struct sp_hist);
} delay_hists SEC(".maps");

struct part_ctx {
	struct bpf_cpumask __kptr *cpus;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_MAX_PARTS);
	__type(key, u32);
	__type(value, struct part_ctx);
} parts SEC(".maps");

struct home_ctx {
	struct bpf_cpumask __kptr *cpus;
	struct bpf_cpumask __kptr *near;
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

struct task_ctx {
	/* home ∩ allowed, valid while home_id != SP_NO_HOME */
	struct bpf_cpumask __kptr *home;
	/* scratch: partition ∩ allowed, near ∩ allowed */
	struct bpf_cpumask __kptr *scratch;
	u64 gen;		/* homes_gen the home was resolved at */
	u64 started_ns;		/* last charged to utilisation */
	u64 runnable_at;	/* when it last began to wait; 0 if not waiting */
	s32 last_cpu;		/* where it last ran; -1 before its first run */
	u32 home_id;
	u32 at_home;		/* 0 away, 1 at home, 2 not yet run */
	/* first of the checks in a row that saw room at home while away; 0: none */
	u64 room_since;
	/* a per-CPU kthread counted in cpu_kthreads_queued[], not yet run */
	u32 kthread_queued;
	/* put back in its CPU's partition queue: held for put_back_cpu; 0: not */
	u64 put_back_at;
	s32 put_back_cpu;
	/* when it last stopped running; 0 before its first run */
	u64 stopped_at;
	/* queued in a partition queue, not yet run: that partition + 1; 0: not */
	u32 part_queued;
	/* what put it where it runs next (enum sp_via), for SP_STAT_XNODE_* */
	u32 via;
	/* a visitor its CPU switches out for a task with no home: hold it there */
	u32 hold_away;
	/*
	 * the CPU that switched this visitor out for a task with no home, + 1
	 * (0: none); marked with or without --no-hold-visitors, so that where
	 * it ran next compares the two (SP_STAT_PASSED_*)
	 */
	u32 passed_cpu;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

static __always_inline void stat_inc(enum sp_stat idx)
{
	if (idx < SP_NR_STATS)
		__sync_fetch_and_add(&stats[idx], 1);
}

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
 * Array indexes are checked, then passed through barrier_var() so that the
 * compiler indexes with the very register the verifier saw checked (it may
 * otherwise index through an unchecked copy).
 */
static __always_inline u32 part_of_cpu(s32 cpu)
{
	u32 c = cpu;

	if (c >= SP_MAX_CPUS)
		return 0;
	barrier_var(c);
	return cpu_part[c];
}

static __always_inline s32 sibling_of(s32 cpu)
{
	u32 c = cpu;

	if (c >= SP_MAX_CPUS)
		return cpu;
	barrier_var(c);
	return cpu_sibling[c];
}

static __always_inline bool softness_says_allowed_first(u32 hid)
{
	if (hid >= SP_MAX_HOMES)
		return false;
	barrier_var(hid);
	return allowed_first[hid];
}

static __always_inline bool home_steals_now(u32 hid)
{
	if (hid >= SP_MAX_HOMES)
		return false;
	barrier_var(hid);
	return steal_now[hid];
}

/* A home id's stats slot: its own, or the no-home one. */
static __always_inline u32 stats_slot(u32 hid)
{
	return hid > SP_NO_HOME ? SP_NO_HOME : hid;
}

static __always_inline struct sp_group_stats *group_stats_of(u32 hid)
{
	u32 slot = stats_slot(hid);

	if (slot >= SP_NR_GROUP_SLOTS)
		return &group_stats[SP_NO_HOME];
	barrier_var(slot);
	return &group_stats[slot];
}

static __always_inline struct sp_part_stats *part_stats_of(u32 part)
{
	if (part >= SP_MAX_PARTS)
		return NULL;
	barrier_var(part);
	return &part_stats[part];
}

static __always_inline u32 cpu_attr(const volatile u32 *attr, s32 cpu)
{
	u32 c = cpu;

	if (c >= SP_MAX_CPUS)
		return 0;
	barrier_var(c);
	return attr[c];
}

/* An idle CPU of @cpus, claimed, searching @near_cpu's node first; or -1. */
static __always_inline s32 pick_idle(const struct cpumask *cpus, s32 near_cpu, u64 flags)
{
	u32 node;

	if (!idle_per_node)
		return scx_bpf_pick_idle_cpu(cpus, flags);
	/*
	 * A CPU that was offline when we attached has no known node: its
	 * cpu_node[] entry is an id of its own, past any node (main.rs), and
	 * the kernel ends the scheduler on a node id it does not have. Such
	 * a CPU runs tasks for a moment when it comes back, before the
	 * kernel detaches us for the hotplug: the soak lost scx_softpart to
	 * "invalid node 65540" (CPU 4) twice in 30 minutes so.
	 */
	node = cpu_attr(cpu_node, near_cpu);
	if (node >= SP_MAX_NODES)
		node = idle_nodes[0];
	return __COMPAT_scx_bpf_pick_idle_cpu_node(cpus, node, flags);
}

/* Is a CPU of @cpus idle? Claims nothing. */
static bool any_idle(const struct cpumask *cpus)
{
	const struct cpumask *idle;
	bool found = false;
	u32 i;

	if (!idle_per_node) {
		idle = scx_bpf_get_idle_cpumask();
		found = bpf_cpumask_intersects(cpus, idle);
		scx_bpf_put_idle_cpumask(idle);
		return found;
	}
	bpf_for(i, 0, nr_idle_nodes) {
		if (i >= SP_MAX_NODES)
			break;
		idle = __COMPAT_scx_bpf_get_idle_cpumask_node(idle_nodes[i]);
		found = bpf_cpumask_intersects(cpus, idle);
		scx_bpf_put_idle_cpumask(idle);
		if (found)
			break;
	}
	return found;
}

static __always_inline enum sp_dist migration_dist(s32 from, s32 to)
{
	if (cpu_attr(cpu_core, from) == cpu_attr(cpu_core, to))
		return SP_DIST_SMT;
	if (cpu_attr(cpu_llc, from) == cpu_attr(cpu_llc, to))
		return SP_DIST_LLC;
	if (cpu_attr(cpu_node, from) == cpu_attr(cpu_node, to))
		return SP_DIST_NODE;
	return SP_DIST_XNODE;
}

static __always_inline void hist_add(u32 slot, u64 v)
{
	struct sp_hist *h = bpf_map_lookup_elem(&delay_hists, &slot);
	u32 idx = sp_hist_bucket(v);

	if (h && idx < SP_HIST_NR_BUCKETS)
		__sync_fetch_and_add(&h->buckets[idx], 1);
}

/* A wait that ended with the task starting on @cpu. */
static void record_delay(struct task_ctx *tctx, s32 cpu, u64 now)
{
	struct sp_group_stats *gs = group_stats_of(tctx->home_id);
	u32 part = part_of_cpu(cpu);
	struct sp_part_stats *ps = part_stats_of(part);
	u64 delay;

	if (!tctx->runnable_at || now <= tctx->runnable_at) {
		tctx->runnable_at = 0;
		return;
	}
	delay = now - tctx->runnable_at;
	tctx->runnable_at = 0;
	__sync_fetch_and_add(&gs->delay_ns, delay);
	__sync_fetch_and_add(&gs->nr_delays, 1);
	hist_add(stats_slot(tctx->home_id), delay);
	if (ps) {
		__sync_fetch_and_add(&ps->delay_ns, delay);
		__sync_fetch_and_add(&ps->nr_delays, 1);
		hist_add(SP_NR_GROUP_SLOTS + part, delay);
	}
}

static __always_inline const struct cpumask *part_cpus(u32 part)
{
	struct part_ctx *pctx = bpf_map_lookup_elem(&parts, &part);

	if (!pctx || !pctx->cpus)
		return NULL;
	return cast_mask(pctx->cpus);
}

static __always_inline struct task_ctx *lookup_tctx(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, p, 0, 0);
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

/* Looks the task's home up again if any home changed since it last did. */
static void refresh_home(struct task_struct *p, struct task_ctx *tctx)
{
	u32 tid = p->pid, home, *th;
	struct home_ctx *h;

	if (tctx->gen == homes_gen)
		return;
	tctx->gen = homes_gen;
	tctx->home_id = SP_NO_HOME;
	stat_inc(SP_STAT_HOME_RESOLVE);

	th = bpf_map_lookup_elem(&task_homes, &tid);
	home = th ? *th : cgroup_home(p);
	if (home >= SP_MAX_HOMES)
		return;
	h = bpf_map_lookup_elem(&homes, &home);
	if (!h || !h->cpus || !tctx->home)
		return;
	/* A home wholly outside the allowed set is ignored. */
	if (bpf_cpumask_and(tctx->home, cast_mask(h->cpus), p->cpus_ptr))
		tctx->home_id = home;
}

static __always_inline bool homed(struct task_ctx *tctx)
{
	return tctx->home_id < SP_MAX_HOMES && tctx->home;
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

/* Seed 003: look at no more than scan_cores cores, starting where this CPU
 * stopped last time so that the search does not always favour low ids. */
static s32 scan_bounded(const struct cpumask *home)
{
	u32 me = bpf_get_smp_processor_id(), budget, seen = 0, start, i;

	if (me >= SP_MAX_CPUS)
		return -1;
	barrier_var(me);
	budget = scan_cores * threads_per_core;
	start = scan_cursor[me];
	bpf_for(i, 0, nr_cpus) {
		u32 cpu = (start + i) % nr_cpus;

		if (!bpf_cpumask_test_cpu(cpu, home))
			continue;
		if (scx_bpf_test_and_clear_cpu_idle(cpu)) {
			scan_cursor[me] = cpu + 1;
			return cpu;
		}
		if (++seen >= budget)
			break;
	}
	scan_cursor[me] = (start + i + 1) % nr_cpus;
	return -1;
}

/*
 * A home CPU running a visitor, claimed (so that two owners do not pick the
 * same one), or -1. Only a visitor whose own home partition has an idle
 * CPU is taken (evict_to_room): evicted, it goes to that CPU (enqueue(),
 * when nothing is queued at home) or queues there with it to serve the
 * queue. With none there it would only queue at home, and the owner gets this CPU anyway at
 * the visitor's slice end (dispatch() serves its own queue first); at a
 * full machine those swaps cost CPU time. Four cgroups of two hackbench
 * groups on 4n2c2t (the balancer, every partition over-full) got 0.96 /
 * 0.965 / 0.97x shared mode's CPU time in three boots against 0.90-0.93x
 * evicting every visitor, with evictions down from 51-58 to 7-8 per s; the
 * fitting cell (one group per cgroup) kept 96.5-97.5% exclusivity, where
 * never evicting gave 94.6% (docs/experiments.md, "Evictions toward
 * room").
 */
static s32 claim_visitor_cpu(const struct cpumask *home)
{
	u32 cpu;

	bpf_for(cpu, 0, nr_cpus) {
		u32 c = cpu, v;

		if (c >= SP_MAX_CPUS)
			break;
		barrier_var(c);
		v = cpu_visitor[c];
		if (!v || !bpf_cpumask_test_cpu(c, home))
			continue;
		if (evict_to_room) {
			const struct cpumask *vhome = part_cpus(v - 1);

			if (!vhome || !any_idle(vhome))
				continue;
		}
		if (__sync_val_compare_and_swap(&cpu_visitor[c], v, 0) == v)
			return c;
	}
	return -1;
}

/*
 * Is a CPU of @cpus marked in cpu_visitor[] (@visitors) or in
 * cpu_claimed_at[]? One loop for both, bounded by the machine's CPUs.
 */
static bool any_cpu_marked(const struct cpumask *cpus, bool visitors)
{
	u32 cpu;

	bpf_for(cpu, 0, nr_cpus) {
		u32 c = cpu;
		bool marked;

		if (c >= SP_MAX_CPUS)
			break;
		barrier_var(c);
		marked = visitors ? cpu_visitor[c] != 0 : cpu_claimed_at[c] != 0;
		if (marked && bpf_cpumask_test_cpu(c, cpus))
			return true;
	}
	return false;
}

/*
 * Does a CPU of @home run another partition's task? Then @home's queue is
 * a visitor's way back: a home CPU reaching a slice end takes it, so its
 * own visitor goes to its home's queue in turn, and two groups each
 * running in the other's partition swap back. Holding a visitor of such a
 * home where it is (hold_visitor_for_passing(), waiting behind kthreads)
 * kept swapped sysbench-memory groups apart: 83.7% exclusivity for the
 * least exclusive of four groups of 4 threads on 4-CPU partitions,
 * against 99.2% without (docs/experiments.md, "Visitors held for their CPU").
 */
static bool home_hosts_visitor(const struct cpumask *home)
{
	return any_cpu_marked(home, true);
}

static __always_inline void set_visitor(s32 cpu, u32 val)
{
	u32 c = cpu;

	if (c >= SP_MAX_CPUS)
		return;
	barrier_var(c);
	cpu_visitor[c] = val;
}

/*
 * Not inlined: inlined into enqueue(), the compiler indexed the array with
 * an earlier, unchecked copy of the CPU, which the verifier refused.
 */
static __noinline void set_claimed(s32 cpu, u64 at)
{
	u32 c = cpu;

	if (c >= SP_MAX_CPUS)
		return;
	barrier_var(c);
	cpu_claimed_at[c] = at;
}

/* Has a CPU of @cpus been handed a task that it does not run yet? */
static bool claim_pending(const struct cpumask *cpus)
{
	return any_cpu_marked(cpus, false);
}

/*
 * An idle CPU away from home: in @near (the home's node(s), allowed part)
 * first, then anywhere allowed; @allowed_first skips @near (softness).
 * Where the kernel has scx_bpf_select_cpu_and() (6.16 and later), its
 * topology-aware pick does this (prev, prev's SMT sibling, LLC, node, with
 * the kernel's per-node idle masks when enabled); elsewhere, or with
 * --no-kernel-pick, our own: prev, then @near, then whole cores, then any.
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
 * --wake-sync: a waker that says it is about to sleep (SCX_WAKE_SYNC, e.g.
 * a pipe write) hands its CPU to the wakee, as EEVDF's wake_affine() does
 * when its idle scan gives up: the wakee runs once the waker sleeps, with
 * no idle CPU to wake. Only where the waker's CPU is at the wakee's home,
 * allowed, with nothing queued on it, and the waker is not exiting.
 */
static __always_inline s32 waker_cpu(struct task_struct *p, const struct cpumask *home,
				     u64 wake_flags)
{
	struct task_struct *waker;
	s32 cpu;

	if (!wake_sync || !(wake_flags & SCX_WAKE_SYNC))
		return -1;
	cpu = bpf_get_smp_processor_id();
	waker = bpf_get_current_task_btf();
	if (waker->flags & PF_EXITING)
		return -1;
	if (!bpf_cpumask_test_cpu(cpu, home) || !bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
		return -1;
	if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu) > 0)
		return -1;
	return cpu;
}

static s32 pick_idle_cpu(struct task_struct *p, s32 prev, u64 wake_flags,
			 struct task_ctx *tctx, bool *evict)
{
	const struct cpumask *home = NULL, *near = NULL;
	struct home_ctx *h;
	u32 hid = tctx->home_id;
	s32 cpu;

	if (homed(tctx)) {
		home = cast_mask(tctx->home);
		h = bpf_map_lookup_elem(&homes, &hid);
		if (h && h->near)
			near = cast_mask(h->near);
		if (softness_says_allowed_first(hid))
			goto search_allowed;
	} else {
		home = and_allowed(p, tctx, part_cpus(part_of_cpu(prev)));
	}

	if (home) {
		cpu = waker_cpu(p, home, wake_flags);
		if (cpu >= 0) {
			stat_inc(SP_STAT_PICK_WAKER);
			return cpu;
		}
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
			/* No idle core: prev's sibling shares its L1/L2. */
			cpu = sibling_of(prev);
			if (cpu != prev && bpf_cpumask_test_cpu(cpu, home) &&
			    scx_bpf_test_and_clear_cpu_idle(cpu)) {
				stat_inc(SP_STAT_PICK_SIBLING);
				return cpu;
			}
		}
		cpu = scan_cores ? scan_bounded(home) : pick_idle(home, prev, 0);
		if (cpu >= 0) {
			stat_inc(SP_STAT_PICK_CPU_HOME);
			return cpu;
		}
		if (homed(tctx)) {
			cpu = claim_visitor_cpu(home);
			if (cpu >= 0) {
				stat_inc(SP_STAT_EVICT);
				*evict = true;
				return cpu;
			}
		}
	}

	/* Home full: spill, nearest first. */
	near = and_allowed(p, tctx, near);
	cpu = pick_away(p, prev, wake_flags, near, homed(tctx), false);
	if (cpu >= 0 && home && claim_pending(home))
		stat_inc(SP_STAT_SPILL_CLAIMED);
	return cpu;

search_allowed:
	return pick_away(p, prev, wake_flags, NULL, homed(tctx), true);
}

static __always_inline u64 task_vtime(struct task_struct *p);

/*
 * Whether @cpu defers its steals: only if its own partition's homed tasks
 * ran on it within owner_window_ns (the steal wait), so that they, and not
 * the other partition's, are likely to want it next. Owners that sleep a
 * few milliseconds at a time (pipe partners) leave their CPU idle for
 * longer than a slice and still want it back; with a one-slice window such
 * a CPU took the other partition's head at once, and two hackbench
 * instances crossed the nodes 1.3-1.8x as often (docs/experiments.md,
 * "Owners' CPUs defer for the whole steal wait"). A CPU that serves no
 * owners (a node left idle by a single instance, or running visitors)
 * steals at once: deferring there only leaves the CPU idle, and the instance
 * bursting into it loses the time (one sysbench-threads instance of 16
 * threads: 0.93x eevdf's CPU time at 500 us, 0.89x at 3 ms, against 0.98x;
 * docs/experiments.md, "Deferred steals").
 */
static __always_inline bool owner_used_recently(s32 cpu, u64 now)
{
	u32 c = cpu;
	u64 at;

	if (c >= SP_MAX_CPUS)
		return false;
	barrier_var(c);
	at = cpu_owner_stopped_at[c];
	return at && time_before(now, at + owner_window_ns);
}

static __always_inline bool owners_recent(s32 cpu, u64 now)
{
	return steal_defer_ns && owner_used_recently(cpu, now);
}

/*
 * Queued spills (--queued-spill, "sync" by default): a wakeup bound for an
 * idle CPU away from home waits in its home's queue instead of in that
 * CPU's local one, and the CPU is kicked: whichever comes first, a home
 * CPU freeing up or the kicked CPU (which takes from the queues as any CPU
 * leaving idle does), or any CPU about to go idle, runs it. In the idle
 * CPU's local queue nothing else could take it while that CPU wakes, which
 * for a halted vCPU on a busy TCG host takes milliseconds (docs/design.md,
 * Queued spills).
 */
static bool queue_spill(struct task_struct *p, struct task_ctx *tctx, s32 prev, s32 cpu,
			u64 wake_flags)
{
	u32 part;

	if (homed(tctx)) {
		const struct cpumask *home = cast_mask(tctx->home);

		if (bpf_cpumask_test_cpu(cpu, home))
			return false;
		part = part_of_cpu(bpf_cpumask_first(home));
	} else {
		/* Its partition is prev's; one it may run in (as in enqueue()). */
		part = part_of_cpu(prev);
		if (part_of_cpu(cpu) == part || !bpf_cpumask_test_cpu(prev, p->cpus_ptr))
			return false;
	}
	/*
	 * "sync": only when the waker says it is about to sleep on a CPU that
	 * serves that queue, so that one CPU at home is sure to free up soon
	 * and look there first (a pipe or socket write). Queuing every spill
	 * ("always") let home CPUs of tasks that yield or wake each other by
	 * futex take the queued task back while the kicked CPU woke to nothing:
	 * one sysbench-threads instance lost up to 15% of its CPU time.
	 * "owned" also queues a spill bound for a CPU that its own partition's
	 * tasks just used (owner_used_recently()): that CPU would defer
	 * stealing the task, so it should not be handed it directly either.
	 * The kicked CPU takes it by the steal rule (at once under
	 * --steal-defer-us 0, when only a home CPU freeing up first keeps it
	 * home); a CPU serving no owners (where that sysbench-threads instance
	 * bursts) is handed it as under "sync".
	 */
	if (queued_spill != SP_QSPILL_ALWAYS) {
		s32 this_cpu = bpf_get_smp_processor_id();

		if ((!(wake_flags & SCX_WAKE_SYNC) ||
		     (bpf_get_current_task_btf()->flags & PF_EXITING) ||
		     part_of_cpu(this_cpu) != part ||
		     !bpf_cpumask_test_cpu(this_cpu, p->cpus_ptr)) &&
		    !(queued_spill == SP_QSPILL_OWNED && owner_used_recently(cpu, now_ns())))
			return false;
	}
	scx_bpf_dsq_insert_vtime(p, SP_PART_DSQ_BASE + part, slice_ns, task_vtime(p), 0);
	tctx->part_queued = part + 1;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	stat_inc(SP_STAT_SPILL_QUEUED);
	return true;
}

s32 BPF_STRUCT_OPS(softpart_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	struct task_ctx *tctx = lookup_tctx(p);
	bool evict = false;
	s32 cpu;

	if (!tctx)
		return prev_cpu;
	refresh_home(p, tctx);
	cpu = pick_idle_cpu(p, prev_cpu, wake_flags, tctx, &evict);
	if (cpu >= 0) {
		if (queued_spill != SP_QSPILL_OFF && !evict &&
		    queue_spill(p, tctx, prev_cpu, cpu, wake_flags))
			return prev_cpu;
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
		if (evict) {
			tctx->via = SP_VIA_EVICT;
			scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
		} else {
			tctx->via = homed(tctx) &&
				!bpf_cpumask_test_cpu(cpu, cast_mask(tctx->home)) ?
				SP_VIA_WAKE_AWAY : SP_VIA_WAKE_HOME;
			set_claimed(cpu, now_ns());
		}
		return cpu;
	}
	stat_inc(SP_STAT_PICK_NONE);
	return prev_cpu;
}

/*
 * Where a task queues on the vtime clock: a sleeper keeps at most
 * slice_lag_ns of credit, and no task is put further ahead than one slice
 * scaled by its weight, i.e. what one whole slice costs it (a nice-19
 * task is charged 100x per ns run), and never more than SP_MAX_LEAD
 * slices. The first bound is EEVDF's on a request's virtual deadline; the
 * second keeps the wait of a very low weight task (nice > 10) from
 * growing with the overload times its weight: with weight 1 among ~25
 * busy tasks per CPU a lead of 100 slices meant waits of 15-18 s, near
 * the kernel's 30 s watchdog. Such tasks get up to 1/SP_MAX_LEAD of a
 * nice-0 task's share instead of 1/100 when CPUs are contended.
 */
static __always_inline u64 task_vtime(struct task_struct *p)
{
	u64 vtime = p->scx.dsq_vtime;
	u64 ahead = slice_ns * 100 / (p->scx.weight ? p->scx.weight : 1);

	if (ahead > SP_MAX_LEAD * slice_ns)
		ahead = SP_MAX_LEAD * slice_ns;

	if (time_before(vtime, vtime_now - slice_lag_ns))
		vtime = vtime_now - slice_lag_ns;
	else if (time_before(vtime_now + ahead, vtime))
		vtime = vtime_now + ahead;
	return vtime;
}

/*
 * How long a task away from home must have seen room there, at every check
 * in a row, before it goes back: 3/4 of a slice, so that a slice-bound task
 * goes at its second slice end with room (ticks make those a slice or more
 * apart), and a task that yields thousands of times per slice does not
 * chase a CPU idle for an instant at its second yield.
 */
#define SP_ROOM_LASTED_NS (slice_ns * 3 / 4)

static __always_inline bool room_lasted(const struct task_ctx *tctx, u64 now)
{
	return tctx->room_since &&
	       !time_before(now, tctx->room_since + SP_ROOM_LASTED_NS);
}

/* An idle CPU at home and nothing queued there; claims nothing. */
static bool home_has_room(const struct cpumask *home)
{
	if (scx_bpf_dsq_nr_queued(SP_PART_DSQ_BASE +
				  part_of_cpu(bpf_cpumask_first(home))) > 0)
		return false;
	return any_idle(home);
}

static __always_inline bool is_percpu_kthread(const struct task_struct *p)
{
	return (p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1;
}

/* Not inlined, for the verifier (see set_claimed()). */
static __noinline void count_kthread_queued(s32 cpu)
{
	u32 c = cpu;

	if (c >= SP_MAX_CPUS)
		return;
	barrier_var(c);
	/*
	 * No check of the local queue here: an insert from enqueue() lands
	 * there only after enqueue() returns.
	 */
	__sync_fetch_and_add(&cpu_kthreads_queued[c], 1);
}

/*
 * @cpu starts a task, @counted if it is a kthread count_kthread_queued()
 * counted. With the local queue then empty, any count left is stale (a
 * kthread dequeued without running, e.g. an affinity change) and dropped,
 * so that a task is never kept behind what it takes for kthreads.
 */
static __noinline void count_kthread_ran(s32 cpu, bool counted)
{
	u32 c = cpu;

	if (c >= SP_MAX_CPUS)
		return;
	barrier_var(c);
	if (!cpu_kthreads_queued[c])
		return;
	if (counted)
		__sync_fetch_and_sub(&cpu_kthreads_queued[c], 1);
	if (!scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | c))
		cpu_kthreads_queued[c] = 0;
}

/*
 * Is all @cpu has queued to run next per-CPU kthreads woken there, with no
 * task waiting at its partition? Then a task @cpu puts back (a slice end,
 * a yield, a kthread's turn) is best left to wait the kthreads' few
 * microseconds on @cpu: sent to an idle CPU it moved, and waited for that
 * CPU to wake, while @cpu ran the kthread and went idle. A lone sysbench
 * thread on the 8-vCPU guest waited so at every kworker on its CPU: 94% of
 * its waits ended on a CPU leaving idle, p99 2.6 ms against EEVDF's 0.2
 * (docs/experiments.md, "Waiting behind per-CPU kthreads").
 */
static __noinline bool kthreads_only_ahead(s32 cpu, u32 part)
{
	u32 c = cpu, ahead;
	s32 queued;

	if (c >= SP_MAX_CPUS)
		return false;
	barrier_var(c);
	ahead = cpu_kthreads_queued[c];
	if (!ahead || scx_bpf_dsq_nr_queued(SP_PART_DSQ_BASE + part))
		return false;
	queued = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | c);
	return queued > 0 && queued <= ahead;
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

/*
 * --wakeup-preempt: a woken task that found no idle CPU it may use, queued
 * at @cpus' partition, takes the turn of the task there that has run the
 * longest, if that task has run wakeup_preempt_ns and is behind the woken
 * one on the vtime clock (as EEVDF lets a wakee with an earlier deadline
 * preempt). Without it the wakee waits for a slice end or a sleep: on a
 * two-vCPU guest where no wakeup waits for a halted vCPU, two pipe pairs'
 * run delay p99 was 4-5x EEVDF's, with or without homes
 * (docs/experiments.md, vcpu-wake). The running task's vtime is read as it
 * started plus the time it has run, not scaled by its weight: for a nice-0
 * task that is exact; a heavier task (nice < 0) is taken to have used more
 * than it has and may be preempted sooner than its share says, a niced one
 * later.
 */
static void preempt_for_wakeup(struct task_struct *p, const struct cpumask *cpus)
{
	u64 now = now_ns(), vtime = task_vtime(p), oldest = now;
	s32 victim = -1;
	u32 cpu;

	bpf_for(cpu, 0, nr_cpus) {
		u32 c = cpu;
		u64 since, ran;

		if (c >= SP_MAX_CPUS)
			break;
		barrier_var(c);
		since = cpu_run_since[c];
		if (!since || since >= oldest || !bpf_cpumask_test_cpu(c, cpus))
			continue;
		ran = now - since;
		if (ran < wakeup_preempt_ns || !time_before(vtime, cpu_run_vtime[c] + ran))
			continue;
		oldest = since;
		victim = c;
	}
	if (victim < 0 || victim >= SP_MAX_CPUS)
		return;
	/* Chosen once: the next wakeup looks for another victim. */
	if (__sync_val_compare_and_swap(&cpu_run_since[victim], oldest, 0) != oldest)
		return;
	scx_bpf_kick_cpu(victim, SCX_KICK_PREEMPT);
	stat_inc(SP_STAT_WAKE_PREEMPT);
}

void BPF_STRUCT_OPS(softpart_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = lookup_tctx(p);
	s32 task_cpu = scx_bpf_task_cpu(p), cpu = -1;
	const struct cpumask *home = NULL;
	u32 part = part_of_cpu(task_cpu);
	bool hold_away = false;

	/*
	 * A task that may run only on a CPU this attachment left out of every
	 * partition: a CPU coming online, whose hotplug thread must run there
	 * before the kernel detaches us for it. No partition queue is served
	 * by that CPU, so the task goes straight to its local DSQ. Without
	 * this a guest run lost cpuhp/4 for 43 s, and the scheduler to the
	 * watchdog, when CPU 4 came back (docs/reliability.md).
	 */
	if (p->nr_cpus_allowed == 1) {
		const struct cpumask *part_mask = part_cpus(part);

		if (part_mask && !bpf_cpumask_test_cpu(task_cpu, part_mask)) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | task_cpu, slice_ns,
					   enq_flags);
			scx_bpf_kick_cpu(task_cpu, SCX_KICK_IDLE);
			return;
		}
	}

	/*
	 * A per-CPU kthread's wakeup: it can run nowhere else, so it goes
	 * straight to its CPU's local queue, ahead of the partition queue
	 * (which other CPUs would only look through), and counts there for
	 * kthreads_only_ahead(). Its later slice ends queue as any task's, so
	 * a kthread that keeps running shares the CPU by vtime.
	 */
	if (wait_behind_kthreads && tctx && is_percpu_kthread(p) && (enq_flags & SCX_ENQ_WAKEUP) &&
	    bpf_cpumask_test_cpu(task_cpu, p->cpus_ptr)) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | task_cpu, slice_ns, enq_flags);
		if (!tctx->kthread_queued) {
			tctx->kthread_queued = 1;
			count_kthread_queued(task_cpu);
		}
		scx_bpf_kick_cpu(task_cpu, SCX_KICK_IDLE);
		return;
	}

	if (tctx) {
		hold_away = tctx->hold_away;
		tctx->hold_away = 0;
		refresh_home(p, tctx);
		if (homed(tctx)) {
			home = cast_mask(tctx->home);
			if (!bpf_cpumask_test_cpu(task_cpu, home)) {
				/*
				 * Away from home: go back when there is room, i.e. an
				 * idle CPU and nothing queued at home, seen for most
				 * of a slice (room_lasted()): a CPU idle for an
				 * instant is not room, and chasing it costs two
				 * migrations.
				 */
				if (home_has_room(home) &&
				    (!(enq_flags & SCX_ENQ_LAST) ||
				     room_lasted(tctx, now_ns())))
					cpu = pick_idle(home, task_cpu, 0);
				if (cpu >= 0) {
					tctx->room_since = 0;
					scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
					set_claimed(cpu, now_ns());
					scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
					stat_inc(SP_STAT_RETURN_IDLE);
					tctx->via = SP_VIA_RETURN;
					return;
				}
				cpu = claim_visitor_cpu(home);
				if (cpu >= 0) {
					tctx->via = SP_VIA_EVICT;
					scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
					scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
					stat_inc(SP_STAT_EVICT);
					return;
				}
				/* Nothing else wants this CPU: keep running here. */
				if (enq_flags & SCX_ENQ_LAST) {
					keep_last(p, task_cpu, enq_flags);
					return;
				}
				/* Queue at home, on a partition with a CPU it may use. */
				part = part_of_cpu(bpf_cpumask_first(home));
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

	/*
	 * Put back behind per-CPU kthreads only: wait for them here. A visitor
	 * too (unless --no-hold-visitors), as long as its home runs only its
	 * own: queued there, it would start a chain of swaps
	 * (hold_visitor_for_passing()).
	 */
	if (wait_behind_kthreads && !(enq_flags & SCX_ENQ_WAKEUP) &&
	    (part == part_of_cpu(task_cpu) || hold_visitors) &&
	    bpf_cpumask_test_cpu(task_cpu, p->cpus_ptr) &&
	    kthreads_only_ahead(task_cpu, part_of_cpu(task_cpu)) &&
	    (part == part_of_cpu(task_cpu) || !home || !home_hosts_visitor(home))) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, enq_flags);
		stat_inc(SP_STAT_KTHREAD_WAIT);
		return;
	}

	/*
	 * Room at home (an idle CPU, nobody queued): straight onto that CPU.
	 * Queued and kicked instead, the task could be taken by a CPU of
	 * another partition going idle before the kicked one wakes, and run
	 * away from a home with room. Under the balancer, sysbench-memory and
	 * redis groups spent 89-97% of their time away so; with this their
	 * least exclusive group went from 94.5% and 91.2% to 99.2% and 99.0%.
	 */
	if (home && !scx_bpf_dsq_nr_queued(SP_PART_DSQ_BASE + part)) {
		cpu = pick_idle(home, task_cpu, 0);
		if (cpu >= 0) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
			set_claimed(cpu, now_ns());
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
			stat_inc(SP_STAT_ENQUEUE_IDLE);
			if (tctx)
				tctx->via = SP_VIA_ENQUEUE_IDLE;
			return;
		}
	}

	/* Held put-backs (off: --no-hold-put-back); see head_held_elsewhere(). */
	if (hold_put_back_ns && tctx) {
		if (!(enq_flags & SCX_ENQ_WAKEUP) &&
		    (part == part_of_cpu(task_cpu) || hold_away)) {
			tctx->put_back_cpu = task_cpu;
			tctx->put_back_at = now_ns();
			stat_inc(SP_STAT_PUT_BACK_HELD);
			if (part != part_of_cpu(task_cpu))
				stat_inc(SP_STAT_PUT_BACK_HELD_AWAY);
		} else {
			tctx->put_back_at = 0;
		}
	}
	scx_bpf_dsq_insert_vtime(p, SP_PART_DSQ_BASE + part, slice_ns,
				 task_vtime(p), enq_flags);
	stat_inc(SP_STAT_ENQUEUE);
	if (tctx)
		tctx->part_queued = part + 1;

	/* "If there is idle, we use it": wake an idle CPU that may run p. */
	if (home)
		cpu = pick_idle(home, task_cpu, 0);
	if (cpu < 0)
		cpu = pick_idle(p->cpus_ptr, task_cpu, 0);
	if (cpu >= 0) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		stat_inc(SP_STAT_KICK);
	} else if (wakeup_preempt_ns && home && (enq_flags & SCX_ENQ_WAKEUP)) {
		preempt_for_wakeup(p, home);
	}
}

/*
 * At the end of a slice (or a sched_yield()) with nothing else to run: is
 * @p away from home with room there, seen at every such check for
 * SP_ROOM_LASTED_NS? sysbench threads yields while it runs; counting
 * checks instead of time, two yields microseconds apart were "two slice
 * ends in a row" and its threads went home at every blink of an idle home
 * CPU (docs/experiments.md, one-sysbench-threads).
 */
static bool should_go_home(struct task_struct *p, s32 cpu)
{
	struct task_ctx *tctx = lookup_tctx(p);
	const struct cpumask *home;
	u64 now;

	if (!tctx)
		return false;
	refresh_home(p, tctx);
	if (!homed(tctx))
		return false;
	home = cast_mask(tctx->home);
	if (bpf_cpumask_test_cpu(cpu, home) || !home_has_room(home)) {
		tctx->room_since = 0;
		return false;
	}
	now = now_ns();
	if (!tctx->room_since) {
		tctx->room_since = now;
		return false;
	}
	return room_lasted(tctx, now);
}

/* Is a queued task held for a CPU (see head_held_elsewhere())? held_for_other(): one other than @cpu. */
static __always_inline bool held_now(const struct task_ctx *tctx)
{
	return tctx && tctx->put_back_at &&
	       time_before(now_ns(), tctx->put_back_at + hold_put_back_ns);
}

static __always_inline bool held_for_other(const struct task_ctx *tctx, s32 cpu)
{
	return held_now(tctx) && tctx->put_back_cpu != cpu;
}

/*
 * @prev runs here away from its home while a task queued at its home has
 * waited longer on the vtime clock than @prev has run: the spill CPU
 * should take the next turn from that queue, so that an instance bursting
 * out of a full home shares the spill CPUs among its tasks instead of the
 * first to spill keeping them. Only visitors yield, so a partition's own
 * tasks are never displaced by another partition's queue.
 */
static bool visitor_owes_turn(struct task_struct *prev, s32 cpu, u32 *part)
{
	struct task_ctx *tctx = lookup_tctx(prev);
	const struct cpumask *home;
	struct task_struct *head;
	bool owed = false;
	u64 dsq;

	if (!tctx)
		return false;
	refresh_home(prev, tctx);
	if (!homed(tctx))
		return false;
	home = cast_mask(tctx->home);
	if (!home || bpf_cpumask_test_cpu(cpu, home))
		return false;
	/* Where its home's tasks queue (as in enqueue()). */
	*part = part_of_cpu(bpf_cpumask_first(home));
	dsq = SP_PART_DSQ_BASE + *part;
	if (!scx_bpf_dsq_nr_queued(dsq))
		return false;
	bpf_for_each(scx_dsq, head, dsq, 0) {
		/*
		 * By more than a slice: rotating costs two migrations. Not a
		 * head held for another CPU: that CPU takes it back.
		 */
		owed = time_before(head->scx.dsq_vtime + slice_ns, prev->scx.dsq_vtime) &&
		       !held_for_other(bpf_task_storage_get(&task_ctxs, head, 0, 0), cpu);
		break;
	}
	return owed;
}

/*
 * Is the head of @part's queue a task another CPU put back there less than
 * hold_put_back_ns ago? That CPU takes it back when its turn ends; a CPU
 * still busy with its own task (@cpu) leaves it, instead of displacing
 * its task into the queue, where the next CPU to reach a slice end would
 * take that one, and so on: one extra runnable task moved every task it
 * passed on its way. EEVDF queues the displaced task on its own CPU. A CPU
 * about to go idle does not ask, so no CPU idles while a held task waits.
 */
static bool head_held_elsewhere(u32 part, s32 cpu)
{
	struct task_struct *head;
	bool held = false;

	bpf_for_each(scx_dsq, head, SP_PART_DSQ_BASE + part, 0) {
		held = held_for_other(bpf_task_storage_get(&task_ctxs, head, 0, 0), cpu);
		break;
	}
	return held;
}

/*
 * May a CPU of another partition take @part's head now? With @defer (see
 * owners_recent()), only once the head has not run for steal_defer_ns:
 * until then its own partition's CPUs, where its cache is, are likely to
 * free up first, and the thief's own tasks to want it back. EEVDF's
 * balancer defers a pull the same way (can_migrate_task(): task_hot(), a
 * task that ran within sysctl_sched_migration_cost), so a CPU may stand
 * idle a moment rather than move a task that just ran. A head that may
 * not be taken yet lowers *@ready_at (0: none yet) to when it may; the
 * caller arms its CPU's timer for then, so the wait is bounded: "if there
 * is idle, we use it" holds within steal_defer_ns. An empty queue has
 * nothing to take. A balanced group's head in a partition its groups
 * over-fill is taken at once (steal_now[], set by the control plane from
 * softpart_core::overfull): that partition's CPUs do not get through its
 * queue within the wait. So is a head held for @cpu (a visitor it switched
 * out for a passing task: hold_visitor_for_passing()).
 */
static bool head_stealable(u32 part, s32 cpu, u64 now, bool defer, u64 *ready_at)
{
	struct task_struct *head;
	struct task_ctx *tctx;
	bool ok = false;
	u64 at;

	bpf_for_each(scx_dsq, head, SP_PART_DSQ_BASE + part, 0) {
		tctx = bpf_task_storage_get(&task_ctxs, head, 0, 0);
		at = tctx ? tctx->stopped_at : 0;
		if (!defer || !at || !time_before(now, at + steal_defer_ns) ||
		    (tctx && home_steals_now(tctx->home_id)) ||
		    (held_now(tctx) && tctx->put_back_cpu == cpu))
			ok = true;
		else if (!*ready_at || time_before(at + steal_defer_ns, *ready_at))
			*ready_at = at + steal_defer_ns;
		break;
	}
	return ok;
}

/*
 * @prev, a visitor on @cpu, is about to be switched out at its slice end
 * for the head of @cpu's partition queue. A head with no home (a daemon,
 * an unbound kthread, the scheduler's own thread) passes through: @prev
 * is held in its home's queue for @cpu, which takes it back when that
 * task is done, as it would its own partition's task. Unheld, the next
 * home CPU to reach a slice end took it and put its own task in the queue
 * in its place, and so on: in one sysbench-memory instance of 8 threads
 * homed on 4 of the 8 CPUs, one thread at a time went round the CPUs and
 * nodes, and the other node's CPUs went idle while it was between them
 * (docs/experiments.md, "Visitors held for their CPU"). Not while its
 * home runs a visitor (home_hosts_visitor()). --no-hold-visitors marks it
 * passed but not held, so that SP_STAT_PASSED_* tell where it ran next
 * either way. Returns @prev's context if it was marked, for dispatch() to
 * unmark if nothing moved.
 */
static struct task_ctx *hold_visitor_for_passing(struct task_struct *prev, s32 cpu, u32 own)
{
	struct task_ctx *tctx = lookup_tctx(prev), *hctx;
	const struct cpumask *home;
	struct task_struct *head;
	bool passing = false;

	if (!tctx || !homed(tctx))
		return NULL;
	home = cast_mask(tctx->home);
	if (!home || bpf_cpumask_test_cpu(cpu, home))
		return NULL;
	bpf_for_each(scx_dsq, head, SP_PART_DSQ_BASE + own, 0) {
		hctx = bpf_task_storage_get(&task_ctxs, head, 0, 0);
		passing = hctx && !homed(hctx);
		break;
	}
	if (!passing || home_hosts_visitor(home))
		return NULL;
	tctx->hold_away = hold_put_back_ns && hold_visitors;
	tctx->passed_cpu = cpu + 1;
	return tctx;
}

void BPF_STRUCT_OPS(softpart_dispatch, s32 cpu, struct task_struct *prev)
{
	u32 own = part_of_cpu(cpu);
	bool busy = prev && (prev->scx.flags & SCX_TASK_QUEUED);
	u64 now, ready_at;
	bool defer;
	u32 i;

	if (hold_put_back_ns && busy && head_held_elsewhere(own, cpu)) {
		stat_inc(SP_STAT_HELD_SKIP);
	} else {
		struct task_ctx *held = NULL;

		if (busy)
			held = hold_visitor_for_passing(prev, cpu, own);
		if (scx_bpf_dsq_move_to_local(SP_PART_DSQ_BASE + own, 0)) {
			stat_inc(SP_STAT_DISPATCH_OWN);
			return;
		}
		if (held) {
			held->hold_away = 0;
			held->passed_cpu = 0;
		}
	}
	/*
	 * Still busy with prev: not idle, so nothing to take from others.
	 * Refilling prev's slice keeps it running without a trip through
	 * enqueue(); only a task away from home with room there is let go, so
	 * that enqueue() (SCX_ENQ_LAST) sends it back.
	 */
	if (busy) {
		u32 part;

		if (visitor_owes_turn(prev, cpu, &part) &&
		    scx_bpf_dsq_move_to_local(SP_PART_DSQ_BASE + part, 0)) {
			stat_inc(SP_STAT_VISITOR_YIELD);
			return;
		}
		if (!should_go_home(prev, cpu))
			prev->scx.slice = slice_ns;
		return;
	}
	/*
	 * About to go idle: take waiting work from the others, nearest first.
	 * --no-steal leaves it there, against the maintainers' rule, only to
	 * measure what steals cost in locality and give in CPU time.
	 */
	if (!steal) {
		stat_inc(SP_STAT_DISPATCH_IDLE);
		return;
	}
	now = now_ns();
	defer = owners_recent(cpu, now);
	ready_at = 0;
	bpf_for(i, 1, nr_parts) {
		u32 idx = own * SP_MAX_PARTS + i, part;

		if (idx >= SP_MAX_PARTS * SP_MAX_PARTS)
			break;
		part = part_order[idx];
		if (!head_stealable(part, cpu, now, defer, &ready_at))
			continue;
		if (scx_bpf_dsq_move_to_local(SP_PART_DSQ_BASE + part, 0)) {
			struct sp_part_stats *ps = part_stats_of(own);

			stat_inc(SP_STAT_DISPATCH_STEAL);
			if (ps)
				__sync_fetch_and_add(&ps->steals, 1);
			return;
		}
	}
	if (ready_at) {
		arm_steal_timer(cpu, now, ready_at);
		stat_inc(SP_STAT_STEAL_DEFERRED);
	}
	stat_inc(SP_STAT_DISPATCH_IDLE);
}

/*
 * Does a yield with nobody waiting for its CPU leave @from its slice? Yes,
 * away from home too: dispatch()'s rules for a task away from home (its
 * home's queue owed a turn, going home) then wait for the slice's end, as
 * for a task that never yields; both have hysteresis of a slice or most
 * of one anyway. Ending the slice at every yield away from home sent each
 * through dispatch(), only for it to refill the slice: one
 * sysbench-threads instance of 8 threads homed on a 4-CPU node, the
 * other node idle, spent 0.53 CPU-s per s in dispatch() against 0.13 with
 * no homes. Asking dispatch()'s two questions here instead (2fd305f)
 * saved that, but this callback then took 0.99 CPU-s per s against 0.58
 * (8.3 against 3.7 us per call under TCG: the home queue's head, the idle
 * masks), so all callbacks together cost no less (docs/experiments.md,
 * "Yields away from home").
 */
static bool yield_keeps_slice(struct task_struct *from)
{
	struct task_ctx *tctx = lookup_tctx(from);

	if (!tctx || !homed(tctx) || tctx->at_home == 1)
		return true;
	if (!yield_away_keeps)
		return false;
	stat_inc(SP_STAT_YIELD_KEPT_AWAY);
	return true;
}

/*
 * sched_yield() with nobody waiting for this CPU (its local queue and its
 * partition's queue empty): the task keeps its slice, and the kernel keeps
 * it running without calling dispatch(). The kernel's default for a
 * scheduler without this callback is to end the slice, and dispatch() then
 * found nothing to hand over and refilled it, a call per yield: 250
 * thousand per s, 2.1 CPU-s per s of guest time, for two sysbench-threads
 * instances of 8 threads per 4-CPU node (docs/experiments.md, "The
 * scheduler's clock"). yield_to() and a task waiting end the slice as
 * before.
 */
bool BPF_STRUCT_OPS(softpart_yield, struct task_struct *from,
		    struct task_struct *to)
{
	s32 cpu = scx_bpf_task_cpu(from);

	if (!to && !scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) &&
	    !scx_bpf_dsq_nr_queued(SP_PART_DSQ_BASE + part_of_cpu(cpu)) &&
	    yield_keeps_slice(from)) {
		stat_inc(SP_STAT_YIELD_KEPT);
		return false;
	}
	from->scx.slice = 0;
	return false;
}

/*
 * A CPU is going idle: look again at the partition queues. dispatch()
 * found them empty, but enqueue() on another CPU may have queued a task
 * since, before this CPU's idle bit was set, and then found no idle CPU to
 * kick. Nothing would take that task until some CPU next passed through
 * dispatch(): a CPU idle while a task it may run waits. The kernel sets
 * the idle bit before calling this (6.16 and later), so either enqueue()
 * saw the bit or this sees the task. Kicking itself sends the CPU back
 * through dispatch(); if the task may not run here the CPU goes idle again
 * without a second call (idle to idle is not a transition).
 */
void BPF_STRUCT_OPS(softpart_update_idle, s32 cpu, bool idle)
{
	u32 own = part_of_cpu(cpu), part;
	u64 now, ready_at;
	bool defer;

	if (!idle)
		return;
	/* Idle again: whatever it was handed has run (or gone elsewhere). */
	set_claimed(cpu, 0);
	if (!idle_recheck)
		return;
	now = now_ns();
	defer = owners_recent(cpu, now);
	ready_at = 0;
	bpf_for(part, 0, nr_parts) {
		if (part != own && (!steal || !head_stealable(part, cpu, now, defer, &ready_at)))
			continue;
		if (scx_bpf_dsq_nr_queued(SP_PART_DSQ_BASE + part)) {
			scx_bpf_kick_cpu(cpu, 0);
			stat_inc(SP_STAT_IDLE_RECHECK);
			return;
		}
	}
	/*
	 * A head dispatch() would pass over (or that came since): the timer
	 * brings this CPU back when it may be taken. Kicking now would only
	 * pass it over again, and again at every return to idle.
	 */
	if (ready_at)
		arm_steal_timer(cpu, now, ready_at);
}

void BPF_STRUCT_OPS(softpart_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = lookup_tctx(p);

	if (tctx) {
		tctx->runnable_at = now_ns();
		/* A sleep ends the checks in a row (see room_lasted()). */
		tctx->room_since = 0;
	}
}

void BPF_STRUCT_OPS(softpart_running, struct task_struct *p)
{
	struct task_ctx *tctx = lookup_tctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	struct sp_group_stats *hs;
	u64 now;

	if (time_before(vtime_now, p->scx.dsq_vtime))
		vtime_now = p->scx.dsq_vtime;
	set_claimed(cpu, 0);
	count_kthread_ran(cpu, tctx && tctx->kthread_queued);
	if (!tctx)
		return;
	tctx->kthread_queued = 0;
	now = now_ns();
	if (tctx->put_back_at) {
		bool same = tctx->put_back_cpu == cpu;

		stat_inc(same ? SP_STAT_PUT_BACK_SAME : SP_STAT_PUT_BACK_MOVED);
		if (now > tctx->put_back_at)
			__sync_fetch_and_add(&stats[same ? SP_STAT_PUT_BACK_SAME_NS :
						     SP_STAT_PUT_BACK_MOVED_NS],
					     now - tctx->put_back_at);
	}
	tctx->put_back_at = 0;
	if (tctx->passed_cpu) {
		s32 passed = tctx->passed_cpu - 1;

		if (passed == cpu)
			stat_inc(SP_STAT_PASSED_SAME_CPU);
		else if (cpu_attr(cpu_node, passed) == cpu_attr(cpu_node, cpu))
			stat_inc(SP_STAT_PASSED_SAME_NODE);
		else
			stat_inc(SP_STAT_PASSED_CROSSED);
		tctx->passed_cpu = 0;
	}
	if (tctx->part_queued && !homed(tctx))
		stat_inc(SP_STAT_RAN_HOMELESS_QUEUED);
	if (tctx->part_queued)
		tctx->via = tctx->part_queued - 1 == part_of_cpu(cpu) ? SP_VIA_QUEUE_OWN :
									SP_VIA_QUEUE_STEAL;
	tctx->part_queued = 0;
	tctx->started_ns = now;
	hs = group_stats_of(tctx->home_id);
	record_delay(tctx, cpu, now);
	if (tctx->last_cpu >= 0 && tctx->last_cpu != cpu) {
		u32 d = migration_dist(tctx->last_cpu, cpu);

		if (d < SP_NR_DIST)
			__sync_fetch_and_add(&hs->migrations[d], 1);
		if (d == SP_DIST_XNODE && homed(tctx))
			stat_inc(SP_XNODE_OF(tctx->via < SP_NR_VIA ? tctx->via : SP_VIA_OTHER));
	}
	tctx->via = SP_VIA_OTHER;
	tctx->last_cpu = cpu;
	{
		u32 c = cpu;

		if (c < SP_MAX_CPUS) {
			barrier_var(c);
			cpu_run_vtime[c] = p->scx.dsq_vtime;
			cpu_run_since[c] = now;
		}
	}
	if (homed(tctx)) {
		const struct cpumask *home = cast_mask(tctx->home);
		u32 in = home && bpf_cpumask_test_cpu(cpu, home);

		if (in && tctx->at_home == 0)
			__sync_fetch_and_add(&hs->returns, 1);
		else if (!in && tctx->at_home == 1)
			__sync_fetch_and_add(&hs->spills, 1);
		tctx->at_home = in;
		/* Away: the visitor's home partition + 1 (claim_visitor_cpu()). */
		set_visitor(cpu, in || !home ? 0 : part_of_cpu(bpf_cpumask_first(home)) + 1);
	} else {
		set_visitor(cpu, 0);
	}
}

/*
 * Charges the time since the task started (or was last charged): to the
 * CPU's utilisation, the group's counters and, scaled by 100/weight, the
 * task's vtime. Called at every tick too, so a task whose slice dispatch()
 * keeps refilling is charged as it runs, and its vtime compares fairly
 * with the waiting tasks'.
 */
static void account_run(struct task_struct *p, struct task_ctx *tctx, u32 cpu)
{
	struct sp_group_stats *hs;
	struct sp_part_stats *ps;
	u64 now = now_ns(), ran;

	if (!tctx->started_ns || now <= tctx->started_ns)
		return;
	ran = now - tctx->started_ns;
	tctx->started_ns = now;
	p->scx.dsq_vtime += ran * 100 / (p->scx.weight ? p->scx.weight : 1);
	if (cpu < SP_MAX_CPUS) {
		barrier_var(cpu);
		__sync_fetch_and_add(&cpu_busy_ns[cpu], ran);
	}
	{
		u32 idx = stats_slot(tctx->home_id) * SP_MAX_PARTS + part_of_cpu(cpu);

		if (idx < SP_NR_GROUP_SLOTS * SP_MAX_PARTS) {
			barrier_var(idx);
			__sync_fetch_and_add(&group_part_ns[idx], ran);
		}
	}
	hs = group_stats_of(tctx->home_id);
	if (!homed(tctx)) {
		/* Homeless tasks are neither at home nor away: count them as
		 * "at home" so that their CPU time shows. */
		__sync_fetch_and_add(&hs->run_home_ns, ran);
	} else {
		if (tctx->at_home == 1) {
			__sync_fetch_and_add(&hs->run_home_ns, ran);
		} else {
			const struct cpumask *home = cast_mask(tctx->home);

			__sync_fetch_and_add(&hs->run_away_ns, ran);
			/*
			 * Bursting out of a full home is the design; time away
			 * while the home had room is placement lag. Sampled at
			 * each charge (slice end, sleep, tick), to tell the two
			 * apart in the balancer's exclusivity figures.
			 */
			if (home && any_idle(home))
				__sync_fetch_and_add(&hs->run_away_room_ns, ran);
			ps = part_stats_of(part_of_cpu(cpu));
			if (ps)
				__sync_fetch_and_add(&ps->foreign_ns, ran);
		}
	}
}

void BPF_STRUCT_OPS(softpart_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *tctx = lookup_tctx(p);
	u32 cpu = scx_bpf_task_cpu(p);

	set_visitor(cpu, 0);
	if (cpu < SP_MAX_CPUS) {
		barrier_var(cpu);
		cpu_run_since[cpu] = 0;
	}
	if (!tctx)
		return;
	account_run(p, tctx, cpu);
	tctx->stopped_at = now_ns();
	/* Homeless tasks (kthreads, daemons) leave the mark as it is. */
	if (homed(tctx) && cpu < SP_MAX_CPUS) {
		barrier_var(cpu);
		cpu_owner_stopped_at[cpu] = tctx->at_home == 1 ? tctx->stopped_at : 0;
	}
	/* Preempted or out of slice: it waits again from now. */
	if (runnable)
		tctx->runnable_at = tctx->stopped_at;
}

/*
 * A task whose slice dispatch() refills never stops: account its running
 * time at every tick too, so per-CPU utilisation sees it.
 */
void BPF_STRUCT_OPS(softpart_tick, struct task_struct *p)
{
	struct task_ctx *tctx = lookup_tctx(p);

	if (tctx)
		account_run(p, tctx, scx_bpf_task_cpu(p));
}

void BPF_STRUCT_OPS(softpart_enable, struct task_struct *p)
{
	p->scx.dsq_vtime = vtime_now;
}

/* Affinity or cgroup changed: look the home up again at the next wakeup. */
void BPF_STRUCT_OPS(softpart_set_cpumask, struct task_struct *p,
		    const struct cpumask *cpumask)
{
	struct task_ctx *tctx = lookup_tctx(p);

	if (tctx)
		tctx->gen = 0;
}

void BPF_STRUCT_OPS(softpart_cgroup_move, struct task_struct *p,
		    struct cgroup *from, struct cgroup *to)
{
	struct task_ctx *tctx = lookup_tctx(p);

	if (tctx)
		tctx->gen = 0;
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
	tctx->home_id = SP_NO_HOME;
	tctx->at_home = 2;
	tctx->last_cpu = -1;
	if (new_mask(&tctx->home) || new_mask(&tctx->scratch))
		return -ENOMEM;

	/* Like affinity, a home is inherited at fork (exec keeps it). */
	if (args->fork) {
		struct task_struct *parent = bpf_get_current_task_btf();
		u32 ptid = parent->pid, ctid = p->pid, *h;

		h = bpf_map_lookup_elem(&task_homes, &ptid);
		if (h) {
			u32 home = *h;

			bpf_map_update_elem(&task_homes, &ctid, &home, BPF_ANY);
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

	if (id >= SP_MAX_HOMES)
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
#pragma unroll
	for (w = 0; w < SP_CPU_WORDS; w++) {
		u64 c = args->cpus[w], n = args->near[w];
		u32 b;

		if (!c && !n)
			continue;
		bpf_for(b, 0, 64) {
			if (c & (1ULL << b))
				bpf_cpumask_set_cpu(w * 64 + b, cpus);
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
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(softpart_init)
{
	u32 part, cpu;
	s32 ret;

	kernel_pick_used = kernel_pick && __COMPAT_HAS_scx_bpf_select_cpu_and;

	bpf_for(cpu, 0, nr_cpus) {
		struct steal_timer *st;
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

	bpf_for(part, 0, nr_parts) {
		struct part_ctx *pctx;
		struct bpf_cpumask *mask;

		ret = scx_bpf_create_dsq(SP_PART_DSQ_BASE + part, -1);
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
			if (cpu < SP_MAX_CPUS && cpu_part[cpu] == part)
				bpf_cpumask_set_cpu(cpu, mask);
		}
		mask = bpf_kptr_xchg(&pctx->cpus, mask);
		if (mask)
			bpf_cpumask_release(mask);
	}
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
	       .running		= (void *)softpart_running,
	       .stopping	= (void *)softpart_stopping,
	       .tick		= (void *)softpart_tick,
	       .enable		= (void *)softpart_enable,
	       .set_cpumask	= (void *)softpart_set_cpumask,
	       .cgroup_move	= (void *)softpart_cgroup_move,
	       .init_task	= (void *)softpart_init_task,
	       .exit_task	= (void *)softpart_exit_task,
	       .init		= (void *)softpart_init,
	       .exit		= (void *)softpart_exit,
	       .name		= "softpart");
