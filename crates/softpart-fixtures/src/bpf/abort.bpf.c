/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A test fixture, not shipped: the smallest sched_ext scheduler that does
 * what a buggy one in the field did before softpart attached after it.
 *
 * - select_cpu hands a wakeup that found an idle CPU straight to it
 *   (a direct dispatch from select_cpu);
 * - enqueue hands a task to another idle CPU's local queue when there is
 *   one (a direct dispatch the kernel carries out later, on that CPU),
 *   else to the global queue;
 * - queued wakeups are allowed, so a wakeup to another CPU's cache may
 *   wait on that CPU's wake list with its direct dispatch decided;
 * - abort_after_ns after its first wakeup (the kernel calls select_cpu
 *   only once every task is switched to it), the next wakeup calls
 *   scx_bpf_error(), and the kernel disables it with wakeups in flight.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

const volatile u64 abort_after_ns = 500ULL * 1000 * 1000;

/* When select_cpu first ran (bpf_ktime_get_ns()); 0 before. */
u64 first_wakeup_at;

s32 BPF_STRUCT_OPS(abort_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	u64 now = bpf_ktime_get_ns();
	bool is_idle = false;
	s32 cpu;

	if (!first_wakeup_at)
		first_wakeup_at = now;

	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	if (is_idle)
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL, 0);
	if (now - first_wakeup_at > abort_after_ns)
		scx_bpf_error("abort fixture: aborting %llu ms after its first wakeup, as told",
			      abort_after_ns / 1000000);
	return cpu;
}

void BPF_STRUCT_OPS(abort_enqueue, struct task_struct *p, u64 enq_flags)
{
	s32 this_cpu = bpf_get_smp_processor_id();
	s32 cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);

	if (cpu >= 0 && cpu != this_cpu) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, SCX_SLICE_DFL, enq_flags);
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		return;
	}
	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(abort_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(abort_ops,
	       .select_cpu	= (void *)abort_select_cpu,
	       .enqueue		= (void *)abort_enqueue,
	       .exit		= (void *)abort_exit,
	       .name		= "abort_fixture");
