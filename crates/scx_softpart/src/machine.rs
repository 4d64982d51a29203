//! What the control plane needs to know about the machine, read once from
//! sysfs through scx_utils and then pure data: CPUs, their SMT sibling,
//! NUMA nodes with distances, LLCs. Homes given as a node or an LLC are
//! resolved here.

use anyhow::Result;
use softpart_core::config::Cpus;
use softpart_core::control::HomeSpec;
use softpart_core::layout::Layout;
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub cpus: BTreeSet<usize>,
    /// CPUs of each NUMA node, by node id.
    pub nodes: Vec<BTreeSet<usize>>,
    /// Node distance matrix (sysfs `distance`), by node id.
    pub distance: Vec<Vec<usize>>,
    /// CPUs of each LLC, numbered machine-wide in CPU order.
    pub llcs: Vec<BTreeSet<usize>>,
    /// One SMT sibling of each CPU id (itself when it has none).
    pub sibling: Vec<usize>,
    /// Each CPU's core, named by the core's lowest CPU id.
    pub core: Vec<usize>,
    pub threads_per_core: usize,
}

impl Machine {
    pub fn from_topology(topo: &scx_utils::Topology) -> Machine {
        let nr = topo.all_cpus.keys().max().map_or(0, |m| m + 1);
        let nr_nodes = topo.nodes.keys().max().map_or(0, |m| m + 1);
        let mut nodes = vec![BTreeSet::new(); nr_nodes];
        let mut distance = vec![vec![10; nr_nodes]; nr_nodes];
        for (id, node) in &topo.nodes {
            nodes[*id] = node.all_cpus.keys().copied().collect();
            for (j, d) in node.distance.iter().enumerate() {
                if j < nr_nodes {
                    distance[*id][j] = *d;
                }
            }
        }
        let mut llcs: Vec<BTreeSet<usize>> = topo
            .all_llcs
            .values()
            .map(|l| l.all_cpus.keys().copied().collect::<BTreeSet<usize>>())
            .filter(|s| !s.is_empty())
            .collect();
        llcs.sort_by_key(|s| s.first().copied());
        let mut sibling: Vec<usize> = (0..nr).collect();
        let mut core_of: Vec<usize> = (0..nr).collect();
        let mut threads_per_core = 1;
        for core in topo.all_cores.values() {
            let ids: Vec<usize> = core.cpus.keys().copied().collect();
            threads_per_core = threads_per_core.max(ids.len());
            let first = ids.iter().copied().min().unwrap_or(0);
            for (i, &c) in ids.iter().enumerate() {
                sibling[c] = ids[(i + 1) % ids.len()];
                core_of[c] = first;
            }
        }
        Machine {
            cpus: topo.all_cpus.keys().copied().collect(),
            nodes,
            distance,
            llcs,
            sibling,
            core: core_of,
            threads_per_core,
        }
    }

    /// The load domains the fast path keeps per-node copies for (a CPU's
    /// is its node id modulo this many): one per node id, at most `max`.
    pub fn load_domains(&self, max: usize) -> usize {
        self.nodes.len().clamp(1, max.max(1))
    }

    pub fn llc_of(&self, cpu: usize) -> Option<usize> {
        self.llcs.iter().position(|l| l.contains(&cpu))
    }

    pub fn node_of(&self, cpu: usize) -> Option<usize> {
        self.nodes.iter().position(|n| n.contains(&cpu))
    }

    /// The CPUs, nodes and LLCs, as a config is checked against them.
    pub fn layout(&self) -> Layout {
        Layout {
            cpus: self.cpus.clone(),
            nodes: self.nodes.clone(),
            llcs: self.llcs.clone(),
        }
    }

    /// The CPUs a home names, checked against the machine.
    pub fn resolve(&self, spec: &HomeSpec) -> Result<BTreeSet<usize>> {
        self.layout().resolve(spec).map_err(anyhow::Error::msg)
    }

    /// The NUMA node(s) a home touches: where its tasks spill first.
    pub fn near(&self, home: &BTreeSet<usize>) -> BTreeSet<usize> {
        self.nodes
            .iter()
            .filter(|n| !n.is_disjoint(home))
            .flatten()
            .copied()
            .collect()
    }

    /// The nodes to track idle CPUs in, one mask each (the kernel's
    /// per-node idle tracking), or None where one machine-wide mask is as
    /// good or the only safe choice: a single node, or a CPU of no known
    /// node (the kernel's per-node lookups take the CPU's node).
    pub fn idle_nodes(&self) -> Option<Vec<usize>> {
        let with_cpus: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| !self.nodes[n].is_empty())
            .collect();
        let all_placed = self.cpus.iter().all(|&c| self.node_of(c).is_some());
        (with_cpus.len() > 1 && all_placed).then_some(with_cpus)
    }

    /// The NUMA node of a partition's first CPU (0 if it has no known one).
    fn part_node(&self, part: &BTreeSet<usize>) -> usize {
        part.first().and_then(|&c| self.node_of(c)).unwrap_or(0)
    }

    /// The NUMA distance between two partitions' nodes.
    fn part_distance(&self, parts: &[BTreeSet<usize>], a: usize, b: usize) -> usize {
        self.distance
            .get(self.part_node(&parts[a]))
            .and_then(|r| r.get(self.part_node(&parts[b])))
            .copied()
            .unwrap_or(usize::MAX)
    }

    /// For each partition, all partitions ordered nearest first (itself
    /// first), by the NUMA distance between their first CPUs' nodes; ties
    /// keep partition order: what `part_rings` gives, read in order.
    #[cfg(test)]
    pub fn part_order(&self, parts: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
        (0..parts.len())
            .map(|a| {
                let mut order: Vec<usize> = (0..parts.len()).collect();
                order.sort_by_key(|&b| (b != a, self.part_distance(parts, a, b), b));
                order
            })
            .collect()
    }

    /// For each partition, the others as rings of one NUMA distance each,
    /// nearest first, a ring a bit mask (bit b: partition b; partitions
    /// past the 64th are in none). Past `max_rings` distances the farthest
    /// share the last ring. Read in ring order and bit order within each,
    /// they are `part_order` without the partition itself.
    pub fn part_rings(&self, parts: &[BTreeSet<usize>], max_rings: usize) -> Vec<Vec<u64>> {
        (0..parts.len())
            .map(|a| {
                let mut dists: Vec<usize> = (0..parts.len())
                    .filter(|&b| b != a)
                    .map(|b| self.part_distance(parts, a, b))
                    .collect();
                dists.sort_unstable();
                dists.dedup();
                let mut rings = vec![0u64; max_rings];
                for b in (0..parts.len().min(64)).filter(|&b| b != a) {
                    let d = self.part_distance(parts, a, b);
                    let r = dists.iter().position(|&x| x == d).unwrap_or(0);
                    rings[r.min(max_rings - 1)] |= 1 << b;
                }
                rings
            })
            .collect()
    }

    /// Which summary word each partition's "tasks queued" bit is in: one
    /// word per NUMA node that has partitions, numbered densely, so that
    /// a node's queues are summarised in a line of their own. Returns the
    /// word of each partition and the number of words.
    pub fn part_words(&self, parts: &[BTreeSet<usize>]) -> (Vec<u32>, usize) {
        let nodes: BTreeSet<usize> = parts.iter().map(|p| self.part_node(p)).collect();
        let words = parts
            .iter()
            .map(|p| {
                let n = self.part_node(p);
                nodes.iter().position(|&x| x == n).unwrap_or(0) as u32
            })
            .collect();
        (words, nodes.len())
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// 2 nodes x 2 cores x 2 threads, like the `2n2c2t` guest.
    pub fn machine_2n2c2t() -> Machine {
        Machine {
            cpus: (0..8).collect(),
            nodes: vec![(0..4).collect(), (4..8).collect()],
            distance: vec![vec![10, 20], vec![20, 10]],
            llcs: vec![(0..4).collect(), (4..8).collect()],
            sibling: vec![1, 0, 3, 2, 5, 4, 7, 6],
            core: vec![0, 0, 2, 2, 4, 4, 6, 6],
            threads_per_core: 2,
        }
    }

    #[test]
    fn idle_masks_per_node_only_with_several_nodes_covering_every_cpu() {
        let mut m = machine_2n2c2t();
        assert_eq!(m.idle_nodes(), Some(vec![0, 1]));
        // Node 1 offline (hotplug) leaves one node with CPUs.
        m.nodes[1].clear();
        m.cpus = (0..4).collect();
        assert_eq!(m.idle_nodes(), None);
        // Sparse node ids: only the nodes with CPUs are looked at.
        let mut m = machine_2n2c2t();
        m.nodes.insert(1, BTreeSet::new());
        assert_eq!(m.idle_nodes(), Some(vec![0, 2]));
        // A CPU the topology put in no node.
        let mut m = machine_2n2c2t();
        m.cpus.insert(8);
        assert_eq!(m.idle_nodes(), None);
    }

    #[test]
    fn resolves_homes() {
        let m = machine_2n2c2t();
        assert_eq!(m.resolve(&HomeSpec::Node(1)).unwrap(), (4..8).collect());
        assert_eq!(m.resolve(&HomeSpec::Llc(0)).unwrap(), (0..4).collect());
        assert_eq!(
            m.resolve(&HomeSpec::Cpus("1-2".into())).unwrap(),
            [1, 2].into()
        );
        let e = m.resolve(&HomeSpec::Cpus("6-9".into())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "CPUs 8-9 in \"6-9\" are not on this machine (CPUs 0-7)"
        );
        assert!(
            m.resolve(&HomeSpec::Node(2))
                .unwrap_err()
                .to_string()
                .contains("node 2")
        );
        assert!(
            m.resolve(&HomeSpec::Llc(5))
                .unwrap_err()
                .to_string()
                .contains("LLC 5")
        );
        assert!(m.resolve(&HomeSpec::Cpus("x".into())).is_err());
    }

    #[test]
    fn near_is_the_home_nodes() {
        let m = machine_2n2c2t();
        assert_eq!(m.near(&[1].into()), (0..4).collect());
        assert_eq!(m.near(&[3, 4].into()), (0..8).collect());
    }

    #[test]
    fn partitions_nearest_first() {
        let mut m = machine_2n2c2t();
        m.nodes = vec![[0, 1].into(), [2, 3].into(), [4, 5].into(), [6, 7].into()];
        m.distance = vec![
            vec![10, 12, 20, 20],
            vec![12, 10, 20, 20],
            vec![20, 20, 10, 12],
            vec![20, 20, 12, 10],
        ];
        let parts: Vec<BTreeSet<usize>> = m.nodes.clone();
        let order = m.part_order(&parts);
        assert_eq!(order[0], vec![0, 1, 2, 3]);
        assert_eq!(order[2], vec![2, 3, 0, 1]);
        assert_eq!(order[3], vec![3, 2, 0, 1]);
    }

    #[test]
    fn rings_read_in_order_are_the_nearest_first_order() {
        let mut m = machine_2n2c2t();
        m.nodes = vec![[0, 1].into(), [2, 3].into(), [4, 5].into(), [6, 7].into()];
        m.distance = vec![
            vec![10, 12, 20, 20],
            vec![12, 10, 20, 22],
            vec![20, 20, 10, 12],
            vec![20, 22, 12, 10],
        ];
        let parts: Vec<BTreeSet<usize>> = m.nodes.clone();
        let order = m.part_order(&parts);
        let rings = m.part_rings(&parts, 8);
        for (a, r) in rings.iter().enumerate() {
            let flat: Vec<usize> = r
                .iter()
                .flat_map(|&mask| (0..64).filter(move |b| mask & (1 << b) != 0))
                .collect();
            assert_eq!(flat, order[a][1..], "partition {a}");
        }
        assert_eq!(rings[1][..3], [1 << 0, 1 << 2, 1 << 3]);
        // Fewer rings than distances: the farthest share the last one.
        assert_eq!(m.part_rings(&parts, 2)[1][..2], [1 << 0, 1 << 2 | 1 << 3]);
    }

    #[test]
    fn a_word_per_node_with_partitions() {
        let m = machine_2n2c2t();
        let parts: Vec<BTreeSet<usize>> = vec![[0, 1].into(), [2, 3].into(), (4..8).collect()];
        assert_eq!(m.part_words(&parts), (vec![0, 0, 1], 2));
    }
}
