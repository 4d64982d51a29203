//! What each cgroup is entitled to when cgroups contend for CPUs: the
//! cgroup v2 CPU contract (`cpu.weight`, `cpu.max`) as CPUs.
//!
//! - Siblings share their parent's CPUs in proportion to their weights
//!   (`cpu.weight`, 1..=10000; 100 by default).
//! - No group gets more than its cap (`cpu.max`, quota / period, in CPUs)
//!   nor more than it can use alone (its demand: one CPU per CPU-bound
//!   thread, fewer if it may run on fewer CPUs).
//! - What a capped or satisfied group cannot take goes to its siblings,
//!   again by weight (water-filling): no CPU idles while a group below its
//!   limits wants more.
//!
//! Tasks live in leaves (cgroup v2 has no tasks in inner groups, the root
//! aside); a parent's demand is its children's. The guest tests compare
//! each group's measured CPU time with these entitlements.

/// One cgroup of a tree, as the contract sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub name: String,
    /// `cpu.weight`, 1..=10000.
    pub weight: u32,
    /// `cpu.max` in CPUs (quota / period); `None` for "max".
    pub cap: Option<f64>,
    /// A leaf's demand in CPUs; ignored for a parent (its children's).
    pub demand: f64,
    pub children: Vec<Group>,
}

/// A group's entitlement in CPUs, with its children's.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// The group's path below the tree's root, `a/x`.
    pub path: String,
    pub cpus: f64,
    pub children: Vec<Share>,
}

/// The lowest and highest `cpu.weight` the kernel accepts.
pub const WEIGHT_RANGE: std::ops::RangeInclusive<u32> = 1..=10_000;

impl Group {
    /// A leaf of `weight` whose threads would use `demand` CPUs alone.
    pub fn leaf(name: &str, weight: u32, demand: f64) -> Group {
        Group {
            name: name.to_string(),
            weight,
            cap: None,
            demand,
            children: Vec::new(),
        }
    }

    /// A parent of `weight` over `children`.
    pub fn parent(name: &str, weight: u32, children: Vec<Group>) -> Group {
        Group {
            name: name.to_string(),
            weight,
            cap: None,
            demand: 0.0,
            children,
        }
    }

    /// The same group with `cpu.max` of `cpus`.
    pub fn capped(mut self, cpus: f64) -> Group {
        self.cap = Some(cpus);
        self
    }

    /// The most this group can take: its demand (a parent's: what its
    /// children can take), at most its cap.
    pub fn limit(&self) -> f64 {
        let wants = if self.children.is_empty() {
            self.demand
        } else {
            self.children.iter().map(Group::limit).sum()
        };
        let wants = wants.max(0.0);
        self.cap.map_or(wants, |c| wants.min(c.max(0.0)))
    }
}

/// Splits `capacity` among claimants given as (weight, limit): in
/// proportion to weight, none above its limit, and what one cannot take
/// shared by the others the same way. Returns each claimant's part, in
/// order; they sum to `capacity` or to all the limits, whichever is less.
pub fn water_fill(capacity: f64, claims: &[(f64, f64)]) -> Vec<f64> {
    let mut part = vec![0.0; claims.len()];
    let mut open: Vec<usize> = (0..claims.len())
        .filter(|&i| claims[i].0 > 0.0 && claims[i].1 > 0.0)
        .collect();
    let mut left = capacity.max(0.0);
    // Each round either fills every open claimant to its fair level or
    // retires at least one at its limit: at most one round per claimant.
    while !open.is_empty() && left > 0.0 {
        let total: f64 = open.iter().map(|&i| claims[i].0).sum();
        let per_weight = left / total;
        let (full, rest): (Vec<usize>, Vec<usize>) = open
            .iter()
            .partition(|&&i| claims[i].1 <= claims[i].0 * per_weight);
        if full.is_empty() {
            for &i in &rest {
                part[i] = claims[i].0 * per_weight;
            }
            break;
        }
        for &i in &full {
            part[i] = claims[i].1;
            left -= claims[i].1;
        }
        open = rest;
    }
    part
}

/// Each group's entitlement when the groups share `capacity` CPUs as
/// siblings (the children of one parent, e.g. the machine's root).
pub fn entitlements(groups: &[Group], capacity: f64) -> Vec<Share> {
    entitlements_below("", groups, capacity)
}

fn entitlements_below(prefix: &str, groups: &[Group], capacity: f64) -> Vec<Share> {
    let claims: Vec<(f64, f64)> = groups
        .iter()
        .map(|g| (g.weight as f64, g.limit()))
        .collect();
    let parts = water_fill(capacity, &claims);
    groups
        .iter()
        .zip(parts)
        .map(|(g, cpus)| {
            let path = if prefix.is_empty() {
                g.name.clone()
            } else {
                format!("{prefix}/{}", g.name)
            };
            let children = entitlements_below(&path, &g.children, cpus);
            Share {
                path,
                cpus,
                children,
            }
        })
        .collect()
}

/// Each active leaf's hierarchical weight: the fraction of the machine it
/// would get if every active leaf could use all of it, the product over
/// its path of its weight over the weights of its active siblings (a
/// parent is active when one of its leaves is). Caps and demands play no
/// part: this is the rate a fair queue charges a leaf's CPU time at.
/// Returns (path, fraction) for the active leaves; they sum to 1 when any
/// leaf is active.
pub fn hierarchical_weights(groups: &[Group], active: &dyn Fn(&str) -> bool) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    hweights_below("", groups, 1.0, active, &mut out);
    out
}

fn hweights_below(
    prefix: &str,
    groups: &[Group],
    fraction: f64,
    active: &dyn Fn(&str) -> bool,
    out: &mut Vec<(String, f64)>,
) {
    let path_of = |g: &Group| {
        if prefix.is_empty() {
            g.name.clone()
        } else {
            format!("{prefix}/{}", g.name)
        }
    };
    let is_active = |g: &Group| any_active(&path_of(g), g, active);
    let total: f64 = groups
        .iter()
        .filter(|g| is_active(g))
        .map(|g| g.weight as f64)
        .sum();
    for g in groups.iter().filter(|g| is_active(g)) {
        let f = fraction * g.weight as f64 / total;
        if g.children.is_empty() {
            out.push((path_of(g), f));
        } else {
            hweights_below(&path_of(g), &g.children, f, active, out);
        }
    }
}

fn any_active(path: &str, g: &Group, active: &dyn Fn(&str) -> bool) -> bool {
    if g.children.is_empty() {
        return active(path);
    }
    g.children
        .iter()
        .any(|c| any_active(&format!("{path}/{}", c.name), c, active))
}

/// Every group's (path, CPUs), parents before their children.
pub fn flatten(shares: &[Share]) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for s in shares {
        out.push((s.path.clone(), s.cpus));
        out.extend(flatten(&s.children));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cpus_of(shares: &[Share], path: &str) -> f64 {
        flatten(shares)
            .into_iter()
            .find(|(p, _)| p == path)
            .unwrap_or_else(|| panic!("no group {path}"))
            .1
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// The groups' entitlements on `capacity` CPUs are `want` (path, CPUs).
    fn expect(groups: &[Group], capacity: f64, want: &[(&str, f64)]) {
        let s = entitlements(groups, capacity);
        for &(path, cpus) in want {
            let got = cpus_of(&s, path);
            assert!(close(got, cpus), "{path}: {got} CPUs, expected {cpus}");
        }
    }

    #[test]
    fn weights_share_what_the_cap_leaves() {
        // 8 CPUs; more threads than CPUs in every group.
        let groups = [
            Group::leaf("light", 100, 16.0),
            Group::leaf("heavy", 300, 24.0),
            Group::leaf("capped", 100, 20.0).capped(1.0),
        ];
        expect(
            &groups,
            8.0,
            &[("capped", 1.0), ("light", 1.75), ("heavy", 5.25)],
        );
    }

    #[test]
    fn nested_groups_split_their_parents_part() {
        let groups = [
            Group::parent(
                "a",
                100,
                vec![Group::leaf("x", 100, 16.0), Group::leaf("y", 100, 16.0)],
            ),
            Group::leaf("b", 100, 16.0),
        ];
        expect(
            &groups,
            8.0,
            &[("a", 4.0), ("a/x", 2.0), ("a/y", 2.0), ("b", 4.0)],
        );
    }

    #[test]
    fn a_parents_cap_bounds_its_children() {
        let groups = [
            Group::parent(
                "a",
                100,
                vec![Group::leaf("x", 100, 16.0), Group::leaf("y", 300, 16.0)],
            )
            .capped(2.0),
            Group::leaf("b", 100, 16.0),
        ];
        expect(
            &groups,
            8.0,
            &[("a", 2.0), ("a/x", 0.5), ("a/y", 1.5), ("b", 6.0)],
        );
    }

    #[test]
    fn a_light_group_leaves_the_rest_to_the_others() {
        // Half a CPU of demand at weight 1000: it gets what it asks, the
        // others share the rest.
        let groups = [
            Group::leaf("light", 1000, 0.5),
            Group::leaf("a", 100, 8.0),
            Group::leaf("b", 100, 8.0),
        ];
        expect(&groups, 8.0, &[("light", 0.5), ("a", 3.75), ("b", 3.75)]);
        // A half-CPU quota over plenty of threads.
        expect(
            &[Group::leaf("q", 100, 8.0).capped(0.5)],
            8.0,
            &[("q", 0.5)],
        );
    }

    #[test]
    fn nothing_to_share_and_nobody_to_share_with() {
        assert_eq!(water_fill(8.0, &[]), Vec::<f64>::new());
        assert_eq!(water_fill(0.0, &[(100.0, 4.0)]), vec![0.0]);
        assert_eq!(
            water_fill(8.0, &[(100.0, 0.0), (100.0, 2.0)]),
            vec![0.0, 2.0]
        );
    }

    #[test]
    fn hierarchical_weights_compound_each_level() {
        // A (100) over B (100) and C (100), beside D (200).
        let groups = [
            Group::parent(
                "a",
                100,
                vec![Group::leaf("b", 100, 1.0), Group::leaf("c", 100, 1.0)],
            ),
            Group::leaf("d", 200, 1.0),
        ];
        let hw = hierarchical_weights(&groups, &|_| true);
        let of = |hw: &[(String, f64)], p: &str| hw.iter().find(|(q, _)| q == p).unwrap().1;
        assert!(close(of(&hw, "a/b"), 1.0 / 6.0));
        assert!(close(of(&hw, "a/c"), 1.0 / 6.0));
        assert!(close(of(&hw, "d"), 2.0 / 3.0));
        // C idle: B has A's third to itself.
        let hw = hierarchical_weights(&groups, &|p| p != "a/c");
        assert_eq!(hw.len(), 2);
        assert!(close(of(&hw, "a/b"), 1.0 / 3.0));
        // D idle: A's children split the machine.
        let hw = hierarchical_weights(&groups, &|p| p != "d");
        assert!(close(of(&hw, "a/b"), 0.5));
        assert!(hierarchical_weights(&groups, &|_| false).is_empty());
    }

    /// A random tree of up to three levels.
    fn tree() -> impl Strategy<Value = Vec<Group>> {
        let leaf = (1u32..=10_000, 0.0f64..32.0, prop::option::of(0.1f64..16.0)).prop_map(
            |(w, d, cap)| Group {
                name: String::new(),
                weight: w,
                cap,
                demand: d,
                children: Vec::new(),
            },
        );
        let node = leaf.prop_recursive(2, 24, 4, |inner| {
            (
                1u32..=10_000,
                prop::option::of(0.1f64..16.0),
                prop::collection::vec(inner, 1..4),
            )
                .prop_map(|(w, cap, children)| Group {
                    name: String::new(),
                    weight: w,
                    cap,
                    demand: 0.0,
                    children,
                })
        });
        prop::collection::vec(node, 1..5).prop_map(|mut groups| {
            name(&mut groups);
            groups
        })
    }

    fn name(groups: &mut [Group]) {
        for (i, g) in groups.iter_mut().enumerate() {
            g.name = format!("g{i}");
            name(&mut g.children);
        }
    }

    /// The contract at one level: within limits, work-conserving, and
    /// proportional among those not at their limit, who get at least the
    /// level of anyone at theirs.
    fn check_level(groups: &[Group], shares: &[Share], capacity: f64) {
        let eps = 1e-6 * (1.0 + capacity);
        let sum: f64 = shares.iter().map(|s| s.cpus).sum();
        let limits: f64 = groups.iter().map(Group::limit).sum();
        assert!(
            (sum - capacity.min(limits)).abs() < eps,
            "{sum} of {capacity}, limits {limits}"
        );
        let per_weight = |i: usize| shares[i].cpus / groups[i].weight as f64;
        let open: Vec<usize> = (0..groups.len())
            .filter(|&i| shares[i].cpus < groups[i].limit() - eps)
            .collect();
        for (i, g) in groups.iter().enumerate() {
            assert!(shares[i].cpus <= g.limit() + eps);
            assert!(shares[i].cpus >= -eps);
            for &j in &open {
                let rel = eps / groups[j].weight as f64 + 1e-9 * per_weight(j);
                assert!(per_weight(i) <= per_weight(j) + rel, "{i} above open {j}");
            }
        }
        for (g, s) in groups.iter().zip(shares) {
            check_level(&g.children, &s.children, s.cpus);
        }
    }

    proptest! {
        #[test]
        fn hierarchical_weights_sum_to_the_machine(groups in tree(), seed in any::<u64>()) {
            // Some leaves active, by a hash of their path and the seed.
            let active = |p: &str| {
                let h = p.bytes().fold(seed, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
                h % 3 != 0
            };
            let hw = hierarchical_weights(&groups, &active);
            let sum: f64 = hw.iter().map(|(_, f)| f).sum();
            prop_assert!(hw.is_empty() || (sum - 1.0).abs() < 1e-9, "{sum}");
            prop_assert!(hw.iter().all(|(p, f)| active(p) && *f > 0.0));
        }

        #[test]
        fn entitlements_keep_the_contract(groups in tree(), capacity in 0.0f64..64.0) {
            let shares = entitlements(&groups, capacity);
            check_level(&groups, &shares, capacity);
        }
    }
}
