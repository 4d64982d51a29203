//! `systemctl reload` (SIGHUP): the config file read again, checked whole
//! against the running scheduler, and applied whole, or refused with the
//! reason in the log while the running config stays.
//!
//! What a reload changes: the homes the config file gave (a rule's home
//! becomes the new rule's, or none if no rule matches any more), which
//! cgroups are balanced, and cgroups that match a rule for the first time
//! (a new rule for a service already running applies at once). What it
//! leaves: homes set with `softpart prefer` or `exec`, which stand until
//! cleared, and the partitions, which change only at a restart.

use crate::control;
use crate::homes::Home;
use crate::notify;
use crate::{CheckedConfig, Scheduler, read_topology};
use anyhow::{Result, bail};
use log::{info, warn};
use softpart_core::config::{self, Match};
use softpart_core::control::HomeView;
use softpart_core::cpulist;
use std::collections::BTreeMap;
use std::path::Path;

/// Where a cgroup's home comes from, for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    None,
    /// `softpart prefer --cgroup`: not the config's to change.
    Operator,
    Rule,
    Balancer,
    /// Its memory's (memory_homes.rs): a rule or the operator overrides it.
    Memory,
}

/// What the config loads so far came to, for the status line and the
/// metrics; kept across reattachments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reloads {
    pub applied: u64,
    pub refused: u64,
    /// Whether the last load (the start's or a reload's) was applied.
    pub last_ok: bool,
    /// When a config was last applied, at start or by a reload, in
    /// seconds since the epoch.
    pub last_success_unix: f64,
}

impl Reloads {
    /// The config the scheduler started with, applied at `now`.
    pub fn started(now: f64) -> Reloads {
        Reloads {
            applied: 0,
            refused: 0,
            last_ok: true,
            last_success_unix: now,
        }
    }

    pub fn record(&mut self, ok: bool, now: f64) {
        self.last_ok = ok;
        if ok {
            self.applied += 1;
            self.last_success_unix = now;
        } else {
            self.refused += 1;
        }
    }
}

pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Scheduler<'_> {
    /// Whether a cgroup's home was set with `softpart prefer`.
    pub(crate) fn is_operator_home(&self, cgid: u64) -> bool {
        self.home_source(cgid) == Source::Operator
    }

    fn home_source(&self, cgid: u64) -> Source {
        if self.balancer.groups.contains_key(&cgid) {
            Source::Balancer
        } else if self.rule_homes.contains_key(&cgid) {
            Source::Rule
        } else if self.memory_homes.given.contains_key(&cgid) {
            Source::Memory
        } else if self.cgroup_groups.contains_key(&cgid) {
            Source::Operator
        } else {
            Source::None
        }
    }

    /// Reads the config file again and applies it, or refuses it: the
    /// verdict in words, logged (a refusal as a warning), counted for the
    /// metrics and shown in `systemctl status`.
    pub(crate) fn reload(&mut self) -> std::result::Result<String, String> {
        notify::reloading();
        let verdict = match self.checked_reload() {
            Ok(changed) => {
                let msg = format!(
                    "config applied: {} home rule(s), {} balance rule(s); {changed} cgroup(s) changed",
                    self.rules.len(),
                    self.balance_rules.len()
                );
                info!("reload: {msg}");
                Ok(msg)
            }
            Err(e) => {
                let msg = format!("reload refused, the running config stays: {e:#}");
                warn!("{msg}");
                Err(msg)
            }
        };
        self.reloads.record(verdict.is_ok(), unix_now());
        notify::ready(&self.status_line());
        verdict
    }

    /// `systemctl status`'s line: the homes in effect, the last reload.
    pub(crate) fn status_line(&self) -> String {
        let homes = self.home_views().len();
        let reload = match (
            self.reloads.applied + self.reloads.refused,
            self.reloads.last_ok,
        ) {
            (0, _) => String::new(),
            (_, true) => "; last reload applied".to_string(),
            (_, false) => "; last reload refused (see the journal)".to_string(),
        };
        format!("attached; {homes} home(s) in effect{reload}")
    }

    /// Sends the status line again if it changed.
    pub(crate) fn update_status(&mut self) {
        let line = self.status_line();
        if line != self.status_sent {
            notify::status(&line);
            self.status_sent = line;
        }
    }

    /// The checks, then the changes: nothing changes unless the whole file
    /// is good. Returns how many cgroups changed.
    fn checked_reload(&mut self) -> Result<usize> {
        let topo = read_topology()?;
        let checked = CheckedConfig::new(&self.opts, self.opts.config.as_deref(), &topo)?;
        if checked.explicit_parts != self.explicit_parts {
            bail!(
                "the partitions (field partitions, or --partitions) differ from the running ones: \
                 they change only at a restart"
            );
        }
        self.rules = checked.homes;
        self.balance_rules = checked.balance_rules;
        self.memory.configure(checked.memory);
        let live = crate::cgroup_scan::cgroup_tree(Path::new(control::CGROUP_ROOT));
        let mut changed = 0;
        for (label, cgid) in live {
            let source = self.home_source(cgid);
            // What softpart prefer gave, or another program (an origin),
            // is not the config's to change.
            if source == Source::Operator || self.origins.contains_key(&cgid) {
                continue;
            }
            let wanted = config::match_cgroup(&self.rules, &self.balance_rules, &label, true);
            match (wanted, source) {
                (Some(Match::Home(rule)), _) => {
                    if source == Source::Rule && self.has_home(&label, &rule.cpus, rule.softness) {
                        continue;
                    }
                    let rule = rule.clone();
                    self.balancer.groups.remove(&cgid);
                    self.apply_home_rule(&label, cgid, &rule);
                }
                (Some(Match::Balance(_)), Source::Balancer) => continue,
                (Some(Match::Balance(rule)), _) => {
                    let (period, pattern) = (rule.period_ms, rule.cgroup.clone());
                    self.clear_cgroup_home(cgid);
                    self.start_balancing(
                        &label,
                        cgid,
                        period,
                        &format!("rule cgroup = {pattern:?}"),
                    );
                }
                (None, Source::None | Source::Memory) => continue,
                (None, _) => {
                    self.clear_cgroup_home(cgid);
                    info!("reload: cgroup {label}: no rule matches any more, home cleared");
                }
            }
            self.seen_cgroups.insert(cgid);
            changed += 1;
        }
        Ok(changed)
    }

    /// Every home in effect, cgroups first, for `softpart list`.
    pub(crate) fn home_views(&self) -> Vec<HomeView> {
        let view = |kind: &str, target: String, h: &Home, source: String| HomeView {
            kind: kind.to_string(),
            target,
            cpus: cpulist::format(&h.cpus),
            softness: h.softness.map(|s| s.to_string()),
            source,
        };
        let mut out = Vec::new();
        for (&cgid, label) in &self.cgroup_groups {
            let Some(h) = self.homes.find(label).and_then(|id| self.homes.get(id)) else {
                continue;
            };
            let source = match self.home_source(cgid) {
                Source::Rule => format!("config rule {:?}", self.rule_homes[&cgid]),
                Source::Balancer => match self.origins.get(&cgid) {
                    Some(o) => format!("balancer, {o}"),
                    None => "balancer".to_string(),
                },
                Source::Memory => self.memory_homes.source(cgid).unwrap_or_default(),
                _ => self
                    .origins
                    .get(&cgid)
                    .cloned()
                    .unwrap_or_else(|| "softpart prefer".to_string()),
            };
            out.push(view("cgroup", label.clone(), h, source));
        }
        let mut groups: BTreeMap<String, (Home, Vec<u32>)> = BTreeMap::new();
        for (tid, h) in self.task_home_list() {
            groups
                .entry(h.label.clone())
                .or_insert_with(|| (h, Vec::new()))
                .1
                .push(tid);
        }
        for (label, (h, mut tids)) in groups {
            tids.sort_unstable();
            let ids: Vec<String> = tids.iter().map(|t| t.to_string()).collect();
            let target = format!("{label}: thread(s) {}", ids.join(","));
            out.push(view(
                "threads",
                target,
                &h,
                "softpart prefer or exec".to_string(),
            ));
        }
        out
    }

    /// Whether a cgroup's group already has this home.
    fn has_home(
        &self,
        label: &str,
        cpus: &std::collections::BTreeSet<usize>,
        softness: Option<softpart_core::softness::Softness>,
    ) -> bool {
        self.homes
            .find(label)
            .and_then(|id| self.homes.get(id))
            .is_some_and(|h| &h.cpus == cpus && h.softness == softness)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_reload_keeps_the_time_of_the_last_applied_one() {
        let mut r = Reloads::started(100.0);
        assert!(r.last_ok);
        r.record(false, 200.0);
        assert_eq!(
            (r.last_ok, r.refused, r.last_success_unix),
            (false, 1, 100.0)
        );
        r.record(true, 300.0);
        assert_eq!(
            (r.last_ok, r.applied, r.last_success_unix),
            (true, 1, 300.0)
        );
    }
}
