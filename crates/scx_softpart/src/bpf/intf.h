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
typedef long long s64;
#endif

#include "../../../../bpf/include/softpart_hist.h"
#include "../../../../bpf/include/softpart_events.h"

enum softpart_consts {
	/*
	 * CPU ids (the kernel's nr_cpu_ids) the scheduler takes. What is
	 * sized by it: the per-CPU lines other CPUs read and the per-CPU
	 * lines a CPU writes (2 x 64 bytes each), the topology tables and
	 * a home's CPU words; nothing on a scheduling event loops up to it.
	 */
	SP_MAX_CPUS = 4096,
	SP_CPU_WORDS = SP_MAX_CPUS / 64,
	SP_MAX_PARTS = 64,
	SP_MAX_NODES = 64,
	/* Distances from a partition told apart when walking the others (part_rings). */
	SP_PART_RINGS = 8,
	/*
	 * Other partitions' queues a CPU looks at per steal, pull or idle
	 * recheck, nearest first among those with tasks queued.
	 */
	SP_PART_VISITS = 8,
	/*
	 * Home ids are 0..nr_homes-1 (config.bpf.h, set at load, at most
	 * this); SP_NO_HOME means "none".
	 */
	SP_MAX_HOMES = 16384,
	SP_NO_HOME = SP_MAX_HOMES,
	SP_MAX_TASK_HOMES = 65536,
	SP_MAX_CGROUP_HOMES = 4096,
	/* How many cgroup levels up a task looks for its cgroup's home. */
	SP_MAX_CGROUP_DEPTH = 16,
	/* DSQ ids below this are partition queues: dsq id == partition id. */
	SP_PART_DSQ_BASE = 0,
	/* A cgroup's throttled tasks wait in DSQ SP_PARK_DSQ_BASE + its slot. */
	SP_PARK_DSQ_BASE = 1 << 16,
	/*
	 * Stats slots: one per home id, then one for tasks with no home
	 * (slot nr_homes once sized at load).
	 */
	SP_NR_GROUP_SLOTS = SP_MAX_HOMES + 1,
	/* cgroups of the cpu controller softpart keeps a contract for. */
	SP_MAX_CGROUPS = 16384,
	SP_NO_CGROUP = SP_MAX_CGROUPS,
	/*
	 * Capped cgroups (cpu.max) at or above a task that its CPU time is
	 * charged to, nearest first. A cgroup under more is a limit the
	 * control plane finds in the tree and says (cap_depth): the caps
	 * past this many are not charged its tasks' time.
	 */
	SP_CAP_DEPTH = 8,
	/*
	 * The cgroups' load is counted per NUMA node, folded onto this many
	 * domains (node id modulo): CPUs of one node add to their own lines;
	 * past this many nodes, two nodes share a domain's lines.
	 */
	SP_LOAD_DOMAINS = 8,
	/*
	 * A cgroup's charge rate (sp_cg_ctl.rate) is in task weight per CPU,
	 * times this: 100 (a nice-0 task) per CPU charges a nice-0 task its
	 * run time as it is.
	 */
	SP_RATE_ONE = 16,
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
	SP_VIA_RETURN,		/* sent home at a wakeup */
	SP_VIA_RETURN_SLICE,	/* sent home at a slice end */
	SP_VIA_ENQUEUE_IDLE,
	SP_VIA_QUEUE_OWN,	/* set in running(), from the queue's partition */
	SP_VIA_QUEUE_STEAL,
	SP_VIA_QUEUE_HOME,	/* a steal by a CPU of its home: a return */
	SP_VIA_REHOME,		/* counted instead of the others after a home change */
	SP_VIA_OTHER,
	SP_NR_VIA,
};

/*
 * Tables the fast path can fill: each hit is an event counted (the
 * control plane names them, limits.rs) and leaves its subject in
 * limit_subject[] (a thread id, or a cgroup id).
 */
enum sp_limit {
	SP_LIMIT_TASK_HOMES,		/* task_homes, at fork: a thread id */
	SP_LIMIT_CGROUP_SLOTS,		/* the cgroup table: a cgroup id */
	SP_LIMIT_CGROUP_STORAGE,	/* cgroup storage: a cgroup id */
	SP_LIMIT_PARK_QUEUE,		/* a park DSQ not made: a cgroup id */
	SP_LIMIT_RELEASES,		/* parks_released: a cgroup slot */
	SP_NR_LIMITS,
};

/* The fast path's event counters (softpart_events.h), indexed by this. */
#define SP_STAT_ENUM(name, desc) SP_STAT_##name,
enum sp_stat {
	SP_EVENTS(SP_STAT_ENUM)
	SP_NR_STATS,
};
#undef SP_STAT_ENUM

/* Argument of the set_home syscall program. */
struct sp_home_args {
	u32 id;
	u32 pad;
	u64 cpus[SP_CPU_WORDS];
	/* The home's NUMA node(s): where to spill first. */
	u64 near[SP_CPU_WORDS];
};

/*
 * Per group (home id, or no home), per CPU: the control plane sums the
 * CPUs (and by partition, for the balancer's per-partition CPU time).
 * Whole cache lines (asserted below), in an array of them.
 */
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
	/* of migrations[SP_DIST_XNODE], by the decision that made them (enum sp_via) */
	u64 xnode[SP_NR_VIA];
	u64 pad[2];	/* to whole cache lines: one CPU's entry shares none */
};

/*
 * One cgroup of the cpu controller, in the slot the fast path gave it when
 * the kernel announced it (ops.cgroup_init). Written by the fast path only,
 * from the kernel's callbacks; the control plane reads it.
 */
struct sp_cgroup {
	u64 cgid;		/* cgroup v2 id (kernfs id); 0: slot free */
	/*
	 * The slot's generation: odd while a cgroup holds it (from the end of
	 * its cgroup_init), even once it exited or while it is being set up.
	 * What others keep of a slot (a task's cgroup, the control plane's
	 * sp_cg_ctl) is theirs only while their generation is this one.
	 */
	u32 slot_gen;
	u32 parent;		/* the parent's slot; SP_NO_CGROUP for the root */
	u32 weight;		/* cpu.weight, 1..10000 */
	u32 idle;		/* cpu.idle (6.19 and later) */
	u64 quota_us;		/* cpu.max quota; ~0 for "max" */
	u64 period_us;		/* cpu.max period */
	u64 burst_us;		/* cpu.max.burst */
	/*
	 * The nearest cgroup at or above this one with a cpu.max quota, as of
	 * its last cgroup_init or cpu.max write (its own slot, or its
	 * parent's then); SP_NO_CGROUP if none. The control plane's
	 * sp_cg_ctl.cap_up, which follows every cgroup's changes, takes over
	 * while valid.
	 */
	u32 cap_up;
	u32 pad;
};

/*
 * What the control plane derives for a cgroup slot from every cgroup's
 * contract and load: written by the control plane only, in place, each
 * field before slot_gen. The fast path takes it while slot_gen is the slot's
 * (sp_cgroup.slot_gen): a slot freed and given to another cgroup never gets
 * its predecessor's values.
 */
struct sp_cg_ctl {
	u32 slot_gen;
	/*
	 * What one ns run by a task of weight w in this cgroup costs on the
	 * vtime clock: rate / (w * SP_RATE_ONE) ns. 0: charged as a plain
	 * task (100).
	 */
	u32 rate;
	/*
	 * The nearest cgroup at or above this one with a cpu.max quota (its
	 * slot; SP_NO_CGROUP if none): a task's CPU time is charged to each
	 * capped cgroup above it, walked this way.
	 */
	u32 cap_up;
	/* This cgroup or one above it has cpu.idle set: its tasks may wait longer. */
	u32 idle_under;
};

/*
 * The cpu.max budget of a capped cgroup slot (bandwidth.bpf.h): written by
 * the fast path, read by the control plane for the statistics.
 */
struct sp_cg_budget {
	s64 left_ns;		/* CPU time left this period; below 0, a debt */
	u64 throttled_at;	/* when it ran out; 0 while it has some left */
	u64 throttled_ns;	/* time spent out of budget, summed */
	u64 nr_throttled;	/* times it ran out */
	u64 refilled_at;	/* its last refill */
	u32 armed;		/* its refill timer runs */
	u32 pad;
	u64 pad_line[2];	/* one line per budget: no two cgroups share one */
};

/*
 * Per load domain, per cgroup slot: its runnable tasks' summed weight and
 * count, added where a task becomes runnable and taken away where it stops
 * being so (perhaps on another node): only the sum over the domains means
 * anything.
 */
struct sp_cg_load {
	s32 weight;
	s32 nr;
};

struct sp_hist {
	u64 buckets[SP_HIST_NR_BUCKETS];
};

/*
 * Per CPU: the event counters and what a partition's figures are summed
 * from (its CPUs'), all written by that CPU only.
 */
struct sp_cpu_stats {
	u64 events[SP_NR_STATS];
	u64 delay_ns;	/* waits that ended on this CPU */
	u64 nr_delays;
	u64 steals;	/* tasks it took from other partitions */
	u64 foreign_ns;	/* its time running tasks homed elsewhere */
	u64 max_delay_ns;	/* the longest wait that ended on this CPU */
	/* --diag: the most slices started in a task's partition while it waited there */
	u64 max_wait_rounds;
	struct sp_hist delay_hist;
};

/*
 * Per-CPU state that other CPUs read (visitor claims, idle candidates,
 * kthread counts), one cache line per CPU. What a CPU writes at every
 * stop and tick is kept off it, in struct sp_cpu_local.
 */
struct sp_cpu_ctx {
	u32 visitor;		/* running a visitor: its home's partition + 1; else 0 */
	u32 kthreads_queued;	/* per-CPU kthreads woken into its local queue, not run yet */
	u32 taken;		/* a higher class (RT, deadline) holds it */
	u32 pad0;
	u64 idle_since;		/* when it last went idle; 0 while busy */
	u64 pad[5];
};

/*
 * Per-CPU state written by its CPU at every stop and tick, read by that
 * CPU and by the control plane only: one cache line per CPU.
 */
struct sp_cpu_local {
	u64 busy_ns;		/* time charged to tasks on it (utilisation) */
	u64 owner_stopped_at;	/* a homed task stopped at home on it; 0 after a visitor */
	u64 pad[6];
};

/* running() counts a cross-node move as SP_STAT_XNODE_WAKE_HOME + its sp_via. */
#define SP_XNODE_OF(via) (SP_STAT_XNODE_WAKE_HOME + (via))
_Static_assert(SP_XNODE_OF(SP_VIA_WAKE_AWAY) == SP_STAT_XNODE_WAKE_AWAY, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_EVICT) == SP_STAT_XNODE_EVICT, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_RETURN) == SP_STAT_XNODE_RETURN, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_RETURN_SLICE) == SP_STAT_XNODE_RETURN_SLICE, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_ENQUEUE_IDLE) == SP_STAT_XNODE_ENQUEUE_IDLE, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_QUEUE_OWN) == SP_STAT_XNODE_QUEUE_OWN, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_QUEUE_STEAL) == SP_STAT_XNODE_QUEUE_STEAL, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_QUEUE_HOME) == SP_STAT_XNODE_QUEUE_HOME, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_REHOME) == SP_STAT_XNODE_REHOME, "xnode order");
_Static_assert(SP_XNODE_OF(SP_VIA_OTHER) == SP_STAT_XNODE_OTHER, "xnode order");

_Static_assert(sizeof(struct sp_cpu_ctx) == 64, "one cache line per CPU");
_Static_assert(sizeof(struct sp_cpu_local) == 64, "one cache line per CPU");
_Static_assert(sizeof(struct sp_group_stats) % 64 == 0, "a CPU's group counters in lines of their own");

#endif /* __SOFTPART_INTF_H */
