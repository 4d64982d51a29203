//! What the control plane costs the machine: the bytes it reads from and
//! writes to the fast path's maps (most of it through the mmap of .bss,
//! which no system call trace sees, so it counts them itself where it
//! reads or writes), and the CPU time of its main loop.

/// Bytes read from and written to the fast path's maps since the start.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct MapTraffic {
    pub read: u64,
    pub written: u64,
    /// Of `read`, what was read only to answer statistics requests
    /// (`softpart stat`, `--stats`, metrics) and the samples kept for them:
    /// a cost of being watched, proportional to homes x CPU ids, apart
    /// from the scheduling work's.
    pub read_for_stats: u64,
}

impl MapTraffic {
    /// `n` values of type `T` read.
    pub(crate) fn read<T>(&mut self, n: usize) {
        self.read += (n * size_of::<T>()) as u64;
    }

    /// `n` values of type `T` read for a statistics request.
    pub(crate) fn read_for_stats<T>(&mut self, n: usize) {
        let bytes = (n * size_of::<T>()) as u64;
        self.read += bytes;
        self.read_for_stats += bytes;
    }

    /// `n` values of type `T` written.
    pub(crate) fn wrote<T>(&mut self, n: usize) {
        self.written += (n * size_of::<T>()) as u64;
    }
}

/// The main loop's CPU time (ns) and map bytes read by what it was doing.
#[derive(Clone, Debug, Default)]
pub(crate) struct PhaseCpu {
    ns: std::collections::BTreeMap<&'static str, u64>,
    runs: std::collections::BTreeMap<&'static str, u64>,
    read: std::collections::BTreeMap<&'static str, u64>,
    /// MapTraffic::read when the last phase ended.
    read_at: u64,
}

impl PhaseCpu {
    /// Counts the CPU time since `at` (a thread_cpu_ns() reading) and the
    /// bytes read since the last phase ended (`read`: MapTraffic::read
    /// now) under `phase`; returns the time now, for the next phase.
    pub(crate) fn add(&mut self, phase: &'static str, at: u64, read: u64) -> u64 {
        let now = thread_cpu_ns();
        *self.ns.entry(phase).or_default() += now.saturating_sub(at);
        *self.runs.entry(phase).or_default() += 1;
        *self.read.entry(phase).or_default() += read.saturating_sub(self.read_at);
        self.read_at = read;
        now
    }

    /// Map bytes read by phase.
    pub(crate) fn read_bytes(&self) -> std::collections::BTreeMap<String, u64> {
        self.read
            .iter()
            .map(|(&k, &v)| (k.to_string(), v))
            .collect()
    }

    /// Counts one more of `what` (a copy of a table, say) without a time.
    pub(crate) fn count(&mut self, what: &'static str) {
        *self.runs.entry(what).or_default() += 1;
    }

    /// How many times each phase ran (and each counted thing happened).
    pub(crate) fn runs(&self) -> std::collections::BTreeMap<String, u64> {
        self.runs
            .iter()
            .map(|(&k, &v)| (k.to_string(), v))
            .collect()
    }

    /// CPU seconds by phase.
    pub(crate) fn secs(&self) -> std::collections::BTreeMap<String, f64> {
        self.ns
            .iter()
            .map(|(&k, &v)| (k.to_string(), v as f64 / 1e9))
            .collect()
    }
}

/// The CPU time (user and system) of the calling thread, in ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; the clock id is a constant.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_bytes_by_type() {
        let mut t = MapTraffic::default();
        t.read::<u64>(3);
        t.wrote::<u32>(2);
        t.read::<[u8; 5]>(1);
        t.read_for_stats::<u64>(2);
        assert_eq!(
            t,
            MapTraffic {
                read: 45,
                written: 8,
                read_for_stats: 16
            }
        );
    }

    #[test]
    fn each_phase_is_given_the_bytes_read_since_the_last_ended() {
        let mut phases = PhaseCpu::default();
        let mut t = MapTraffic::default();
        t.read::<u64>(4);
        let at = phases.add("contract", thread_cpu_ns(), t.read);
        t.read_for_stats::<u64>(1);
        let at = phases.add("stats_samples", at, t.read);
        phases.add("softness", at, t.read);
        t.read::<u32>(1);
        phases.add("contract", at, t.read);
        let read = phases.read_bytes();
        assert_eq!(read["contract"], 36);
        assert_eq!(read["stats_samples"], 8);
        assert_eq!(read["softness"], 0);
        assert_eq!(read.values().sum::<u64>(), t.read);
    }

    #[test]
    fn the_thread_clock_advances_with_work() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > a);
    }
}
