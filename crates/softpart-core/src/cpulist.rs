//! The kernel's CPU list syntax (`0-3,8,10-11`, as in `cpuset.cpus` and
//! `/sys/devices/system/cpu/online`), parsed strictly: every error names the
//! part of the input it rejects.

use std::collections::BTreeSet;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuListError {
    pub input: String,
    pub part: String,
    pub why: &'static str,
}

impl fmt::Display for CpuListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid CPU list {:?}: {:?} {}",
            self.input, self.part, self.why
        )
    }
}

impl std::error::Error for CpuListError {}

/// Upper bound on CPU ids we accept, far above any real machine, so a typo
/// such as `0-99999999` is an error rather than a huge allocation.
pub const MAX_CPU_ID: usize = 8191;

/// Parses a CPU list into a sorted set. Empty input is an empty set; empty
/// elements (`1,,2`), reversed ranges (`3-1`) and ids above [`MAX_CPU_ID`]
/// are errors. A stride (`0-7:2`) is accepted as the kernel does.
pub fn parse(input: &str) -> Result<BTreeSet<usize>, CpuListError> {
    let err = |part: &str, why| CpuListError {
        input: input.to_string(),
        part: part.to_string(),
        why,
    };
    let mut set = BTreeSet::new();
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Ok(set);
    }
    for part in trimmed.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(err(part, "is an empty element"));
        }
        let (range, stride) = match part.split_once(':') {
            Some((r, s)) => {
                let s: usize = s.parse().map_err(|_| err(part, "has a bad stride"))?;
                if s == 0 {
                    return Err(err(part, "has a zero stride"));
                }
                (r, s)
            }
            None => (part, 1),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (parse_id(a, part, input)?, parse_id(b, part, input)?),
            None => {
                let id = parse_id(range, part, input)?;
                (id, id)
            }
        };
        if lo > hi {
            return Err(err(part, "is a reversed range"));
        }
        set.extend((lo..=hi).step_by(stride));
    }
    Ok(set)
}

fn parse_id(s: &str, part: &str, input: &str) -> Result<usize, CpuListError> {
    let err = |why| CpuListError {
        input: input.to_string(),
        part: part.to_string(),
        why,
    };
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err("is not a CPU number or range"));
    }
    let id: usize = s.parse().map_err(|_| err("is out of range"))?;
    if id > MAX_CPU_ID {
        return Err(err("is above the largest CPU id accepted (8191)"));
    }
    Ok(id)
}

/// Formats a set the way the kernel prints one: ascending, ranges collapsed.
pub fn format<'a>(cpus: impl IntoIterator<Item = &'a usize>) -> String {
    let mut out = String::new();
    let mut iter = cpus.into_iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end = iter.next().unwrap_or(end);
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_ranges_and_singles() {
        let s = parse("0-3, 8,10-11").unwrap();
        assert_eq!(
            s.into_iter().collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse("0-7:2").unwrap().len(), 4);
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn errors_name_the_part() {
        let e = parse("0-3,x,5").unwrap_err();
        assert_eq!(e.part, "x");
        assert!(e.to_string().contains("\"x\""));
        assert_eq!(parse("5-2").unwrap_err().why, "is a reversed range");
        assert_eq!(parse("1,,2").unwrap_err().why, "is an empty element");
        assert_eq!(parse("0-99999").unwrap_err().part, "0-99999");
        assert!(parse("-1").is_err());
        assert!(parse("1-").is_err());
    }

    #[test]
    fn formats_like_the_kernel() {
        let s: BTreeSet<usize> = [0, 1, 2, 3, 5, 7, 8].into();
        assert_eq!(format(&s), "0-3,5,7-8");
        assert_eq!(format(&BTreeSet::new()), "");
    }

    proptest! {
        // Case counts are docs/reliability.md's "bad inputs tried".
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn format_then_parse_is_identity(cpus in proptest::collection::btree_set(0usize..300, 0..64)) {
            prop_assert_eq!(parse(&format(&cpus)).unwrap(), cpus);
        }

        /// Any text: a set or an error quoting the input and naming a part
        /// of it; never a panic.
        #[test]
        fn never_panics_and_names_the_part(s in "\\PC{0,40}") {
            if let Err(e) = parse(&s) {
                prop_assert!(s.contains(e.part.as_str()), "{} not in {:?}", e.part, s);
                let quoted = format!("{:?}", e.part);
                prop_assert!(e.to_string().contains(&quoted), "{} lacks {}", e, quoted);
            }
        }

        /// Near-miss lists (the characters of the syntax in any order).
        #[test]
        fn near_misses_name_the_part(s in "[0-9,:-]{0,16}") {
            if let Err(e) = parse(&s) {
                prop_assert!(s.contains(e.part.as_str()), "{} not in {:?}", e.part, s);
            }
        }
    }
}
