//! The softness rule. With the ratio `allowed:preferred`, a task's
//! wakeup searches its whole allowed set first (instead of its home) once
//! the home's utilisation exceeds the allowed set's by that ratio:
//!
//! ```text
//! util(home) / util(allowed) > allowed / preferred
//! ```
//!
//! Utilisations are per-CPU averages over the last period (0..=1). 100:1
//! (the seed's default) almost never triggers on a machine whose allowed set
//! is not 100 times its home; 5:4 triggers once the home is 25% busier per
//! CPU than the machine. softpart's own default (`Softness::HomeFirst`)
//! never switches: it relies on spilling to idle CPUs and owners-first
//! instead, and needs no tuning.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Softness {
    /// Home first always; spill only when the home has no idle CPU.
    HomeFirst,
    /// The seed's `allowed:preferred` ratio.
    Ratio { allowed: u32, preferred: u32 },
}

impl Softness {
    /// Whether wakeups should search the allowed set before the home.
    pub fn allowed_first(&self, util_home: f64, util_allowed: f64) -> bool {
        match *self {
            Softness::HomeFirst => false,
            Softness::Ratio { allowed, preferred } => {
                util_home * preferred as f64 > util_allowed * allowed as f64
            }
        }
    }
}

impl fmt::Display for Softness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Softness::HomeFirst => write!(f, "home-first"),
            Softness::Ratio { allowed, preferred } => write!(f, "{allowed}:{preferred}"),
        }
    }
}

impl FromStr for Softness {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || {
            format!(
                "invalid softness {s:?}: expected home-first or ALLOWED:PREFERRED with both from 1 to 10000 (e.g. 100:1, 5:4)"
            )
        };
        if s == "home-first" {
            return Ok(Softness::HomeFirst);
        }
        let (a, p) = s.split_once(':').ok_or_else(err)?;
        let num = |x: &str| -> Result<u32, String> {
            match x.trim().parse::<u32>() {
                Ok(v) if (1..=10_000).contains(&v) => Ok(v),
                _ => Err(err()),
            }
        };
        Ok(Softness::Ratio {
            allowed: num(a)?,
            preferred: num(p)?,
        })
    }
}

/// Per-CPU utilisation over a period from busy-time counters, smoothed:
/// `new = (1 - alpha) * old + alpha * busy / period`, clamped to 0..=1.
pub fn smooth_util(old: f64, busy_ns: u64, period_ns: u64, alpha: f64) -> f64 {
    if period_ns == 0 {
        return old;
    }
    let now = (busy_ns as f64 / period_ns as f64).clamp(0.0, 1.0);
    ((1.0 - alpha) * old + alpha * now).clamp(0.0, 1.0)
}

/// Mean of `util` over `cpus` (0 for an empty set).
pub fn mean_util<'a>(util: &[f64], cpus: impl IntoIterator<Item = &'a usize>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for &c in cpus {
        if let Some(u) = util.get(c) {
            sum += u;
            n += 1;
        }
    }
    if n == 0 { 0.0 } else { sum / n as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses() {
        assert_eq!(
            "100:1".parse(),
            Ok(Softness::Ratio {
                allowed: 100,
                preferred: 1
            })
        );
        assert_eq!(
            "5:4".parse(),
            Ok(Softness::Ratio {
                allowed: 5,
                preferred: 4
            })
        );
        assert_eq!("home-first".parse(), Ok(Softness::HomeFirst));
        for bad in ["", "5", "0:1", "5:0", "a:b", "5:4:3", "100000:1"] {
            let e = bad.parse::<Softness>().unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        assert_eq!(
            Softness::Ratio {
                allowed: 5,
                preferred: 4
            }
            .to_string(),
            "5:4"
        );
    }

    #[test]
    fn seed_ratios() {
        let r100 = Softness::Ratio {
            allowed: 100,
            preferred: 1,
        };
        let r54 = Softness::Ratio {
            allowed: 5,
            preferred: 4,
        };
        // Home (half the machine) full, other half idle: util 1.0 vs 0.5.
        assert!(!r100.allowed_first(1.0, 0.5));
        assert!(r54.allowed_first(1.0, 0.5));
        // Whole machine equally busy: never.
        assert!(!r54.allowed_first(0.8, 0.8));
        assert!(!Softness::HomeFirst.allowed_first(1.0, 0.0));
    }

    #[test]
    fn utilisation() {
        assert_eq!(smooth_util(0.0, 10, 10, 1.0), 1.0);
        assert_eq!(smooth_util(1.0, 0, 10, 0.5), 0.5);
        assert_eq!(smooth_util(0.3, 50, 10, 1.0), 1.0, "clamped");
        assert_eq!(smooth_util(0.3, 5, 0, 1.0), 0.3);
        assert_eq!(mean_util(&[1.0, 0.0, 0.5], &[0, 2]), 0.75);
        assert_eq!(mean_util(&[1.0], &[5]), 0.0);
    }

    proptest! {
        /// A softer ratio (smaller allowed/preferred) switches at least
        /// whenever a harder one does.
        #[test]
        fn softer_switches_no_later(uh in 0.0f64..=1.0, ua in 0.0f64..=1.0,
                                    a in 1u32..200, p in 1u32..200, k in 1u32..10) {
            let hard = Softness::Ratio { allowed: a * k, preferred: p };
            let soft = Softness::Ratio { allowed: a, preferred: p };
            if hard.allowed_first(uh, ua) {
                prop_assert!(soft.allowed_first(uh, ua));
            }
        }

        /// A home no busier than the machine never switches at ratios >= 1.
        #[test]
        fn calm_home_stays_home(ua in 0.0f64..=1.0, f in 0.0f64..=1.0, a in 1u32..100, extra in 0u32..100) {
            let r = Softness::Ratio { allowed: a + extra, preferred: a };
            prop_assert!(!r.allowed_first(ua * f, ua));
        }
    }
}
