//! Moving a process's pages to a node with move_pages(2), in bounded
//! batches: only its anonymous mappings of base pages whose policy it did
//! not set itself, only pages mapped by it alone (the kernel's
//! MPOL_MF_MOVE), never onto a node its cpuset does not allow (the kernel
//! refuses those with EACCES).

use softpart_core::memory_follow::{Rate, batch_allowance};
use softpart_core::numa_maps;
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};

const PAGE: u64 = 4096;
/// Pages per move_pages call: 16 MB, so a call's work is bounded
/// whatever the mapping's size (a few ms of copying on hardware). Not
/// smaller: every call that moves pages drains the per-CPU LRU caches
/// first (`lru_cache_disable()`, an expedited RCU grace period that
/// interrupts every CPU), so at 64 MB/s 2 MB calls interrupted every CPU
/// 32 times a second, 16 MB ones four times; under TCG the 2 MB calls'
/// grace periods took most of the mover's CPU time.
const BATCH: usize = 4096;
/// include/uapi/linux/mempolicy.h
const MPOL_MF_MOVE: libc::c_int = 1 << 1;

/// Why pages were not moved, counted in pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// The mapping's or the thread's memory policy is the user's.
    UserPolicy,
    /// Mapped by more than one process (EACCES from move_pages on a page,
    /// or the whole call refused for the cpuset).
    SharedOrCpuset,
    /// Pinned (for DMA: it fails every time while pinned) or in use at
    /// that moment (EBUSY).
    Busy,
    /// The target node had no memory for it (ENOMEM).
    NoMemory,
    /// The rate's second was used up.
    Rate,
    /// The target node would have fallen under its high watermark plus
    /// the reserve, or the job's room was used up.
    Reserve,
    /// The process could not be read or moved by us (no ptrace access:
    /// another user's process without CAP_SYS_PTRACE, or an LSM).
    NotPermitted,
}

impl Refusal {
    /// Its name in the statistics.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::UserPolicy => "user_policy",
            Refusal::SharedOrCpuset => "shared",
            Refusal::Busy => "busy",
            Refusal::Reserve => "reserve",
            Refusal::NoMemory => "no_memory",
            Refusal::Rate => "rate",
            Refusal::NotPermitted => "not_permitted",
        }
    }
}

/// What one pass over a process did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub moved_bytes: u64,
    pub refused_pages: BTreeMap<Refusal, u64>,
    /// move_pages calls made (each at most BATCH pages).
    pub calls: u64,
    /// The mover's CPU time for it.
    pub cpu_ns: u64,
}

/// The nodes of `pages` (move_pages with no target: where each page is,
/// a negative errno where none is mapped).
fn move_pages(
    pid: i32,
    pages: &[*mut libc::c_void],
    nodes: Option<&[libc::c_int]>,
) -> io::Result<Vec<libc::c_int>> {
    let mut status = vec![0 as libc::c_int; pages.len()];
    // SAFETY: `pages`, `nodes` (when given) and `status` have
    // `pages.len()` entries; the kernel reads the first two and writes
    // the third, and only touches the addresses in the target process.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            nodes.map_or(std::ptr::null(), |n| n.as_ptr()),
            status.as_mut_ptr(),
            MPOL_MF_MOVE,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(status)
}

/// The end address of each mapping by its start, from /proc/PID/maps
/// (numa_maps gives starts only).
fn ends(maps: &str) -> BTreeMap<u64, u64> {
    maps.lines()
        .filter_map(|l| {
            let range = l.split_whitespace().next()?;
            let (a, b) = range.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect()
}

/// Whether a thread of `pid` other than the one /proc/PID/numa_maps reads
/// through set its own memory policy (set_mempolicy is per thread): the
/// first mapping line of each thread's numa_maps shows its policy where
/// the mapping has none. Only the first line is read, so the cost does not
/// grow with the process's mappings.
fn a_thread_set_a_policy(pid: i32) -> bool {
    use std::io::Read;
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        let mut head = [0u8; 512];
        let Ok(mut f) = std::fs::File::open(t.path().join("numa_maps")) else {
            return false;
        };
        let n = f.read(&mut head).unwrap_or(0);
        let text = String::from_utf8_lossy(&head[..n]);
        let first = text.lines().next().unwrap_or("");
        numa_maps::parse(first)
            .first()
            .is_some_and(|m| m.user_policy())
    })
}

/// What a job may still move: its room and the target's floor (the free
/// memory the target node keeps: its high watermark plus the reserve).
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub left: u64,
    pub target: usize,
    pub floor: u64,
}

/// The node's free memory now; 0 where it cannot be read (nothing moves).
fn node_free(node: usize) -> u64 {
    std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/meminfo"))
        .ok()
        .and_then(|t| softpart_core::memstat::node_free_bytes(&t))
        .unwrap_or(0)
}

/// What a flush of the pages gathered says: go on, or stop this process
/// (the rate's second is used up, or the process is gone).
enum Flushed {
    More,
    Stop,
}

/// Moves the gathered `pages` to `target` in one call, as many as the rate
/// grants; counts what moved and what was refused by cause in `out`.
fn flush(
    pid: i32,
    pages: &mut Vec<*mut libc::c_void>,
    budget: &mut Budget,
    rate: &mut Rate,
    now_ns: u64,
    out: &mut Outcome,
) -> io::Result<Flushed> {
    if pages.is_empty() {
        return Ok(Flushed::More);
    }
    let target = budget.target;
    let allowed = batch_allowance(
        pages.len() as u64 * PAGE,
        budget.left,
        node_free(target),
        budget.floor,
    );
    let fit = (allowed / PAGE) as usize;
    let full = fit < pages.len();
    if full {
        *out.refused_pages.entry(Refusal::Reserve).or_default() += (pages.len() - fit) as u64;
        pages.truncate(fit);
        if fit == 0 {
            budget.left = 0;
            return Ok(Flushed::Stop);
        }
    }
    let granted = rate.take(now_ns, pages.len() as u64 * PAGE);
    let take = (granted / PAGE) as usize;
    if take < pages.len() {
        *out.refused_pages.entry(Refusal::Rate).or_default() += (pages.len() - take) as u64;
    }
    if take == 0 {
        rate.give_back(granted);
        pages.clear();
        return Ok(Flushed::Stop);
    }
    let nodes = vec![target as libc::c_int; take];
    out.calls += 1;
    let status = match move_pages(pid, &pages[..take], Some(&nodes)) {
        Ok(s) => s,
        Err(e) => {
            rate.give_back(granted);
            let n = pages.len() as u64;
            pages.clear();
            return match e.raw_os_error() {
                Some(libc::EACCES) => {
                    *out.refused_pages
                        .entry(Refusal::SharedOrCpuset)
                        .or_default() += n;
                    Ok(Flushed::More)
                }
                Some(libc::ESRCH) => Ok(Flushed::Stop),
                _ => Err(e),
            };
        }
    };
    let rate_cut = take < pages.len();
    pages.clear();
    let mut moved = 0u64;
    for s in status {
        let why = match s {
            s if s == target as libc::c_int => {
                moved += 1;
                continue;
            }
            s if s >= 0 => continue,
            s if -s == libc::EACCES => Refusal::SharedOrCpuset,
            s if -s == libc::EBUSY => Refusal::Busy,
            s if -s == libc::ENOMEM => Refusal::NoMemory,
            _ => continue,
        };
        *out.refused_pages.entry(why).or_default() += 1;
    }
    out.moved_bytes += moved * PAGE;
    budget.left = budget.left.saturating_sub(moved * PAGE);
    if full {
        // The target is at its floor or the job's room is used: the job
        // ends here.
        budget.left = 0;
    }
    rate.give_back(granted - moved * PAGE);
    Ok(if rate_cut || full {
        Flushed::Stop
    } else {
        Flushed::More
    })
}

/// Moves `pid`'s pages that lie off `home_nodes` to `target`, at most
/// what `rate` grants, until `stopped()` says so. Where each page is, is
/// asked a mapping's BATCH pages at a time (a call that only asks drains
/// nothing); the pages off home are gathered across mappings and moved
/// BATCH at a time, so a process of many small mappings costs one moving
/// call, not one per mapping. An error only where the process cannot be
/// read at all (gone, or not ours to read).
pub fn move_process(
    pid: i32,
    home_nodes: &[usize],
    budget: &mut Budget,
    rate: &mut Rate,
    now_ns: impl Fn() -> u64,
    stopped: &dyn Fn() -> bool,
) -> io::Result<Outcome> {
    let numa = std::fs::read_to_string(format!("/proc/{pid}/numa_maps"))?;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let ends = ends(&maps);
    let mut out = Outcome::default();
    let thread_policy = a_thread_set_a_policy(pid);
    let mut off: Vec<*mut libc::c_void> = Vec::new();
    for m in numa_maps::parse(&numa) {
        let away: u64 = m
            .pages_per_node
            .iter()
            .enumerate()
            .filter(|(n, _)| !home_nodes.contains(n))
            .map(|(_, p)| p)
            .sum();
        if m.file || m.anon_pages == 0 || m.page_kb != PAGE / 1024 || away == 0 {
            continue;
        }
        if m.user_policy() || thread_policy {
            *out.refused_pages.entry(Refusal::UserPolicy).or_default() += away;
            continue;
        }
        let Some(&end) = ends.get(&m.start) else {
            continue;
        };
        let mut addr = m.start;
        while addr < end {
            if stopped() {
                return Ok(out);
            }
            let n = (((end - addr) / PAGE) as usize).min(BATCH);
            let pages: Vec<*mut libc::c_void> = (0..n as u64)
                .map(|i| (addr + i * PAGE) as *mut libc::c_void)
                .collect();
            addr += n as u64 * PAGE;
            out.calls += 1;
            let at = match move_pages(pid, &pages, None) {
                Ok(s) => s,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(out),
                Err(e) => return Err(e),
            };
            for (p, &node) in pages.iter().zip(&at) {
                if node >= 0 && !home_nodes.contains(&(node as usize)) {
                    off.push(*p);
                    if off.len() == BATCH {
                        if let Flushed::Stop =
                            flush(pid, &mut off, budget, rate, now_ns(), &mut out)?
                        {
                            return Ok(out);
                        }
                        if stopped() {
                            return Ok(out);
                        }
                    }
                }
            }
        }
    }
    flush(pid, &mut off, budget, rate, now_ns(), &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_by_start_from_maps() {
        let e = ends(
            "55d0c1a4f000-55d0c1a50000 r--p 00000000 08:01 1 /usr/bin/x\n\
             7f2c3a000000-7f2c44000000 rw-p 00000000 00:00 0\n",
        );
        assert_eq!(e[&0x7f2c3a000000], 0x7f2c44000000);
        assert_eq!(e.len(), 2);
    }

    /// This process's own anonymous memory, touched here, moved to the
    /// node it is already on: nothing lies away, nothing is moved, and no
    /// call fails (a single-node host runs this as well as a NUMA one).
    #[test]
    fn own_memory_already_home_is_left() {
        let buf = vec![1u8; 8 << 20];
        let mut rate = Rate::new(u64::MAX / 4);
        let all: Vec<usize> = (0..64).collect();
        let mut budget = Budget {
            left: u64::MAX,
            target: 0,
            floor: 0,
        };
        let out = move_process(
            std::process::id() as i32,
            &all,
            &mut budget,
            &mut rate,
            || 0,
            &|| false,
        )
        .unwrap();
        assert_eq!(out.moved_bytes, 0);
        assert!(out.refused_pages.is_empty(), "{out:?}");
        drop(buf);
    }
}

/// A tenant's pages to bring home: its processes, its home's nodes and the
/// node to move to (memory_follow::decide), and at most how many bytes.
#[derive(Debug, Clone)]
pub struct Job {
    pub label: String,
    pub pids: Vec<i32>,
    pub home_nodes: Vec<usize>,
    pub target: usize,
    pub max_bytes: u64,
    /// The free memory the target keeps (its high watermark plus the
    /// reserve), checked before each batch.
    pub target_floor: u64,
    /// Set when the tenant's home changed or went: the job ends before its
    /// next batch.
    pub cancel: Arc<AtomicBool>,
}

/// The moves off the control plane's loop, on a thread of their own that
/// holds the host-wide rate: a job of hundreds of MB takes seconds under
/// the rate, and the loop's work must not wait for it. Jobs are done one
/// at a time, in the order given; a job's processes that are gone by then
/// are skipped.
pub struct Mover {
    stop: Arc<AtomicBool>,
    jobs: Option<mpsc::Sender<Job>>,
    /// What each process of a job did, as it is done; `true` with the
    /// job's end.
    done: mpsc::Receiver<(String, Outcome, bool)>,
    thread: Option<std::thread::JoinHandle<()>>,
    queued: usize,
    /// The most bytes moved in any one second so far.
    peak: Arc<AtomicU64>,
}

impl Mover {
    pub fn spawn(bytes_per_s: u64) -> io::Result<Mover> {
        let (jobs, todo) = mpsc::channel::<Job>();
        let (out, done) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (stopping, peak_seen) = (stop.clone(), peak.clone());
        let thread = std::thread::Builder::new()
            .name("softpart-memory".into())
            .spawn(move || {
                let start = std::time::Instant::now();
                let now = || start.elapsed().as_nanos() as u64;
                let mut rate = Rate::new(bytes_per_s);
                while let Ok(job) = todo.recv() {
                    let stopped =
                        || stopping.load(Ordering::Relaxed) || job.cancel.load(Ordering::Relaxed);
                    let (mut moved, mut denied) = (0u64, false);
                    let mut budget = Budget {
                        left: job.max_bytes,
                        target: job.target,
                        floor: job.target_floor,
                    };
                    for &pid in &job.pids {
                        if budget.left == 0 || stopped() {
                            break;
                        }
                        let cpu0 = crate::traffic::thread_cpu_ns();
                        let mut o = match move_process(
                            pid,
                            &job.home_nodes,
                            &mut budget,
                            &mut rate,
                            now,
                            &stopped,
                        ) {
                            Ok(o) => o,
                            Err(e)
                                if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) =>
                            {
                                denied = true;
                                Outcome::default()
                            }
                            // Gone, or nothing there to read.
                            Err(_) => Outcome::default(),
                        };
                        o.cpu_ns = crate::traffic::thread_cpu_ns().saturating_sub(cpu0);
                        moved += o.moved_bytes;
                        peak_seen.fetch_max(rate.used(now()), Ordering::Relaxed);
                        if out.send((job.label.clone(), o, false)).is_err() {
                            return;
                        }
                    }
                    let mut last = Outcome::default();
                    if denied && moved < job.max_bytes {
                        last.refused_pages
                            .insert(Refusal::NotPermitted, (job.max_bytes - moved) / PAGE);
                    }
                    if out.send((job.label, last, true)).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Mover {
            stop,
            jobs: Some(jobs),
            done,
            thread: Some(thread),
            queued: 0,
            peak,
        })
    }

    /// The most bytes moved within one second so far (at most the rate).
    pub fn peak_bytes_per_s(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Jobs handed over and not yet done.
    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.queued
    }

    pub fn submit(&mut self, job: Job) -> bool {
        let sent = self.jobs.as_ref().is_some_and(|tx| tx.send(job).is_ok());
        self.queued += usize::from(sent);
        sent
    }

    /// What the jobs did since the last call, a process at a time; `true`
    /// marks a job's end.
    pub fn take(&mut self) -> Vec<(String, Outcome, bool)> {
        let done: Vec<_> = self.done.try_iter().collect();
        let ended = done.iter().filter(|d| d.2).count();
        self.queued -= ended.min(self.queued);
        done
    }
}

impl Drop for Mover {
    /// Ends the thread within one batch: the job in hand stops before its
    /// next move_pages call. A page is either moved or not, so nothing is
    /// left half-done; what was not moved is moved by the next start.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod mover_thread_tests {
    use super::*;

    /// Everything the mover said until a job's end.
    fn until_end(m: &mut Mover) -> Vec<(String, Outcome, bool)> {
        let mut all = Vec::new();
        for _ in 0..500 {
            all.extend(m.take());
            if all.last().is_some_and(|d| d.2) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        all
    }

    #[test]
    fn a_job_comes_back_a_process_at_a_time() {
        let buf = vec![1u8; 4 << 20];
        let mut m = Mover::spawn(1 << 30).unwrap();
        assert!(m.submit(Job {
            label: "self".into(),
            pids: vec![std::process::id() as i32, i32::MAX],
            home_nodes: (0..64).collect(),
            target: 0,
            max_bytes: u64::MAX,
            target_floor: 0,
            cancel: Arc::new(AtomicBool::new(false)),
        }));
        assert_eq!(m.queued(), 1);
        let done = until_end(&mut m);
        // One line per process (the second is gone), then the end.
        assert_eq!(done.len(), 3, "{done:?}");
        assert!(done.iter().all(|d| d.0 == "self"));
        assert!(
            done.iter().all(|d| d.1.moved_bytes == 0),
            "all of it was home already"
        );
        assert_eq!(done.iter().filter(|d| d.2).count(), 1);
        assert_eq!(m.queued(), 0);
        drop(buf);
    }

    /// A cancelled job makes no call at all.
    #[test]
    fn a_cancelled_job_does_nothing() {
        let mut m = Mover::spawn(1 << 30).unwrap();
        m.submit(Job {
            label: "gone".into(),
            pids: vec![std::process::id() as i32],
            home_nodes: vec![63],
            target: 63,
            max_bytes: u64::MAX,
            target_floor: 0,
            cancel: Arc::new(AtomicBool::new(true)),
        });
        let done = until_end(&mut m);
        assert_eq!(done.len(), 1, "{done:?}");
        assert!(done[0].2);
        assert_eq!(done[0].1.calls, 0);
    }
}
