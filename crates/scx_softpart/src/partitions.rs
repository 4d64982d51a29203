//! Which partition each CPU belongs to: the operator's `--partitions`, or by
//! default one per NUMA node, split per LLC when a node has several.

use anyhow::{Result, bail};
use scx_utils::Topology;
use softpart_core::{cpulist, partition};
use std::collections::BTreeSet;

use crate::bpf_intf;

pub fn from_topology(topo: &Topology, spec: Option<&str>) -> Result<Vec<BTreeSet<usize>>> {
    let present: BTreeSet<usize> = topo.all_cpus.keys().copied().collect();
    let max = bpf_intf::softpart_consts_SP_MAX_PARTS as usize;
    if let Some(spec) = spec {
        return partition::parse(spec, &present, max).map_err(anyhow::Error::msg);
    }
    let mut parts = Vec::new();
    for node in topo.nodes.values() {
        if node.llcs.len() > 1 {
            for llc in node.llcs.values() {
                parts.push(llc.all_cpus.keys().copied().collect());
            }
        } else if !node.all_cpus.is_empty() {
            parts.push(node.all_cpus.keys().copied().collect());
        }
    }
    let parts: Vec<BTreeSet<usize>> = parts
        .into_iter()
        .filter(|p: &BTreeSet<usize>| !p.is_empty())
        .collect();
    if parts.len() > max {
        bail!(
            "this machine has {} NUMA nodes/LLCs, more than the {max} partitions supported: give --partitions",
            parts.len()
        );
    }
    Ok(parts)
}

pub fn describe(parts: &[BTreeSet<usize>]) -> String {
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| format!("PART-{i} {}", cpulist::format(p)))
        .collect::<Vec<_>>()
        .join(", ")
}
