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
    // Lowest limit per weight first: the claimants that fill up first. A
    // claimant retired at its limit leaves the others a level at least as
    // high, so each is looked at once: n log n for n claimants.
    open.sort_by(|&a, &b| (claims[a].1 / claims[a].0).total_cmp(&(claims[b].1 / claims[b].0)));
    let mut left = capacity.max(0.0);
    let mut total: f64 = open.iter().map(|&i| claims[i].0).sum();
    for (at, &i) in open.iter().enumerate() {
        if left <= 0.0 || total <= 0.0 {
            break;
        }
        let per_weight = left / total;
        if claims[i].1 > claims[i].0 * per_weight {
            for &j in &open[at..] {
                part[j] = claims[j].0 * per_weight;
            }
            break;
        }
        part[i] = claims[i].1;
        left -= claims[i].1;
        total -= claims[i].0;
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

/// One cgroup of the cpu controller as the scheduler sees it: its place,
/// its contract, and its own runnable tasks (not its children's).
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupLoad {
    /// Its parent's index in the same list; `None` for the root.
    pub parent: Option<usize>,
    /// `cpu.weight`.
    pub weight: u32,
    /// `cpu.max` in CPUs; `None` for "max".
    pub cap: Option<f64>,
    /// The summed weight of its runnable tasks (a nice-0 task's is 100).
    pub runnable_weight: f64,
    /// How many of its tasks are runnable: the CPUs they could use.
    pub runnable: f64,
}

/// The rate at which each cgroup's tasks are charged CPU time on one
/// vtime clock: its runnable weight over its entitlement in CPUs (0 when
/// it has none), so that a task of weight w that ran t ns is charged
/// t * rate / w. Each runnable task's share of its cgroup's entitlement is
/// w / runnable weight, so every task that gets its share advances the
/// clock at the wall clock's rate, and one queue ordered by that clock
/// gives every cgroup its entitlement.
///
/// A cgroup's own tasks compete with its child cgroups as one claimant
/// whose weight is theirs summed, which is how the kernel weighs them
/// (each task against the children, by its own weight): the root's
/// tasks, and those of cgroups whose children do not have the cpu
/// controller.
pub fn charge_rates(cgroups: &[CgroupLoad], capacity: f64) -> Vec<f64> {
    contract_pass(cgroups, capacity).0
}

/// Each cgroup's entitlement in CPUs (its own tasks' and its
/// descendants'), from the same pass as [`charge_rates`].
pub fn cgroup_entitlements(cgroups: &[CgroupLoad], capacity: f64) -> Vec<f64> {
    contract_pass(cgroups, capacity).1
}

/// Deeper than the kernel allows cgroups to nest: the children of a
/// cgroup this deep are left out, which ends a cycle in bad input.
const MAX_DEPTH: usize = 256;

/// The cgroups as a tree of indices: each one's children, in index order
/// (`kids[first[i]..first[i + 1]]`), its depth, and an order that has
/// every cgroup reached from a root after its parent (the roots first). A
/// cgroup whose parent is itself or out of range is a root; one on a
/// cycle is reached from none.
struct Tree {
    first: Vec<usize>,
    kids: Vec<usize>,
    depth: Vec<usize>,
    order: Vec<usize>,
    roots: usize,
}

impl Tree {
    fn of(cgroups: &[CgroupLoad]) -> Tree {
        let n = cgroups.len();
        let parent_of = |i: usize| cgroups[i].parent.filter(|&p| p < n && p != i);
        let mut first = vec![0; n + 1];
        for i in 0..n {
            if let Some(p) = parent_of(i) {
                first[p + 1] += 1;
            }
        }
        for i in 0..n {
            first[i + 1] += first[i];
        }
        let mut next = first.clone();
        let mut kids = vec![0; first[n]];
        let mut order = Vec::with_capacity(n);
        for i in 0..n {
            match parent_of(i) {
                Some(p) => {
                    kids[next[p]] = i;
                    next[p] += 1;
                }
                None => order.push(i),
            }
        }
        let roots = order.len();
        let mut depth = vec![0; n];
        let mut at = 0;
        while at < order.len() {
            let i = order[at];
            at += 1;
            if depth[i] < MAX_DEPTH {
                for &k in &kids[first[i]..first[i + 1]] {
                    depth[k] = depth[i] + 1;
                    order.push(k);
                }
            }
        }
        Tree {
            first,
            kids,
            depth,
            order,
            roots,
        }
    }

    /// @i's children in the pass: none at MAX_DEPTH.
    fn children(&self, i: usize) -> &[usize] {
        if self.depth[i] >= MAX_DEPTH {
            return &[];
        }
        &self.kids[self.first[i]..self.first[i + 1]]
    }
}

/// [`charge_rates`] and [`cgroup_entitlements`] in one pass over the
/// cgroups: each one's limit (what it can take: its runnable tasks' and
/// its children's, at most its cap) from the leaves up, then each
/// parent's share split among its children and its own tasks from the
/// root down, skipping every cgroup below one that gets nothing. Linear in
/// the cgroups, and in the children of each cgroup that gets a share
/// times the log of their number.
pub fn contract_pass(cgroups: &[CgroupLoad], capacity: f64) -> (Vec<f64>, Vec<f64>) {
    let n = cgroups.len();
    let tree = Tree::of(cgroups);
    // A cgroup's own runnable tasks as one claimant: (weight, limit).
    let own = |c: &CgroupLoad| -> Option<(f64, f64)> {
        (c.runnable > 0.0 && c.runnable_weight > 0.0).then(|| {
            (
                c.runnable_weight.round().clamp(1.0, u32::MAX as f64),
                c.runnable.max(0.0),
            )
        })
    };
    let mut limit = vec![0.0; n];
    for &i in tree.order.iter().rev() {
        let c = &cgroups[i];
        let kids: f64 = tree.children(i).iter().map(|&k| limit[k]).sum();
        let wants = (kids + own(c).map_or(0.0, |o| o.1)).max(0.0);
        limit[i] = c.cap.map_or(wants, |cap| wants.min(cap.max(0.0)));
    }
    let mut share = vec![0.0; n];
    let mut rates = vec![0.0; n];
    let claims_of = |ids: &[usize], limit: &[f64]| -> Vec<(f64, f64)> {
        ids.iter()
            .map(|&k| (cgroups[k].weight as f64, limit[k]))
            .collect()
    };
    let roots = &tree.order[..tree.roots];
    for (&r, part) in roots
        .iter()
        .zip(water_fill(capacity, &claims_of(roots, &limit)))
    {
        share[r] = part;
    }
    let mut claims = Vec::new();
    for &i in &tree.order {
        if share[i] <= 0.0 {
            continue;
        }
        let kids = tree.children(i);
        claims.clear();
        claims.extend(claims_of(kids, &limit));
        let own = own(&cgroups[i]);
        claims.extend(own);
        let parts = water_fill(share[i], &claims);
        for (&k, &part) in kids.iter().zip(&parts) {
            share[k] = part;
        }
        if own.is_some() && parts[kids.len()] > 0.0 {
            rates[i] = cgroups[i].runnable_weight / parts[kids.len()];
        }
    }
    (rates, share)
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

    fn load(parent: Option<usize>, weight: u32, tasks: f64) -> CgroupLoad {
        CgroupLoad {
            parent,
            weight,
            cap: None,
            runnable_weight: 100.0 * tasks,
            runnable: tasks,
        }
    }

    /// Each cgroup's tasks, given their shares of its entitlement, advance
    /// the vtime clock at the wall clock's rate.
    #[test]
    fn rates_make_every_entitled_task_advance_at_wall_rate() {
        // The root (no tasks of its own) over light, heavy and capped.
        let mut cgs = vec![
            load(None, 100, 0.0),
            load(Some(0), 100, 16.0),
            load(Some(0), 300, 24.0),
            load(Some(0), 100, 20.0),
        ];
        cgs[3].cap = Some(1.0);
        let rates = charge_rates(&cgs, 8.0);
        assert_eq!(rates[0], 0.0);
        // Entitlements 1.75, 5.25, 1: rate = runnable weight / entitlement.
        assert!(close(rates[1], 1600.0 / 1.75));
        assert!(close(rates[2], 2400.0 / 5.25));
        assert!(close(rates[3], 2000.0 / 1.0));
        for (c, e) in [(1, 1.75), (2, 5.25), (3, 1.0)] {
            let per_task = e / cgs[c].runnable;
            assert!(close(per_task * rates[c] / 100.0, 1.0));
        }
    }

    #[test]
    fn own_tasks_compete_with_child_cgroups_by_their_weight() {
        // Two nice-0 tasks in the root beside a cgroup of weight 100 with
        // eight: 200 against 100 of 4 CPUs, but two tasks use at most 2.
        let cgs = [load(None, 100, 2.0), load(Some(0), 100, 8.0)];
        let rates = charge_rates(&cgs, 4.0);
        assert!(close(rates[0], 200.0 / 2.0));
        assert!(close(rates[1], 800.0 / 2.0));
        // Nested: /a/{x,y} against /b, equal weights at each level.
        let cgs = [
            load(None, 100, 0.0),
            load(Some(0), 100, 0.0),
            load(Some(1), 100, 16.0),
            load(Some(1), 100, 16.0),
            load(Some(0), 100, 16.0),
        ];
        let rates = charge_rates(&cgs, 8.0);
        assert!(close(rates[2], 1600.0 / 2.0));
        assert!(close(rates[3], 1600.0 / 2.0));
        assert!(close(rates[4], 1600.0 / 4.0));
        assert_eq!(rates[1], 0.0);
    }

    #[test]
    fn idle_cgroups_and_bad_parents_get_no_rate() {
        let cgs = [
            load(None, 100, 0.0),
            load(Some(0), 100, 0.0),
            // Its own parent, and a parent out of range: roots.
            load(Some(2), 100, 4.0),
            load(Some(9), 100, 4.0),
        ];
        let rates = charge_rates(&cgs, 4.0);
        assert_eq!(&rates[..2], &[0.0, 0.0]);
        assert!(close(rates[2], 400.0 / 2.0));
        assert!(close(rates[3], 400.0 / 2.0));
        assert!(charge_rates(&[], 4.0).is_empty());
    }

    #[test]
    fn entitlements_of_cgroups_sum_their_own_tasks_and_children() {
        // root -> a (weight 100, cap 2 CPUs) -> {x, y}; root -> b; 8 CPUs.
        let mut cgs = [
            load(None, 100, 0.0),
            load(Some(0), 100, 0.0),
            load(Some(1), 100, 16.0),
            load(Some(1), 100, 24.0),
            load(Some(0), 100, 12.0),
        ];
        cgs[1].cap = Some(2.0);
        let got = cgroup_entitlements(&cgs, 8.0);
        for (i, want) in [8.0, 2.0, 1.0, 1.0, 6.0].into_iter().enumerate() {
            assert!(
                close(got[i], want),
                "cgroup {i}: {} CPUs, expected {want}",
                got[i]
            );
        }
        assert!(cgroup_entitlements(&[], 8.0).is_empty());
    }

    fn same(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
    }

    /// Water-filling by rounds, each retiring every claimant at its limit.
    fn reference_water_fill(capacity: f64, claims: &[(f64, f64)]) -> Vec<f64> {
        let mut part = vec![0.0; claims.len()];
        let mut open: Vec<usize> = (0..claims.len())
            .filter(|&i| claims[i].0 > 0.0 && claims[i].1 > 0.0)
            .collect();
        let mut left = capacity.max(0.0);
        while !open.is_empty() && left > 0.0 {
            let total: f64 = open.iter().map(|&i| claims[i].0).sum();
            let level = left / total;
            let (full, rest): (Vec<usize>, Vec<usize>) = open
                .iter()
                .partition(|&&i| claims[i].1 <= claims[i].0 * level);
            if full.is_empty() {
                for &i in &rest {
                    part[i] = claims[i].0 * level;
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

    /// The contract by its definition, recursively: a cgroup's limit is
    /// its own tasks' and its children's limits, at most its cap; its
    /// share is split among its children and its own tasks by weight
    /// (water-filling); its rate is its runnable weight over its own
    /// tasks' part.
    fn reference_pass(cgs: &[CgroupLoad], capacity: f64) -> (Vec<f64>, Vec<f64>) {
        let n = cgs.len();
        let mut children = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (i, c) in cgs.iter().enumerate() {
            match c.parent {
                Some(p) if p < n && p != i => children[p].push(i),
                _ => roots.push(i),
            }
        }
        let own = |i: usize| {
            let c = &cgs[i];
            (c.runnable > 0.0 && c.runnable_weight > 0.0).then(|| {
                (
                    c.runnable_weight.round().clamp(1.0, u32::MAX as f64),
                    c.runnable,
                )
            })
        };
        let kids = |i: usize, depth: usize| {
            if depth < MAX_DEPTH {
                children[i].clone()
            } else {
                Vec::new()
            }
        };
        fn limit(
            i: usize,
            depth: usize,
            cgs: &[CgroupLoad],
            kids: &dyn Fn(usize, usize) -> Vec<usize>,
            own: &dyn Fn(usize) -> Option<(f64, f64)>,
        ) -> f64 {
            let wants: f64 = kids(i, depth)
                .iter()
                .map(|&k| limit(k, depth + 1, cgs, kids, own))
                .sum::<f64>()
                + own(i).map_or(0.0, |o| o.1);
            let wants = wants.max(0.0);
            cgs[i].cap.map_or(wants, |c| wants.min(c.max(0.0)))
        }
        #[allow(clippy::too_many_arguments)]
        fn split(
            i: usize,
            depth: usize,
            share: f64,
            cgs: &[CgroupLoad],
            kids: &dyn Fn(usize, usize) -> Vec<usize>,
            own: &dyn Fn(usize) -> Option<(f64, f64)>,
            rates: &mut [f64],
            shares: &mut [f64],
        ) {
            shares[i] = share;
            let ks = kids(i, depth);
            let mut claims: Vec<(f64, f64)> = ks
                .iter()
                .map(|&k| (cgs[k].weight as f64, limit(k, depth + 1, cgs, kids, own)))
                .collect();
            claims.extend(own(i));
            let parts = reference_water_fill(share, &claims);
            for (&k, &p) in ks.iter().zip(&parts) {
                split(k, depth + 1, p, cgs, kids, own, rates, shares);
            }
            if own(i).is_some() && parts[ks.len()] > 0.0 {
                rates[i] = cgs[i].runnable_weight / parts[ks.len()];
            }
        }
        let (mut rates, mut shares) = (vec![0.0; n], vec![0.0; n]);
        let claims: Vec<(f64, f64)> = roots
            .iter()
            .map(|&r| (cgs[r].weight as f64, limit(r, 0, cgs, &kids, &own)))
            .collect();
        for (&r, p) in roots.iter().zip(reference_water_fill(capacity, &claims)) {
            split(r, 0, p, cgs, &kids, &own, &mut rates, &mut shares);
        }
        (rates, shares)
    }

    #[test]
    fn a_chain_deeper_than_cgroups_nest_ends_where_the_definition_does() {
        // 300 cgroups, each the child of the one before; tasks at depth
        // 200 (counted) and at the bottom (below MAX_DEPTH: left out).
        let cgs: Vec<CgroupLoad> = (0..300usize)
            .map(|i| {
                load(
                    i.checked_sub(1),
                    100,
                    if i == 200 || i == 299 { 2.0 } else { 0.0 },
                )
            })
            .collect();
        let (rates, shares) = contract_pass(&cgs, 4.0);
        assert_eq!((rates.clone(), shares.clone()), reference_pass(&cgs, 4.0));
        assert!(close(shares[200], 2.0) && close(rates[200], 100.0));
        assert_eq!((shares[299], rates[299]), (0.0, 0.0));
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
        fn rates_give_out_the_machine_and_no_more(
            raw in prop::collection::vec(
                (any::<prop::sample::Index>(), 1u32..=10_000,
                 prop::option::weighted(0.2, 0.1f64..8.0), 0u32..12),
                1..12),
            capacity in 0.5f64..64.0,
        ) {
            let cgs: Vec<CgroupLoad> = raw.iter().enumerate().map(|(i, (p, w, cap, n))| CgroupLoad {
                parent: (i > 0).then(|| p.index(i)),
                weight: *w,
                cap: *cap,
                runnable_weight: 100.0 * *n as f64,
                runnable: *n as f64,
            }).collect();
            let rates = charge_rates(&cgs, capacity);
            let mut given = 0.0;
            for (c, r) in cgs.iter().zip(&rates) {
                prop_assert!(r.is_finite() && *r >= 0.0);
                prop_assert!(c.runnable > 0.0 || *r == 0.0);
                if *r > 0.0 {
                    // Entitlement = runnable weight / rate, at most one CPU per task.
                    let e = c.runnable_weight / r;
                    prop_assert!(e <= c.runnable + 1e-9);
                    given += e;
                }
            }
            let wanted: f64 = cgs.iter().map(|c| c.runnable).sum();
            prop_assert!(given <= capacity.min(wanted) + 1e-6);
            if cgs.iter().all(|c| c.cap.is_none()) {
                prop_assert!((given - capacity.min(wanted)).abs() < 1e-6, "{given}");
            }
        }

        #[test]
        fn the_pass_gives_what_the_recursive_definition_gives(
            raw in prop::collection::vec(
                (prop::option::weighted(0.9, 0usize..40), 1u32..=10_000,
                 prop::option::weighted(0.2, 0.1f64..8.0), 0u32..12),
                1..40),
            capacity in 0.0f64..64.0,
        ) {
            // Any parent: earlier, later, itself, out of range, cycles.
            let cgs: Vec<CgroupLoad> = raw.iter().map(|(p, w, cap, n)| CgroupLoad {
                parent: *p,
                weight: *w,
                cap: *cap,
                runnable_weight: 100.0 * *n as f64,
                runnable: *n as f64,
            }).collect();
            let (rates, shares) = contract_pass(&cgs, capacity);
            let (want_rates, want_shares) = reference_pass(&cgs, capacity);
            for i in 0..cgs.len() {
                prop_assert!(same(rates[i], want_rates[i]), "rate {i}: {} vs {}", rates[i], want_rates[i]);
                prop_assert!(same(shares[i], want_shares[i]), "share {i}: {} vs {}", shares[i], want_shares[i]);
            }
        }

        #[test]
        fn entitlements_keep_the_contract(groups in tree(), capacity in 0.0f64..64.0) {
            let shares = entitlements(&groups, capacity);
            check_level(&groups, &shares, capacity);
        }
    }
}
