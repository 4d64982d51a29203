//! What a pod asks for in its annotations:
//!
//! - `home.softpart.io/pod: "node=1"` (or `llc=N`, `cpus=LIST`), with an
//!   optional `softness=home-first` or `softness=A:P` after a space or a
//!   `;`: the pod's cgroup gets that home, and its containers inherit it;
//! - `home.softpart.io/container.NAME: ...`, the same for one container,
//!   which then has its own home;
//! - `balance.softpart.io/pod: "true"`: the balancer places the pod's
//!   cgroup. A pod with a home of its own is not balanced (an explicit
//!   home wins, as everywhere in softpart).

use softpart_core::control::HomeSpec;
use softpart_core::cpulist;
use softpart_core::softness::Softness;
use std::collections::HashMap;

pub const POD_HOME: &str = "home.softpart.io/pod";
pub const CONTAINER_HOME_PREFIX: &str = "home.softpart.io/container.";
pub const POD_BALANCE: &str = "balance.softpart.io/pod";

/// A home as an annotation gives it: what scx_softpart resolves to CPUs,
/// and the group's own softness if given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeAsked {
    pub spec: HomeSpec,
    pub softness: Option<String>,
}

impl std::fmt::Display for HomeAsked {
    /// The annotation's value in its one spelling (what `softpart list`
    /// shows after the pod's name).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.spec {
            HomeSpec::Node(n) => write!(f, "node={n}")?,
            HomeSpec::Llc(n) => write!(f, "llc={n}")?,
            HomeSpec::Cpus(c) => write!(f, "cpus={c}")?,
        }
        if let Some(s) = &self.softness {
            write!(f, " softness={s}")?;
        }
        Ok(())
    }
}

/// Parses a home annotation's value; the error names the part it could
/// not take and why.
pub fn parse_home(value: &str) -> Result<HomeAsked, String> {
    let mut spec = None;
    let mut softness = None;
    for part in value
        .split(|c: char| c.is_whitespace() || c == ';')
        .filter(|p| !p.is_empty())
    {
        let (key, val) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?} is not KEY=VALUE"))?;
        let number = || {
            val.parse::<u32>()
                .map_err(|_| format!("{key}={val:?}: not a number"))
        };
        let this = match key {
            "node" => HomeSpec::Node(number()?),
            "llc" => HomeSpec::Llc(number()?),
            "cpus" => {
                let cpus = cpulist::parse(val).map_err(|e| format!("cpus={val:?}: {e}"))?;
                if cpus.is_empty() {
                    return Err(format!("cpus={val:?}: no CPU"));
                }
                HomeSpec::Cpus(cpulist::format(&cpus))
            }
            "softness" => {
                val.parse::<Softness>()
                    .map_err(|e| format!("softness={val:?}: {e}"))?;
                if softness.replace(val.to_string()).is_some() {
                    return Err("softness given twice".to_string());
                }
                continue;
            }
            _ => {
                return Err(format!("unknown key {key:?} (node, llc, cpus or softness)"));
            }
        };
        if spec.replace(this).is_some() {
            return Err("more than one of node, llc and cpus".to_string());
        }
    }
    let spec = spec.ok_or_else(|| "no node=, llc= or cpus=".to_string())?;
    Ok(HomeAsked { spec, softness })
}

/// Parses `balance.softpart.io/pod`.
pub fn parse_balance(value: &str) -> Result<bool, String> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        v => Err(format!("{v:?}: true or false")),
    }
}

/// What a pod's annotations ask for, the pod's own and each named
/// container's; and what could not be read, as (key, value, reason).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PodAsks {
    pub home: Option<HomeAsked>,
    pub balance: bool,
    pub containers: HashMap<String, HomeAsked>,
    pub refused: Vec<(String, String, String)>,
}

/// Reads a pod's softpart annotations; others are not looked at.
pub fn pod_asks(annotations: &HashMap<String, String>) -> PodAsks {
    let mut asks = PodAsks::default();
    let mut keys: Vec<_> = annotations.keys().collect();
    keys.sort();
    for key in keys {
        let value = &annotations[key];
        let mut refuse = |reason: String| {
            asks.refused
                .push((key.to_string(), value.to_string(), reason))
        };
        if key == POD_HOME {
            match parse_home(value) {
                Ok(h) => asks.home = Some(h),
                Err(e) => refuse(e),
            }
        } else if key == POD_BALANCE {
            match parse_balance(value) {
                Ok(b) => asks.balance = b,
                Err(e) => refuse(e),
            }
        } else if let Some(name) = key.strip_prefix(CONTAINER_HOME_PREFIX) {
            if name.is_empty() {
                refuse("no container name after \"container.\"".to_string());
                continue;
            }
            match parse_home(value) {
                Ok(h) => {
                    asks.containers.insert(name.to_string(), h);
                }
                Err(e) => refuse(e),
            }
        } else if key.contains("softpart.io/") {
            refuse(format!(
                "unknown softpart annotation (known: {POD_HOME}, {CONTAINER_HOME_PREFIX}NAME, {POD_BALANCE})"
            ));
        }
    }
    if asks.home.is_some() && asks.balance {
        asks.balance = false;
        asks.refused.push((
            POD_BALANCE.to_string(),
            "true".to_string(),
            format!("the pod has a home ({POD_HOME}), which wins over balancing"),
        ));
    }
    asks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_home_is_a_node_an_llc_or_cpus_with_an_optional_softness() {
        assert_eq!(
            parse_home("node=1").unwrap(),
            HomeAsked {
                spec: HomeSpec::Node(1),
                softness: None
            }
        );
        let h = parse_home(" cpus=0-3,8-11;softness=100:1 ").unwrap();
        assert_eq!(h.spec, HomeSpec::Cpus("0-3,8-11".into()));
        assert_eq!(h.softness.as_deref(), Some("100:1"));
        assert_eq!(h.to_string(), "cpus=0-3,8-11 softness=100:1");
        assert_eq!(
            parse_home("llc=2 softness=home-first").unwrap().to_string(),
            "llc=2 softness=home-first"
        );
    }

    #[test]
    fn a_bad_home_says_which_part_and_why() {
        for (v, want) in [
            ("", "no node="),
            ("node=x", "node=\"x\": not a number"),
            ("node=1 llc=0", "more than one"),
            ("node", "\"node\" is not KEY=VALUE"),
            ("socket=1", "unknown key \"socket\""),
            ("cpus=3-1", "cpus=\"3-1\""),
            ("node=0 softness=fast", "softness=\"fast\""),
        ] {
            let e = parse_home(v).unwrap_err();
            assert!(e.contains(want), "{v:?}: {e}");
        }
    }

    #[test]
    fn a_pod_reads_its_own_home_its_containers_and_balancing() {
        let a = pod_asks(&ann(&[
            (POD_HOME, "node=1"),
            ("home.softpart.io/container.db", "cpus=4-5"),
            ("app.kubernetes.io/name", "web"),
        ]));
        assert_eq!(a.home.unwrap().spec, HomeSpec::Node(1));
        assert_eq!(a.containers["db"].spec, HomeSpec::Cpus("4-5".into()));
        assert!(!a.balance && a.refused.is_empty());
        let b = pod_asks(&ann(&[(POD_BALANCE, "true")]));
        assert!(b.balance && b.home.is_none());
    }

    #[test]
    fn what_cannot_be_read_is_listed_with_its_value_and_the_rest_still_counts() {
        let a = pod_asks(&ann(&[
            (POD_HOME, "node=one"),
            ("home.softpart.io/container.db", "node=0"),
            ("home.softpart.io/container.", "node=0"),
            ("home.softpart.io/podd", "node=0"),
            (POD_BALANCE, "yes"),
        ]));
        assert!(a.home.is_none() && !a.balance);
        assert_eq!(a.containers["db"].spec, HomeSpec::Node(0));
        let keys: Vec<_> = a.refused.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(
            keys,
            [
                POD_BALANCE,
                "home.softpart.io/container.",
                POD_HOME,
                "home.softpart.io/podd"
            ]
        );
        assert_eq!(a.refused[2].1, "node=one");
    }

    #[test]
    fn a_home_wins_over_balancing_and_says_so() {
        let a = pod_asks(&ann(&[(POD_HOME, "node=0"), (POD_BALANCE, "true")]));
        assert!(a.home.is_some() && !a.balance);
        assert_eq!(a.refused.len(), 1);
        assert!(a.refused[0].2.contains("wins"), "{:?}", a.refused);
    }
}
