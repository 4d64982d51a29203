/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The fast path's event counters, one SP_EVENT(NAME, "what it counts") per
 * line. The BPF side makes enum sp_stat from this list; softpart-core's
 * build script reads the same lines to make EVENT_NAMES (NAME in lower
 * case) and their descriptions, so the two cannot drift apart.
 *
 * The XNODE_* entries follow enum sp_via's order (intf.h checks it). The
 * entries marked "diag" are counted only with --diag: they attribute
 * experiments and cost work (a scan of the CPUs, per-task fields) that an
 * operator's host need not pay for.
 */
#ifndef __SOFTPART_EVENTS_H
#define __SOFTPART_EVENTS_H

#define SP_EVENTS(SP_EVENT) \
	SP_EVENT(PICK_PREV, "wakeups onto prev, idle and at home") \
	SP_EVENT(PICK_CORE_HOME, "wakeups onto an idle whole core at home") \
	SP_EVENT(PICK_SIBLING, "wakeups onto prev's idle SMT sibling at home") \
	SP_EVENT(PICK_CPU_HOME, "wakeups onto an idle CPU at home") \
	SP_EVENT(PICK_PREV_AWAY, "wakeups onto prev, idle, away from home") \
	SP_EVENT(PICK_ROOM_LASTED, "wakeups of a task away from home onto a home CPU idle for a while") \
	SP_EVENT(PICK_STAY_AWAY, "wakeups of a task away from home onto an idle CPU of the partition it runs in") \
	SP_EVENT(PICK_NEAR, "wakeups onto an idle CPU of the home's node(s)") \
	SP_EVENT(PICK_CORE_ANY, "wakeups onto an idle whole core elsewhere") \
	SP_EVENT(PICK_CPU_ANY, "wakeups onto an idle CPU elsewhere") \
	SP_EVENT(PICK_NONE, "wakeups that found no idle CPU (queued)") \
	SP_EVENT(PICK_KERNEL, "wakeups away from home placed by the kernel's scx_bpf_select_cpu_and()") \
	SP_EVENT(STALE_DIRECT_DISPATCH, "wakeups that found a direct dispatch the kernel left on the task, placed without one") \
	SP_EVENT(ENQUEUE, "tasks queued on a partition queue") \
	SP_EVENT(ENQUEUE_IDLE, "tasks queued with room at home, sent to the idle CPU instead") \
	SP_EVENT(QUEUE_AWAY, "tasks away from home queued in the partition they run in, no owner waiting there") \
	SP_EVENT(KICK, "idle CPUs kicked to take queued work") \
	SP_EVENT(DISPATCH_OWN, "CPUs that took work from their own partition") \
	SP_EVENT(DISPATCH_STEAL, "idle CPUs that took work from another partition (steals)") \
	SP_EVENT(DISPATCH_IDLE, "CPUs that found no work anywhere (went idle)") \
	SP_EVENT(PULL_BEHIND, "CPUs that took another partition's head, far behind on the vtime clock") \
	SP_EVENT(PARKED, "tasks of a cgroup out of cpu.max budget, parked until its refill") \
	SP_EVENT(UNPARKED, "parked tasks released to their partition's queue after a refill") \
	SP_EVENT(DEBT_FORGIVEN, "refills that found a capped cgroup's debt past what its quota repays in 10 s, and forgave the rest") \
	SP_EVENT(LATE_PARKS, "refills that found tasks parked after the throttle had ended, and released them") \
	SP_EVENT(THROTTLE_PREEMPT, "running tasks switched out when their cgroup ran out of budget") \
	SP_EVENT(CGROUP_NO_SLOT, "cgroups created while the cgroup table was full (charged as plain tasks)") \
	SP_EVENT(CGROUP_REFUSED, "cgroups refused at creation: their park queue could not be made") \
	SP_EVENT(CGROUP_NO_STORAGE, "cgroups created whose storage could not be made (charged as plain tasks)") \
	SP_EVENT(TASK_HOME_NOT_KEPT, "homes inherited at fork not kept: the thread-home map was full") \
	SP_EVENT(RELEASE_NOT_QUEUED, "throttle ends not queued for release: the release queue was full") \
	SP_EVENT(IDLE_RECHECK, "CPUs going idle that saw work queued meanwhile") \
	SP_EVENT(HOME_RESOLVE, "task homes looked up again after a change") \
	SP_EVENT(RETURN_IDLE, "tasks away from home sent back to an idle CPU there") \
	SP_EVENT(EVICT, "visitors preempted so that an owner runs at home") \
	SP_EVENT(SPILL_QUEUED, "spills that waited in the home's queue, the idle CPU kicked") \
	SP_EVENT(KTHREAD_WAIT, "tasks put back behind per-CPU kthreads that waited on their CPU") \
	SP_EVENT(PUT_BACK_HELD, "tasks put back in their partition's queue, held for their CPU") \
	SP_EVENT(PUT_BACK_HELD_AWAY, "of those, visitors (in their home's queue or the one of the partition they run in)") \
	SP_EVENT(HELD_SKIP, "busy CPUs that left a queue head held for another CPU") \
	SP_EVENT(OWNER_KEPT, "busy CPUs that kept a task homed there running over a visitor queued there") \
	SP_EVENT(PREV_AHEAD, "busy CPUs that kept a task running whose vtime was below its queue head's") \
	SP_EVENT(WAIT_BOUND, "queue heads past the wait bound that took a busy CPU over every other rule") \
	SP_EVENT(REENQUEUED, "tasks queued on a CPU a higher class (RT, deadline) took, moved to their partition's queue") \
	SP_EVENT(YIELD_KEPT, "sched_yield() calls with nobody waiting: the task kept its slice") \
	SP_EVENT(YIELD_KEPT_AWAY, "of those, by a task away from home") \
	SP_EVENT(STEAL_DEFERRED, "CPUs that went idle leaving another partition's head that ran too recently") \
	SP_EVENT(STEAL_TIMER, "deferred steals' timers that fired") \
	SP_EVENT(XNODE_WAKE_HOME, "cross-node moves: wakeup onto an idle CPU at home") \
	SP_EVENT(XNODE_WAKE_AWAY, "cross-node moves: wakeup onto an idle CPU away from home (spill)") \
	SP_EVENT(XNODE_EVICT, "cross-node moves: onto a home CPU taken back from a visitor") \
	SP_EVENT(XNODE_RETURN, "cross-node moves: sent home to an idle CPU there at a wakeup") \
	SP_EVENT(XNODE_RETURN_SLICE, "cross-node moves: sent home to an idle CPU there at a slice end") \
	SP_EVENT(XNODE_ENQUEUE_IDLE, "cross-node moves: sent to an idle CPU of its queue's partition") \
	SP_EVENT(XNODE_QUEUE_OWN, "cross-node moves: queued, taken by a CPU of that queue's partition") \
	SP_EVENT(XNODE_QUEUE_STEAL, "cross-node moves: queued, taken by another partition's CPU") \
	SP_EVENT(XNODE_QUEUE_HOME, "cross-node moves: queued away from home, taken by a CPU of its home") \
	SP_EVENT(XNODE_REHOME, "cross-node moves: its home moved (the balancer, a new home)") \
	SP_EVENT(XNODE_OTHER, "cross-node moves: anything else (a first run)") \
	SP_EVENT(PUT_BACK_SAME, "diag: held put-backs that ran next on the CPU they were held for") \
	SP_EVENT(PUT_BACK_MOVED, "diag: held put-backs that ran next on another CPU") \
	SP_EVENT(PASSED_SAME_CPU, "diag: visitors passed by a homeless task that ran next on that CPU") \
	SP_EVENT(PASSED_SAME_NODE, "diag: ... on another CPU of its node") \
	SP_EVENT(PASSED_CROSSED, "diag: ... on another node") \
	SP_EVENT(CALLS_SELECT_CPU, "diag: select_cpu calls") \
	SP_EVENT(CALLS_ENQUEUE, "diag: enqueue calls") \
	SP_EVENT(CALLS_DISPATCH, "diag: dispatch calls") \
	SP_EVENT(CPU_LINES_READ, "diag: other CPUs' state lines read to place a task or take a CPU back (idle and visitor candidates)") \
	SP_EVENT(PART_HEADS_READ, "diag: other partitions' queue heads looked at") \
	SP_EVENT(PART_HEADS_LOCKED, "diag: other partitions' queues peeked at under their lock (a stale published head, or the next head after a task was taken from there)") \
	SP_EVENT(CAP_CHARGES, "diag: CPU time charged to a capped cgroup (at a tick or a stop), each cap above a task counted") \
	SP_EVENT(CAP_FOLDS, "diag: a node's charges folded into a capped cgroup's shared budget (writes to its line)")

#endif /* __SOFTPART_EVENTS_H */
