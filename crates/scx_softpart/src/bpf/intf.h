/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Shared between the BPF fast path (main.bpf.c) and the Rust control plane
 * (bindgen'd into bpf_intf.rs). Keep it plain C: no kernel types.
 */
#ifndef __SOFTPART_INTF_H
#define __SOFTPART_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned char u8;
typedef unsigned int u32;
typedef int s32;
typedef unsigned long long u64;
#endif

#include "../../../../bpf/include/softpart_hist.h"

enum softpart_consts {
	SP_MAX_CPUS = 512,
	SP_CPU_WORDS = SP_MAX_CPUS / 64,
	SP_MAX_PARTS = 64,
	SP_MAX_NODES = 64,
	/* Home ids are 0..SP_MAX_HOMES-1; SP_NO_HOME means "none". */
	SP_MAX_HOMES = 256,
	SP_NO_HOME = SP_MAX_HOMES,
	SP_MAX_TASK_HOMES = 65536,
	SP_MAX_CGROUP_HOMES = 4096,
	/* How many cgroup levels up a task looks for its cgroup's home. */
	SP_MAX_CGROUP_DEPTH = 16,
	/* DSQ ids below this are partition queues: dsq id == partition id. */
	SP_PART_DSQ_BASE = 0,
	/* Stats slots: one per home id, then one for tasks with no home. */
	SP_NR_GROUP_SLOTS = SP_MAX_HOMES + 1,
	/* delay_hists: the group slots, then one per partition. */
	SP_NR_HISTS = SP_NR_GROUP_SLOTS + SP_MAX_PARTS,
};

/* Which spills wait in the home's queue (--queued-spill). */
enum sp_queued_spill {
	SP_QSPILL_OFF,
	SP_QSPILL_SYNC,		/* the waker is about to sleep at the task's home */
	SP_QSPILL_ALWAYS,
	SP_QSPILL_OWNED,	/* sync, or the idle CPU's own partition just used it */
};

/* How far a task moved between two runs, nearest first. */
enum sp_dist {
	SP_DIST_SMT,	/* to the other thread of the same core */
	SP_DIST_LLC,	/* within the last-level cache */
	SP_DIST_NODE,	/* within the NUMA node */
	SP_DIST_XNODE,	/* to another node */
	SP_NR_DIST,
};

/*
 * The decision that put a task on the CPU it runs on next, to tell where
 * cross-node moves come from (SP_STAT_XNODE_*, same order).
 */
enum sp_via {
	SP_VIA_WAKE_HOME,
	SP_VIA_WAKE_AWAY,
	SP_VIA_EVICT,
	SP_VIA_RETURN,
	SP_VIA_ENQUEUE_IDLE,
	SP_VIA_QUEUE_OWN,	/* set in running(), from the queue's partition */
	SP_VIA_QUEUE_STEAL,
	SP_VIA_OTHER,
	SP_NR_VIA,
};

/* Counters the fast path keeps, indexed by enum sp_stat. */
enum sp_stat {
	SP_STAT_PICK_PREV,	/* wakeup: prev CPU idle and at home */
	SP_STAT_PICK_CORE_HOME,	/* wakeup: idle whole core at home */
	SP_STAT_PICK_SIBLING,	/* wakeup: idle SMT sibling of prev, at home */
	SP_STAT_PICK_CPU_HOME,	/* wakeup: idle CPU at home */
	SP_STAT_PICK_PREV_AWAY,	/* wakeup: prev CPU idle, outside home */
	SP_STAT_PICK_NEAR,	/* wakeup: idle CPU in the home's node(s) */
	SP_STAT_PICK_CORE_ANY,	/* wakeup: idle whole core elsewhere */
	SP_STAT_PICK_CPU_ANY,	/* wakeup: idle CPU elsewhere */
	SP_STAT_PICK_NONE,	/* wakeup: nothing idle, task queued */
	SP_STAT_ENQUEUE,	/* tasks queued on a partition DSQ */
	SP_STAT_KICK,		/* idle CPUs kicked to take queued work */
	SP_STAT_DISPATCH_OWN,	/* a CPU took work from its own partition */
	SP_STAT_DISPATCH_STEAL,	/* a CPU took work from another partition */
	SP_STAT_HOME_RESOLVE,	/* a task's home looked up again */
	SP_STAT_RETURN_IDLE,	/* an away task sent to an idle CPU at home */
	SP_STAT_EVICT,		/* a visitor preempted so an owner runs at home */
	SP_STAT_VISITOR_YIELD,	/* a visitor's CPU took its home's next turn */
	SP_STAT_PICK_KERNEL,	/* wakeup away from home: scx_bpf_select_cpu_and() */
	SP_STAT_ENQUEUE_IDLE,	/* queued with room at home: sent to its idle CPU */
	SP_STAT_DISPATCH_IDLE,	/* a CPU found no work anywhere (goes idle) */
	SP_STAT_IDLE_RECHECK,	/* a CPU going idle saw work queued meanwhile */
	SP_STAT_PICK_WAKER,	/* sync wakeup: onto the waker's CPU (--wake-sync) */
	SP_STAT_SPILL_QUEUED,	/* spill queued at home, the idle CPU kicked (--queued-spill) */
	SP_STAT_WAKE_PREEMPT,	/* a wakeup with no idle CPU preempted a longer runner (--wakeup-preempt) */
	SP_STAT_SPILL_CLAIMED,	/* wakeup away from home while a home CPU was handed a task not yet running */
	SP_STAT_KTHREAD_WAIT,	/* a task requeued behind per-CPU kthreads waited for them on its CPU */
	SP_STAT_PUT_BACK_HELD,	/* a task put back in its partition's queue, held for its CPU */
	SP_STAT_HELD_SKIP,	/* a busy CPU left a queue head held for another CPU (kept prev) */
	SP_STAT_YIELD_KEPT,	/* sched_yield() with nobody waiting: the task kept its slice */
	SP_STAT_STEAL_DEFERRED,	/* dispatch() went idle leaving another partition's head, run too recently */
	SP_STAT_STEAL_TIMER,	/* a deferred steal's timer fired (and kicked its CPU if idle) */
	SP_STAT_YIELD_KEPT_AWAY,	/* of yield_kept: by a task away from home */
	SP_STAT_PUT_BACK_SAME,	/* a held put-back ran next on the CPU it was held for */
	SP_STAT_PUT_BACK_MOVED,	/* a held put-back ran next on another CPU */
	SP_STAT_PUT_BACK_SAME_NS,	/* of put_back_same: ns from put-back to run, summed */
	SP_STAT_PUT_BACK_MOVED_NS,	/* of put_back_moved: the same */
	SP_STAT_RAN_HOMELESS_QUEUED,	/* a task with no home ran after waiting in a partition queue */
	SP_STAT_PUT_BACK_HELD_AWAY,	/* of put_back_held: a visitor, held in its home's queue for the CPU it visits */
	/*
	 * A homed task ran on another node than last time, by the decision
	 * that put it there (enum sp_via, in that order).
	 */
	SP_STAT_XNODE_WAKE_HOME,	/* wakeup onto an idle CPU at home */
	SP_STAT_XNODE_WAKE_AWAY,	/* wakeup onto an idle CPU away from home (a spill) */
	SP_STAT_XNODE_EVICT,	/* onto a home CPU taken back from a visitor */
	SP_STAT_XNODE_RETURN,	/* enqueue() sent it home, to an idle CPU there */
	SP_STAT_XNODE_ENQUEUE_IDLE,	/* enqueue() sent it to an idle CPU of its queue's partition */
	SP_STAT_XNODE_QUEUE_OWN,	/* queued, taken by a CPU of that queue's partition */
	SP_STAT_XNODE_QUEUE_STEAL,	/* queued, taken by another partition's CPU (a steal, or a visitor's home's turn) */
	SP_STAT_XNODE_OTHER,	/* anything else (e.g. its first run) */
	/*
	 * A visitor switched out for a task with no home (the case of
	 * hold_visitor_for_passing(), counted with --no-hold-visitors too)
	 * ran next on that CPU, on another of its node, or on another node.
	 */
	SP_STAT_PASSED_SAME_CPU,
	SP_STAT_PASSED_SAME_NODE,
	SP_STAT_PASSED_CROSSED,
	SP_NR_STATS,
};

/* Argument of the set_home syscall program. */
struct sp_home_args {
	u32 id;
	u32 pad;
	u64 cpus[SP_CPU_WORDS];
	/* The home's NUMA node(s): where to spill first. */
	u64 near[SP_CPU_WORDS];
};

/* Per group (home id, or no home), kept for the control plane's stats. */
struct sp_group_stats {
	u64 run_home_ns;
	u64 run_away_ns;
	/* of run_away_ns, charged while the home had an idle CPU */
	u64 run_away_room_ns;
	u64 spills;	/* began running away from home after running at home */
	u64 returns;	/* began running at home after running away */
	u64 delay_ns;	/* runnable but not running, summed */
	u64 nr_delays;
	u64 migrations[SP_NR_DIST];
};

/* running() counts a cross-node move as SP_STAT_XNODE_WAKE_HOME + its sp_via. */
#define SP_XNODE_OF(via) (SP_STAT_XNODE_WAKE_HOME + (via))
_Static_assert(SP_XNODE_OF(SP_VIA_WAKE_AWAY) == SP_STAT_XNODE_WAKE_AWAY, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_EVICT) == SP_STAT_XNODE_EVICT, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_RETURN) == SP_STAT_XNODE_RETURN, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_ENQUEUE_IDLE) == SP_STAT_XNODE_ENQUEUE_IDLE, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_QUEUE_OWN) == SP_STAT_XNODE_QUEUE_OWN, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_QUEUE_STEAL) == SP_STAT_XNODE_QUEUE_STEAL, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_OTHER) == SP_STAT_XNODE_OTHER, "xnode order");

/* Per partition. */
struct sp_part_stats {
	u64 delay_ns;	/* waits that ended on one of its CPUs */
	u64 nr_delays;
	u64 steals;	/* tasks its CPUs took from other partitions */
	u64 foreign_ns;	/* its CPUs' time running tasks homed elsewhere */
};

struct sp_hist {
	u64 buckets[SP_HIST_NR_BUCKETS];
};

#endif /* __SOFTPART_INTF_H */
