//! Scenario files (TOML): a guest topology, groups of workloads (each in its
//! own cgroup, with an optional home), load levels, and the policies to
//! compare. Validated whole before anything runs.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use softpart_core::cpulist;
use softpart_core::events::EVENT_NAMES;
use softpart_core::topo::GuestTopo;
use std::collections::BTreeSet;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Guest topology, e.g. "2n2c2t".
    pub topology: String,
    /// Measured window per run, seconds.
    pub duration_s: f64,
    /// Time between starting the workloads and measuring, seconds.
    #[serde(default = "default_warmup")]
    pub warmup_s: f64,
    /// Values substituted for `{load}` in commands: one table row each.
    #[serde(default = "default_loads")]
    pub loads: Vec<u32>,
    /// What a load level means, for the table's first column.
    #[serde(default = "default_load_label")]
    pub load_label: String,
    /// Policies to compare (see Policy::parse). Overridable on the CLI.
    #[serde(default = "default_policies")]
    pub policies: Vec<String>,
    /// Repetitions of every cell.
    #[serde(default = "default_reps")]
    pub reps: u32,
    /// Shell commands run in the guest after each measured window, while
    /// the workloads and the scheduler still run; their output and exit
    /// status are returned (the guest tests use them to drive the CLI).
    #[serde(default)]
    pub probes: Vec<String>,
    /// What the fast path did, from scx_softpart's own event counters over
    /// the 3 s right after the measured window (the workloads still run):
    /// figure name -> event name, each reported as `NAME_per_s`. No figure
    /// for the policies without scx_softpart.
    #[serde(default)]
    pub scheduler_rates: std::collections::BTreeMap<String, String>,
    /// Report the group balancer's moves against the measured window
    /// (`moves`, `groups_moved_in_window`, `last_move_from_window_start_s`;
    /// see balancer_moves.rs). No figure where no group is balanced.
    #[serde(default)]
    pub balancer_moves: bool,
    /// Report the time each BPF callback of the scheduler took in the
    /// measured window, and the other BPF programs' (the observer's) as a
    /// baseline (`cb_*`, `other_bpf_*`; see callback_costs.rs).
    #[serde(default)]
    pub callback_costs: bool,
    /// Files written in the guest before the scenario runs (absolute path
    /// = content), e.g. a config file a policy's arguments name.
    #[serde(default)]
    pub files: std::collections::BTreeMap<String, String>,
    /// Boot this guest kernel (a trixie-backports package name, e.g.
    /// "linux-image-7.2.12+deb13-amd64") instead of scripts/versions.sh's.
    #[serde(default)]
    pub kernel: Option<String>,
    /// Extra parameters for the guest kernel's command line, e.g.
    /// `["idle=poll"]`: for experiments on the guest itself (what a halted
    /// vCPU's wake-up costs under TCG). Scenarios with different ones boot
    /// separate guests.
    #[serde(default)]
    pub guest_args: Vec<String>,
    #[serde(rename = "group")]
    pub groups: Vec<Group>,
}

/// A kernel image package name as scripts/guest-kernel.sh takes it (from
/// a scenario's `kernel` or `softpart-bench run --kernel`); it becomes
/// part of the guest's work directory name, so nothing that could leave it.
pub fn parse_kernel_pkg(s: &str) -> std::result::Result<String, String> {
    let rest = s.strip_prefix("linux-image-").unwrap_or("");
    let ok = rest.starts_with(|c: char| c.is_ascii_digit())
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.~_".contains(c));
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a kernel image package name (linux-image-VERSION-amd64, \
             e.g. linux-image-7.3.4+deb13-amd64)"
        ))
    }
}

/// Parameters the bench sets itself on the guest's command line; a
/// scenario may not change them (the guest would not reach the agent, or
/// its console would go elsewhere).
const BENCH_OWNED_ARGS: &[&str] = &[
    "console", "panic", "rdinit", "init", "loglevel", "nokaslr", "quiet",
];

/// One extra guest kernel parameter (`--guest-arg` or a scenario's
/// `guest_args`): `key` or `key=value`, no spaces or quotes (it is passed
/// as one word and becomes part of the guest's work directory name), and
/// not one the bench sets itself.
pub fn parse_guest_arg(s: &str) -> std::result::Result<String, String> {
    let key = s.split('=').next().unwrap_or("");
    let well_formed = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.,=:".contains(c));
    if BENCH_OWNED_ARGS.contains(&key) {
        return Err(format!(
            "{s:?}: the bench sets {key} itself ({})",
            BENCH_OWNED_ARGS.join(", ")
        ));
    }
    if !well_formed {
        return Err(format!(
            "{s:?} is not a kernel parameter (key or key=value, with letters, digits and _-.,=: only)"
        ));
    }
    Ok(s.to_string())
}

fn default_warmup() -> f64 {
    1.0
}
fn default_loads() -> Vec<u32> {
    vec![1]
}
fn default_load_label() -> String {
    "load".into()
}
fn default_policies() -> Vec<String> {
    vec!["eevdf".into(), "pinned".into(), "softpart".into()]
}
fn default_reps() -> u32 {
    3
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// cgroup name (a single path component).
    pub name: String,
    /// Shell command run in the group's cgroup; `{load}` and `{cpus}` (the
    /// guest's CPU count) are substituted. It should run until killed.
    /// Empty, and only empty, for a group other groups name as `parent`:
    /// under cgroup v2 a cgroup that shares its controllers with children
    /// holds no tasks itself.
    #[serde(default)]
    pub command: String,
    /// The group this one's cgroup is created inside (declared earlier in
    /// the file); its CPU time is reported as the sum of its children's.
    #[serde(default)]
    pub parent: Option<String>,
    /// The group's home: where locality is measured against, what `pinned`
    /// confines it to, and (later) what softpart prefers.
    #[serde(default)]
    pub home: Option<Home>,
    /// Always confine the group to these CPUs (cpuset), under every policy.
    #[serde(default)]
    pub cpuset: Option<String>,
    /// The group's `cpu.weight` (1 to 10000; the kernel's default is 100).
    #[serde(default)]
    pub weight: Option<u32>,
    /// The group's `cpu.max`, "QUOTA PERIOD" in microseconds (QUOTA may
    /// be "max"), e.g. "100000 100000" for one CPU.
    #[serde(default)]
    pub max: Option<String>,
    /// The group's `cpu.idle`: true for 1 (its tasks run only on CPUs no
    /// one else wants, as SCHED_IDLE tasks do).
    #[serde(default)]
    pub idle: bool,
}

impl Group {
    /// `max` as (quota µs or None for "max", period µs), checked as the
    /// kernel checks it: a period of 1 ms to 1 s, a quota of at least 1 ms.
    pub fn cpu_max(&self) -> Result<Option<(Option<u64>, u64)>> {
        let Some(text) = &self.max else {
            return Ok(None);
        };
        let err = || {
            anyhow::anyhow!(
                "group {:?}: max = {text:?}: expected \"QUOTA PERIOD\" in microseconds (QUOTA a number or max; PERIOD 1000 to 1000000; QUOTA at least 1000), e.g. \"100000 100000\" for one CPU",
                self.name
            )
        };
        let mut words = text.split_whitespace();
        let (Some(q), Some(p), None) = (words.next(), words.next(), words.next()) else {
            return Err(err());
        };
        let period: u64 = p.parse().map_err(|_| err())?;
        if !(1000..=1_000_000).contains(&period) {
            return Err(err());
        }
        let quota = match q {
            "max" => None,
            q => match q.parse::<u64>() {
                Ok(v) if v >= 1000 => Some(v),
                _ => return Err(err()),
            },
        };
        Ok(Some((quota, period)))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Home {
    #[serde(default)]
    pub node: Option<u32>,
    #[serde(default)]
    pub cpus: Option<String>,
}

/// How the CPUs are scheduled during a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Policy {
    /// The kernel's default scheduler, no affinity.
    Eevdf,
    /// The default scheduler, each group with a home hard-pinned to it.
    Pinned,
    /// scx_softpart with these extra arguments.
    Softpart(Vec<String>),
    /// scx_softpart with no homes given: every task takes the homeless
    /// path, i.e. the foundation scheduler's behaviour (the baseline for
    /// the cost of placement decisions).
    SoftpartNoHomes(Vec<String>),
    /// Any other sched_ext scheduler: a command line.
    External(Vec<String>),
    /// Another build of scx_softpart (scripts/build-rev.sh), a command
    /// line: groups get their homes through the softpart CLI, as under
    /// `Softpart`, so that an earlier behaviour runs beside the current
    /// one in the same boot.
    ExternalHomes(Vec<String>),
}

impl Policy {
    /// `eevdf`, `pinned`, `softpart[:ARGS]`, `softpart-nohome[:ARGS]`,
    /// `external:COMMAND ARGS`, `external-homes:COMMAND ARGS`.
    pub fn parse(s: &str) -> Result<Policy> {
        let (kind, rest) = match s.split_once(':') {
            Some((k, r)) => (k.trim(), Some(r)),
            None => (s.trim(), None),
        };
        let words = |r: Option<&str>| -> Vec<String> {
            r.unwrap_or("")
                .split_whitespace()
                .map(String::from)
                .collect()
        };
        Ok(match (kind, rest) {
            ("eevdf", None) => Policy::Eevdf,
            ("pinned", None) => Policy::Pinned,
            ("softpart", r) => Policy::Softpart(words(r)),
            ("softpart-nohome", r) => Policy::SoftpartNoHomes(words(r)),
            ("external", Some(r)) if !r.trim().is_empty() => Policy::External(words(Some(r))),
            ("external-homes", Some(r)) if !r.trim().is_empty() => {
                Policy::ExternalHomes(words(Some(r)))
            }
            _ => bail!(
                "unknown policy {s:?}: expected eevdf, pinned, softpart[:ARGS], softpart-nohome[:ARGS], external:COMMAND [ARGS] or external-homes:COMMAND [ARGS]"
            ),
        })
    }

    pub fn uses_sched_ext(&self) -> bool {
        matches!(
            self,
            Policy::Softpart(_)
                | Policy::SoftpartNoHomes(_)
                | Policy::External(_)
                | Policy::ExternalHomes(_)
        )
    }
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading scenario {}", path.display()))?;
        let s: Scenario = toml::from_str(&text)
            .with_context(|| format!("parsing scenario {}", path.display()))?;
        s.validate()
            .with_context(|| format!("scenario {}", path.display()))?;
        Ok(s)
    }

    pub fn topo(&self) -> Result<GuestTopo> {
        self.topology
            .parse::<GuestTopo>()
            .with_context(|| format!("field topology = {:?}", self.topology))
    }

    pub fn validate(&self) -> Result<()> {
        let topo = self.topo()?;
        if let Some(k) = &self.kernel {
            parse_kernel_pkg(k).map_err(|e| anyhow::anyhow!("field kernel: {e}"))?;
        }
        for a in &self.guest_args {
            parse_guest_arg(a).map_err(|e| anyhow::anyhow!("field guest_args: {e}"))?;
        }
        if !(self.duration_s > 0.0 && self.duration_s <= 3600.0) {
            bail!(
                "field duration_s = {}: must be in (0, 3600] seconds",
                self.duration_s
            );
        }
        if !(self.warmup_s >= 0.0 && self.warmup_s <= 600.0) {
            bail!(
                "field warmup_s = {}: must be in [0, 600] seconds",
                self.warmup_s
            );
        }
        if self.loads.is_empty() {
            bail!("field loads is empty: give at least one load level");
        }
        if self.reps == 0 || self.reps > 100 {
            bail!("field reps = {}: must be 1 to 100", self.reps);
        }
        if self.groups.is_empty() {
            bail!("no [[group]]: a scenario needs at least one group");
        }
        for p in &self.policies {
            Policy::parse(p).with_context(|| "field policies".to_string())?;
        }
        for (figure, event) in &self.scheduler_rates {
            if figure.is_empty()
                || !figure
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                bail!("field scheduler_rates: figure name {figure:?}: use a-z, 0-9 and '_' only");
            }
            if !EVENT_NAMES.contains(&event.as_str()) {
                bail!(
                    "field scheduler_rates: {figure} = {event:?} is not a scheduler event (one of {})",
                    EVENT_NAMES.join(", ")
                );
            }
        }
        for path in self.files.keys() {
            if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
                bail!("field files: path {path:?} must be absolute, without '..'");
            }
        }
        let mut names = BTreeSet::new();
        for g in &self.groups {
            let ok = !g.name.is_empty()
                && g.name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !ok {
                bail!(
                    "group name {:?}: use letters, digits, '-' and '_' only",
                    g.name
                );
            }
            if !names.insert(&g.name) {
                bail!("group name {:?} appears twice", g.name);
            }
            if let Some(p) = &g.parent {
                let Some(up) = self.groups.iter().find(|u| &u.name == p) else {
                    bail!("group {:?}: parent = {p:?}: no such group", g.name);
                };
                if !names.contains(&up.name) || up.name == g.name {
                    bail!(
                        "group {:?}: parent = {p:?}: declare the parent before its children",
                        g.name
                    );
                }
            }
            let is_parent = self.is_parent(g);
            if is_parent && !g.command.trim().is_empty() {
                bail!(
                    "group {:?}: field command must be empty: other groups name it as parent, \
                     and a cgroup with children holds no tasks",
                    g.name
                );
            }
            if !is_parent && g.command.trim().is_empty() {
                bail!("group {:?}: field command is empty", g.name);
            }
            if is_parent && (g.home.is_some() || g.cpuset.is_some()) {
                bail!(
                    "group {:?}: a parent group takes weight and max only (no home, no cpuset)",
                    g.name
                );
            }
            self.home_cpus(g, &topo)?;
            if let Some(w) = g.weight
                && !(1..=10_000).contains(&w)
            {
                bail!(
                    "group {:?}: weight = {w}: cpu.weight takes 1 to 10000 (100 is the default)",
                    g.name
                );
            }
            g.cpu_max()?;
            if let Some(c) = &g.cpuset {
                check_cpus(c, &topo)
                    .with_context(|| format!("group {:?}: field cpuset", g.name))?;
            }
        }
        Ok(())
    }

    /// Whether other groups name `g` as their parent.
    pub fn is_parent(&self, g: &Group) -> bool {
        self.groups
            .iter()
            .any(|c| c.parent.as_deref() == Some(g.name.as_str()))
    }

    /// `g`'s cgroup path below the bench's cgroup: its parents' names,
    /// outermost first, then its own ("a/x").
    pub fn cgroup_path(&self, g: &Group) -> String {
        let mut path = vec![g.name.as_str()];
        let mut at = g;
        // validate() keeps parents declared first, so this ends.
        for _ in 0..self.groups.len() {
            let Some(up) = at
                .parent
                .as_ref()
                .and_then(|p| self.groups.iter().find(|u| &u.name == p))
            else {
                break;
            };
            path.push(up.name.as_str());
            at = up;
        }
        path.reverse();
        path.join("/")
    }

    /// The groups with a command (not parents), whose tasks are measured.
    pub fn leaves(&self) -> impl Iterator<Item = &Group> {
        self.groups.iter().filter(|g| !self.is_parent(g))
    }

    /// Whether any group sets a CPU contract (a weight, a cap) or nests:
    /// the report then gives each group's CPU time with its contract.
    pub fn sets_contract(&self) -> bool {
        self.groups
            .iter()
            .any(|g| g.weight.is_some() || g.max.is_some() || g.parent.is_some() || g.idle)
    }

    /// The shell commands run after each window (`probes`).
    pub fn probe_commands(&self) -> Vec<String> {
        self.probes.clone()
    }

    /// The command run alongside each window, if `scheduler_rates` asks
    /// for any: `scx_softpart --monitor` with the window's length as its
    /// interval, started as the window begins, so that its second report
    /// covers the window itself.
    pub fn window_probe(&self) -> Option<String> {
        if self.scheduler_rates.is_empty() {
            return None;
        }
        let prints: Vec<String> = self
            .scheduler_rates
            .iter()
            .map(|(figure, event)| {
                format!("printf \"figure {figure}_per_s %.1f\\n\", v[\"{event}\"] / t")
            })
            .collect();
        Some(format!(
            "timeout {} scx_softpart --monitor {} 2>/dev/null | awk '/^\\[softpart\\]/ {{ n++; t = $2 + 0 }} \
             n == 2 && /^  events:/ {{ sub(/^  events: /, \"\"); k = split($0, a, \", \"); \
             for (i = 1; i <= k; i++) {{ split(a[i], b, \" \"); v[b[1]] = b[2] }} }} \
             END {{ if (n >= 2 && t > 0) {{ {} }} }}'",
            self.duration_s.ceil() as u64 + 5,
            self.duration_s,
            prints.join("; ")
        ))
    }

    /// The CPUs of a group's home, if it has one.
    pub fn home_cpus(&self, g: &Group, topo: &GuestTopo) -> Result<Option<BTreeSet<usize>>> {
        let Some(home) = &g.home else {
            return Ok(None);
        };
        match (home.node, &home.cpus) {
            (Some(node), None) => {
                if node >= topo.nodes {
                    bail!(
                        "group {:?}: home node = {node}, but topology {topo} has nodes 0-{}",
                        g.name,
                        topo.nodes - 1
                    );
                }
                Ok(Some(topo.node_cpus(node).map(|c| c as usize).collect()))
            }
            (None, Some(cpus)) => {
                Ok(Some(check_cpus(cpus, topo).with_context(|| {
                    format!("group {:?}: home cpus", g.name)
                })?))
            }
            _ => bail!(
                "group {:?}: home needs exactly one of node = N or cpus = \"LIST\"",
                g.name
            ),
        }
    }

    pub fn command_for(&self, g: &Group, load: u32, topo: &GuestTopo) -> String {
        g.command
            .replace("{load}", &load.to_string())
            .replace("{cpus}", &topo.nr_cpus().to_string())
    }
}

fn check_cpus(list: &str, topo: &GuestTopo) -> Result<BTreeSet<usize>> {
    let set = cpulist::parse(list)?;
    if set.is_empty() {
        bail!("CPU list {list:?} is empty");
    }
    if let Some(bad) = set.iter().find(|&&c| c >= topo.nr_cpus() as usize) {
        bail!(
            "CPU {bad} in {list:?} is outside topology {topo} (CPUs 0-{})",
            topo.nr_cpus() - 1
        );
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
topology = "2n2c2t"
duration_s = 5
loads = [1, 2]
[[group]]
name = "a"
command = "hackbench -g {load}"
home = { node = 0 }
[[group]]
name = "b"
command = "stress-ng --cpu {cpus}"
home = { cpus = "4-7" }
"#;

    fn parse(s: &str) -> Result<Scenario> {
        let sc: Scenario = toml::from_str(s)?;
        sc.validate()?;
        Ok(sc)
    }

    /// Runs the awk part of the generated rate probe on a captured
    /// `scx_softpart --monitor` output (the scheduler is not run).
    fn rates_from(sc: &Scenario, monitor: &str) -> String {
        let cmd = sc.window_probe().unwrap();
        let (_, awk) = cmd.split_once("2>/dev/null | ").unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s' \"$MONITOR\" | {awk}"))
            .env("MONITOR", monitor)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn kernel_must_be_a_package_name() {
        let with = |k: &str| {
            GOOD.replacen(
                "loads = [1, 2]",
                &format!("loads = [1, 2]\nkernel = \"{k}\""),
                1,
            )
        };
        assert_eq!(
            parse(&with("linux-image-7.3.4+deb13-amd64"))
                .unwrap()
                .kernel
                .as_deref(),
            Some("linux-image-7.3.4+deb13-amd64")
        );
        assert!(parse_kernel_pkg("linux-image-6.17.13+deb13-amd64").is_ok());
        for bad in [
            "7.3.4",
            "linux-image-",
            "linux-image-amd64",
            "linux-image-7.3/../x",
            "linux-image-7 3",
        ] {
            let err = parse_kernel_pkg(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
            let err = format!("{:#}", parse(&with(bad)).unwrap_err());
            assert!(err.contains("field kernel") && err.contains(bad), "{err}");
        }
    }

    #[test]
    fn guest_args_are_single_parameters_the_bench_does_not_own() {
        let with = |a: &str| {
            GOOD.replacen(
                "loads = [1, 2]",
                &format!("loads = [1, 2]\nguest_args = [\"{a}\"]"),
                1,
            )
        };
        for good in ["idle=poll", "nohz=off", "isolcpus=1,3", "threadirqs"] {
            assert_eq!(parse(&with(good)).unwrap().guest_args, vec![good]);
        }
        for (bad, why) in [
            ("idle=poll nohz=off", "not a kernel parameter"),
            ("", "not a kernel parameter"),
            ("=x", "not a kernel parameter"),
            ("a/../b", "not a kernel parameter"),
            ("console=tty0", "sets console itself"),
            ("rdinit=/bin/sh", "sets rdinit itself"),
        ] {
            let err = parse_guest_arg(bad).unwrap_err();
            assert!(
                err.contains(why) && err.contains(&format!("{bad:?}")),
                "{err}"
            );
            let err = format!("{:#}", parse(&with(bad)).unwrap_err());
            assert!(err.contains("field guest_args"), "{err}");
        }
    }

    #[test]
    fn scheduler_rates_read_the_second_report() {
        let text = GOOD.replacen(
            "loads = [1, 2]",
            "loads = [1, 2]\nscheduler_rates = { steals = \"dispatch_steal\", returns_home = \"return_idle\" }",
            1,
        );
        let sc = parse(&text).unwrap();
        assert!(sc.probe_commands().is_empty());
        assert!(sc.window_probe().unwrap().contains("--monitor "));
        // The first report covers the time since the scheduler started;
        // only the second one (3 s) counts. An event with no count is 0.
        let monitor = "[softpart] 12.00s  wakeups: home 1 away 2\n  events: dispatch_steal 999, return_idle 5\n\
                       [softpart] 3.00s  wakeups: home 1 away 2\n  events: dispatch_steal 30, pick_prev 7\n";
        assert_eq!(
            rates_from(&sc, monitor),
            "figure returns_home_per_s 0.0\nfigure steals_per_s 10.0\n"
        );
        // A single report (the scheduler not running long enough): no figure.
        assert_eq!(
            rates_from(&sc, "[softpart] 3.00s\n  events: dispatch_steal 30\n"),
            ""
        );
    }

    #[test]
    fn scheduler_rates_name_a_known_event() {
        let bad = GOOD.replacen(
            "loads = [1, 2]",
            "loads = [1, 2]\nscheduler_rates = { steals = \"dispatch_stael\" }",
            1,
        );
        let e = format!("{:#}", parse(&bad).unwrap_err());
        assert!(
            e.contains("scheduler_rates") && e.contains("dispatch_stael"),
            "{e}"
        );
        let bad = GOOD.replacen(
            "loads = [1, 2]",
            "loads = [1, 2]\nscheduler_rates = { \"Steals/s\" = \"dispatch_steal\" }",
            1,
        );
        let e = format!("{:#}", parse(&bad).unwrap_err());
        assert!(e.contains("Steals/s"), "{e}");
        assert!(parse(GOOD).unwrap().probe_commands().is_empty());
        assert!(parse(GOOD).unwrap().window_probe().is_none());
    }

    #[test]
    fn good_scenario() {
        let s = parse(GOOD).unwrap();
        let topo = s.topo().unwrap();
        assert_eq!(s.reps, 3);
        assert_eq!(
            s.home_cpus(&s.groups[0], &topo).unwrap().unwrap(),
            (0..4).collect()
        );
        assert_eq!(s.command_for(&s.groups[1], 2, &topo), "stress-ng --cpu 8");
        assert_eq!(s.command_for(&s.groups[0], 2, &topo), "hackbench -g 2");
    }

    #[test]
    fn errors_name_the_field_and_value() {
        let cases = [
            (GOOD.replace("node = 0", "node = 2"), "home node = 2"),
            (GOOD.replace("4-7", "4-9"), "CPU 8 in \"4-9\""),
            (
                GOOD.replace("duration_s = 5", "duration_s = 0"),
                "duration_s = 0",
            ),
            (GOOD.replace("\"2n2c2t\"", "\"2x2\""), "topology = \"2x2\""),
            (
                GOOD.replace("name = \"b\"", "name = \"a\""),
                "\"a\" appears twice",
            ),
            (GOOD.replace("name = \"b\"", "name = \"b/c\""), "\"b/c\""),
            (
                GOOD.replace("loads = [1, 2]", "loads = [1]\npolicies = [\"cfs\"]"),
                "unknown policy \"cfs\"",
            ),
            (
                GOOD.replace("duration_s = 5", "duration_s = 5\nbogus = 1"),
                "bogus",
            ),
        ];
        // Group a's contract fields, in place of its home.
        let contracts = [
            (
                "weight = 0",
                "group \"a\": weight = 0: cpu.weight takes 1 to 10000",
            ),
            (
                "max = \"100000\"",
                "group \"a\": max = \"100000\": expected \"QUOTA PERIOD\"",
            ),
            ("max = \"500 100000\"", "max = \"500 100000\""),
            ("max = \"max 10\"", "max = \"max 10\""),
        ]
        .map(|(field, want)| (GOOD.replace("home = { node = 0 }", field), want));
        for (text, want) in cases.into_iter().chain(contracts) {
            let e = format!("{:#}", parse(&text).unwrap_err());
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
    }

    #[test]
    fn groups_nest_inside_parents_without_tasks() {
        const NESTED: &str = r#"
name = "t"
topology = "2n2c2t"
duration_s = 5
loads = [1]
[[group]]
name = "a"
weight = 200
[[group]]
name = "x"
parent = "a"
command = "stress-ng --cpu 4"
[[group]]
name = "y"
parent = "x2"
command = "stress-ng --cpu 4"
"#;
        let err = |s: &str| format!("{:#}", parse(s).unwrap_err());
        let e = err(NESTED);
        assert!(
            e.contains("\"y\"") && e.contains("x2") && e.contains("no such group"),
            "{e}"
        );
        let s = parse(&NESTED.replace("\"x2\"", "\"a\"")).unwrap();
        assert!(s.is_parent(&s.groups[0]) && !s.is_parent(&s.groups[1]));
        assert_eq!(s.cgroup_path(&s.groups[2]), "a/y");
        assert_eq!(
            s.leaves().map(|g| g.name.as_str()).collect::<Vec<_>>(),
            ["x", "y"]
        );
        // A parent runs nothing; a leaf runs something.
        let e = err(&NESTED
            .replace("\"x2\"", "\"a\"")
            .replace("weight = 200", "weight = 200\ncommand = \"sleep 9\""));
        assert!(
            e.contains("\"a\"") && e.contains("command must be empty"),
            "{e}"
        );
        let e = err(&NESTED.replace("\"x2\"", "\"a\"").replace(
            "command = \"stress-ng --cpu 4\"\n[[group]]\nname = \"y\"",
            "[[group]]\nname = \"y\"",
        ));
        assert!(e.contains("\"x\"") && e.contains("command is empty"), "{e}");
        // Parents first.
        let e = err(&NESTED
            .replace("parent = \"a\"", "parent = \"y\"")
            .replace("\"x2\"", "\"a\""));
        assert!(e.contains("declare the parent before"), "{e}");
    }

    #[test]
    fn weights_and_caps_are_a_contract() {
        assert!(!parse(GOOD).unwrap().sets_contract());
        let s = parse(&GOOD.replace(
            "home = { node = 0 }",
            "weight = 300\nmax = \"50000 100000\"",
        ))
        .unwrap();
        assert!(s.sets_contract());
        assert_eq!(s.groups[0].weight, Some(300));
        assert_eq!(
            s.groups[0].cpu_max().unwrap(),
            Some((Some(50_000), 100_000))
        );
        let s = parse(&GOOD.replace("home = { node = 0 }", "max = \"max 100000\"")).unwrap();
        assert_eq!(s.groups[0].cpu_max().unwrap(), Some((None, 100_000)));
        assert!(s.sets_contract());
    }

    #[test]
    fn policies() {
        assert_eq!(Policy::parse("eevdf").unwrap(), Policy::Eevdf);
        assert_eq!(
            Policy::parse("softpart:--slice-us 1000").unwrap(),
            Policy::Softpart(vec!["--slice-us".into(), "1000".into()])
        );
        assert_eq!(
            Policy::parse("external:scx_bpfland -s 5000").unwrap(),
            Policy::External(vec!["scx_bpfland".into(), "-s".into(), "5000".into()])
        );
        assert_eq!(
            Policy::parse("external-homes:scx_softpart-abc123 --diag").unwrap(),
            Policy::ExternalHomes(vec!["scx_softpart-abc123".into(), "--diag".into()])
        );
        assert!(Policy::parse("external:").is_err());
        assert!(Policy::parse("pinned:x").is_err());
    }

    #[test]
    fn shipped_scenarios_are_valid() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut n = 0;
        for dir in [
            root.clone(),
            root.join("experiments"),
            root.join("soak"),
            root.join("vcpu-wake"),
        ] {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "toml") {
                    Scenario::load(&p).unwrap();
                    n += 1;
                }
            }
        }
        assert!(n > 8, "only {n} scenarios in {}", root.display());
    }
}
