//! CPU partitions in the group balancer's syntax (`0-15;16-31;32-47;48-63`),
//! validated against the CPUs the machine has.

use crate::cpulist;
use std::collections::BTreeSet;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionError {
    Syntax {
        index: usize,
        text: String,
        why: String,
    },
    Empty {
        index: usize,
    },
    Overlap {
        a: usize,
        b: usize,
        cpus: String,
    },
    NotPresent {
        index: usize,
        cpus: String,
        present: String,
    },
    TooMany {
        count: usize,
        max: usize,
    },
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax { index, text, why } => {
                write!(f, "partition {index} ({text:?}): {why}")
            }
            Self::Empty { index } => write!(f, "partition {index} is empty"),
            Self::Overlap { a, b, cpus } => {
                write!(f, "partitions {a} and {b} overlap on CPUs {cpus}")
            }
            Self::NotPresent {
                index,
                cpus,
                present,
            } => write!(
                f,
                "partition {index} names CPUs {cpus} that this machine does not have (CPUs: {present})"
            ),
            Self::TooMany { count, max } => {
                write!(f, "{count} partitions given, at most {max} are supported")
            }
        }
    }
}

impl std::error::Error for PartitionError {}

/// Parses `A;B;C` (a trailing `;` is allowed) into CPU sets and checks them:
/// each non-empty, pairwise disjoint, made of CPUs in `present`. CPUs of
/// `present` that no partition names are returned as the last partition, so
/// that every CPU belongs to exactly one.
pub fn parse(
    spec: &str,
    present: &BTreeSet<usize>,
    max_parts: usize,
) -> Result<Vec<BTreeSet<usize>>, PartitionError> {
    let texts: Vec<&str> = spec
        .trim()
        .trim_end_matches(';')
        .split(';')
        .map(str::trim)
        .collect();
    let mut parts = Vec::with_capacity(texts.len());
    for (index, text) in texts.iter().enumerate() {
        let set = cpulist::parse(text).map_err(|e| PartitionError::Syntax {
            index,
            text: text.to_string(),
            why: e.to_string(),
        })?;
        if set.is_empty() {
            return Err(PartitionError::Empty { index });
        }
        let absent: BTreeSet<usize> = set.difference(present).copied().collect();
        if !absent.is_empty() {
            return Err(PartitionError::NotPresent {
                index,
                cpus: cpulist::format(&absent),
                present: cpulist::format(present),
            });
        }
        parts.push(set);
    }
    for a in 0..parts.len() {
        for b in a + 1..parts.len() {
            let both: BTreeSet<usize> = parts[a].intersection(&parts[b]).copied().collect();
            if !both.is_empty() {
                return Err(PartitionError::Overlap {
                    a,
                    b,
                    cpus: cpulist::format(&both),
                });
            }
        }
    }
    let named: BTreeSet<usize> = parts.iter().flatten().copied().collect();
    let rest: BTreeSet<usize> = present.difference(&named).copied().collect();
    if !rest.is_empty() {
        parts.push(rest);
    }
    if parts.len() > max_parts {
        return Err(PartitionError::TooMany {
            count: parts.len(),
            max: max_parts,
        });
    }
    Ok(parts)
}

/// Maps each CPU id (up to `nr_cpu_ids`) to its partition index.
pub fn cpu_to_part(parts: &[BTreeSet<usize>], nr_cpu_ids: usize) -> Vec<u32> {
    let mut map = vec![0u32; nr_cpu_ids];
    for (i, part) in parts.iter().enumerate() {
        for &cpu in part {
            if cpu < nr_cpu_ids {
                map[cpu] = i as u32;
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cpus(n: usize) -> BTreeSet<usize> {
        (0..n).collect()
    }

    #[test]
    fn seed_syntax() {
        let p = parse("0-15;16-31;32-47;48-63;", &cpus(64), 64).unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(cpulist::format(&p[1]), "16-31");
    }

    #[test]
    fn uncovered_cpus_form_the_last_partition() {
        let p = parse("0-3", &cpus(8), 64).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(cpulist::format(&p[1]), "4-7");
    }

    #[test]
    fn rejects_with_names() {
        let e = parse("0-3;3-5", &cpus(8), 64).unwrap_err();
        assert_eq!(e.to_string(), "partitions 0 and 1 overlap on CPUs 3");
        let e = parse("0-3;;4-7", &cpus(8), 64).unwrap_err();
        assert!(e.to_string().contains("partition 1"), "{e}");
        let e = parse("0-3;4-9", &cpus(8), 64).unwrap_err();
        assert_eq!(
            e.to_string(),
            "partition 1 names CPUs 8-9 that this machine does not have (CPUs: 0-7)"
        );
        let e = parse("0-3;a", &cpus(8), 64).unwrap_err();
        assert!(e.to_string().starts_with("partition 1 (\"a\")"), "{e}");
        assert!(matches!(
            parse("0;1;2", &cpus(3), 2),
            Err(PartitionError::TooMany { count: 3, max: 2 })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any text: partitions or an error naming the partition (or
        /// partitions) at fault; never a panic.
        #[test]
        fn errors_name_the_partition(spec in "\\PC{0,30}", n in 1usize..24) {
            if let Err(e) = parse(&spec, &cpus(n), 64) {
                let msg = e.to_string();
                prop_assert!(msg.starts_with("partition") || msg.contains("partitions"), "{}", msg);
            }
        }

        #[test]
        fn accepted_partitions_cover_every_cpu_once(spec in "[0-9;,-]{0,24}", n in 1usize..24) {
            if let Ok(parts) = parse(&spec, &cpus(n), 64) {
                let mut seen = BTreeSet::new();
                for p in &parts {
                    prop_assert!(!p.is_empty());
                    for &c in p {
                        prop_assert!(c < n);
                        prop_assert!(seen.insert(c), "CPU {} twice", c);
                    }
                }
                prop_assert_eq!(seen, cpus(n));
            }
        }
    }
}
