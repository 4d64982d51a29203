//! `softpart check-config`: a config file checked as the scheduler would
//! check it, on this machine or another (`--topology`), with every error
//! and warning by line, and with `--live` the cgroups each rule takes now.
//! It needs no scheduler and no privilege.

use anyhow::{Context, Result};
use softpart_core::config::{self, Finding, Severity};
use softpart_core::config_report::{self, Live};
use softpart_core::cpulist;
use softpart_core::layout::Layout;
use std::collections::BTreeSet;
use std::path::Path;

const SYS_CPU: &str = "/sys/devices/system/cpu";
const SYS_NODE: &str = "/sys/devices/system/node";

fn read_list(path: &Path) -> Option<BTreeSet<usize>> {
    cpulist::parse(std::fs::read_to_string(path).ok()?.trim()).ok()
}

/// This machine, from sysfs: online CPUs, each node's, each LLC's (the
/// highest cache level a CPU lists).
pub fn this_machine() -> Result<Layout> {
    let cpus = read_list(&Path::new(SYS_CPU).join("online"))
        .context("reading /sys/devices/system/cpu/online")?;
    let mut nodes: Vec<BTreeSet<usize>> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(SYS_NODE) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(id) = name
                .strip_prefix("node")
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let set = read_list(&e.path().join("cpulist")).unwrap_or_default();
            if nodes.len() <= id {
                nodes.resize(id + 1, BTreeSet::new());
            }
            nodes[id] = set.intersection(&cpus).copied().collect();
        }
    }
    if nodes.iter().all(|n| n.is_empty()) {
        nodes = vec![cpus.clone()];
    }
    let mut llcs: Vec<BTreeSet<usize>> = Vec::new();
    for &cpu in &cpus {
        let dir = Path::new(SYS_CPU).join(format!("cpu{cpu}/cache"));
        let mut best: Option<(u32, BTreeSet<usize>)> = None;
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let level = std::fs::read_to_string(e.path().join("level"))
                .ok()
                .and_then(|l| l.trim().parse::<u32>().ok());
            let shared = read_list(&e.path().join("shared_cpu_list"));
            if let (Some(level), Some(shared)) = (level, shared)
                && best.as_ref().is_none_or(|(l, _)| level > *l)
            {
                best = Some((level, shared));
            }
        }
        let set: BTreeSet<usize> = match best {
            Some((_, s)) => s.intersection(&cpus).copied().collect(),
            None => nodes
                .iter()
                .find(|n| n.contains(&cpu))
                .cloned()
                .unwrap_or_default(),
        };
        if !set.is_empty() && !llcs.contains(&set) {
            llcs.push(set);
        }
    }
    llcs.sort_by_key(|s| s.first().copied());
    Ok(Layout { cpus, nodes, llcs })
}

/// Every cgroup under `root`, as paths from it ("/a/b").
pub fn live_cgroups(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rel = dir.strip_prefix(root).unwrap_or(&dir);
        out.push(format!("/{}", rel.display()));
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// A warning when `root` is not a cgroup v2 hierarchy.
pub fn cgroup_v1_warning(root: &Path) -> Option<Finding> {
    (!root.join("cgroup.controllers").exists()).then(|| Finding {
        severity: Severity::Warning,
        line: None,
        entry: None,
        message: format!(
            "{} is not a cgroup v2 hierarchy (no cgroup.controllers): homes by cgroup, weights and caps need cgroup v2 (systemd.unified_cgroup_hierarchy=1)",
            root.display()
        ),
    })
}

pub struct Options<'a> {
    pub file: &'a Path,
    pub topology: Option<&'a str>,
    pub live: bool,
    pub json: bool,
    pub strict: bool,
}

/// Prints the report; Ok(true) when the file passes (no error, and no
/// warning under `strict`).
pub fn run(o: &Options, cgroup_root: &Path) -> Result<bool> {
    let text =
        std::fs::read_to_string(o.file).with_context(|| format!("reading {}", o.file.display()))?;
    let layout = match o.topology {
        None => this_machine()?,
        Some(t) if Path::new(t).is_file() => {
            let saved = std::fs::read_to_string(t).with_context(|| format!("reading {t}"))?;
            Layout::from_lscpu(&saved).map_err(|e| anyhow::anyhow!("--topology {t}: {e}"))?
        }
        Some(t) => Layout::from_spec(t).map_err(anyhow::Error::msg)?,
    };
    let checked = config::check(&text, &layout);
    let mut extra = Vec::new();
    if o.topology.is_none() || o.live {
        extra.extend(cgroup_v1_warning(cgroup_root));
    }
    let live = match (&checked.config, o.live) {
        (Some(cfg), true) => Some(Live::of(cfg, &live_cgroups(cgroup_root))),
        _ => None,
    };
    if let Some(l) = &live {
        extra.extend(config_report::unmatched(&checked, l));
    }
    let file = o.file.display().to_string();
    let errors = checked.errors().count();
    let warnings = checked.warnings().count() + extra.len();
    if o.json {
        let report = config_report::report(&file, &checked, &extra, live.as_ref());
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if let Some(t) = o.topology {
            println!("{file}: checked for {t}: {}", layout.describe());
        }
        print!(
            "{}",
            config_report::text(&file, &checked, &extra, live.as_ref())
        );
    }
    Ok(errors == 0 && !(o.strict && warnings > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("softpart-check-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_config_for_two_nodes_checks_on_any_machine_with_topology() {
        let d = tmp("topo");
        let f = d.join("c.toml");
        std::fs::write(&f, "[[home]]\ncgroup = \"/a\"\nnode = 1\n").unwrap();
        let o = |topology| Options {
            file: &f,
            topology,
            live: false,
            json: false,
            strict: false,
        };
        assert!(run(&o(Some("2n2c2t")), &d).unwrap());
        assert!(!run(&o(Some("1n2c2t")), &d).unwrap());
        // A saved lscpu -p.
        let saved = d.join("lscpu.txt");
        std::fs::write(
            &saved,
            "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n0,0,0,0,,0,0,0,0\n1,1,1,1,,1,1,1,1\n",
        )
        .unwrap();
        assert!(run(&o(Some(saved.to_str().unwrap())), &d).unwrap());
    }

    #[test]
    fn live_lists_what_each_rule_takes_and_strict_fails_on_a_rule_that_takes_nothing() {
        let d = tmp("live");
        let root = d.join("cg");
        std::fs::create_dir_all(root.join("m.slice/vm1.scope")).unwrap();
        std::fs::write(root.join("cgroup.controllers"), "cpu\n").unwrap();
        let f = d.join("c.toml");
        std::fs::write(
            &f,
            "[[home]]\ncgroup = \"/m.slice/*\"\nnode = 0\n[[home]]\ncgroup = \"/x\"\nnode = 0\n",
        )
        .unwrap();
        let o = |strict| Options {
            file: &f,
            topology: Some("2n2c2t"),
            live: true,
            json: false,
            strict,
        };
        assert!(run(&o(false), &root).unwrap());
        assert!(!run(&o(true), &root).unwrap());
        let live = live_cgroups(&root);
        assert_eq!(live, vec!["/", "/m.slice", "/m.slice/vm1.scope"]);
        // No cgroup.controllers: a v1 (or no) hierarchy, said.
        assert!(cgroup_v1_warning(&d).is_some());
        assert!(cgroup_v1_warning(&root).is_none());
    }

    #[test]
    fn this_machine_reads_sysfs() {
        let l = this_machine().unwrap();
        assert!(!l.cpus.is_empty() && !l.llcs.is_empty());
        let covered: BTreeSet<usize> = l.llcs.iter().flatten().copied().collect();
        assert_eq!(covered, l.cpus);
    }
}
