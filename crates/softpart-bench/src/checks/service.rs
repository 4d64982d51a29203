//! The service's operations on a host, by hand (service-ops.toml):
//! metrics scraped, a config checked without attaching, a reload applied whole or refused,
//! `softpart list`, run-time homes kept across a restart, and `softpart
//! exec` with no scheduler running.

use super::*;

pub(super) const TESTS: &[(&str, Check)] = &[
    (
        "metrics_rise_between_scrapes_and_match_help_stats",
        metrics_scraped,
    ),
    ("config_is_checked_without_attaching", config_checked),
    ("reload_applies_a_good_config", reload_applies),
    (
        "reload_refuses_a_broken_config_and_keeps_the_old",
        reload_refuses,
    ),
    ("runtime_homes_survive_a_restart", homes_survive_restart),
    (
        "exec_runs_its_command_while_no_scheduler_runs",
        exec_while_down,
    ),
];

fn ops_probe<'a>(r: &'a Results, prefix: &str) -> Result<&'a (String, i32, String)> {
    probe_of(r.run("service-ops")?, prefix)
}

/// The `softpart list` line for a cgroup, if any.
fn list_line<'a>(out: &'a str, cgroup: &str) -> Option<&'a str> {
    out.lines()
        .find(|l| l.starts_with("cgroup") && l.split_whitespace().nth(1) == Some(cgroup))
}

/// The value ending each line of `out` that starts with `prefix`.
fn sample_values(out: &str, prefix: &str) -> Vec<f64> {
    out.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

/// inst0 (two CPU-bound tasks homed on node 0, two of its four CPUs) runs at
/// home between two scrapes a second apart, the first 2 s after the homes
/// were given (the steady state, not the first scan's moment), as an
/// operator's `rate()` over the counters shows it. The since-start gauge
/// also counts the time before the first scan gave the homes, so it is
/// only checked to be served and a ratio.
fn metrics_scraped(r: &Results) -> Result<String> {
    let (_, _, out) = ops_probe(r, "sleep 2; wget -q -O /tmp/m1")?;
    let series = "softpart_group_run_seconds_total{group=\"/bench/inst0\",where=";
    let home = sample_values(out, &format!("{series}\"home\"}}"));
    let away = sample_values(out, &format!("{series}\"away\"}}"));
    let (&[h1, h2], &[a1, a2]) = (&home[..], &away[..]) else {
        bail!("expected inst0's home and away run time in both scrapes: {out}");
    };
    if h2 <= h1 {
        bail!("inst0's home run time did not rise between the scrapes ({h1} then {h2}): {out}");
    }
    if a2 < a1 {
        bail!("inst0's away run time fell between the scrapes ({a1} then {a2}): {out}");
    }
    let between = (h2 - h1) / (h2 - h1 + a2 - a1);
    if between < 0.9 {
        bail!(
            "inst0's locality between the scrapes {:.1}% (below 90%): {out}",
            between * 100.0
        );
    }
    let gauge = sample_values(out, "softpart_group_locality_ratio{group=\"/bench/inst0\"}");
    let Some(&since_start) = gauge.first().filter(|l| (0.0..=1.0).contains(*l)) else {
        bail!("inst0's locality gauge missing or not a ratio: {out}");
    };
    if !out.contains("families match") {
        bail!("what is served differs from --help-stats: {out}");
    }
    Ok(format!(
        "inst0 at home {h1:.2} s then {h2:.2} s; locality {:.1}% between the scrapes, {:.1}% since it began; families as --help-stats lists them",
        between * 100.0,
        since_start * 100.0
    ))
}

fn config_checked(r: &Results) -> Result<String> {
    let (_, _, out) = ops_probe(r, "scx_softpart --check-config")?;
    let mut parts = out.split("exit ");
    let good = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    if rest.first().map(|s| s.trim_start().starts_with('0')) != Some(true)
        || !good.contains("/bench/inst0  CPUs 4-7")
    {
        bail!("a good config was not passed with its homes: {out}");
    }
    if rest.get(1).map(|s| s.trim_start().starts_with('1')) != Some(true)
        || !out.contains("[[home]] #2")
        || !out.contains("[[home]] #1")
    {
        bail!("a duplicate rule was not refused naming both entries: {out}");
    }
    Ok(
        "good file: exit 0, its home listed; duplicate rule: exit 1 naming [[home]] #2 and #1"
            .into(),
    )
}

fn reload_applies(r: &Results) -> Result<String> {
    let (_, _, before) = ops_probe(r, "n=0; until grep -q 'prefers CPUs'")?;
    let inst0 = list_line(before, "/bench/inst0").unwrap_or_default();
    let inst1 = list_line(before, "/bench/inst1").unwrap_or_default();
    if !inst0.contains("CPUs 0-3") || !inst0.contains("config rule") || !inst1.contains("CPUs 4-7")
    {
        bail!("the config's homes were not listed at start: {before}");
    }
    let (_, _, after) = ops_probe(r, "cp /etc/softpart/next.toml")?;
    let inst0 = list_line(after, "/bench/inst0").unwrap_or_default();
    if !inst0.contains("CPUs 4-7") || !inst0.contains("config rule") {
        bail!("inst0 did not get the reloaded rule's home: {after}");
    }
    if list_line(after, "/bench/inst1").is_some() {
        bail!("inst1 kept a home no rule gives any more: {after}");
    }
    if !after.contains("preferred: 4-7") {
        bail!("inst0's tasks do not use the new home: {after}");
    }
    Ok("inst0 moved from 0-3 to 4-7, inst1's home gone with its rule, tasks follow".into())
}

fn reload_refuses(r: &Results) -> Result<String> {
    let (_, _, out) = ops_probe(r, "cp /etc/softpart/broken.toml")?;
    if !out.contains("reload refused") || !out.contains("node = 7") {
        bail!("the broken config's reload was not refused naming the field: {out}");
    }
    let inst0 = list_line(out, "/bench/inst0").unwrap_or_default();
    if !inst0.contains("CPUs 4-7") {
        bail!("the running config did not stay: {out}");
    }
    Ok("refused naming node = 7; inst0 keeps CPUs 4-7".into())
}

fn homes_survive_restart(r: &Results) -> Result<String> {
    let (_, _, out) = ops_probe(r, "p=$(head -1")?;
    let inst1 = list_line(out, "/bench/inst1").unwrap_or_default();
    if !inst1.contains("CPUs 4-7") || !inst1.contains("softpart prefer") {
        bail!("the cgroup home set with prefer did not come back: {out}");
    }
    if !out.contains("preferred: 2-3") {
        bail!("the thread home set with prefer did not come back: {out}");
    }
    let inst0 = list_line(out, "/bench/inst0").unwrap_or_default();
    if !inst0.contains("config rule") {
        bail!("the config's home was not given again: {out}");
    }
    Ok(
        "after a restart: thread home 2-3 and cgroup /bench/inst1 4-7 back, inst0 from its rule"
            .into(),
    )
}

fn exec_while_down(r: &Results) -> Result<String> {
    let (_, _, out) = ops_probe(r, "old=$(cat /tmp/sched.pid); kill -INT")?;
    if !out.contains("the command ran") || !out.contains("exit 0") || !out.contains("warning") {
        bail!("exec did not run its command with a warning while down: {out}");
    }
    Ok("the command ran (exit 0) with a warning".into())
}
