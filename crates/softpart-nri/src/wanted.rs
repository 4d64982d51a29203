//! The pods and containers containerd runs, as NRI told the plugin, and
//! the homes they want: each an annotated pod's or container's cgroup,
//! with the source `softpart list` shows for it. What scx_softpart has is
//! made to match (`reconcile`): a home whose pod or container went is
//! cleared, one that is missing is given, whatever happened in between
//! (the plugin, scx_softpart or containerd restarted).

use crate::annotations::{self, HomeAsked, PodAsks};
use crate::cgroup_path;
use softpart_core::control::HomeView;
use std::collections::{BTreeMap, BTreeSet};

/// Every source this plugin gives starts so; a home listed with another
/// source is not the plugin's (an operator's, a config rule's).
pub const SOURCE_PREFIX: &str = "kubernetes ";
/// How `softpart list` shows a cgroup the plugin handed to the balancer.
pub const BALANCED_PREFIX: &str = "balancer, kubernetes ";

#[derive(Debug, Clone, PartialEq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    /// From the cgroup2 root; None when NRI's cgroup parent is not one
    /// this plugin can read.
    pub cgroup: Option<String>,
    pub asks: PodAsks,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    pub pod: String,
    pub name: String,
    pub cgroup: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    Home(HomeAsked),
    Balance,
}

/// A home the plugin gives: to which cgroup, what, and the source it
/// carries (`kubernetes NAMESPACE/POD[/CONTAINER] VALUE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub want: Want,
    pub origin: String,
}

/// Why a pod's annotation gives nothing: logged once per pod, counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// NAMESPACE/POD.
    pub pod: String,
    pub key: String,
    pub value: String,
    pub reason: String,
    /// The metric's label: "malformed", "namespace" (not allowed) or
    /// "cgroup" (a cgroup parent the plugin cannot read).
    pub kind: &'static str,
}

/// The namespaces whose pods may have homes from their annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    All,
    Only(BTreeSet<String>),
}

impl Allowed {
    pub fn allows(&self, ns: &str) -> bool {
        match self {
            Allowed::All => true,
            Allowed::Only(set) => set.contains(ns),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    pub allowed: Allowed,
    pub pods: BTreeMap<String, Pod>,
    pub containers: BTreeMap<String, Container>,
}

impl Node {
    pub fn new(allowed: Allowed) -> Node {
        Node {
            allowed,
            pods: BTreeMap::new(),
            containers: BTreeMap::new(),
        }
    }

    /// A pod seen (run, or listed by Synchronize); what of its annotations
    /// gives nothing, and why.
    pub fn add_pod(
        &mut self,
        id: &str,
        namespace: &str,
        name: &str,
        cgroup_parent: &str,
        annotations: &std::collections::HashMap<String, String>,
    ) -> Vec<Ignored> {
        let who = format!("{namespace}/{name}");
        let ours = softpart_annotations(annotations);
        let cgroup = cgroup_path::pod_cgroup(cgroup_parent);
        let mut ignored = Vec::new();
        let asks = if !ours.is_empty() && !self.allowed.allows(namespace) {
            for (key, value) in ours {
                ignored.push(Ignored {
                    pod: who.clone(),
                    key,
                    value,
                    reason: format!("namespace {namespace:?} is not among the allowed ones"),
                    kind: "namespace",
                });
            }
            PodAsks::default()
        } else {
            let asks = annotations::pod_asks(annotations);
            for (key, value, reason) in &asks.refused {
                ignored.push(Ignored {
                    pod: who.clone(),
                    key: key.clone(),
                    value: value.clone(),
                    reason: reason.clone(),
                    kind: "malformed",
                });
            }
            let asks_any = asks.home.is_some() || asks.balance || !asks.containers.is_empty();
            if asks_any && cgroup.is_none() {
                ignored.push(Ignored {
                    pod: who.clone(),
                    key: "cgroup_parent".to_string(),
                    value: cgroup_parent.to_string(),
                    reason: "not a cgroup path or a systemd slice".to_string(),
                    kind: "cgroup",
                });
            }
            asks
        };
        self.pods.insert(
            id.to_string(),
            Pod {
                namespace: namespace.to_string(),
                name: name.to_string(),
                cgroup,
                asks,
            },
        );
        ignored
    }

    pub fn remove_pod(&mut self, id: &str) {
        self.pods.remove(id);
        self.containers.retain(|_, c| c.pod != id);
    }

    pub fn add_container(&mut self, id: &str, pod: &str, name: &str, cgroups_path: &str) {
        self.containers.insert(
            id.to_string(),
            Container {
                pod: pod.to_string(),
                name: name.to_string(),
                cgroup: cgroup_path::container_cgroup(cgroups_path),
            },
        );
    }

    pub fn remove_container(&mut self, id: &str) {
        self.containers.remove(id);
    }

    /// The homes wanted, by cgroup.
    pub fn wanted(&self) -> BTreeMap<String, Wanted> {
        let mut out = BTreeMap::new();
        for pod in self.pods.values() {
            let who = format!("{}/{}", pod.namespace, pod.name);
            let Some(cg) = &pod.cgroup else { continue };
            if let Some(h) = &pod.asks.home {
                out.insert(
                    cg.clone(),
                    Wanted {
                        want: Want::Home(h.clone()),
                        origin: format!("{SOURCE_PREFIX}{who} {h}"),
                    },
                );
            } else if pod.asks.balance {
                out.insert(
                    cg.clone(),
                    Wanted {
                        want: Want::Balance,
                        origin: format!("{SOURCE_PREFIX}{who}"),
                    },
                );
            }
        }
        for c in self.containers.values() {
            let Some(pod) = self.pods.get(&c.pod) else {
                continue;
            };
            let (Some(cg), Some(h)) = (&c.cgroup, pod.asks.containers.get(&c.name)) else {
                continue;
            };
            out.insert(
                cg.clone(),
                Wanted {
                    want: Want::Home(h.clone()),
                    origin: format!(
                        "{SOURCE_PREFIX}{}/{}/{} {h}",
                        pod.namespace, pod.name, c.name
                    ),
                },
            );
        }
        out
    }
}

/// The softpart annotations of a pod, sorted.
fn softpart_annotations(
    annotations: &std::collections::HashMap<String, String>,
) -> Vec<(String, String)> {
    let mut v: Vec<_> = annotations
        .iter()
        .filter(|(k, _)| k.contains("softpart.io/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    v.sort();
    v
}

/// One change to scx_softpart's homes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Give { cgroup: String, wanted: Wanted },
    Clear { cgroup: String },
}

/// The cgroup and its source of a listed home the plugin gave.
fn ours(h: &HomeView) -> Option<(&str, String)> {
    if h.kind != "cgroup" {
        return None;
    }
    if let Some(rest) = h.source.strip_prefix(BALANCED_PREFIX) {
        return Some((&h.target, format!("{SOURCE_PREFIX}{rest}")));
    }
    h.source
        .starts_with(SOURCE_PREFIX)
        .then(|| (h.target.as_str(), h.source.clone()))
}

/// What makes `listed` (scx_softpart's homes) match `wanted`: the
/// plugin's homes no longer wanted are cleared, and the wanted ones not
/// listed with their source are given (again; a new home replaces the
/// old one whole). A cgroup handed to the
/// balancer is listed only once placed; until then it is asked again,
/// which scx_softpart takes as a no-op.
pub fn reconcile(wanted: &BTreeMap<String, Wanted>, listed: &[HomeView]) -> Vec<Action> {
    let mut actions = Vec::new();
    let mut have = BTreeMap::new();
    for h in listed {
        if let Some((cg, source)) = ours(h) {
            have.insert(cg.to_string(), source);
        }
    }
    for cg in have.keys() {
        if !wanted.contains_key(cg) {
            actions.push(Action::Clear { cgroup: cg.clone() });
        }
    }
    for (cg, w) in wanted {
        if have.get(cg) != Some(&w.origin) {
            actions.push(Action::Give {
                cgroup: cg.clone(),
                wanted: w.clone(),
            });
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use softpart_core::control::HomeSpec;
    use std::collections::HashMap;

    const POD_SLICE: &str = "kubepods-burstable-poduid1.slice";
    const POD_CG: &str =
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poduid1.slice";

    fn ann(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn listed(target: &str, source: &str) -> HomeView {
        HomeView {
            kind: "cgroup".into(),
            target: target.into(),
            cpus: "4-7".into(),
            softness: None,
            source: source.into(),
        }
    }

    #[test]
    fn a_pods_home_and_a_containers_own_are_wanted_with_their_names() {
        let mut n = Node::new(Allowed::All);
        let ig = n.add_pod(
            "p1",
            "db",
            "pg-0",
            POD_SLICE,
            &ann(&[
                ("home.softpart.io/pod", "node=1"),
                ("home.softpart.io/container.log", "cpus=0"),
            ]),
        );
        assert!(ig.is_empty(), "{ig:?}");
        n.add_container("c1", "p1", "pg", &format!("{POD_SLICE}:cri-containerd:c1"));
        n.add_container("c2", "p1", "log", &format!("{POD_SLICE}:cri-containerd:c2"));
        let w = n.wanted();
        assert_eq!(w.len(), 2);
        assert_eq!(w[POD_CG].origin, "kubernetes db/pg-0 node=1");
        assert_eq!(
            w[POD_CG].want,
            Want::Home(HomeAsked {
                spec: HomeSpec::Node(1),
                softness: None
            })
        );
        let c2 = format!("{POD_CG}/cri-containerd-c2.scope");
        assert_eq!(w[&c2].origin, "kubernetes db/pg-0/log cpus=0");
        // The container stops: its home is no longer wanted; the pod
        // goes: nothing is.
        n.remove_container("c2");
        assert_eq!(n.wanted().len(), 1);
        n.remove_pod("p1");
        assert!(n.wanted().is_empty() && n.containers.is_empty());
    }

    #[test]
    fn a_namespace_not_allowed_gets_nothing_and_each_annotation_is_named() {
        let mut n = Node::new(Allowed::Only(["db".to_string()].into()));
        let ig = n.add_pod(
            "p1",
            "web",
            "front-1",
            POD_SLICE,
            &ann(&[
                ("home.softpart.io/pod", "node=1"),
                ("balance.softpart.io/pod", "true"),
            ]),
        );
        assert!(n.wanted().is_empty());
        assert_eq!(ig.len(), 2, "{ig:?}");
        assert_eq!(ig[1].pod, "web/front-1");
        assert_eq!(ig[1].key, "home.softpart.io/pod");
        assert_eq!(ig[1].value, "node=1");
        assert!(ig[1].reason.contains("\"web\""), "{ig:?}");
        // A pod without softpart annotations is not reported.
        assert!(
            n.add_pod("p2", "web", "x", POD_SLICE, &ann(&[("a", "b")]))
                .is_empty()
        );
    }

    #[test]
    fn a_bad_annotation_is_reported_and_the_pod_still_runs_without_a_home() {
        let mut n = Node::new(Allowed::All);
        let ig = n.add_pod(
            "p1",
            "db",
            "pg-0",
            POD_SLICE,
            &ann(&[("home.softpart.io/pod", "node=x")]),
        );
        assert_eq!(ig.len(), 1);
        assert!(ig[0].reason.contains("not a number"), "{ig:?}");
        assert!(n.wanted().is_empty());
    }

    #[test]
    fn reconcile_clears_the_plugins_stale_homes_gives_the_missing_and_leaves_others_alone() {
        let mut n = Node::new(Allowed::All);
        n.add_pod(
            "p1",
            "db",
            "pg-0",
            POD_SLICE,
            &ann(&[("home.softpart.io/pod", "node=1")]),
        );
        n.add_pod(
            "p2",
            "batch",
            "job",
            "kubepods-besteffort-poduid2.slice",
            &ann(&[("balance.softpart.io/pod", "true")]),
        );
        let w = n.wanted();
        let job = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poduid2.slice";
        // Nothing listed: both are given.
        let a = reconcile(&w, &[]);
        assert_eq!(a.len(), 2);
        // Listed as given (the balanced one placed): nothing to do; an
        // operator's home and a gone pod's are told apart.
        let l = vec![
            listed(POD_CG, "kubernetes db/pg-0 node=1"),
            listed(job, "balancer, kubernetes batch/job"),
            listed("/system.slice/x.service", "softpart prefer"),
            listed("/kubepods.slice/gone.slice", "kubernetes old/pod node=0"),
        ];
        assert_eq!(
            reconcile(&w, &l),
            vec![Action::Clear {
                cgroup: "/kubepods.slice/gone.slice".into()
            }]
        );
        // The pod's home listed with another value, or as an operator's
        // (restored without its source): given again with the wanted one.
        for source in ["kubernetes db/pg-0 node=0", "softpart prefer"] {
            let l = vec![
                listed(POD_CG, source),
                listed(job, "balancer, kubernetes batch/job"),
            ];
            let a = reconcile(&w, &l);
            assert!(
                matches!(&a[..], [Action::Give { cgroup, .. }] if cgroup == POD_CG),
                "{source}: {a:?}"
            );
        }
    }
}
