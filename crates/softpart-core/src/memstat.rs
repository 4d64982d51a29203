//! The memory controller's and the kernel's memory counters as text:
//! `memory.numa_stat` (per node), `memory.stat` and `/proc/vmstat` (flat
//! "key value" lines), and the locality figures made from them.

use std::collections::BTreeMap;

/// `memory.numa_stat`: each key's bytes by node id ("anon N0=4096 N1=0").
/// Nodes missing from a line count 0; a line that does not parse is left
/// out (the kernel adds keys over time, never changes the form).
pub fn parse_numa_stat(text: &str) -> BTreeMap<String, Vec<u64>> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(key) = words.next() else { continue };
        let mut per_node: Vec<u64> = Vec::new();
        let mut ok = true;
        for w in words {
            let parsed = w
                .strip_prefix('N')
                .and_then(|w| w.split_once('='))
                .and_then(|(n, v)| Some((n.parse::<usize>().ok()?, v.parse::<u64>().ok()?)));
            match parsed {
                Some((node, bytes)) if node < 4096 => {
                    if per_node.len() <= node {
                        per_node.resize(node + 1, 0);
                    }
                    per_node[node] = bytes;
                }
                _ => ok = false,
            }
        }
        if ok {
            out.insert(key.to_string(), per_node);
        }
    }
    out
}

/// A flat-keyed file ("key value" per line: `memory.stat`, `/proc/vmstat`).
pub fn parse_flat(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// What a tenant holds that moving pages can bring home, per node: its
/// anonymous memory and its shared memory (tmpfs, shm). Unmapped page
/// cache (`file` less `shmem`) never moves with a process's pages, so it
/// is not counted.
pub fn resident_per_node(numa_stat: &BTreeMap<String, Vec<u64>>) -> Vec<u64> {
    let anon = numa_stat.get("anon").cloned().unwrap_or_default();
    let shmem = numa_stat.get("shmem").cloned().unwrap_or_default();
    let n = anon.len().max(shmem.len());
    (0..n)
        .map(|i| anon.get(i).copied().unwrap_or(0) + shmem.get(i).copied().unwrap_or(0))
        .collect()
}

/// Share of `per_node`'s bytes on `nodes`; None when it holds nothing.
pub fn share_on(per_node: &[u64], nodes: &[usize]) -> Option<f64> {
    let total: u64 = per_node.iter().sum();
    let on: u64 = nodes.iter().filter_map(|&n| per_node.get(n)).sum();
    (total > 0).then(|| on as f64 / total as f64)
}

/// The share of a tenant's accesses that are local, if each CPU-second on
/// a node touches its memory evenly: the sum over nodes of its CPU time's
/// share there times its memory's share there. 1 when all of both are on
/// one node, 1/N when both are spread evenly over N nodes, 0 when they
/// are on different nodes. None without CPU time or memory.
pub fn local_access(cpu_per_node: &[u64], mem_per_node: &[u64]) -> Option<f64> {
    let cpu: u64 = cpu_per_node.iter().sum();
    let mem: u64 = mem_per_node.iter().sum();
    if cpu == 0 || mem == 0 {
        return None;
    }
    Some(
        cpu_per_node
            .iter()
            .zip(mem_per_node)
            .map(|(&c, &m)| (c as f64 / cpu as f64) * (m as f64 / mem as f64))
            .sum(),
    )
}

/// Each node's high watermark in pages, summed over its zones
/// (`/proc/zoneinfo`): under it kswapd reclaims on the node, so what a move
/// may fill stops above it.
pub fn high_watermarks(zoneinfo: &str) -> std::collections::BTreeMap<usize, u64> {
    let mut out = std::collections::BTreeMap::new();
    let mut node = None;
    for line in zoneinfo.lines() {
        let t = line.trim_start();
        if let Some(rest) = line.strip_prefix("Node ") {
            node = rest
                .split(',')
                .next()
                .and_then(|n| n.trim().parse::<usize>().ok());
            continue;
        }
        let mut w = t.split_whitespace();
        if let (Some(n), Some("high"), Some(v)) = (node, w.next(), w.next())
            && let Ok(pages) = v.parse::<u64>()
        {
            *out.entry(n).or_default() += pages;
        }
    }
    out
}

/// A field of a node's meminfo in bytes
/// (`/sys/devices/system/node/nodeN/meminfo`: "Node 0 MemFree:  123456 kB").
fn node_meminfo_bytes(meminfo: &str, field: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        let (_, _, key, kb) = (w.next()?, w.next()?, w.next()?, w.next()?);
        (key.strip_suffix(':') == Some(field)).then(|| kb.parse::<u64>().ok().map(|k| k * 1024))?
    })
}

/// A node's free memory in bytes.
pub fn node_free_bytes(meminfo: &str) -> Option<u64> {
    node_meminfo_bytes(meminfo, "MemFree")
}

/// A node's memory in bytes.
pub fn node_total_bytes(meminfo: &str) -> Option<u64> {
    node_meminfo_bytes(meminfo, "MemTotal")
}

/// The share of `per_node` bytes on each partition's nodes (a partition
/// within a node gets that node's share); empty when there is none.
pub fn share_per_part(
    per_node: &[u64],
    part_nodes: &[std::collections::BTreeSet<usize>],
) -> Vec<f64> {
    let total: u64 = per_node.iter().sum();
    if total == 0 {
        return Vec::new();
    }
    part_nodes
        .iter()
        .map(|nodes| {
            nodes
                .iter()
                .map(|&n| per_node.get(n).copied().unwrap_or(0))
                .sum::<u64>() as f64
                / total as f64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn shares_by_partition() {
        let parts: Vec<std::collections::BTreeSet<usize>> =
            vec![[0].into(), [1].into(), [1].into(), [0, 1].into()];
        assert_eq!(
            share_per_part(&[30, 10], &parts),
            vec![0.75, 0.25, 0.25, 1.0]
        );
        assert!(share_per_part(&[0, 0], &parts).is_empty());
    }

    #[test]
    fn watermarks_by_node_and_free_memory() {
        let z = "Node 0, zone      DMA\n  pages free     3840\n        min      34\n        low      42\n        high     50\n\
Node 0, zone   Normal\n  pages free     100000\n        high     1000\n        protection: (0, 0)\n              high:     0\n\
Node 1, zone   Normal\n        high     2000\n";
        let w = high_watermarks(z);
        assert_eq!(w[&0], 1050);
        assert_eq!(w[&1], 2000);
        assert_eq!(
            node_free_bytes("Node 1 MemTotal:  524288 kB\nNode 1 MemFree:   1000 kB\n"),
            Some(1000 * 1024)
        );
        assert_eq!(
            node_total_bytes("Node 1 MemTotal:  524288 kB\nNode 1 MemFree:   1000 kB\n"),
            Some(524288 * 1024)
        );
        assert_eq!(node_free_bytes("nothing"), None);
    }

    #[test]
    fn numa_stat_reads_bytes_by_node() {
        let s = parse_numa_stat(
            "anon N0=4096 N1=8192\nfile N0=0 N1=12288\nshmem N1=4096\nbogus N0=x\n",
        );
        assert_eq!(s["anon"], vec![4096, 8192]);
        assert_eq!(s["shmem"], vec![0, 4096]);
        assert!(!s.contains_key("bogus"));
        assert_eq!(resident_per_node(&s), vec![4096, 12288]);
    }

    #[test]
    fn flat_files_read_key_value_lines() {
        let v = parse_flat("numa_hint_faults 170\nnuma_pages_migrated 3\nodd\n");
        assert_eq!(v["numa_hint_faults"], 170);
        assert_eq!(v["numa_pages_migrated"], 3);
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn local_access_of_the_plain_cases() {
        assert_eq!(local_access(&[10, 0], &[5, 0]), Some(1.0));
        assert_eq!(local_access(&[10, 0], &[0, 5]), Some(0.0));
        assert_eq!(local_access(&[5, 5], &[5, 5]), Some(0.5));
        assert_eq!(local_access(&[0, 0], &[5, 5]), None);
        assert_eq!(share_on(&[1, 3], &[1]), Some(0.75));
        assert_eq!(share_on(&[0, 0], &[1]), None);
    }

    proptest! {
        #[test]
        fn local_access_is_a_share(
            cpu in prop::collection::vec(0u64..1_000_000, 1..8),
            mem in prop::collection::vec(0u64..1_000_000, 1..8),
        ) {
            if let Some(x) = local_access(&cpu, &mem) {
                prop_assert!((-1e-12..=1.0 + 1e-12).contains(&x), "{x}");
                // Never above the larger of the two shares on any node.
                let max_mem = mem.iter().max().copied().unwrap_or(0) as f64
                    / mem.iter().sum::<u64>() as f64;
                prop_assert!(x <= max_mem + 1e-12);
            }
        }
    }
}
