/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Shared between observer.bpf.c and the Rust side (bindgen'd). The
 * histogram layout is bpf/include/softpart_hist.h's.
 */
#ifndef __OBSERVER_INTF_H
#define __OBSERVER_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned int u32;
typedef unsigned long long u64;
#endif

#include "../../../../bpf/include/softpart_hist.h"

enum observer_consts {
	OBS_MAX_CPUS = 256,
	OBS_MAX_GROUPS = 1024,
	OBS_NR_BUCKETS = SP_HIST_NR_BUCKETS,
};

/* How far a migration went, nearest first. */
enum obs_dist {
	OBS_DIST_SMT,
	OBS_DIST_LLC,
	OBS_DIST_NODE,
	OBS_DIST_XNODE,
	OBS_NR_DIST,
};

/* Per cgroup (cgroup v2 id = inode number of its directory). */
struct obs_group {
	u64 cpu_ns[OBS_MAX_CPUS];
	u64 migrations[OBS_NR_DIST];
	u64 delay_hist[OBS_NR_BUCKETS];
	u64 delay_ns;
	u64 nr_delays;
	u64 max_delay_ns;	/* longest single wait since the group appeared */
	/*
	 * The waits above that ended on a CPU leaving idle (the CPU was idle
	 * while the task waited: waking it, or a scheduler leaving it idle),
	 * as opposed to taking a running task's turn.
	 */
	u64 idle_end_hist[OBS_NR_BUCKETS];
	/*
	 * The waits above that began with the task switched out while still
	 * runnable (its slice ended, it yielded, or it was preempted), as
	 * opposed to a wakeup; and their sum.
	 */
	u64 preempted_hist[OBS_NR_BUCKETS];
	u64 preempted_delay_ns;
	/*
	 * Runs that began on a CPU outside the thread's allowed set (migration
	 * not disabled): a scheduler must never do that.
	 */
	u64 nr_outside;
	u64 outside_ns;
};

/* Per CPU, written only by that CPU. */
struct obs_cpu {
	u64 run_start_ns;	/* 0 while idle */
	u64 run_cgid;
	u64 idle_since_ns;	/* 0 while busy */
	u64 idle_wclock0;	/* wait clock when the idle period began */
	u64 idle_ns;
	u64 idle_waiting_ns;	/* idle while some task waited to run */
	u64 run_outside;	/* the running thread is outside its allowed set */
};

#endif /* __OBSERVER_INTF_H */
