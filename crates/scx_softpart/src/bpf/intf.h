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

enum softpart_consts {
	SP_MAX_CPUS = 512,
	SP_MAX_PARTS = 64,
	/* DSQ ids below this are partition queues: dsq id == partition id. */
	SP_PART_DSQ_BASE = 0,
};

/* Counters the fast path keeps, indexed by enum sp_stat. */
enum sp_stat {
	SP_STAT_PICK_PREV,	/* wakeup: prev CPU was idle */
	SP_STAT_PICK_CORE_PART,	/* wakeup: idle whole core in prev's partition */
	SP_STAT_PICK_CPU_PART,	/* wakeup: idle CPU in prev's partition */
	SP_STAT_PICK_CORE_ANY,	/* wakeup: idle whole core elsewhere */
	SP_STAT_PICK_CPU_ANY,	/* wakeup: idle CPU elsewhere */
	SP_STAT_PICK_NONE,	/* wakeup: nothing idle, task queued */
	SP_STAT_ENQUEUE,	/* tasks queued on a partition DSQ */
	SP_STAT_KICK,		/* idle CPUs kicked to take queued work */
	SP_STAT_DISPATCH_OWN,	/* a CPU took work from its own partition */
	SP_STAT_DISPATCH_STEAL,	/* a CPU took work from another partition */
	SP_NR_STATS,
};

#endif /* __SOFTPART_INTF_H */
