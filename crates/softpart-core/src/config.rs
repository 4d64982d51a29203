//! The config file (`scx_softpart --config FILE`, softpart.toml(5)):
//! cgroup paths or globs and the home each gets, the cgroups the group
//! balancer places, and the partitions. Checked whole, against a machine's
//! CPUs (`Cpus`): every error and warning found, each with its line, the
//! entry, the field and the value; the scheduler starts (or reloads) only
//! from a file with no error. A syntax error or an unknown field stops the
//! reading where it is: it is the one error reported.
//!
//! ```toml
//! partitions = "0-15;16-31"                 # optional; default: per node/LLC
//!
//! [[home]]
//! cgroup = "/db.slice/postgres-*.service"   # relative to the cgroup2 root
//! node = 0                                  # or cpus = "0-15", or llc = 1
//! softness = "5:4"                          # optional; default: --softness
//!
//! [[balance]]                               # the group balancer
//! cgroup = "/machine.slice/*"               # every child of machine.slice
//! period_ms = 1000                          # optional; default: --balance-period-ms
//! ```

use crate::control::HomeSpec;
use crate::softness::Softness;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use toml::Spanned;

/// Where cgroup v2 is mounted; a rule may give its path from there.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// What a config is checked against: the CPUs a home names, and whether
/// a `partitions` value fits the machine.
pub trait Cpus {
    fn resolve(&self, spec: &HomeSpec) -> Result<BTreeSet<usize>, String>;
    fn check_partitions(&self, spec: &str) -> Result<(), String>;
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    partitions: Option<Spanned<String>>,
    #[serde(default, rename = "home")]
    homes: Vec<Entry>,
    #[serde(default, rename = "balance")]
    balance: Vec<BalanceEntry>,
    memory: Option<MemoryEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryEntry {
    follow: Option<bool>,
    rate_mb_s: Option<Spanned<u64>>,
    reserve_mb: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    cgroup: Spanned<String>,
    cpus: Option<Spanned<String>>,
    node: Option<Spanned<u32>>,
    llc: Option<Spanned<u32>>,
    softness: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BalanceEntry {
    cgroup: Spanned<String>,
    period_ms: Option<Spanned<u64>>,
}

/// A checked config file.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// In the `--partitions` syntax, checked against the machine.
    pub partitions: Option<String>,
    pub homes: Vec<Rule>,
    pub balance: Vec<BalanceRule>,
    pub memory: Memory,
}

/// Whether and how fast a homed tenant's memory follows it to its home's
/// nodes (`[memory]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub follow: bool,
    /// Bytes moved per second at most, host-wide, over any one second.
    pub rate_bytes_per_s: u64,
    /// Free memory a home node keeps above its high watermark: no move
    /// fills it further. `None`: `default_reserve` of the node's size.
    pub reserve_bytes: Option<u64>,
}

/// The reserve a node keeps unless `reserve_mb` says otherwise: 1/64 of
/// its memory (1 GB of 64 GB), at least 16 MB (docs/decisions.md, "Memory
/// follows the home: its reserve").
pub fn default_reserve(node_bytes: u64) -> u64 {
    (node_bytes / 64).max(16 << 20)
}

/// The default rate, 64 MB/s (docs/decisions.md, "Memory follows the
/// home: its rate").
pub const MEMORY_RATE_MB_S: u64 = 64;
/// The rate's range, MB/s.
pub const MEMORY_RATE_RANGE: std::ops::RangeInclusive<u64> = 1..=100_000;

impl Default for Memory {
    fn default() -> Memory {
        Memory {
            follow: true,
            rate_bytes_per_s: MEMORY_RATE_MB_S << 20,
            reserve_bytes: None,
        }
    }
}

/// How bad a finding is: an error stops the scheduler from starting with
/// the file (or a reload from applying it); a warning does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// One thing found wrong, or likely wrong, in a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub severity: Severity,
    /// 1-based; None when the finding is about the whole file.
    pub line: Option<usize>,
    /// e.g. `[[home]] #2 (cgroup = "/a")`; None for the whole file.
    pub entry: Option<String>,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(l) = self.line {
            write!(f, "line {l}: ")?;
        }
        if self.severity == Severity::Warning {
            write!(f, "warning: ")?;
        }
        if let Some(e) = &self.entry {
            write!(f, "{e}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

/// A file checked: what it gives if it has no error, and every finding.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    pub config: Option<Config>,
    /// Each rule's line, in the order of `config.homes` then
    /// `config.balance`.
    pub home_lines: Vec<usize>,
    pub balance_lines: Vec<usize>,
    pub findings: Vec<Finding>,
}

impl Checked {
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
    }

    /// The config, or every error in one message, a line each.
    pub fn into_result(self) -> Result<Config, String> {
        match self.config {
            Some(c) => Ok(c),
            None => Err(self
                .errors()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join("\n")),
        }
    }
}

/// Cgroups whose home the group balancer chooses.
#[derive(Debug, Clone)]
pub struct BalanceRule {
    pub cgroup: String,
    pattern: glob::Pattern,
    /// None: the scheduler's --balance-period-ms.
    pub period_ms: Option<u64>,
}

impl BalanceRule {
    pub fn new(cgroup: &str, period_ms: Option<u64>) -> Result<BalanceRule, String> {
        Ok(BalanceRule {
            cgroup: cgroup.to_string(),
            pattern: cgroup_pattern(cgroup)?,
            period_ms,
        })
    }

    pub fn matches(&self, cgroup: &str) -> bool {
        matches(&self.pattern, cgroup)
    }
}

fn matches(pattern: &glob::Pattern, cgroup: &str) -> bool {
    pattern.matches_with(
        cgroup,
        glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        },
    )
}

/// A cgroup path or glob from the cgroup2 root ("/a/b*"), as a pattern.
fn cgroup_pattern(text: &str) -> Result<glob::Pattern, String> {
    let cgroup = text.strip_prefix(CGROUP_ROOT).unwrap_or(text).to_string();
    if !cgroup.starts_with('/') || cgroup.split('/').any(|c| c == "..") {
        return Err(format!(
            "field cgroup = {text:?}: give a path from the cgroup2 root, starting with '/'"
        ));
    }
    let cgroup = if cgroup.len() > 1 {
        cgroup.trim_end_matches('/').to_string()
    } else {
        cgroup
    };
    glob::Pattern::new(&cgroup).map_err(|e| {
        format!(
            "field cgroup = {text:?}: not a valid glob at character {}: {} \
             ('*' and '?' match within a path component, '[...]' one character of a set)",
            e.pos + 1,
            e.msg
        )
    })
}

/// The path a rule's pattern is written as, from the cgroup2 root.
fn rule_path(text: &str) -> &str {
    let p = text.strip_prefix(CGROUP_ROOT).unwrap_or(text);
    if p.len() > 1 {
        p.trim_end_matches('/')
    } else {
        p
    }
}

#[derive(Debug, Clone)]
pub struct Rule {
    /// As written, for messages.
    pub cgroup: String,
    pattern: glob::Pattern,
    pub cpus: BTreeSet<usize>,
    pub softness: Option<Softness>,
}

impl Rule {
    /// Whether a cgroup (path from the cgroup2 root, "/a/b") matches. `*`
    /// and `?` stay within one path component.
    pub fn matches(&self, cgroup: &str) -> bool {
        matches(&self.pattern, cgroup)
    }
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The suffixes of the systemd units that have cgroups.
const UNIT_SUFFIXES: [&str; 6] = [".service", ".scope", ".slice", ".socket", ".mount", ".swap"];

/// Why no systemd-made cgroup can have this path, if none can: under a
/// `.slice`, every cgroup is a unit's, named with its suffix and in the
/// characters unit names may have.
fn not_a_unit_path(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    for w in parts.windows(2) {
        let (parent, name) = (w[0], w[1]);
        if !parent.ends_with(".slice") || name.contains(['*', '?', '[']) {
            continue;
        }
        if !UNIT_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            return Some(format!(
                "{name:?} is under the slice {parent:?}, where systemd names every cgroup after its unit ({}): no such cgroup is made",
                UNIT_SUFFIXES.join(", ")
            ));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || ":_.\\@-".contains(*c)))
        {
            return Some(format!(
                "{name:?} has {c:?}, which a systemd unit name cannot have (systemd escapes it, e.g. '\\x20' for a space)"
            ));
        }
    }
    None
}

/// Whether every cgroup `later` (a path or glob as written) can match is
/// matched by `earlier` first: exact for a later path without glob
/// characters; for a later glob, tried on its text, which catches a
/// parent's `*` over a child's more precise glob.
fn shadows(earlier: &glob::Pattern, later: &str) -> bool {
    matches(earlier, rule_path(later))
}

/// Checks a config file's text against `cpus`: every finding, and the
/// config when there is no error.
pub fn check(text: &str, cpus: &dyn Cpus) -> Checked {
    let mut out = Checked::default();
    let file: File = match toml::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            let hint = if e.message().contains("escape") {
                " (a cgroup name with a backslash, systemd's escapes such as \\x2d in \
                 machine-qemu\\x2d1\\x2ddb1.scope, goes in single quotes, a TOML literal string: \
                 cgroup = '/machine.slice/machine-qemu\\x2d*\\x2ddb1.scope')"
            } else {
                ""
            };
            out.findings.push(Finding {
                severity: Severity::Error,
                line: e.span().map(|s| line_of(text, s.start)),
                entry: None,
                message: format!("{}{hint}", e.message().trim_end()),
            });
            return out;
        }
    };
    let mut errors = 0;
    let mut error = |out: &mut Checked, line: usize, entry: &str, message: String| {
        errors += 1;
        out.findings.push(Finding {
            severity: Severity::Error,
            line: Some(line),
            entry: Some(entry.to_string()),
            message,
        });
    };
    let warn = |out: &mut Checked, line: usize, entry: &str, message: String| {
        out.findings.push(Finding {
            severity: Severity::Warning,
            line: Some(line),
            entry: Some(entry.to_string()),
            message,
        });
    };
    if file.partitions.is_none()
        && file.homes.is_empty()
        && file.balance.is_empty()
        && file.memory.is_none()
    {
        out.findings.push(Finding {
            severity: Severity::Warning,
            line: None,
            entry: None,
            message: "the file gives no homes, no balanced cgroups and no partitions: the scheduler runs as if it had none".into(),
        });
    }
    let partitions = file.partitions.map(|p| {
        let line = line_of(text, p.span().start);
        let spec = p.into_inner();
        (spec, line)
    });
    if let Some((spec, line)) = &partitions
        && let Err(m) = cpus.check_partitions(spec)
    {
        error(
            &mut out,
            *line,
            "partitions",
            format!("field partitions = {spec:?}: {m}"),
        );
    }

    let mut rules: Vec<(Rule, usize)> = Vec::new();
    for (i, e) in file.homes.into_iter().enumerate() {
        let line = line_of(text, e.cgroup.span().start);
        let cgroup = e.cgroup.into_inner();
        let at = format!("[[home]] #{} (cgroup = {cgroup:?})", i + 1);
        let pattern = match cgroup_pattern(&cgroup) {
            Ok(p) => Some(p),
            Err(m) => {
                error(&mut out, line, &at, m);
                None
            }
        };
        if let Some(p) = &pattern {
            if let Some(j) = rules.iter().position(|(r, _)| &r.pattern == p) {
                error(
                    &mut out,
                    line,
                    &at,
                    format!(
                        "the same cgroup as [[home]] #{} (line {}): only the first rule for a cgroup applies",
                        j + 1,
                        rules[j].1
                    ),
                );
            } else if let Some(j) = rules.iter().position(|(r, _)| shadows(&r.pattern, &cgroup)) {
                warn(
                    &mut out,
                    line,
                    &at,
                    format!(
                        "never applies: [[home]] #{} (line {}, cgroup = {:?}) comes first and matches every cgroup this one does; the first rule that matches wins, so put the narrower rule first",
                        j + 1,
                        rules[j].1,
                        rules[j].0.cgroup
                    ),
                );
            }
            if let Some(m) = not_a_unit_path(rule_path(&cgroup)) {
                warn(
                    &mut out,
                    line,
                    &at,
                    format!("matches no cgroup systemd makes: {m}"),
                );
            }
        }
        let given = [e.cpus.is_some(), e.node.is_some(), e.llc.is_some()];
        let spec = match (e.cpus, e.node, e.llc) {
            (Some(c), None, None) => Some((HomeSpec::Cpus(c.get_ref().clone()), c.span())),
            (None, Some(n), None) => Some((HomeSpec::Node(*n.get_ref()), n.span())),
            (None, None, Some(l)) => Some((HomeSpec::Llc(*l.get_ref()), l.span())),
            _ => {
                let n = given.iter().filter(|g| **g).count();
                error(
                    &mut out,
                    line,
                    &at,
                    format!("give exactly one of the fields cpus, node, llc (this entry has {n})"),
                );
                None
            }
        };
        let resolved = spec.and_then(|(spec, span)| {
            let field = match &spec {
                HomeSpec::Cpus(c) => format!("cpus = {c:?}"),
                HomeSpec::Node(n) => format!("node = {n}"),
                HomeSpec::Llc(l) => format!("llc = {l}"),
            };
            match cpus.resolve(&spec) {
                Ok(set) => Some(set),
                Err(m) => {
                    error(
                        &mut out,
                        line_of(text, span.start),
                        &at,
                        format!("field {field}: {m}"),
                    );
                    None
                }
            }
        });
        let softness = match e.softness {
            None => Some(None),
            Some(s) => {
                let l = line_of(text, s.span().start);
                match s.get_ref().parse::<Softness>() {
                    Ok(v) => Some(Some(v)),
                    Err(m) => {
                        error(&mut out, l, &at, format!("field softness: {m}"));
                        None
                    }
                }
            }
        };
        if let (Some(pattern), Some(cpus), Some(softness)) = (pattern, resolved, softness) {
            rules.push((
                Rule {
                    cgroup,
                    pattern,
                    cpus,
                    softness,
                },
                line,
            ));
        }
    }

    let mut balance: Vec<(BalanceRule, usize)> = Vec::new();
    for (i, e) in file.balance.into_iter().enumerate() {
        let line = line_of(text, e.cgroup.span().start);
        let cgroup = e.cgroup.into_inner();
        let at = format!("[[balance]] #{} (cgroup = {cgroup:?})", i + 1);
        let period_ms = e
            .period_ms
            .map(|p| (*p.get_ref(), line_of(text, p.span().start)));
        let mut ok = true;
        if let Some((ms, l)) = period_ms
            && !(10..=3_600_000).contains(&ms)
        {
            error(
                &mut out,
                l,
                &at,
                format!("field period_ms = {ms}: give 10 to 3600000 ms"),
            );
            ok = false;
        }
        match BalanceRule::new(&cgroup, period_ms.map(|p| p.0)) {
            Err(m) => error(&mut out, line, &at, m),
            Ok(rule) => {
                if let Some(j) = balance.iter().position(|(r, _)| r.pattern == rule.pattern) {
                    error(
                        &mut out,
                        line,
                        &at,
                        format!(
                            "the same cgroup as [[balance]] #{} (line {}): only the first rule for a cgroup applies",
                            j + 1,
                            balance[j].1
                        ),
                    );
                } else {
                    if let Some(j) = balance
                        .iter()
                        .position(|(r, _)| shadows(&r.pattern, &cgroup))
                    {
                        warn(
                            &mut out,
                            line,
                            &at,
                            format!(
                                "never applies: [[balance]] #{} (line {}, cgroup = {:?}) comes first and matches every cgroup this one does",
                                j + 1,
                                balance[j].1,
                                balance[j].0.cgroup
                            ),
                        );
                    }
                    if let Some(m) = not_a_unit_path(rule_path(&cgroup)) {
                        warn(
                            &mut out,
                            line,
                            &at,
                            format!("matches no cgroup systemd makes: {m}"),
                        );
                    }
                    if ok {
                        balance.push((rule, line));
                    }
                }
            }
        }
    }
    let mut memory = Memory::default();
    if let Some(m) = file.memory {
        memory.follow = m.follow.unwrap_or(true);
        if let Some(r) = m.rate_mb_s {
            let v = *r.get_ref();
            if MEMORY_RATE_RANGE.contains(&v) {
                memory.rate_bytes_per_s = v << 20;
            } else {
                error(
                    &mut out,
                    line_of(text, r.span().start),
                    "[memory]",
                    format!(
                        "field rate_mb_s = {v}: give {} to {} MB per second",
                        MEMORY_RATE_RANGE.start(),
                        MEMORY_RATE_RANGE.end()
                    ),
                );
            }
        }
        if let Some(r) = m.reserve_mb {
            let v = *r.get_ref();
            if v <= 1 << 30 {
                memory.reserve_bytes = Some(v << 20);
            } else {
                error(
                    &mut out,
                    line_of(text, r.span().start),
                    "[memory]",
                    format!("field reserve_mb = {v}: give at most {} MB", 1u64 << 30),
                );
            }
        }
    }
    out.findings.sort_by_key(|f| f.line.unwrap_or(0));
    if errors == 0 {
        out.home_lines = rules.iter().map(|(_, l)| *l).collect();
        out.balance_lines = balance.iter().map(|(_, l)| *l).collect();
        out.config = Some(Config {
            partitions: partitions.map(|p| p.0),
            homes: rules.into_iter().map(|(r, _)| r).collect(),
            balance: balance.into_iter().map(|(r, _)| r).collect(),
            memory,
        });
    }
    out
}

/// The config in `text`, or every error found, a line each.
pub fn parse(text: &str, cpus: &dyn Cpus) -> Result<Config, String> {
    check(text, cpus).into_result()
}

/// What the config file says about a cgroup the scheduler has no home for.
#[derive(Debug, Clone, Copy)]
pub enum Match<'a> {
    Home(&'a Rule),
    Balance(&'a BalanceRule),
}

/// An explicit `[[home]]` wins over `[[balance]]`, but applies only the
/// first time the cgroup is seen: once its home is cleared (`softpart prefer
/// --clear`), a balance rule may take it.
pub fn match_cgroup<'a>(
    homes: &'a [Rule],
    balance: &'a [BalanceRule],
    cgroup: &str,
    first_seen: bool,
) -> Option<Match<'a>> {
    if first_seen && let Some(r) = rule_for(homes, cgroup) {
        return Some(Match::Home(r));
    }
    balance_rule_for(balance, cgroup).map(Match::Balance)
}

/// The first balance rule a cgroup matches.
pub fn balance_rule_for<'a>(rules: &'a [BalanceRule], cgroup: &str) -> Option<&'a BalanceRule> {
    rules.iter().find(|r| r.matches(cgroup))
}

/// The first rule a cgroup matches.
pub fn rule_for<'a>(rules: &'a [Rule], cgroup: &str) -> Option<&'a Rule> {
    rules.iter().find(|r| r.matches(cgroup))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two nodes of four CPUs, one LLC each.
    struct TwoNodes;

    impl Cpus for TwoNodes {
        fn resolve(&self, spec: &HomeSpec) -> Result<BTreeSet<usize>, String> {
            match spec {
                HomeSpec::Node(0) | HomeSpec::Llc(0) => Ok((0..4).collect()),
                HomeSpec::Node(1) | HomeSpec::Llc(1) => Ok((4..8).collect()),
                HomeSpec::Cpus(c) => crate::cpulist::parse(c).map_err(|e| e.to_string()),
                other => Err(format!("{other:?} does not exist")),
            }
        }

        fn check_partitions(&self, spec: &str) -> Result<(), String> {
            crate::partition::parse(spec, &(0..8).collect(), 64)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    }

    #[test]
    fn parses_and_matches() {
        let cfg = parse(
            r#"
            partitions = "0-3;4-7"
            [[balance]]
            cgroup = "/vms/*"
            period_ms = 500
            [[home]]
            cgroup = "/db.slice/pg-*.service"
            node = 0
            softness = "5:4"
            [[home]]
            cgroup = "/sys/fs/cgroup/web/"
            cpus = "4-5"
            [[home]]
            cgroup = "/db.slice/*"
            node = 1
            "#,
            &TwoNodes,
        )
        .unwrap();
        assert_eq!(cfg.partitions.as_deref(), Some("0-3;4-7"));
        let b = balance_rule_for(&cfg.balance, "/vms/vm1").unwrap();
        assert_eq!(b.period_ms, Some(500));
        assert!(balance_rule_for(&cfg.balance, "/vms").is_none());
        assert!(balance_rule_for(&cfg.balance, "/vms/vm1/sub").is_none());
        let rules = cfg.homes;
        assert_eq!(rules.len(), 3);
        let pg = rule_for(&rules, "/db.slice/pg-1.service").unwrap();
        assert_eq!(pg.cpus, (0..4).collect());
        assert_eq!(
            pg.softness,
            Some(Softness::Ratio {
                allowed: 5,
                preferred: 4
            })
        );
        // First match wins; '*' does not cross '/'.
        assert_eq!(
            rule_for(&rules, "/db.slice/other").unwrap().cpus,
            (4..8).collect()
        );
        assert!(rule_for(&rules, "/db.slice/pg-1.service/child").is_none());
        assert_eq!(rule_for(&rules, "/web").unwrap().cpus, [4, 5].into());
        assert!(rule_for(&rules, "/webx").is_none());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any text: an answer, never a panic.
        #[test]
        fn never_panics_on_any_text(text in "\\PC{0,200}") {
            let _ = parse(&text, &TwoNodes);
        }

        /// Well-formed entries with arbitrary values: accepted, or an error
        /// that names the entry.
        #[test]
        fn errors_name_the_entry(
            cgroup in "[/a-z*?\\[\\].]{0,12}",
            cpus in "[0-9,-]{0,8}",
            node in 0u32..4,
            soft in "[0-9:a-z-]{0,6}",
            period in 0u64..5_000_000,
            which in 0u8..3,
        ) {
            let home = match which {
                0 => format!("cpus = {cpus:?}"),
                1 => format!("node = {node}"),
                _ => format!("node = {node}\ncpus = {cpus:?}"),
            };
            let text = format!(
                "[[home]]\ncgroup = \"/ok\"\nnode = 0\n[[home]]\ncgroup = {cgroup:?}\n{home}\nsoftness = {soft:?}\n[[balance]]\ncgroup = {cgroup:?}\nperiod_ms = {period}\n"
            );
            if let Err(e) = parse(&text, &TwoNodes) {
                let e = format!("{e:#}");
                proptest::prop_assert!(e.contains("[[home]] #2") || e.contains("[[balance]] #1"), "{}", e);
            }
        }
    }

    #[test]
    fn duplicate_rules_are_refused_naming_both() {
        let err = |text: &str| format!("{:#}", parse(text, &TwoNodes).unwrap_err());
        let e = err(
            "[[home]]\ncgroup = \"/db\"\nnode = 0\n[[home]]\ncgroup = \"/sys/fs/cgroup/db/\"\nnode = 1\n",
        );
        assert!(
            e.contains("[[home]] #2") && e.contains("[[home]] #1"),
            "{e}"
        );
        let e = err("[[balance]]\ncgroup = \"/vms/*\"\n[[balance]]\ncgroup = \"/vms/*\"\n");
        assert!(
            e.contains("[[balance]] #2") && e.contains("[[balance]] #1"),
            "{e}"
        );
        // A home and a balance rule for one cgroup: the home first, then
        // the balancer once it is cleared.
        parse(
            "[[home]]\ncgroup = \"/vms/a\"\nnode = 0\n[[balance]]\ncgroup = \"/vms/a\"\n",
            &TwoNodes,
        )
        .unwrap();
    }

    /// docs/recipes.md's `toml` blocks, and a cgroup each rule must match.
    #[test]
    fn every_recipe_parses_and_matches() {
        let doc = include_str!("../../../docs/recipes.md");
        let blocks: Vec<&str> = doc
            .split("```toml\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap())
            .collect();
        assert!(blocks.len() >= 5, "{} blocks", blocks.len());
        let mut rules = Vec::new();
        let mut balance = Vec::new();
        for b in blocks {
            let cfg = parse(b, &TwoNodes).unwrap_or_else(|e| panic!("{e:#}\n{b}"));
            rules.extend(cfg.homes);
            balance.extend(cfg.balance);
        }
        for (cgroup, home) in [
            (
                "/system.slice/system-postgresql.slice/postgresql@17-main.service",
                true,
            ),
            ("/machine.slice/machine-qemu\\x2d1\\x2ddb1.scope", true),
            ("/machine.slice/machine-qemu\\x2d17\\x2ddb1.scope", true),
            ("/machine.slice/machine-qemu\\x2d3\\x2dweb1.scope", true),
            ("/tenant.slice/tenant-a.slice", true),
            (
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice",
                false,
            ),
        ] {
            let found = if home {
                rule_for(&rules, cgroup).is_some()
            } else {
                balance_rule_for(&balance, cgroup).is_some()
            };
            assert!(found, "no recipe matches {cgroup}");
        }
        // The domain id is matched; the name is not.
        let db1 = rule_for(&rules, "/machine.slice/machine-qemu\\x2d1\\x2ddb1.scope").unwrap();
        assert!(!db1.matches("/machine.slice/machine-qemu\\x2d1\\x2ddb2.scope"));
    }

    #[test]
    fn escaped_scope_names_get_a_hint_and_work_as_literal_strings() {
        let e = format!(
            "{:#}",
            parse(
                "[[home]]\ncgroup = \"/machine.slice/machine-qemu\\x2d1.scope\"\nnode = 0\n",
                &TwoNodes
            )
            .unwrap_err()
        );
        assert!(e.contains("single quotes"), "{e}");
        let cfg = parse(
            "[[home]]\ncgroup = '/machine.slice/machine-qemu\\x2d1.scope'\nnode = 0\n",
            &TwoNodes,
        )
        .unwrap();
        assert!(rule_for(&cfg.homes, "/machine.slice/machine-qemu\\x2d1.scope").is_some());
    }

    #[test]
    fn explicit_homes_win_over_balancing() {
        let cfg = parse(
            "[[home]]\ncgroup = \"/vms/db\"\nnode = 1\n[[balance]]\ncgroup = \"/vms/*\"\n",
            &TwoNodes,
        )
        .unwrap();
        let m = |cg: &str, first: bool| match_cgroup(&cfg.homes, &cfg.balance, cg, first);
        assert!(matches!(m("/vms/db", true), Some(Match::Home(r)) if r.cpus == (4..8).collect()));
        // Cleared later: the balancer may take it.
        assert!(matches!(m("/vms/db", false), Some(Match::Balance(_))));
        assert!(matches!(m("/vms/web", true), Some(Match::Balance(_))));
        assert!(m("/other", true).is_none());
    }

    #[test]
    fn errors_name_entry_field_and_value() {
        let err = |text: &str| format!("{:#}", parse(text, &TwoNodes).unwrap_err());
        let e = err("[[home]]\ncgroup = \"/a\"\nnode = 0\ncpus = \"1\"\n");
        assert!(e.contains("#1") && e.contains("exactly one of"), "{e}");
        let e = err("[[home]]\ncgroup = \"/a\"\nnode = 0\n[[home]]\ncgroup = \"/b\"\nnode = 7\n");
        assert!(e.contains("#2") && e.contains("Node(7)"), "{e}");
        let e = err("[[home]]\ncgroup = \"a\"\nnode = 0\n");
        assert!(e.contains("field cgroup = \"a\""), "{e}");
        let e = err("[[home]]\ncgroup = \"/a[\"\nnode = 0\n");
        assert!(e.contains("field cgroup"), "{e}");
        let e = err("[[home]]\ncgroup = \"/a\"\nnode = 0\nsoftness = \"3\"\n");
        assert!(e.contains("field softness") && e.contains("\"3\""), "{e}");
        let e = err("[[home]]\ncgroup = \"/a\"\nnode = 0\nnodes = 1\n");
        assert!(e.contains("nodes"), "{e}");
        let e = err("[[home]]\ncgroup = \"/a\"\ncpus = \"9-x\"\n");
        assert!(e.contains("9-x"), "{e}");
        let e = err("[[balance]]\ncgroup = \"/a/*\"\nperiod_ms = 0\n");
        assert!(
            e.contains("[[balance]] #1") && e.contains("period_ms = 0"),
            "{e}"
        );
        let e = err("[[balance]]\ncgroup = \"a/*\"\n");
        assert!(e.contains("field cgroup = \"a/*\""), "{e}");
    }

    #[test]
    fn memory_section_defaults_and_errors() {
        let cfg = parse("[[home]]\ncgroup = \"/a\"\nnode = 0\n", &TwoNodes).unwrap();
        assert_eq!(cfg.memory, Memory::default());
        assert!(cfg.memory.follow);
        let cfg = parse(
            "[memory]\nfollow = false\nrate_mb_s = 8\nreserve_mb = 100\n",
            &TwoNodes,
        )
        .unwrap();
        assert_eq!(
            cfg.memory,
            Memory {
                follow: false,
                rate_bytes_per_s: 8 << 20,
                reserve_bytes: Some(100 << 20)
            }
        );
        let err = |text: &str| format!("{:#}", parse(text, &TwoNodes).unwrap_err());
        let e = err("[memory]\nrate_mb_s = 0\n");
        assert!(e.contains("[memory]") && e.contains("rate_mb_s = 0"), "{e}");
        let e = err("[memory]\nreserve_mb = 9999999999\n");
        assert!(e.contains("reserve_mb = 9999999999"), "{e}");
        let e = err("[memory]\nrate = 5\n");
        assert!(e.contains("rate"), "{e}");
    }

    fn findings(text: &str) -> Vec<String> {
        check(text, &TwoNodes)
            .findings
            .iter()
            .map(|f| f.to_string())
            .collect()
    }

    #[test]
    fn every_error_is_reported_with_its_line() {
        let text = "partitions = \"0;0-1\"\n\
                    [[home]]\ncgroup = \"/a\"\nnode = 7\n\
                    [[home]]\ncgroup = \"/b\"\ncpus = \"1\"\nsoftness = \"3\"\n\
                    [[balance]]\ncgroup = \"/c/*\"\nperiod_ms = 1\n";
        let c = check(text, &TwoNodes);
        assert!(c.config.is_none());
        let f: Vec<String> = c.errors().map(|f| f.to_string()).collect();
        assert_eq!(f.len(), 4, "{f:#?}");
        assert!(
            f[0].starts_with("line 1: partitions: field partitions = \"0;0-1\""),
            "{}",
            f[0]
        );
        assert!(!f[0].contains("--partitions"), "{}", f[0]);
        assert!(
            f[1].starts_with("line 4: [[home]] #1 (cgroup = \"/a\"): field node = 7"),
            "{}",
            f[1]
        );
        assert!(
            f[2].starts_with("line 8: [[home]] #2 (cgroup = \"/b\"): field softness"),
            "{}",
            f[2]
        );
        assert!(
            f[3].starts_with("line 11: [[balance]] #1 (cgroup = \"/c/*\"): field period_ms = 1"),
            "{}",
            f[3]
        );
        // The scheduler's message is all of them, a line each.
        assert_eq!(parse(text, &TwoNodes).unwrap_err().lines().count(), 4);
    }

    #[test]
    fn a_syntax_error_names_its_line() {
        let f = findings("[[home]]\ncgroup = \"/a\"\nnode = = 0\n");
        assert_eq!(f.len(), 1);
        assert!(f[0].starts_with("line 3: "), "{f:?}");
        let f = findings("[[home]]\ncgroup = \"/a\"\nnode = 0\nnodes = 1\n");
        assert!(
            f[0].starts_with("line 4: ") && f[0].contains("nodes"),
            "{f:?}"
        );
    }

    #[test]
    fn an_empty_file_is_a_warning() {
        let c = check("# nothing yet\n", &TwoNodes);
        assert!(c.config.is_some());
        let w: Vec<String> = c.warnings().map(|f| f.to_string()).collect();
        assert!(w.len() == 1 && w[0].contains("no homes"), "{w:?}");
    }

    #[test]
    fn a_rule_behind_a_wider_one_never_applies() {
        let c = check(
            "[[home]]\ncgroup = \"/machine.slice/*\"\nnode = 0\n\
             [[home]]\ncgroup = \"/machine.slice/vm1.scope\"\nnode = 1\n\
             [[home]]\ncgroup = \"/machine.slice/db*.scope\"\nnode = 1\n\
             [[home]]\ncgroup = \"/other.slice/x.service\"\nnode = 1\n",
            &TwoNodes,
        );
        assert!(c.config.is_some());
        let w: Vec<String> = c.warnings().map(|f| f.to_string()).collect();
        assert_eq!(w.len(), 2, "{w:#?}");
        assert!(w[0].starts_with("line 5: warning: [[home]] #2"), "{}", w[0]);
        assert!(
            w[0].contains("never applies") && w[0].contains("#1 (line 2"),
            "{}",
            w[0]
        );
        assert!(w[1].starts_with("line 8: warning: [[home]] #3"), "{}", w[1]);
        // The narrower rule first: nothing to say.
        let c = check(
            "[[home]]\ncgroup = \"/machine.slice/vm1.scope\"\nnode = 1\n\
             [[home]]\ncgroup = \"/machine.slice/*\"\nnode = 0\n",
            &TwoNodes,
        );
        assert_eq!(c.warnings().count(), 0);
    }

    #[test]
    fn a_name_no_systemd_unit_can_have_is_a_warning() {
        let w = findings(
            "[[home]]\ncgroup = \"/system.slice/postgresql\"\nnode = 0\n\
             [[home]]\ncgroup = \"/machine.slice/my vm.scope\"\nnode = 0\n\
             [[home]]\ncgroup = \"/bench/anything\"\nnode = 0\n\
             [[balance]]\ncgroup = \"/machine.slice/*\"\n",
        );
        assert_eq!(w.len(), 2, "{w:#?}");
        assert!(
            w[0].contains("\"postgresql\"") && w[0].contains(".service"),
            "{}",
            w[0]
        );
        assert!(w[1].contains("' '"), "{}", w[1]);
    }

    #[test]
    fn a_bad_glob_is_said_in_words() {
        let f = findings("[[home]]\ncgroup = \"/a/b[c\"\nnode = 0\n");
        assert!(f[0].contains("not a valid glob at character"), "{f:?}");
    }
}
