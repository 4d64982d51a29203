/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_softpart: the BPF fast path.
 *
 * CPUs are grouped into partitions (by default one per NUMA node, or per LLC
 * when a node has several). Each partition has one vtime-ordered DSQ.
 *
 * - select_cpu: prev if idle, then an idle whole core in prev's partition,
 *   an idle CPU there, and only then the rest of the allowed set. A task
 *   that finds an idle CPU is dispatched to it directly.
 * - enqueue: a task that found no idle CPU queues on its partition's DSQ,
 *   and any idle CPU that may run it is kicked, so no CPU stays idle while
 *   work it could run is waiting.
 * - dispatch: a CPU serves its own partition first, then the others.
 *
 * Everything that needs history or policy lives in the Rust control plane;
 * this file only reads what it was given in rodata and maps.
 */
#include <scx/common.bpf.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/* Set by the control plane before load. */
const volatile u32 nr_cpus = 1;
const volatile u32 nr_parts = 1;
const volatile u64 slice_ns = 3000000ULL;
const volatile u64 slice_lag_ns = 20000000ULL;
const volatile bool smt_enabled = true;
const volatile u32 cpu_part[SP_MAX_CPUS];

u64 stats[SP_NR_STATS];

/* Global vtime clock: the largest vtime a task has started running with. */
static u64 vtime_now;

struct part_ctx {
	struct bpf_cpumask __kptr *cpus;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_MAX_PARTS);
	__type(key, u32);
	__type(value, struct part_ctx);
} parts SEC(".maps");

/* Scratch mask per task: partition ∩ allowed, rebuilt on each use. */
struct task_ctx {
	struct bpf_cpumask __kptr *scratch;
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

static __always_inline u32 part_of_cpu(s32 cpu)
{
	if (cpu < 0 || cpu >= SP_MAX_CPUS)
		return 0;
	return cpu_part[cpu];
}

static __always_inline const struct cpumask *part_cpus(u32 part)
{
	struct part_ctx *pctx = bpf_map_lookup_elem(&parts, &part);

	if (!pctx || !pctx->cpus)
		return NULL;
	return cast_mask(pctx->cpus);
}

/*
 * Fills the task's scratch mask with (partition ∩ allowed) and returns it, or
 * NULL when the intersection cannot be built (then callers use the allowed
 * set alone: correctness never depends on locality).
 */
static const struct cpumask *part_allowed(struct task_struct *p, u32 part)
{
	struct task_ctx *tctx;
	const struct cpumask *pmask;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	pmask = part_cpus(part);
	if (!tctx || !tctx->scratch || !pmask)
		return NULL;
	if (!bpf_cpumask_and(tctx->scratch, pmask, p->cpus_ptr))
		return NULL;
	return cast_mask(tctx->scratch);
}

static s32 pick_idle_cpu(struct task_struct *p, s32 prev_cpu)
{
	const struct cpumask *local;
	s32 cpu;

	if (bpf_cpumask_test_cpu(prev_cpu, p->cpus_ptr) &&
	    scx_bpf_test_and_clear_cpu_idle(prev_cpu)) {
		stat_inc(SP_STAT_PICK_PREV);
		return prev_cpu;
	}

	local = part_allowed(p, part_of_cpu(prev_cpu));
	if (local) {
		if (smt_enabled) {
			cpu = scx_bpf_pick_idle_cpu(local, SCX_PICK_IDLE_CORE);
			if (cpu >= 0) {
				stat_inc(SP_STAT_PICK_CORE_PART);
				return cpu;
			}
		}
		cpu = scx_bpf_pick_idle_cpu(local, 0);
		if (cpu >= 0) {
			stat_inc(SP_STAT_PICK_CPU_PART);
			return cpu;
		}
	}

	if (smt_enabled) {
		cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, SCX_PICK_IDLE_CORE);
		if (cpu >= 0) {
			stat_inc(SP_STAT_PICK_CORE_ANY);
			return cpu;
		}
	}
	cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (cpu >= 0) {
		stat_inc(SP_STAT_PICK_CPU_ANY);
		return cpu;
	}
	return -1;
}

s32 BPF_STRUCT_OPS(softpart_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	s32 cpu = pick_idle_cpu(p, prev_cpu);

	if (cpu >= 0) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
		return cpu;
	}
	stat_inc(SP_STAT_PICK_NONE);
	return prev_cpu;
}

/*
 * A task may not run ahead of the clock by more than one slice of credit
 * (it slept), nor keep more than slice_lag_ns of it.
 */
static __always_inline u64 task_vtime(struct task_struct *p)
{
	u64 vtime = p->scx.dsq_vtime;

	if (time_before(vtime, vtime_now - slice_lag_ns))
		vtime = vtime_now - slice_lag_ns;
	return vtime;
}

void BPF_STRUCT_OPS(softpart_enqueue, struct task_struct *p, u64 enq_flags)
{
	s32 task_cpu = scx_bpf_task_cpu(p);
	u32 part = part_of_cpu(task_cpu);
	const struct cpumask *local;
	s32 cpu;

	scx_bpf_dsq_insert_vtime(p, SP_PART_DSQ_BASE + part, slice_ns,
				 task_vtime(p), enq_flags);
	stat_inc(SP_STAT_ENQUEUE);

	/* "If there is idle, we use it": wake an idle CPU that may run p. */
	cpu = -1;
	local = part_allowed(p, part);
	if (local)
		cpu = scx_bpf_pick_idle_cpu(local, 0);
	if (cpu < 0)
		cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (cpu >= 0) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		stat_inc(SP_STAT_KICK);
	}
}

void BPF_STRUCT_OPS(softpart_dispatch, s32 cpu, struct task_struct *prev)
{
	u32 own = part_of_cpu(cpu);
	u32 i;

	if (scx_bpf_dsq_move_to_local(SP_PART_DSQ_BASE + own, 0)) {
		stat_inc(SP_STAT_DISPATCH_OWN);
		return;
	}
	/* Own partition empty: take waiting work from the others. */
	bpf_for(i, 1, nr_parts) {
		u32 part = (own + i) % nr_parts;

		if (scx_bpf_dsq_move_to_local(SP_PART_DSQ_BASE + part, 0)) {
			stat_inc(SP_STAT_DISPATCH_STEAL);
			return;
		}
	}
}

void BPF_STRUCT_OPS(softpart_running, struct task_struct *p)
{
	if (time_before(vtime_now, p->scx.dsq_vtime))
		vtime_now = p->scx.dsq_vtime;
}

void BPF_STRUCT_OPS(softpart_stopping, struct task_struct *p, bool runnable)
{
	u64 used = slice_ns - p->scx.slice;

	if (p->scx.slice > slice_ns)
		used = 0;
	p->scx.dsq_vtime += used * 100 / p->scx.weight;
}

void BPF_STRUCT_OPS(softpart_enable, struct task_struct *p)
{
	p->scx.dsq_vtime = vtime_now;
}

s32 BPF_STRUCT_OPS(softpart_init_task, struct task_struct *p,
		   struct scx_init_task_args *args)
{
	struct task_ctx *tctx;
	struct bpf_cpumask *mask;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	mask = bpf_cpumask_create();
	if (!mask)
		return -ENOMEM;
	mask = bpf_kptr_xchg(&tctx->scratch, mask);
	if (mask)
		bpf_cpumask_release(mask);
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(softpart_init)
{
	u32 part, cpu;
	s32 ret;

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
	       .running		= (void *)softpart_running,
	       .stopping	= (void *)softpart_stopping,
	       .enable		= (void *)softpart_enable,
	       .init_task	= (void *)softpart_init_task,
	       .init		= (void *)softpart_init,
	       .exit		= (void *)softpart_exit,
	       .name		= "softpart");
