//! Reads that must not be preempted halfway.
//!
//! A snapshot (Observer::snapshot) and the cpuacct reads around it are many
//! system calls. A normal task among hundreds of runnable threads can be
//! preempted between them for a long time (up to 600 ms measured in a
//! busy 8-vCPU TCG guest), and every run that ends meanwhile lands in
//! counters meant to stop at the snapshot's instant: one window's CPU time
//! came out at 8.4 CPU-s per s on 8 CPUs. SCHED_FIFO runs above EEVDF and
//! sched_ext alike, so every scheduler compared gets the same short read.

/// The calling thread runs SCHED_FIFO while this lives and goes back to
/// SCHED_OTHER on drop. Never hold it across a fork or exec: children
/// inherit the policy.
pub struct RealtimeReads {
    raised: bool,
}

impl RealtimeReads {
    pub fn start() -> Self {
        let param = libc::sched_param { sched_priority: 40 };
        // SAFETY: sets the calling thread's policy from a valid struct.
        // Without the privilege the reads stay as they were; the
        // snapshot's read_ns records what they cost.
        let raised = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
        RealtimeReads { raised }
    }

    /// Whether the thread runs SCHED_FIFO (false without CAP_SYS_NICE).
    pub fn raised(&self) -> bool {
        self.raised
    }
}

impl Drop for RealtimeReads {
    fn drop(&mut self) {
        if self.raised {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: as above.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> i32 {
        // SAFETY: reads the calling thread's policy.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn the_policy_is_restored_on_drop() {
        let before = policy();
        {
            let guard = RealtimeReads::start();
            if guard.raised() {
                assert_eq!(policy(), libc::SCHED_FIFO);
            } else {
                assert_eq!(policy(), before, "a failed raise changes nothing");
            }
        }
        assert_eq!(policy(), before);
    }
}
