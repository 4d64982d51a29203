//! Where a machine's CPUs are, as far as a config names them: the CPUs,
//! each NUMA node's, each LLC's (numbered machine-wide in CPU order). The
//! scheduler builds one from sysfs; `softpart check-config --topology`
//! from a spec (`2n16c2t`) or a saved `lscpu -p`, to check a config for
//! another machine. Homes given as a node or an LLC resolve here.

use crate::config::Cpus;
use crate::control::HomeSpec;
use crate::cpulist;
use std::collections::{BTreeMap, BTreeSet};

/// The most partitions the scheduler takes (SP_MAX_PARTS in the BPF
/// program's intf.h).
pub const MAX_PARTS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    pub cpus: BTreeSet<usize>,
    /// By node id (a node without CPUs is an empty set).
    pub nodes: Vec<BTreeSet<usize>>,
    pub llcs: Vec<BTreeSet<usize>>,
}

impl Layout {
    /// `NnCcTt`: N nodes, one LLC each, of C cores of T threads; CPUs
    /// numbered node by node, siblings adjacent (up to 64 nodes and 4096
    /// CPUs: a spec for a machine larger than the scheduler takes is
    /// read, and the check says so).
    pub fn from_spec(spec: &str) -> Result<Layout, String> {
        let err = || {
            format!(
                "--topology {spec:?}: give NODESnCOREScTHREADSt (e.g. 2n16c2t: 2 nodes of 16 cores of 2 threads), or a file saved from `lscpu -p`"
            )
        };
        let rest = spec.strip_suffix('t').ok_or_else(err)?;
        let (n, rest) = rest.split_once('n').ok_or_else(err)?;
        let (c, t) = rest.split_once('c').ok_or_else(err)?;
        let num = |s: &str| s.parse::<usize>().ok().filter(|v| *v > 0).ok_or_else(err);
        let (n, c, t) = (num(n)?, num(c)?, num(t)?);
        if n > 64 || n * c * t > 4096 {
            return Err(format!("{}: at most 64 nodes and 4096 CPUs", err()));
        }
        let per = c * t;
        let nodes: Vec<BTreeSet<usize>> =
            (0..n).map(|i| (i * per..(i + 1) * per).collect()).collect();
        Ok(Layout {
            cpus: (0..n * per).collect(),
            llcs: nodes.clone(),
            nodes,
        })
    }

    /// `lscpu -p` (or `-p=CPU,NODE,CACHE`): one line per CPU, comments
    /// first; the header comment names the columns. The LLC is the last
    /// cache column (L3 where there is one).
    pub fn from_lscpu(text: &str) -> Result<Layout, String> {
        let header = text
            .lines()
            .filter_map(|l| l.strip_prefix('#'))
            .map(str::trim)
            .find(|l| l.starts_with("CPU,"))
            .ok_or("no '# CPU,...' header line: not the output of lscpu -p")?;
        let cols: Vec<&str> = header.split(',').collect();
        let at = |name: &str| cols.iter().position(|c| c.eq_ignore_ascii_case(name));
        let node_col = at("Node").ok_or("lscpu -p output without a Node column")?;
        let cache_col = at("Cache").or_else(|| cols.len().checked_sub(1).filter(|&i| i > node_col));
        let mut nodes: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        let mut llcs: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
        let mut cpus = BTreeSet::new();
        for (i, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split(',').collect();
            let bad = || format!("lscpu -p line {}: {line:?}", i + 1);
            let cpu: usize = f
                .first()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(bad)?;
            let node: usize = f
                .get(node_col)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            cpus.insert(cpu);
            nodes.entry(node).or_default().insert(cpu);
            // "0:0:0:0": the last id is the LLC's.
            let llc = cache_col
                .and_then(|c| f.get(c))
                .map(|v| v.rsplit(':').next().unwrap_or("").trim().to_string())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| format!("node{node}"));
            llcs.entry(llc).or_default().insert(cpu);
        }
        if cpus.is_empty() {
            return Err("lscpu -p output with no CPU lines".into());
        }
        let nr_nodes = nodes.keys().max().map_or(0, |m| m + 1);
        let mut by_id = vec![BTreeSet::new(); nr_nodes];
        for (id, set) in nodes {
            by_id[id] = set;
        }
        let mut llcs: Vec<BTreeSet<usize>> = llcs.into_values().collect();
        llcs.sort_by_key(|s| s.first().copied());
        Ok(Layout {
            cpus,
            nodes: by_id,
            llcs,
        })
    }

    /// "2 nodes, 64 CPUs (0-63), 2 LLCs".
    pub fn describe(&self) -> String {
        format!(
            "{} node(s), {} CPUs ({}), {} LLC(s)",
            self.nodes.iter().filter(|n| !n.is_empty()).count(),
            self.cpus.len(),
            cpulist::format(&self.cpus),
            self.llcs.len()
        )
    }

    fn nodes_with_cpus(&self) -> String {
        let ids: Vec<String> = (0..self.nodes.len())
            .filter(|&i| !self.nodes[i].is_empty())
            .map(|i| i.to_string())
            .collect();
        ids.join(",")
    }
}

impl Cpus for Layout {
    fn resolve(&self, spec: &HomeSpec) -> Result<BTreeSet<usize>, String> {
        match spec {
            HomeSpec::Cpus(list) => {
                let set = cpulist::parse(list).map_err(|e| e.to_string())?;
                if set.is_empty() {
                    return Err(format!("CPU list {list:?} is empty"));
                }
                let absent: BTreeSet<usize> = set.difference(&self.cpus).copied().collect();
                if !absent.is_empty() {
                    return Err(format!(
                        "CPUs {} in {list:?} are not on this machine (CPUs {})",
                        cpulist::format(&absent),
                        cpulist::format(&self.cpus)
                    ));
                }
                Ok(set)
            }
            HomeSpec::Node(n) => match self.nodes.get(*n as usize) {
                Some(s) if !s.is_empty() => Ok(s.clone()),
                _ => Err(format!(
                    "node {n} does not exist or has no CPUs (nodes with CPUs: {})",
                    self.nodes_with_cpus()
                )),
            },
            HomeSpec::Llc(n) => match self.llcs.get(*n as usize) {
                Some(s) => Ok(s.clone()),
                None => Err(format!(
                    "LLC {n} does not exist (this machine has LLCs 0-{})",
                    self.llcs.len().saturating_sub(1)
                )),
            },
        }
    }

    fn check_partitions(&self, spec: &str) -> Result<(), String> {
        crate::partition::parse(spec, &self.cpus, MAX_PARTS)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_lays_out_nodes_of_cores_of_threads() {
        let l = Layout::from_spec("2n16c2t").unwrap();
        assert_eq!(l.cpus.len(), 64);
        assert_eq!(l.resolve(&HomeSpec::Node(1)).unwrap(), (32..64).collect());
        assert_eq!(l.resolve(&HomeSpec::Llc(0)).unwrap(), (0..32).collect());
        let e = l.resolve(&HomeSpec::Node(2)).unwrap_err();
        assert!(e.contains("nodes with CPUs: 0,1"), "{e}");
        for bad in ["", "2n16c", "0n1c1t", "2x16c2t", "65n1c1t"] {
            assert!(Layout::from_spec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lscpu_output_gives_nodes_and_llcs() {
        let text = "# The following is the parsable format\n\
                    # CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n\
                    0,0,0,0,,0,0,0,0\n1,1,0,0,,1,1,1,0\n2,2,1,1,,2,2,2,1\n3,3,1,1,,3,3,3,1\n";
        let l = Layout::from_lscpu(text).unwrap();
        assert_eq!(l.nodes, vec![[0, 1].into(), [2, 3].into()]);
        assert_eq!(l.llcs, vec![[0, 1].into(), [2, 3].into()]);
        assert!(l.check_partitions("0-1;2-3").is_ok());
        assert!(l.check_partitions("0-1;1-3").is_err());
        assert!(Layout::from_lscpu("0,0,0\n").is_err());
    }
}
