//! The operator's interface: the softpart CLI, the config file, refused
//! mistakes and the statistics report.

use super::*;

pub(super) const TESTS: &[(&str, Check)] = &[
    ("cli_shows_a_cgroup_home", cli_shows_cgroup_home),
    ("cli_rejects_bad_input_naming_it", cli_rejects_bad_input),
    ("cli_exec_home_survives_exec_and_fork", cli_exec_inherits),
    (
        "cli_task_home_overrides_and_clears",
        cli_task_home_and_clear,
    ),
    ("config_file_gives_new_cgroups_homes", config_file_homes),
    ("stats_report_groups_and_partitions", stats_report),
    ("operator_mistakes_are_refused", operator_mistakes_refused),
    ("cli_sets_a_group_softness", cli_group_softness),
];

/// The softpart run's probe whose command starts with `prefix`.
fn probe<'a>(r: &'a Results, prefix: &str) -> Result<&'a (String, i32, String)> {
    r.run_of("homes-two-instances", "softpart")?
        .probes
        .iter()
        .find(|(c, _, _)| c.starts_with(prefix))
        .with_context(|| format!("no probe {prefix:?}"))
}

fn cli_shows_cgroup_home(r: &Results) -> Result<String> {
    let (_, code, out) = probe(
        r,
        "softpart show --pid $(head -1 /sys/fs/cgroup/bench/inst0",
    )?;
    if *code != 0 || !out.contains("preferred: 0-3") || !out.contains("cgroup /bench/inst0") {
        bail!("exit {code}: {out}");
    }
    Ok("show reports preferred 0-3 from cgroup /bench/inst0".into())
}

fn cli_rejects_bad_input(r: &Results) -> Result<String> {
    use softpart_core::control::exit;
    // (command, what its message must name, the exit status it must give)
    let cases = [
        ("softpart prefer --pid 999999", "999999", exit::REFUSED),
        ("softpart prefer --pid 1 --cpus 0-99", "8-99", exit::REFUSED),
        ("softpart prefer --pid 1 --cpus 3-1", "3-1", exit::USAGE),
        ("softpart prefer --pid 1 --node 7", "node 7", exit::REFUSED),
        (
            "softpart prefer --cgroup /no/such/group",
            "/no/such/group",
            exit::REFUSED,
        ),
        ("softpart prefer --pid 1,999999", "999999", exit::REFUSED),
        ("softpart prefer --pid 1 --cpus 0,,2", "0,,2", exit::USAGE),
        (
            "softpart exec --cpus 6-7 -- /no/such/command",
            "/no/such/command",
            exit::NOT_FOUND,
        ),
        (
            "softpart exec --cpus 6-7 -- /proc/version",
            "/proc/version",
            exit::CANNOT_RUN,
        ),
        (
            "SOFTPART_SOCKET=/tmp/nobody.sock softpart list",
            "/tmp/nobody.sock",
            exit::DOWN,
        ),
    ];
    for (cmd, named, status) in cases {
        let (_, code, out) = probe(r, cmd)?;
        // The probes that go on to `show` report the exit status in text.
        let got = match out.lines().find_map(|l| l.strip_prefix("exit ")) {
            Some(n) => n.trim().parse::<i32>().unwrap_or(-1),
            None => *code,
        };
        if got != i32::from(status) || !out.contains(named) {
            bail!(
                "{cmd}: exit {got} (want {status}), or the output does not name {named:?}: {out}"
            );
        }
        // Nothing applied: pid 1 kept no home.
        if out.contains("pid 1 (") && !out.contains("preferred: -") {
            bail!("{cmd} failed but changed pid 1's home: {out}");
        }
    }
    Ok(format!(
        "{} bad inputs rejected, each naming the value, with its documented exit status",
        cases.len()
    ))
}

fn cli_exec_inherits(r: &Results) -> Result<String> {
    for cmd in [
        "softpart exec --cpus 6-7 -- sh -c 'softpart show --pid $$'",
        "softpart exec --cpus 6-7 -- sh -c 'sleep 5 & softpart show --pid $!'",
    ] {
        let (_, code, out) = probe(r, cmd)?;
        if *code != 0 || !out.contains("preferred: 6-7") || !out.contains("its own") {
            bail!("{cmd}: exit {code}: {out}");
        }
    }
    Ok("exec'd command and its forked child both prefer 6-7".into())
}

fn cli_task_home_and_clear(r: &Results) -> Result<String> {
    let (_, code, out) = probe(r, "P=$(head -1 /sys/fs/cgroup/bench/inst1")?;
    // prefer --cpus 1, show, --clear, show: the task's own home, then its
    // cgroup's again.
    let at = |needle: &str| out.find(needle);
    let ok = *code == 0
        && matches!(
            (at("preferred: 1\n"), at("own home cleared"), at("preferred: 4-7")),
            (Some(a), Some(b), Some(c)) if a < b && b < c
        )
        && out.contains("cgroup /bench/inst1");
    if !ok {
        bail!("exit {code}: {out:?}");
    }
    Ok("task home 1 overrides cgroup 4-7; --clear falls back to the cgroup".into())
}

const CONFIG_POLICY: &str = "softpart:--config /etc/softpart.toml";

fn config_file_homes(r: &Results) -> Result<String> {
    let homes = [("inst0", 0..4), ("inst1", 4..8)];
    let sp = r.run_of("config-and-stats", CONFIG_POLICY)?;
    let ev = r.run_of("config-and-stats", "eevdf")?;
    let (l_sp, l_ev) = (locality(sp, &homes), locality(ev, &homes));
    if l_sp < 0.95 {
        bail!(
            "locality with config-file homes {:.1}% (eevdf {:.1}%), expected >= 95%",
            l_sp * 100.0,
            l_ev * 100.0
        );
    }
    Ok(format!(
        "locality {:.1}% (eevdf {:.1}%) with homes from two glob rules",
        l_sp * 100.0,
        l_ev * 100.0
    ))
}

/// The last `group LABEL` line of a --monitor output, as fields.
fn last_line<'a>(out: &'a str, prefix: &str) -> Option<Vec<&'a str>> {
    out.lines()
        .rev()
        .find(|l| l.trim_start().starts_with(prefix))
        .map(|l| l.split_whitespace().collect())
}

/// The value after `key` in a report line ("local 99.8%" -> 99.8).
fn field(words: &[&str], key: &str) -> Option<f64> {
    let i = words.iter().position(|w| *w == key)?;
    words
        .get(i + 1)?
        .trim_end_matches(['%', 's'])
        .trim_end_matches("u")
        .parse()
        .ok()
}

fn operator_mistakes_refused(r: &Results) -> Result<String> {
    let sp = r.run_of("config-and-stats", CONFIG_POLICY)?;
    let (_, _, out) = probe_of(sp, "if [ $(cat /sys/kernel/sched_ext/state) = enabled ]")?;
    if !out.contains("another scx_softpart is running") || out.contains("exit 0") {
        bail!("a second scx_softpart was not refused: {out}");
    }
    if !out.contains("first still answers") {
        bail!("the running scx_softpart lost its control socket: {out}");
    }
    let (_, _, out) = probe_of(
        sp,
        "timeout 20 scx_softpart --config /etc/softpart-bad.toml",
    )?;
    // 78 (EX_CONFIG): the status the unit does not restart on.
    if !out.contains("exit 78") || !out.contains("[[home]] #2") || !out.contains("8-99") {
        bail!("a bad config was not refused with exit 78 naming the entry and value: {out}");
    }
    if !out.lines().any(|l| l.trim() == "enabled") {
        bail!("the running scheduler was disturbed by a rejected start: {out}");
    }
    Ok("second instance refused (the first keeps its socket); bad config refused (exit 78) naming [[home]] #2 and CPUs 8-99".into())
}

fn stats_report(r: &Results) -> Result<String> {
    let sp = r.run_of("config-and-stats", CONFIG_POLICY)?;
    let (_, code, out) = probe_of(sp, "timeout 3.5 scx_softpart --monitor")?;
    // timeout ends the monitor with SIGTERM: 143 (or 124 from busybox).
    if ![0, 124, 143].contains(code) || !out.contains("[softpart]") {
        bail!("monitor exit {code}: {out}");
    }
    let mut seen = Vec::new();
    for (label, home, softness) in [
        ("/bench/inst0", "0-3", "100:1"),
        ("/bench/inst1", "4-7", "home-first"),
    ] {
        let w = last_line(out, &format!("group {label} "))
            .with_context(|| format!("no line for group {label}: {out}"))?;
        let local = field(&w, "local").context("no locality")?;
        let cpus = field(&w, "cpus").context("no cpus")?;
        let xnode = field(&w, "xnode").context("no xnode")?;
        if w.get(3) != Some(&home) || w.get(4) != Some(&softness) {
            bail!("group {label}: expected home {home} softness {softness}: {w:?}");
        }
        // Three CPU hogs that fit their node: all at home, ~3 CPUs.
        if local < 95.0 || !(2.0..=4.5).contains(&cpus) || xnode > 5.0 {
            bail!("group {label}: local {local}% cpus {cpus} xnode {xnode}/s: {w:?}");
        }
        seen.push(format!("{label} local {local}% cpus {cpus}"));
    }
    for part in ["part 0 ", "part 1 "] {
        let w = last_line(out, part).with_context(|| format!("no {part:?} line: {out}"))?;
        let util = field(&w, "util").context("no util")?;
        if !(50.0..=100.0).contains(&util) {
            bail!("{part}: util {util}% with 3 hogs on 4 CPUs: {w:?}");
        }
        seen.push(format!("{}util {util}%", part));
    }
    Ok(seen.join("; "))
}

fn cli_group_softness(r: &Results) -> Result<String> {
    let sp = r.run_of("config-and-stats", CONFIG_POLICY)?;
    let (_, code, out) = probe_of(
        sp,
        "softpart prefer --cgroup /bench/inst1 --node 1 --softness 5:4",
    )?;
    let w = last_line(out, "group /bench/inst1 ").with_context(|| format!("exit {code}: {out}"))?;
    if w.get(3) != Some(&"4-7") || w.get(4) != Some(&"5:4") {
        bail!("after --softness 5:4: {w:?}");
    }
    for (cmd, named) in [
        (
            "softpart prefer --cgroup /bench/inst1 --node 1 --softness 3",
            "\"3\"",
        ),
        ("softpart prefer --cgroup '' --node 0", "empty"),
    ] {
        let (_, code, out) = probe_of(sp, cmd)?;
        if *code == 0 || !out.contains(named) {
            bail!("{cmd}: exit {code}, does not name {named}: {out}");
        }
    }
    Ok(
        "inst1 reports softness 5:4 after prefer --softness; bad softness and empty path rejected"
            .into(),
    )
}
