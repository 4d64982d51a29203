//! The cgroup CPU contract: cgroups share contended CPUs by cpu.weight.

use super::*;

pub(super) const TESTS: &[(&str, Check)] = &[("weights_split_contended_cpus", weights_split)];

/// A group's CPU time per second of the run.
fn cpus_of(run: &RunResult, name: &str) -> Result<f64> {
    let g = group(run, name)?;
    Ok(g.counters.total_cpu_ns() as f64 / run.wall_ns.max(1) as f64)
}

fn weights_split(r: &Results) -> Result<String> {
    let sp = r.run_of("weights", "softpart")?;
    let ev = r.run_of("weights", "eevdf")?;
    let (light, heavy) = (cpus_of(sp, "light")?, cpus_of(sp, "heavy")?);
    let (ev_light, ev_heavy) = (cpus_of(ev, "light")?, cpus_of(ev, "heavy")?);
    // Entitled 2 and 6 CPUs: 1:3. Shared by task it would be 3:1; a
    // third either side of 1:3 tells the two apart without flaking.
    let ratio = heavy / light.max(1e-9);
    if !(2.0..=4.0).contains(&ratio) {
        bail!(
            "heavy (weight 300) got {heavy:.2} CPUs against light's (weight 100) {light:.2}: \
             {ratio:.2}x, expected about 3x (eevdf: {ev_heavy:.2} against {ev_light:.2})"
        );
    }
    if heavy < 0.75 * 6.0 {
        bail!("heavy got {heavy:.2} CPUs of its entitled 6 (eevdf: {ev_heavy:.2})");
    }
    Ok(format!(
        "heavy {heavy:.2}, light {light:.2} CPUs ({ratio:.2}x; entitled 6 and 2; eevdf {ev_heavy:.2} and {ev_light:.2})"
    ))
}
