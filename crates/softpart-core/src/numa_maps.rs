//! `/proc/PID/numa_maps` (and `/proc/PID/task/TID/numa_maps`): per mapping,
//! its memory policy and its pages per node. What decides whether a
//! process's pages may be moved and which mappings hold pages to move.

/// One mapping's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Its start address.
    pub start: u64,
    /// Its memory policy as the kernel prints it: the mapping's own, else
    /// the reading thread's ("default", "bind:1", "interleave:0-1",
    /// "prefer:1", "prefer (many):0-1", "weighted interleave:0-1", "local",
    /// with "=static" or "=relative" after the mode where set).
    pub policy: String,
    /// Anonymous pages (`anon=`), and pages per node (`N<n>=`), in
    /// `page_kb` units.
    pub anon_pages: u64,
    pub pages_per_node: Vec<u64>,
    /// The most processes any of its pages is mapped by (`mapmax=`; 1
    /// when the kernel prints none).
    pub mapmax: u64,
    /// `kernelpagesize_kB=`: 4 for base pages and transparent huge pages
    /// alike, 2048 or 1048576 for hugetlbfs.
    pub page_kb: u64,
    /// A file mapping (`file=`), shared memory included.
    pub file: bool,
}

impl Mapping {
    /// A policy the process or the mapping set itself (numactl --membind,
    /// --interleave, --preferred, mbind, set_mempolicy): its pages stay
    /// where that policy put them.
    pub fn user_policy(&self) -> bool {
        self.policy != "default"
    }

    /// Bytes on each node.
    pub fn bytes_per_node(&self) -> Vec<u64> {
        self.pages_per_node
            .iter()
            .map(|p| p * self.page_kb * 1024)
            .collect()
    }
}

/// Words that end the policy and are not `key=value`.
const FLAGS: &[&str] = &["heap", "stack", "huge"];

/// The keys of the `key=value` words after the policy.
fn is_counter(k: &str) -> bool {
    const KEYS: &[&str] = &[
        "file",
        "anon",
        "dirty",
        "mapped",
        "mapmax",
        "swapcache",
        "active",
        "writeback",
        "kernelpagesize_kB",
    ];
    KEYS.contains(&k)
        || k.strip_prefix('N')
            .is_some_and(|n| n.parse::<u32>().is_ok())
}

fn parse_line(line: &str) -> Option<Mapping> {
    let mut words = line.split_whitespace();
    let start = u64::from_str_radix(words.next()?, 16).ok()?;
    let mut policy: Vec<&str> = Vec::new();
    let mut m = Mapping {
        start,
        policy: String::new(),
        anon_pages: 0,
        pages_per_node: Vec::new(),
        mapmax: 1,
        page_kb: 4,
        file: false,
    };
    let mut in_policy = true;
    for w in words {
        let kv = w.split_once('=');
        // The policy is the words before the first flag or counter; its
        // mode may carry "=static" or "=relative" ("bind=static:1"), which
        // no counter's key is.
        if in_policy && !FLAGS.contains(&w) && !kv.is_some_and(|(k, _)| is_counter(k)) {
            policy.push(w);
            continue;
        }
        in_policy = false;
        let Some((k, v)) = kv else { continue };
        match k {
            "anon" => m.anon_pages = v.parse().ok()?,
            "mapmax" => m.mapmax = v.parse().ok()?,
            "kernelpagesize_kB" => m.page_kb = v.parse().ok()?,
            "file" => m.file = true,
            _ => {
                if let Some(n) = k.strip_prefix('N').and_then(|n| n.parse::<usize>().ok())
                    && n < 4096
                {
                    if m.pages_per_node.len() <= n {
                        m.pages_per_node.resize(n + 1, 0);
                    }
                    m.pages_per_node[n] = v.parse().ok()?;
                }
            }
        }
    }
    if policy.is_empty() {
        return None;
    }
    m.policy = policy.join(" ");
    Some(m)
}

/// Every mapping of a numa_maps file; a line that does not parse is left
/// out.
pub fn parse(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c1a4f000 default file=/usr/bin/stress-ng mapped=100 N0=100 kernelpagesize_kB=4
55d0c2000000 default heap anon=33 dirty=33 N1=33 kernelpagesize_kB=4
7f2c3a000000 default anon=40960 dirty=40960 active=0 N0=512 N1=40448 kernelpagesize_kB=4
7f2c40000000 default file=/dev/shm/x mapmax=3 dirty=64 N1=64 kernelpagesize_kB=4
7f2c50000000 bind:1 anon=10 dirty=10 N1=10 kernelpagesize_kB=4
7f2c60000000 interleave:0-1 anon=10 dirty=10 N0=5 N1=5 kernelpagesize_kB=4
7f2c70000000 prefer (many):0-1 anon=1 dirty=1 N0=1 kernelpagesize_kB=4
7f2c80000000 weighted interleave:0-1 anon=1 N1=1 kernelpagesize_kB=4
7f2c90000000 bind=static:1 anon=2 N1=2 kernelpagesize_kB=4
7f2ca0000000 default file=/dev/hugepages/h huge dirty=2 N1=2 kernelpagesize_kB=2048
7ffd5b3e1000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
garbage
";

    #[test]
    fn every_mapping_with_its_policy_and_pages() {
        let m = parse(MAPS);
        assert_eq!(m.len(), 11, "{m:#?}");
        assert_eq!(m[0].policy, "default");
        assert!(m[0].file && m[0].anon_pages == 0);
        assert_eq!(m[1].anon_pages, 33);
        assert_eq!(m[2].pages_per_node, vec![512, 40448]);
        assert_eq!(m[2].bytes_per_node(), vec![512 * 4096, 40448 * 4096]);
        assert_eq!(m[3].mapmax, 3);
        assert_eq!(m[2].mapmax, 1);
        let policies: Vec<&str> = m.iter().map(|m| m.policy.as_str()).collect();
        assert_eq!(
            &policies[4..9],
            &[
                "bind:1",
                "interleave:0-1",
                "prefer (many):0-1",
                "weighted interleave:0-1",
                "bind=static:1"
            ]
        );
        assert_eq!(m[9].page_kb, 2048);
        assert_eq!(m[9].bytes_per_node(), vec![0, 2 * 2048 * 1024]);
        assert_eq!(m[10].policy, "default");
        let user: Vec<bool> = m.iter().map(Mapping::user_policy).collect();
        assert_eq!(user.iter().filter(|&&u| u).count(), 5);
    }
}
