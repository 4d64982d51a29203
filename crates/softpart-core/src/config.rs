//! The config file (`--config FILE`): cgroup paths or globs and the home
//! each gets. Read and checked whole at start (a bad file stops the
//! scheduler before it attaches, naming the entry, the field and the
//! value); matched against every cgroup then and against cgroups created
//! later, so that containers and service slices get their home as they
//! appear. A rule is applied once per cgroup: a later `softpart prefer` on
//! the same cgroup stands.
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

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use softpart_core::control::HomeSpec;
use softpart_core::softness::Softness;
use std::collections::BTreeSet;
use std::path::Path;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    partitions: Option<String>,
    #[serde(default, rename = "home")]
    homes: Vec<Entry>,
    #[serde(default, rename = "balance")]
    balance: Vec<BalanceEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BalanceEntry {
    cgroup: String,
    period_ms: Option<u64>,
}

/// A checked config file.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// In the `--partitions` syntax; checked against the machine by the
    /// caller (which knows its CPUs).
    pub partitions: Option<String>,
    pub homes: Vec<Rule>,
    pub balance: Vec<BalanceRule>,
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
    pub fn new(cgroup: &str, period_ms: Option<u64>) -> Result<BalanceRule> {
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
fn cgroup_pattern(text: &str) -> Result<glob::Pattern> {
    let cgroup = text
        .strip_prefix(crate::control::CGROUP_ROOT)
        .unwrap_or(text)
        .to_string();
    if !cgroup.starts_with('/') || cgroup.split('/').any(|c| c == "..") {
        bail!("field cgroup = {text:?}: give a path from the cgroup2 root, starting with '/'");
    }
    let cgroup = if cgroup.len() > 1 {
        cgroup.trim_end_matches('/').to_string()
    } else {
        cgroup
    };
    glob::Pattern::new(&cgroup).with_context(|| format!("field cgroup = {text:?}"))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    cgroup: String,
    cpus: Option<String>,
    node: Option<u32>,
    llc: Option<u32>,
    softness: Option<String>,
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

/// Reads and checks a config file. `resolve` turns a home into CPUs on
/// this machine (and says what is wrong with it).
pub fn load(path: &Path, resolve: impl Fn(&HomeSpec) -> Result<BTreeSet<usize>>) -> Result<Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    parse(&text, resolve).with_context(|| format!("config file {}", path.display()))
}

pub fn parse(text: &str, resolve: impl Fn(&HomeSpec) -> Result<BTreeSet<usize>>) -> Result<Config> {
    let file: File = toml::from_str(text).map_err(|e| {
        let hint = if e.message().contains("escape") {
            "\nhint: a cgroup name with a backslash (systemd's escapes, e.g. \\x2d in \
             machine-qemu\\x2d1\\x2ddb1.scope) goes in single quotes, a TOML literal string: \
             cgroup = '/machine.slice/machine-qemu\\x2d1\\x2ddb1.scope'"
        } else {
            ""
        };
        anyhow::anyhow!("{e}{hint}")
    })?;
    let mut rules: Vec<Rule> = Vec::new();
    for (i, e) in file.homes.into_iter().enumerate() {
        let at = format!("[[home]] #{} (cgroup = {:?})", i + 1, e.cgroup);
        let pattern = cgroup_pattern(&e.cgroup).with_context(|| at.clone())?;
        if let Some(j) = rules.iter().position(|r| r.pattern == pattern) {
            bail!(
                "{at}: the same cgroup as [[home]] #{}: only the first rule for a cgroup applies",
                j + 1
            );
        }
        let spec = match (e.cpus, e.node, e.llc) {
            (Some(c), None, None) => HomeSpec::Cpus(c),
            (None, Some(n), None) => HomeSpec::Node(n),
            (None, None, Some(l)) => HomeSpec::Llc(l),
            _ => bail!("{at}: give exactly one of the fields cpus, node, llc"),
        };
        let field = match &spec {
            HomeSpec::Cpus(c) => format!("cpus = {c:?}"),
            HomeSpec::Node(n) => format!("node = {n}"),
            HomeSpec::Llc(l) => format!("llc = {l}"),
        };
        let cpus = resolve(&spec).with_context(|| format!("{at}: {field}"))?;
        let softness = match e.softness {
            None => None,
            Some(s) => Some(
                s.parse::<Softness>()
                    .map_err(|m| anyhow::anyhow!("{at}: field softness: {m}"))?,
            ),
        };
        rules.push(Rule {
            cgroup: e.cgroup,
            pattern,
            cpus,
            softness,
        });
    }
    let mut balance = Vec::new();
    for (i, e) in file.balance.into_iter().enumerate() {
        let at = format!("[[balance]] #{} (cgroup = {:?})", i + 1, e.cgroup);
        if let Some(ms) = e.period_ms
            && !(10..=3_600_000).contains(&ms)
        {
            bail!("{at}: field period_ms = {ms}: give 10 to 3600000 ms");
        }
        let rule = BalanceRule::new(&e.cgroup, e.period_ms).with_context(|| at.clone())?;
        if let Some(j) = balance
            .iter()
            .position(|r: &BalanceRule| r.pattern == rule.pattern)
        {
            bail!(
                "{at}: the same cgroup as [[balance]] #{}: only the first rule for a cgroup applies",
                j + 1
            );
        }
        balance.push(rule);
    }
    Ok(Config {
        partitions: file.partitions,
        homes: rules,
        balance,
    })
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
    fn resolve(spec: &HomeSpec) -> Result<BTreeSet<usize>> {
        match spec {
            HomeSpec::Node(0) | HomeSpec::Llc(0) => Ok((0..4).collect()),
            HomeSpec::Node(1) | HomeSpec::Llc(1) => Ok((4..8).collect()),
            HomeSpec::Cpus(c) => Ok(softpart_core::cpulist::parse(c)?),
            other => bail!("{other:?} does not exist"),
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
            resolve,
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
            let _ = parse(&text, resolve);
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
            if let Err(e) = parse(&text, resolve) {
                let e = format!("{e:#}");
                proptest::prop_assert!(e.contains("[[home]] #2") || e.contains("[[balance]] #1"), "{}", e);
            }
        }
    }

    #[test]
    fn duplicate_rules_are_refused_naming_both() {
        let err = |text: &str| format!("{:#}", parse(text, resolve).unwrap_err());
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
            resolve,
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
            let cfg = parse(b, resolve).unwrap_or_else(|e| panic!("{e:#}\n{b}"));
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
                resolve
            )
            .unwrap_err()
        );
        assert!(e.contains("single quotes"), "{e}");
        let cfg = parse(
            "[[home]]\ncgroup = '/machine.slice/machine-qemu\\x2d1.scope'\nnode = 0\n",
            resolve,
        )
        .unwrap();
        assert!(rule_for(&cfg.homes, "/machine.slice/machine-qemu\\x2d1.scope").is_some());
    }

    #[test]
    fn explicit_homes_win_over_balancing() {
        let cfg = parse(
            "[[home]]\ncgroup = \"/vms/db\"\nnode = 1\n[[balance]]\ncgroup = \"/vms/*\"\n",
            resolve,
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
        let err = |text: &str| format!("{:#}", parse(text, resolve).unwrap_err());
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
}
