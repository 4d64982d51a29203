//! Names of scx_softpart's fast-path event counters, in `enum sp_stat`
//! order (src/bpf/intf.h). `scx_softpart --monitor` prints them; the bench
//! reads them back by name, so both take the list from here.

pub const EVENT_NAMES: [&str; 28] = [
    "pick_prev",
    "pick_core_home",
    "pick_sibling",
    "pick_cpu_home",
    "pick_prev_away",
    "pick_near",
    "pick_core_any",
    "pick_cpu_any",
    "pick_none",
    "enqueue",
    "kick",
    "dispatch_own",
    "dispatch_steal",
    "home_resolve",
    "return_idle",
    "evict",
    "visitor_yield",
    "pick_kernel",
    "enqueue_idle",
    "dispatch_idle",
    "idle_recheck",
    "pick_waker",
    "spill_queued",
    "wake_preempt",
    "spill_claimed",
    "kthread_wait",
    "put_back_held",
    "held_skip",
];
