/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The run-delay histogram layout, shared by the scheduler and the observer
 * and matched by softpart_core::hist (tested there): log-linear, 8
 * sub-buckets per power of two, so a value is known within 12.5%; 2^40 ns
 * (about 18 minutes) and more land in the last bucket.
 */
#ifndef __SOFTPART_HIST_H
#define __SOFTPART_HIST_H

enum softpart_hist_consts {
	SP_HIST_SUB_BITS = 3,
	SP_HIST_MAX_MSB = 40,
	SP_HIST_NR_BUCKETS = (SP_HIST_MAX_MSB - SP_HIST_SUB_BITS + 2) << SP_HIST_SUB_BITS,
};

#ifdef __VMLINUX_H__
/* BPF has no count-leading-zeros instruction. */
static __always_inline u32 sp_msb64(u64 v)
{
	u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline u32 sp_hist_bucket(u64 v)
{
	const u64 sub = 1ULL << SP_HIST_SUB_BITS;
	u32 msb;

	if (v < sub)
		return v;
	msb = sp_msb64(v);
	if (msb > SP_HIST_MAX_MSB)
		return SP_HIST_NR_BUCKETS - 1;
	return (msb - SP_HIST_SUB_BITS + 1) * sub +
	       ((v >> (msb - SP_HIST_SUB_BITS)) & (sub - 1));
}
#endif

#endif /* __SOFTPART_HIST_H */
