//! A checked config file as the operator reads it: every finding as
//! `FILE:LINE: error: ...` (the form editors jump to), then what each rule
//! gives, with the live cgroups it takes when those were looked up; or the
//! same as one JSON document. `scx_softpart --check-config` and
//! `softpart check-config` print it.

use crate::config::{Checked, Config, Finding, Severity};
use crate::cpulist;
use serde::Serialize;

/// Per rule, in file order, the live cgroups it gives a home or balances:
/// each cgroup counted for the first rule it matches, as the scheduler
/// applies them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Live {
    pub homes: Vec<Vec<String>>,
    pub balance: Vec<Vec<String>>,
}

impl Live {
    /// Matches `cgroups` (paths from the cgroup2 root) against a config.
    pub fn of(config: &Config, cgroups: &[String]) -> Live {
        let mut live = Live {
            homes: vec![Vec::new(); config.homes.len()],
            balance: vec![Vec::new(); config.balance.len()],
        };
        for cg in cgroups {
            if let Some(i) = config.homes.iter().position(|r| r.matches(cg)) {
                live.homes[i].push(cg.clone());
            }
            if let Some(i) = config.balance.iter().position(|r| r.matches(cg)) {
                live.balance[i].push(cg.clone());
            }
        }
        live
    }
}

/// The findings for rules that match nothing now (with `Live`).
pub fn unmatched(checked: &Checked, live: &Live) -> Vec<Finding> {
    let Some(cfg) = &checked.config else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let kinds = [
        (
            "home",
            &live.homes,
            &checked.home_lines,
            cfg.homes
                .iter()
                .map(|r| r.cgroup.clone())
                .collect::<Vec<_>>(),
        ),
        (
            "balance",
            &live.balance,
            &checked.balance_lines,
            cfg.balance.iter().map(|r| r.cgroup.clone()).collect(),
        ),
    ];
    for (kind, matched, lines, names) in kinds {
        for (i, m) in matched.iter().enumerate() {
            if m.is_empty() {
                out.push(Finding {
                    severity: Severity::Warning,
                    line: lines.get(i).copied(),
                    entry: Some(format!("[[{kind}]] #{} (cgroup = {:?})", i + 1, names[i])),
                    message: "matches no cgroup that exists now".into(),
                });
            }
        }
    }
    out
}

fn finding_line(file: &str, f: &Finding) -> String {
    let at = match f.line {
        Some(l) => format!("{file}:{l}"),
        None => file.to_string(),
    };
    let sev = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let entry = f
        .entry
        .as_deref()
        .map(|e| format!("{e}: "))
        .unwrap_or_default();
    format!("{at}: {sev}: {entry}{}", f.message)
}

/// The report as text.
pub fn text(file: &str, checked: &Checked, extra: &[Finding], live: Option<&Live>) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut all: Vec<&Finding> = checked.findings.iter().chain(extra).collect();
    all.sort_by_key(|f| f.line.unwrap_or(0));
    let errors = all.iter().filter(|f| f.severity == Severity::Error).count();
    let warnings = all.len() - errors;
    for f in &all {
        let _ = writeln!(out, "{}", finding_line(file, f));
    }
    let Some(cfg) = &checked.config else {
        let _ = writeln!(out, "{file}: {errors} error(s), {warnings} warning(s)");
        return out;
    };
    let _ = writeln!(
        out,
        "{file}: ok, {} home rule(s), {} balance rule(s); {warnings} warning(s)",
        cfg.homes.len(),
        cfg.balance.len()
    );
    for (i, r) in cfg.homes.iter().enumerate() {
        let soft = r
            .softness
            .map(|s| format!(", softness {s}"))
            .unwrap_or_default();
        let line = checked
            .home_lines
            .get(i)
            .map(|l| format!("  (line {l})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  home     {}  CPUs {}{soft}{line}",
            r.cgroup,
            cpulist::format(&r.cpus)
        );
        if let Some(l) = live {
            let _ = writeln!(out, "           live: {}", list(&l.homes[i]));
        }
    }
    for (i, b) in cfg.balance.iter().enumerate() {
        let period = b
            .period_ms
            .map_or("the default period".to_string(), |p| format!("{p} ms"));
        let line = checked
            .balance_lines
            .get(i)
            .map(|l| format!("  (line {l})"))
            .unwrap_or_default();
        let _ = writeln!(out, "  balance  {}  every {period}{line}", b.cgroup);
        if let Some(l) = live {
            let _ = writeln!(out, "           live: {}", list(&l.balance[i]));
        }
    }
    if let Some(p) = &cfg.partitions {
        let _ = writeln!(out, "  partitions  {p}");
    }
    let m = &cfg.memory;
    if m.follow {
        let reserve = m
            .reserve_bytes
            .map_or("1/64 of each node".to_string(), |r| {
                format!("{} MB a node", r >> 20)
            });
        let _ = writeln!(
            out,
            "  memory  follows the homes, at most {} MB/s, reserve {reserve}; homeless cgroups of \
             {} MB or more get a home from it",
            m.rate_bytes_per_s >> 20,
            crate::memory_home::MIN_TENANT_BYTES >> 20
        );
    } else {
        let _ = writeln!(
            out,
            "  memory  stays where it is, no homes from it (follow = false)"
        );
    }
    out
}

fn list(cgroups: &[String]) -> String {
    if cgroups.is_empty() {
        "none".into()
    } else {
        cgroups.join(" ")
    }
}

/// One rule in the JSON report.
#[derive(Debug, Serialize)]
pub struct RuleView {
    pub kind: &'static str,
    pub cgroup: String,
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub softness: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<Vec<String>>,
}

/// The JSON report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub file: String,
    /// Whether the scheduler would start with the file.
    pub ok: bool,
    pub errors: Vec<Finding>,
    pub warnings: Vec<Finding>,
    pub rules: Vec<RuleView>,
    pub partitions: Option<String>,
}

pub fn report(file: &str, checked: &Checked, extra: &[Finding], live: Option<&Live>) -> Report {
    let all: Vec<Finding> = checked.findings.iter().chain(extra).cloned().collect();
    let (errors, warnings) = all.into_iter().partition(|f| f.severity == Severity::Error);
    let mut rules = Vec::new();
    if let Some(cfg) = &checked.config {
        for (i, r) in cfg.homes.iter().enumerate() {
            rules.push(RuleView {
                kind: "home",
                cgroup: r.cgroup.clone(),
                line: checked.home_lines.get(i).copied(),
                cpus: Some(cpulist::format(&r.cpus)),
                softness: r.softness.map(|s| s.to_string()),
                period_ms: None,
                live: live.map(|l| l.homes[i].clone()),
            });
        }
        for (i, b) in cfg.balance.iter().enumerate() {
            rules.push(RuleView {
                kind: "balance",
                cgroup: b.cgroup.clone(),
                line: checked.balance_lines.get(i).copied(),
                cpus: None,
                softness: None,
                period_ms: b.period_ms,
                live: live.map(|l| l.balance[i].clone()),
            });
        }
    }
    Report {
        file: file.to_string(),
        ok: checked.config.is_some(),
        errors,
        warnings,
        rules,
        partitions: checked.config.as_ref().and_then(|c| c.partitions.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::check;
    use crate::layout::Layout;

    #[test]
    fn findings_read_as_file_line_severity() {
        let l = Layout::from_spec("2n2c2t").unwrap();
        let c = check("[[home]]\ncgroup = \"/a\"\nnode = 7\n", &l);
        let t = text("x.toml", &c, &[], None);
        assert!(
            t.starts_with("x.toml:3: error: [[home]] #1 (cgroup = \"/a\"): field node = 7: node 7"),
            "{t}"
        );
        assert!(t.ends_with("x.toml: 1 error(s), 0 warning(s)\n"), "{t}");
    }

    #[test]
    fn live_cgroups_go_to_the_first_rule_that_matches() {
        let l = Layout::from_spec("2n2c2t").unwrap();
        let c = check(
            "[[home]]\ncgroup = \"/m.slice/vm1.scope\"\nnode = 1\n\
             [[home]]\ncgroup = \"/m.slice/*\"\nnode = 0\n\
             [[home]]\ncgroup = \"/gone\"\nnode = 0\n",
            &l,
        );
        let cgroups: Vec<String> = ["/m.slice", "/m.slice/vm1.scope", "/m.slice/vm2.scope"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let live = Live::of(c.config.as_ref().unwrap(), &cgroups);
        assert_eq!(live.homes[0], vec!["/m.slice/vm1.scope"]);
        assert_eq!(live.homes[1], vec!["/m.slice/vm2.scope"]);
        let extra = unmatched(&c, &live);
        assert_eq!(extra.len(), 1);
        assert_eq!(extra[0].line, Some(8));
        let t = text("f", &c, &extra, Some(&live));
        assert!(
            t.contains("f:8: warning: [[home]] #3 (cgroup = \"/gone\"): matches no cgroup"),
            "{t}"
        );
        assert!(t.contains("live: /m.slice/vm2.scope"), "{t}");
        assert!(
            t.contains(
                "  memory  follows the homes, at most 64 MB/s, reserve 1/64 of each node; \
                 homeless cgroups of 64 MB or more get a home from it\n"
            ),
            "{t}"
        );
        let off = check("[memory]\nfollow = false\n", &l);
        let t = text("g", &off, &[], None);
        assert!(
            t.contains("  memory  stays where it is, no homes from it (follow = false)\n"),
            "{t}"
        );
        let r = report("f", &c, &extra, Some(&live));
        assert!(r.ok && r.warnings.len() == 1 && r.rules.len() == 3);
        assert_eq!(
            r.rules[0].live.as_deref(),
            Some(&["/m.slice/vm1.scope".to_string()][..])
        );
    }
}
