/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What keeps the verifier's work bounded where the fast path calls a
 * function in a loop.
 *
 * __verified_alone marks a function the verifier checks once, on its
 * own, for any arguments of its parameters' types, and not again at each
 * call: a loop that calls it then costs the verifier the call, not the
 * function's paths multiplied by the states the loop brings to it. Such a
 * function takes scalars and pointers it checks for NULL and returns a
 * scalar. It must be global with default visibility: libbpf turns a
 * global function of hidden visibility (__hidden) into a static one when
 * it loads the object, and the verifier walks a static function again at
 * every call, with the caller's state. noinline, so that the compiler
 * does not copy it into its callers either. The guest test
 * `callbacks_verify_in_bounded_steps` and the unit test
 * `tests/verified_alone.rs` hold both.
 */
#ifndef __SOFTPART_VERIFY_BPF_H
#define __SOFTPART_VERIFY_BPF_H

#define __verified_alone __attribute__((noinline))

#endif /* __SOFTPART_VERIFY_BPF_H */
