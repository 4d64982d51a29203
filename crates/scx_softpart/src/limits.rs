//! The full tables, said out loud (softpart_core::limits): each second
//! the control plane compares each fast-path limit's event count with
//! what it saw, names the latest subject the fast path left
//! (limit_subject[]) and logs a limit's first hit at warning level; the
//! same for its own table of home ids, from the refusals it counted. The
//! fast path's counts are events (`softpart_events_total`); every limit's
//! is `softpart_limit_refusals_total`; `softpart stat` lists the limits hit.

use crate::Scheduler;
use crate::bpf_intf as intf;
use log::warn;
use softpart_core::limits::Limit;

/// What a limit's subject is.
#[derive(Clone, Copy)]
enum Subject {
    Thread,
    Cgroup,
    CgroupSlot,
}

/// One fast-path limit: its entry in limit_subject[], the event that
/// counts it, what it is.
struct FastLimit {
    index: u32,
    event: &'static str,
    subject: Subject,
    limit: Limit,
}

const FAST_LIMITS: [FastLimit; 5] = [
    FastLimit {
        index: intf::sp_limit_SP_LIMIT_TASK_HOMES,
        event: "task_home_not_kept",
        subject: Subject::Thread,
        limit: Limit {
            name: "task_homes",
            size: Some(intf::softpart_consts_SP_MAX_TASK_HOMES as usize),
            lost: "the home it inherited at fork is not kept (it runs without one)",
        },
    },
    FastLimit {
        index: intf::sp_limit_SP_LIMIT_CGROUP_SLOTS,
        event: "cgroup_no_slot",
        subject: Subject::Cgroup,
        limit: Limit {
            name: "cgroup_slots",
            size: Some(intf::softpart_consts_SP_MAX_CGROUPS as usize),
            lost: "its cpu.weight and cpu.max are not applied (its tasks are charged as plain tasks)",
        },
    },
    FastLimit {
        index: intf::sp_limit_SP_LIMIT_CGROUP_STORAGE,
        event: "cgroup_no_storage",
        subject: Subject::Cgroup,
        limit: Limit {
            name: "cgroup_storage",
            size: None,
            lost: "its cpu.weight and cpu.max are not applied (the kernel could not allocate its storage)",
        },
    },
    FastLimit {
        index: intf::sp_limit_SP_LIMIT_PARK_QUEUE,
        event: "cgroup_refused",
        subject: Subject::Cgroup,
        limit: Limit {
            name: "park_queues",
            size: None,
            lost: "its creation was refused (its park queue could not be made)",
        },
    },
    FastLimit {
        index: intf::sp_limit_SP_LIMIT_RELEASES,
        event: "release_not_queued",
        subject: Subject::CgroupSlot,
        limit: Limit {
            name: "release_queue",
            size: Some(2 * intf::softpart_consts_SP_MAX_CGROUPS as usize),
            lost: "its parked tasks wait for the next refill",
        },
    },
];

/// The control plane's table of home ids, of `size` entries (set at load).
fn home_ids(size: usize) -> Limit {
    Limit {
        name: "home_ids",
        size: Some(size),
        lost: "it gets no home (the request or rule is refused; a balanced cgroup is not placed)",
    }
}

/// The capped cgroups a task's CPU time is charged to, found too few
/// for a cgroup by the control plane in the tree.
const CAP_DEPTH: Limit = Limit {
    name: "cap_depth",
    size: Some(intf::softpart_consts_SP_CAP_DEPTH as usize),
    lost: "it is under more cpu.max caps than that, and the caps above its nearest ones are not charged its tasks' CPU time",
};

/// Every limit `softpart stat` may list, with `homes` home ids.
pub(crate) fn all(homes: usize) -> Vec<Limit> {
    FAST_LIMITS
        .iter()
        .map(|l| l.limit)
        .chain([home_ids(homes), CAP_DEPTH])
        .collect()
}

fn thread_name(tid: u64) -> String {
    match std::fs::read_to_string(format!("/proc/{tid}/comm")) {
        Ok(comm) => format!("thread {tid} ({})", comm.trim()),
        Err(_) => format!("thread {tid} (gone)"),
    }
}

impl Scheduler<'_> {
    /// Logs each fast-path limit's first hit, and notes the latest subject.
    pub(crate) fn check_limits(&mut self) {
        let (hits, subjects): (Vec<u64>, Vec<u64>) =
            self.skel
                .maps
                .bss_data
                .as_ref()
                .map_or((Vec::new(), Vec::new()), |bss| {
                    // SAFETY: aligned u64s of the mapped .bss, written whole.
                    let read = |v: &[u64]| {
                        v.iter()
                            .map(|x| unsafe { std::ptr::read_volatile(x) })
                            .collect()
                    };
                    (read(&bss.limit_hits), read(&bss.limit_subject))
                });
        self.traffic.read::<u64>(hits.len() + subjects.len());
        for l in &FAST_LIMITS {
            let hits = hits.get(l.index as usize).copied().unwrap_or(0);
            let id = subjects.get(l.index as usize).copied().unwrap_or(0);
            let name = || match l.subject {
                Subject::Thread => thread_name(id),
                Subject::Cgroup => self
                    .cgroup_paths
                    .get(&id)
                    .map_or(format!("cgroup id {id}"), |p| format!("cgroup {p}")),
                Subject::CgroupSlot => self
                    .skel
                    .maps
                    .bss_data
                    .as_ref()
                    .and_then(|bss| bss.cgroups.get(id as usize))
                    .and_then(|c| self.cgroup_paths.get(&c.cgid))
                    .map_or(format!("cgroup slot {id}"), |p| format!("cgroup {p}")),
            };
            let counted = format!("softpart_events_total{{event=\"{}\"}}", l.event);
            if let Some(line) = self.limits.observe(&l.limit, hits, name, &counted) {
                warn!("{line}");
            }
        }
        let (refused, last) = self.homes.refused();
        let last = last.to_string();
        if let Some(line) = self.limits.observe(
            &home_ids(self.homes.capacity()),
            refused,
            || format!("group {last}"),
            "softpart_limit_refusals_total{limit=\"home_ids\"}",
        ) {
            warn!("{line}");
        }
        let deep = self.contract.caps_too_deep_last;
        if let Some(line) = self.limits.observe(
            &CAP_DEPTH,
            self.contract.caps_too_deep_found,
            || {
                self.cgroup_paths
                    .get(&deep)
                    .map_or(format!("cgroup id {deep}"), |p| format!("cgroup {p}"))
            },
            "softpart_limit_refusals_total{limit=\"cap_depth\"}",
        ) {
            warn!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EVENT_NAMES;

    #[test]
    fn every_fast_limit_is_counted_by_an_event_and_has_its_own_subject() {
        let mut seen = std::collections::BTreeSet::new();
        for l in &FAST_LIMITS {
            assert!(EVENT_NAMES.contains(&l.event), "no event {}", l.event);
            assert!(l.index < intf::sp_limit_SP_NR_LIMITS, "{}", l.limit.name);
            assert!(seen.insert(l.index), "{} shares its subject", l.limit.name);
        }
        assert_eq!(seen.len(), intf::sp_limit_SP_NR_LIMITS as usize);
    }
}
