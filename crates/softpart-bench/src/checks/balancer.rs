//! The group balancer: groups settled apart, capacity kept, steady state
//! and a phase change.

use super::*;

pub(super) const TESTS: &[(&str, Check)] = &[
    ("balancer_settles_groups_apart", balancer_settles_apart),
    ("balancer_loses_no_capacity", balancer_capacity),
    ("balancer_still_in_steady_state", balancer_steady),
    ("balancer_resettles_after_a_phase_change", balancer_phase),
];

/// Each group's share of its CPU time in the 4-CPU partition it uses most,
/// and that partition.
fn exclusivity(run: &RunResult, group_name: &str) -> Result<(f64, usize)> {
    let g = group(run, group_name)?;
    let per_part: Vec<u64> = (0..4)
        .map(|p| g.counters.cpu_ns.iter().skip(p * 4).take(4).sum())
        .collect();
    let total: u64 = per_part.iter().sum();
    let (best, ns) = per_part
        .iter()
        .enumerate()
        .max_by_key(|(_, n)| **n)
        .map(|(i, n)| (i, *n))
        .unwrap_or((0, 0));
    Ok((ns as f64 / total.max(1) as f64, best))
}

fn balancer_settles_apart(r: &Results) -> Result<String> {
    let bal = r.run_of("balance-4n2c2t", BALANCE_POLICY)?;
    let ev = r.run_of("balance-4n2c2t", "eevdf")?;
    let mut used = std::collections::BTreeSet::new();
    let mut seen = Vec::new();
    for name in ["g0", "g1", "g2", "g3"] {
        let (e, part) = exclusivity(bal, name)?;
        let (e_ev, _) = exclusivity(ev, name)?;
        // Measured 86-95% (the balancer's target is 95%: a known miss); eevdf ~66%.
        if e < 0.75 {
            bail!(
                "{name}: {:.1}% in its partition (eevdf {:.1}%)",
                e * 100.0,
                e_ev * 100.0
            );
        }
        used.insert(part);
        seen.push(format!(
            "{name} {:.1}% (eevdf {:.1}%)",
            e * 100.0,
            e_ev * 100.0
        ));
    }
    if used.len() != 4 {
        bail!("groups share partitions {used:?}: {}", seen.join(", "));
    }
    Ok(format!("one partition each: {}", seen.join(", ")))
}

fn balancer_capacity(r: &Results) -> Result<String> {
    let bal = granted(r.run_of("balance-4n2c2t", BALANCE_POLICY)?);
    let none = granted(r.run_of("balance-4n2c2t", "softpart-nohome")?);
    let ev = granted(r.run_of("balance-4n2c2t", "eevdf")?);
    if bal < 0.9 * none {
        bail!("balanced {bal:.2} CPU-s/s, shared {none:.2}");
    }
    Ok(format!(
        "granted balanced {bal:.2}, shared (no homes) {none:.2}, eevdf {ev:.2} CPU-s/s"
    ))
}

fn balancer_steady(r: &Results) -> Result<String> {
    let bal = r.run_of("balance-4n2c2t", BALANCE_POLICY)?;
    let (_, code, table) = probe_of(bal, "softpart stat")?;
    let (_, _, json) = bal
        .probes
        .iter()
        .find(|(c, _, _)| c == "softpart stat --json")
        .context("no stat --json probe")?;
    let v: softpart_core::control::StatView =
        serde_json::from_str(json).with_context(|| format!("stat --json: {json}"))?;
    let window = scenario("balance-4n2c2t")?.duration_s;
    if *code != 0 || table.matches(" *").count() != 4 || v.groups.len() != 4 {
        bail!("stat exit {code}, expected 4 groups with a starred home:\n{table}");
    }
    let mut moves = 0;
    for g in &v.groups {
        if g.part.is_none() {
            bail!("{} not placed:\n{table}", g.label);
        }
        if g.last_move_s_ago.is_some_and(|s| s < window) {
            bail!(
                "{} moved {:.1} s before the end of a {window} s steady window:\n{table}",
                g.label,
                g.last_move_s_ago.unwrap_or(0.0)
            );
        }
        moves += g.moves;
    }
    Ok(format!(
        "4 groups placed, none moved in the window ({moves} moves before it)"
    ))
}

fn balancer_phase(r: &Results) -> Result<String> {
    let run = r.run_of("balance-phase", BALANCE_POLICY)?;
    let (_, code, out) = probe_of(run, "cat /tmp/phase.txt")?;
    let figs = crate::table::probe_figures(run);
    let (Some(moves), Some(periods)) =
        (figs.get("moves_after_change"), figs.get("resettle_periods"))
    else {
        bail!("no figures (exit {code}): {out}");
    };
    // 5 + 3 on two 4-CPU partitions: a 1-thread group must move.
    if *moves < 1.0 {
        bail!("no move after the load doubled: {out}");
    }
    if *periods > 5.0 {
        bail!("settled again only after {periods} periods: {out}");
    }
    Ok(format!(
        "{moves} move(s); settled {periods} periods after the change"
    ))
}
