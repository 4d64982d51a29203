//! Topology models: where each CPU sits (core, LLC, node), the distance of a
//! migration, and the compact guest spec `2n2c2t` (nodes × cores per node ×
//! threads per core) that the bench turns into a QEMU command line.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where one CPU sits. Ids are the kernel's (core ids are unique machine-wide
/// here: the model numbers them so).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPlace {
    pub core: u32,
    pub llc: u32,
    pub node: u32,
}

/// How far a task moved, nearest first. Mirrors `classify()` in the
/// observer's BPF program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Distance {
    /// Same CPU: not a migration.
    Same,
    /// To an SMT sibling (same core).
    Smt,
    /// Another core sharing the last-level cache.
    Llc,
    /// Another LLC in the same NUMA node.
    Node,
    /// Another NUMA node.
    CrossNode,
}

pub fn distance(places: &[CpuPlace], from: usize, to: usize) -> Distance {
    let (a, b) = (places[from], places[to]);
    if from == to {
        Distance::Same
    } else if a.core == b.core {
        Distance::Smt
    } else if a.llc == b.llc {
        Distance::Llc
    } else if a.node == b.node {
        Distance::Node
    } else {
        Distance::CrossNode
    }
}

/// A guest topology: `nodes` sockets, one NUMA node and one LLC each, with
/// `cores` cores of `threads` SMT threads. CPU ids follow QEMU's order:
/// socket-major, then core, then thread, so siblings are adjacent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestTopo {
    pub nodes: u32,
    pub cores: u32,
    pub threads: u32,
}

impl GuestTopo {
    pub fn nr_cpus(&self) -> u32 {
        self.nodes * self.cores * self.threads
    }

    pub fn cpus_per_node(&self) -> u32 {
        self.cores * self.threads
    }

    pub fn node_cpus(&self, node: u32) -> std::ops::Range<u32> {
        let n = self.cpus_per_node();
        node * n..(node + 1) * n
    }

    pub fn places(&self) -> Vec<CpuPlace> {
        (0..self.nr_cpus())
            .map(|cpu| CpuPlace {
                core: cpu / self.threads,
                llc: cpu / self.cpus_per_node(),
                node: cpu / self.cpus_per_node(),
            })
            .collect()
    }

    /// QEMU arguments for this topology with `mem_mb_per_node` of RAM on
    /// each node.
    pub fn qemu_args(&self, mem_mb_per_node: u32) -> Vec<String> {
        let mut args = vec![
            "-smp".to_string(),
            format!(
                "{},sockets={},cores={},threads={}",
                self.nr_cpus(),
                self.nodes,
                self.cores,
                self.threads
            ),
            "-m".to_string(),
            format!("{}M", mem_mb_per_node * self.nodes),
        ];
        for node in 0..self.nodes {
            let cpus = self.node_cpus(node);
            args.push("-object".into());
            args.push(format!(
                "memory-backend-ram,id=m{node},size={mem_mb_per_node}M"
            ));
            args.push("-numa".into());
            args.push(format!(
                "node,cpus={}-{},nodeid={node},memdev=m{node}",
                cpus.start,
                cpus.end - 1
            ));
        }
        args
    }
}

impl fmt::Display for GuestTopo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}n{}c{}t", self.nodes, self.cores, self.threads)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopoSpecError(pub String);

impl fmt::Display for TopoSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid topology {:?}: expected <nodes>n<cores>c<threads>t, e.g. 2n2c2t (1-8 nodes, 1-64 cores, 1-4 threads, at most 256 CPUs)",
            self.0
        )
    }
}

impl std::error::Error for TopoSpecError {}

impl FromStr for GuestTopo {
    type Err = TopoSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || TopoSpecError(s.to_string());
        let (n, rest) = s.split_once('n').ok_or_else(err)?;
        let (c, rest) = rest.split_once('c').ok_or_else(err)?;
        let t = rest.strip_suffix('t').ok_or_else(err)?;
        let num = |x: &str| -> Result<u32, TopoSpecError> {
            if x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err());
            }
            x.parse().map_err(|_| err())
        };
        let topo = GuestTopo {
            nodes: num(n)?,
            cores: num(c)?,
            threads: num(t)?,
        };
        let ok = (1..=8).contains(&topo.nodes)
            && (1..=64).contains(&topo.cores)
            && (1..=4).contains(&topo.threads)
            && topo.nr_cpus() <= 256;
        if ok { Ok(topo) } else { Err(err()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_lays_out_2n2c2t() {
        let t: GuestTopo = "2n2c2t".parse().unwrap();
        assert_eq!(t.nr_cpus(), 8);
        assert_eq!(t.node_cpus(1), 4..8);
        let p = t.places();
        assert_eq!(distance(&p, 0, 1), Distance::Smt);
        assert_eq!(distance(&p, 0, 2), Distance::Llc);
        assert_eq!(distance(&p, 0, 4), Distance::CrossNode);
        assert_eq!(distance(&p, 3, 3), Distance::Same);
        let args = t.qemu_args(512).join(" ");
        assert!(
            args.contains("-smp 8,sockets=2,cores=2,threads=2"),
            "{args}"
        );
        assert!(args.contains("node,cpus=4-7,nodeid=1,memdev=m1"), "{args}");
    }

    #[test]
    fn other_shapes() {
        assert_eq!("1n4c2t".parse::<GuestTopo>().unwrap().nr_cpus(), 8);
        assert_eq!("4n2c2t".parse::<GuestTopo>().unwrap().nr_cpus(), 16);
        assert_eq!("4n4c1t".parse::<GuestTopo>().unwrap().to_string(), "4n4c1t");
    }

    #[test]
    fn rejects_bad_specs() {
        for bad in [
            "", "2n2c", "0n2c2t", "2n2c9t", "xn2c2t", "2n2c2", "8n64c4t", "2n-1c2t",
        ] {
            let e = bad.parse::<GuestTopo>().unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }
}
