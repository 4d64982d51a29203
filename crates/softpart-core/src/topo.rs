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
    /// CPU ids the firmware lists (present or not: the kernel counts them
    /// all as possible), when more than the CPUs present; 0: as many as
    /// present. One node only, so the absent CPUs sit in the same socket
    /// after the present ones (spec `1n4c2t-1024`).
    #[serde(default)]
    pub possible: u32,
}

impl GuestTopo {
    pub fn nr_cpus(&self) -> u32 {
        self.nodes * self.cores * self.threads
    }

    /// CPU ids the guest's kernel sees as possible.
    pub fn possible_cpus(&self) -> u32 {
        self.possible.max(self.nr_cpus())
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
        let possible = self.possible_cpus();
        let mut args = Vec::new();
        let smp = if possible > self.nr_cpus() {
            // APIC ids from 255 on need x2APIC, which the guest kernel
            // enables only with interrupt remapping (an IOMMU with EIM).
            // The absent CPUs fill whole sockets of their own: the kernel
            // ignores a hot-pluggable CPU in a package that is present.
            args.extend(
                [
                    "-machine",
                    "q35",
                    "-device",
                    "intel-iommu,intremap=on,eim=on",
                ]
                .map(String::from),
            );
            format!(
                "{},maxcpus={possible},sockets={},cores={},threads={}",
                self.nr_cpus(),
                possible / self.nr_cpus(),
                self.cores,
                self.threads
            )
        } else {
            format!(
                "{},sockets={},cores={},threads={}",
                self.nr_cpus(),
                self.nodes,
                self.cores,
                self.threads
            )
        };
        // Each possible CPU costs the guest kernel its per-CPU areas (about
        // 256 KB), each cgroup's per-CPU state (about 1 KB a cgroup of the
        // cpu controller) and each per-CPU BPF map's entries: 3 MB more
        // per CPU id absent.
        let mem_mb_per_node = mem_mb_per_node + 3 * (possible - self.nr_cpus()) / self.nodes;
        args.extend([
            "-smp".to_string(),
            smp,
            "-m".to_string(),
            format!("{}M", mem_mb_per_node * self.nodes),
        ]);
        for node in 0..self.nodes {
            let cpus = if possible > self.nr_cpus() {
                0..possible
            } else {
                self.node_cpus(node)
            };
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
        write!(f, "{}n{}c{}t", self.nodes, self.cores, self.threads)?;
        if self.possible > self.nr_cpus() {
            write!(f, "-{}", self.possible)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopoSpecError(pub String);

impl fmt::Display for TopoSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid topology {:?}: expected <nodes>n<cores>c<threads>t, e.g. 2n2c2t (1-8 nodes, 1-64 cores, 1-4 threads, at most 256 CPUs), optionally -<possible CPU ids> on one node, e.g. 1n4c2t-1024 (more than present, at most 4096, a multiple of the CPUs present)",
            self.0
        )
    }
}

impl std::error::Error for TopoSpecError {}

impl FromStr for GuestTopo {
    type Err = TopoSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || TopoSpecError(s.to_string());
        let (shape, possible) = match s.split_once('-') {
            Some((shape, p)) => (shape, Some(p)),
            None => (s, None),
        };
        let (n, rest) = shape.split_once('n').ok_or_else(err)?;
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
            possible: possible.map(num).transpose()?.unwrap_or(0),
        };
        let possible_ok = possible.is_none()
            || (topo.nodes == 1
                && topo.possible > topo.nr_cpus()
                && topo.possible <= 4096
                && topo.possible.is_multiple_of(topo.nr_cpus()));
        let ok = (1..=8).contains(&topo.nodes)
            && (1..=64).contains(&topo.cores)
            && (1..=4).contains(&topo.threads)
            && topo.nr_cpus() <= 256
            && possible_ok;
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
    fn possible_cpu_ids_beyond_the_present_ones() {
        let t: GuestTopo = "1n4c2t-1024".parse().unwrap();
        assert_eq!((t.nr_cpus(), t.possible_cpus()), (8, 1024));
        assert_eq!(t.to_string(), "1n4c2t-1024");
        let args = t.qemu_args(512).join(" ");
        assert!(
            args.contains("-smp 8,maxcpus=1024,sockets=128,cores=4,threads=2"),
            "{args}"
        );
        assert!(args.contains("intremap=on,eim=on"), "{args}");
        assert!(args.contains("node,cpus=0-1023,nodeid=0"), "{args}");
        assert!(args.contains("-m 3560M"), "{args}");
        assert_eq!("2n2c2t".parse::<GuestTopo>().unwrap().possible_cpus(), 8);
    }

    #[test]
    fn rejects_bad_specs() {
        for bad in [
            "",
            "2n2c",
            "0n2c2t",
            "2n2c9t",
            "xn2c2t",
            "2n2c2",
            "8n64c4t",
            "2n-1c2t",
            "2n2c2t-1024",
            "1n4c2t-8",
            "1n4c2t-1020",
            "1n4c2t-8192",
            "1n4c2t-",
        ] {
            let e = bad.parse::<GuestTopo>().unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }
}
