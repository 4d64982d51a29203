//! The cgroup tree, walked every second: cgroups that are gone lose their
//! home, new ones that match the config file's rules get theirs or join
//! the balancer, renamed balanced ones are matched again.

use crate::Scheduler;
use crate::control::{self, Peer};
use crate::{balancer, bpf_intf};
use anyhow::bail;
use log::{info, warn};
use softpart_core::config;
use softpart_core::cpulist;
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

impl Scheduler<'_> {
    /// Forgets cgroups that are gone, and gives new cgroups that match the
    /// config file their home.
    pub(crate) fn scan_cgroups(&mut self) {
        self.last_scan = std::time::Instant::now();
        let live = cgroup_tree(Path::new(control::CGROUP_ROOT));
        self.cgroup_paths = live.iter().map(|(l, id)| (*id, l.clone())).collect();
        self.memory_homes.tree_changed(&self.cgroup_paths);
        let ids: BTreeSet<u64> = live.iter().map(|(_, id)| *id).collect();
        let gone: Vec<u64> = self
            .cgroup_groups
            .keys()
            .filter(|id| !ids.contains(id))
            .copied()
            .collect();
        for cgid in gone {
            self.clear_cgroup_home(cgid);
        }
        self.seen_cgroups.retain(|id| ids.contains(id));
        // A balanced cgroup renamed: forget it; it is found again below if
        // its new path still matches.
        let renamed: Vec<u64> = live
            .iter()
            .filter(|(label, id)| {
                self.balancer
                    .groups
                    .get(id)
                    .is_some_and(|g| &g.label != label)
            })
            .map(|(_, id)| *id)
            .collect();
        for cgid in renamed {
            self.clear_cgroup_home(cgid);
        }
        for (label, cgid) in live {
            let first_seen = self.seen_cgroups.insert(cgid);
            if first_seen {
                self.warn_unenforced(&label);
            }
            if self.cgroup_groups.contains_key(&cgid) {
                continue;
            }
            match config::match_cgroup(&self.rules, &self.balance_rules, &label, first_seen) {
                Some(config::Match::Home(rule)) => {
                    let rule = rule.clone();
                    self.apply_home_rule(&label, cgid, &rule);
                }
                Some(config::Match::Balance(rule)) => {
                    let period = rule.period_ms;
                    let pattern = rule.cgroup.clone();
                    self.start_balancing(
                        &label,
                        cgid,
                        period,
                        &format!("rule cgroup = {pattern:?}"),
                    );
                }
                None => {}
            }
        }
    }

    /// Names a new cgroup whose cpu.max or cpu.idle this kernel does not
    /// let scx_softpart enforce: nothing is ignored silently.
    fn warn_unenforced(&self, label: &str) {
        let dir = Path::new(control::CGROUP_ROOT).join(label.trim_start_matches('/'));
        for u in &self.unenforced {
            if let Ok(v) = std::fs::read_to_string(dir.join(u.file))
                && (u.set)(&v)
            {
                warn!(
                    "cgroup {label}: {} {} not enforced: this kernel does not hand {} \
                     to sched_ext schedulers ({} and later do)",
                    u.file,
                    v.trim(),
                    u.file,
                    u.since
                );
            }
        }
    }

    pub(crate) fn apply_home_rule(&mut self, label: &str, cgid: u64, rule: &config::Rule) {
        let applied =
            control::check_cgroup(&Peer::root(), label, Some(&rule.cpus)).and_then(|(id, _)| {
                if id != cgid {
                    bail!("cgroup {label} was replaced while it was being set up");
                }
                self.set_cgroup_home(id, label.to_string(), &rule.cpus, rule.softness)
            });
        match applied {
            Ok(()) => {
                self.rule_homes.insert(cgid, rule.cgroup.clone());
                info!(
                    "config: cgroup {label} prefers CPUs {} (rule cgroup = {:?})",
                    cpulist::format(&rule.cpus),
                    rule.cgroup
                )
            }
            Err(e) => warn!("config: cgroup {label} (rule {:?}): {e:#}", rule.cgroup),
        }
    }

    /// Starts balancing a cgroup (no home of its own; a balance rule
    /// matches, or someone asked); until its load is known its home is the
    /// whole machine (it runs as if it had none, with counters of its
    /// own). `why` is logged. Whether it joined.
    pub(crate) fn start_balancing(
        &mut self,
        label: &str,
        cgid: u64,
        period_ms: Option<u64>,
        why: &str,
    ) -> bool {
        let period =
            Duration::from_millis(period_ms.unwrap_or(self.balance_period.as_millis() as u64));
        let all = self.machine.cpus.clone();
        match self.set_cgroup_home(cgid, label.to_string(), &all, None) {
            Ok(()) => {
                self.balancer.groups.insert(
                    cgid,
                    balancer::Balanced::new(label.to_string(), period, self.parts.len()),
                );
                info!("balancer: cgroup {label} joins ({why})");
                true
            }
            Err(e) => {
                warn!("balancer: cgroup {label}: {e:#}");
                false
            }
        }
    }
}

/// A cgroup setting the kernel does not hand to sched_ext schedulers (an
/// older kernel): a cgroup found with it set is named in a warning.
pub(crate) struct Unenforced {
    /// The cgroup file, e.g. "cpu.idle".
    pub file: &'static str,
    /// Whether a value of the file sets it.
    pub set: fn(&str) -> bool,
    /// The first kernel that hands it over.
    pub since: &'static str,
}

/// The settings this kernel does not hand over.
pub(crate) fn unenforced_settings() -> Vec<Unenforced> {
    let has = |op: &str| scx_utils::compat::struct_has_field("sched_ext_ops", op).unwrap_or(false);
    let mut out = Vec::new();
    if !has("cgroup_set_bandwidth") {
        out.push(Unenforced {
            file: "cpu.max",
            set: |v| !v.starts_with("max"),
            since: "6.17",
        });
    }
    if !has("cgroup_set_idle") {
        out.push(Unenforced {
            file: "cpu.idle",
            set: |v| v.trim() == "1",
            since: "6.19",
        });
    }
    out
}

/// Every cgroup under `root` (at most SP_MAX_CGROUP_DEPTH levels down),
/// as (path from the root, cgroup id).
pub(crate) fn cgroup_tree(root: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0u32)];
    while let Some((dir, depth)) = stack.pop() {
        if let Ok(meta) = std::fs::metadata(&dir) {
            out.push((control::cgroup_label(&dir), meta.ino()));
        }
        if depth >= bpf_intf::softpart_consts_SP_MAX_CGROUP_DEPTH {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push((e.path(), depth + 1));
            }
        }
    }
    out
}
