//! `--metrics ADDR`: the scheduler's cumulative counters in the
//! OpenMetrics text format (which Prometheus reads), per group, per
//! partition and per cgroup of the cpu controller. Each scrape asks the
//! main loop for a snapshot of the counters, the same one `--stats` reads,
//! and encodes it with prometheus-client. The families are listed once,
//! in FAMILIES, which `--help-stats` prints too.

use crate::cli::CgroupSeries;
use crate::stats::{RawCounters, Snapshot};
use anyhow::{Context, Result};
use log::info;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use softpart_core::hist;
use softpart_core::metrics_http::Scrape as Served;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, sync_channel};
use std::time::Duration;

/// One metric family: name (without the `_total` a counter gets), help,
/// type, and the labels its series carry.
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: MetricType,
    pub labels: &'static [&'static str],
}

const fn fam(name: &'static str, help: &'static str, kind: MetricType) -> Family {
    Family {
        name,
        help,
        kind,
        labels: &[],
    }
}

const fn with(family: Family, labels: &'static [&'static str]) -> Family {
    Family { labels, ..family }
}

/// The label naming a group, in every family about one: a cgroup's path
/// from the cgroup2 root, `pid N,...` for threads given a home together,
/// `-` for the tasks without a home.
const GROUP: &[&str] = &["group"];

use MetricType::{Counter, Gauge, Histogram};

/// Every family served, in the order served. The first two are served
/// even while the scheduler attaches again (the rest wait for it).
pub const FAMILIES: &[Family] = &[
    with(
        fam(
            "softpart_build_info",
            "the running build: version and git commit, value 1",
            Gauge,
        ),
        &["version", "git"],
    ),
    fam(
        "softpart_attached",
        "1 while the BPF scheduler is attached, 0 while the control plane attaches it again",
        Gauge,
    ),
    fam(
        "softpart_restarts",
        "attachments after the first (the kernel detaches the scheduler at a CPU hotplug)",
        Counter,
    ),
    fam(
        "softpart_control_cpu_seconds",
        "CPU time of the control plane's main loop since the scheduler attached",
        Counter,
    ),
    with(
        fam(
            "softpart_control_map_bytes",
            "bytes the control plane's periodic work read from and wrote to the BPF maps (direction: read, written), since the scheduler attached",
            Counter,
        ),
        &["direction"],
    ),
    fam(
        "softpart_control_map_stats_read_bytes",
        "of the bytes read, those read only to answer statistics requests (softpart stat, its homes' samples each second for a minute after, the snapshot served here), since the scheduler attached",
        Counter,
    ),
    with(
        fam(
            "softpart_config_reloads",
            "config reloads by result (applied, refused)",
            Counter,
        ),
        &["result"],
    ),
    fam(
        "softpart_config_last_reload_successful",
        "1 if the last config load (at start or a reload) was applied, 0 if it was refused",
        Gauge,
    ),
    fam(
        "softpart_config_last_reload_success_timestamp_seconds",
        "when a config was last applied, at start or by a reload (seconds since the epoch)",
        Gauge,
    ),
    with(
        fam(
            "softpart_group_info",
            "a group (a cgroup or process set with a home): its home CPUs and softness, value 1",
            Gauge,
        ),
        &["group", "home", "softness"],
    ),
    with(
        fam(
            "softpart_group_run_seconds",
            "CPU time its tasks ran, at home or away from it (where)",
            Counter,
        ),
        &["group", "where"],
    ),
    with(
        fam(
            "softpart_group_locality_ratio",
            "share of its CPU time at home since the group began (groups with a home)",
            Gauge,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_group_spills",
            "tasks that began running away after running at home",
            Counter,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_group_returns",
            "tasks that began running at home after running away",
            Counter,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_group_run_delay_seconds",
            "run delay (runnable to running) of its tasks",
            Histogram,
        ),
        &["group", "le"],
    ),
    with(
        fam(
            "softpart_group_migrations",
            "task migrations by distance (smt, llc, node, xnode)",
            Counter,
        ),
        &["group", "distance"],
    ),
    with(
        fam(
            "softpart_group_xnode_moves",
            "homed tasks' cross-node moves by cause (spill_wakeup, return_wakeup, return_slice_end, return_queued, steal, evict, balancer, other)",
            Counter,
        ),
        &["group", "cause"],
    ),
    with(
        fam(
            "softpart_group_balancer_moves",
            "balanced groups: moves by the group balancer",
            Counter,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_partition_busy_seconds",
            "busy time of the partition's CPUs",
            Counter,
        ),
        &["partition"],
    ),
    with(
        fam(
            "softpart_partition_foreign_seconds",
            "time its CPUs gave to tasks homed elsewhere",
            Counter,
        ),
        &["partition"],
    ),
    with(
        fam(
            "softpart_partition_steals",
            "tasks its idle CPUs took from other partitions",
            Counter,
        ),
        &["partition"],
    ),
    with(
        fam("softpart_partition_cpus", "CPUs in the partition", Gauge),
        &["partition", "cpus"],
    ),
    with(
        fam(
            "softpart_partition_run_delay_seconds",
            "run delay of the waits that ended on its CPUs",
            Histogram,
        ),
        &["partition", "le"],
    ),
    with(
        fam(
            "softpart_cgroup_weight",
            "cpu.weight of a cgroup of the cpu controller",
            Gauge,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_cgroup_cap_cpus",
            "cpu.max in CPUs; no series for a cgroup without a cap",
            Gauge,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_cgroup_entitled_cpus",
            "CPUs its contract entitles it to against everyone's load now",
            Gauge,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_cgroup_run_seconds",
            "CPU time its own tasks ran",
            Counter,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_cgroup_throttled_seconds",
            "time it spent out of cpu.max budget",
            Counter,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_cgroup_throttles",
            "times it ran out of cpu.max budget",
            Counter,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_events",
            "fast-path events (wakeup picks, queueing, steals, ...) by name",
            Counter,
        ),
        &["event"],
    ),
    with(
        fam(
            "softpart_limit_refusals",
            "times each fixed-size table turned something away (softpart stat names the latest)",
            Counter,
        ),
        &["limit"],
    ),
    fam(
        "softpart_memory_follow",
        "1 while homed tenants' memory follows them to their homes' nodes, 0 when off",
        Gauge,
    ),
    fam(
        "softpart_memory_rate_bytes_per_second",
        "the most bytes moved per second host-wide ([memory] rate_mb_s)",
        Gauge,
    ),
    fam(
        "softpart_memory_peak_bytes_per_second",
        "the most bytes moved within one second since the scheduler attached",
        Gauge,
    ),
    fam(
        "softpart_memory_mover_cpu_seconds",
        "CPU time of the thread that moves pages",
        Counter,
    ),
    with(
        fam(
            "softpart_memory_bytes",
            "a home's movable memory (anonymous and shared) as last read, on its home's nodes (where=\"home\") and elsewhere (\"away\")",
            Gauge,
        ),
        &["group", "where"],
    ),
    with(
        fam(
            "softpart_memory_moved_bytes",
            "bytes of a home's memory moved to its home's nodes",
            Counter,
        ),
        GROUP,
    ),
    with(
        fam(
            "softpart_memory_refused_bytes",
            "bytes a pass meant to move and did not, by cause: reserve, rate, user_policy, shared, busy, no_memory, not_permitted",
            Counter,
        ),
        &["group", "cause"],
    ),
    with(
        fam(
            "softpart_memory_last_move_seconds_ago",
            "seconds since a home's memory last moved (no series before its first move)",
            Gauge,
        ),
        GROUP,
    ),
];

/// A family of one series.
const NO_LABELS: [(&str, &str); 0] = [];

/// Run-delay bucket bounds served, in ns: 10 µs to 10 s.
const DELAY_BOUNDS_NS: [u64; 13] = [
    10_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    50_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
];

/// Prints what is served, for `--help-stats`.
pub fn describe(w: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(
        w,
        "--metrics ADDR serves (OpenMetrics text at http://ADDR/metrics):"
    )?;
    for f in FAMILIES {
        let suffix = if matches!(f.kind, Counter) {
            "_total"
        } else {
            ""
        };
        let kind = match f.kind {
            Counter => "counter",
            Gauge => "gauge",
            _ => "histogram",
        };
        let labels = if f.labels.is_empty() {
            String::new()
        } else {
            format!("; labels {}", f.labels.join(", "))
        };
        writeln!(w, "  {}{suffix} ({kind}{labels}): {}", f.name, f.help)?;
    }
    Ok(())
}

/// A scrape's snapshot, encoded family by family, with the cgroups that
/// get series of their own.
#[derive(Debug)]
struct Scrape(Snapshot, CgroupSeries);

/// Whether a cgroup gets the softpart_cgroup_* series.
fn served(which: CgroupSeries, t: &crate::stats::RawTenant) -> bool {
    match which {
        CgroupSeries::All => true,
        CgroupSeries::Contract => t.weight != 100 || t.cap.is_some(),
        CgroupSeries::None => false,
    }
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn delay_buckets(c: &RawCounters) -> (f64, u64, Vec<(f64, u64)>) {
    let counts = hist::coarsen(&c.delay_hist, &DELAY_BOUNDS_NS);
    let mut buckets: Vec<(f64, u64)> = DELAY_BOUNDS_NS
        .iter()
        .zip(&counts)
        .map(|(&b, &n)| (secs(b), n))
        .collect();
    buckets.push((f64::INFINITY, counts[DELAY_BOUNDS_NS.len()]));
    (secs(c.delay_ns), counts.iter().sum(), buckets)
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::result::Result<(), std::fmt::Error> {
        let s = &self.0;
        let tenants: Vec<_> = s
            .tenants
            .iter()
            .filter(|(_, t)| served(self.1, t))
            .collect();
        let service = &s.service;
        for f in FAMILIES {
            if !service.attached && !matches!(f.name, "softpart_build_info" | "softpart_attached") {
                continue;
            }
            let mut me = enc.encode_descriptor(f.name, f.help, None, f.kind)?;
            macro_rules! counter {
                ($labels:expr, $v:expr) => {
                    me.encode_family(&$labels)?
                        .encode_counter::<NoLabelSet, _, u64>(&$v, None)?
                };
            }
            macro_rules! gauge {
                ($labels:expr, $v:expr) => {
                    me.encode_family(&$labels)?.encode_gauge(&$v)?
                };
            }
            macro_rules! histogram {
                ($labels:expr, $c:expr) => {{
                    let (sum, count, buckets) = delay_buckets($c);
                    me.encode_family(&$labels)?
                        .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?
                }};
            }
            match f.name {
                "softpart_build_info" => gauge!(
                    [
                        ("version", env!("CARGO_PKG_VERSION")),
                        ("git", env!("SOFTPART_GIT_REV"))
                    ],
                    1i64
                ),
                "softpart_attached" => gauge!(NO_LABELS, i64::from(service.attached)),
                "softpart_restarts" => counter!(NO_LABELS, u64::from(service.restarts)),
                "softpart_control_cpu_seconds" => me
                    .encode_family(&NO_LABELS)?
                    .encode_counter::<NoLabelSet, _, u64>(&service.cost.cpu_s, None)?,
                "softpart_control_map_bytes" => {
                    counter!([("direction", "read")], service.cost.map_read_bytes);
                    counter!([("direction", "written")], service.cost.map_written_bytes);
                }
                "softpart_control_map_stats_read_bytes" => {
                    counter!(NO_LABELS, service.cost.map_read_bytes_for_stats)
                }
                "softpart_config_reloads" => {
                    if let Some(r) = &service.reloads {
                        counter!([("result", "applied")], r.applied);
                        counter!([("result", "refused")], r.refused);
                    }
                }
                "softpart_config_last_reload_successful" => {
                    if let Some(r) = &service.reloads {
                        gauge!(NO_LABELS, i64::from(r.last_ok));
                    }
                }
                "softpart_config_last_reload_success_timestamp_seconds" => {
                    if let Some(r) = &service.reloads {
                        gauge!(NO_LABELS, r.last_success_unix);
                    }
                }
                "softpart_group_info" => {
                    for (g, (home, soft, _)) in &s.groups {
                        let home = if home.is_empty() { "-" } else { home.as_str() };
                        gauge!(
                            [
                                ("group", g.as_str()),
                                ("home", home),
                                ("softness", soft.as_str())
                            ],
                            1i64
                        );
                    }
                }
                "softpart_group_run_seconds" => {
                    for (g, (_, _, c)) in &s.groups {
                        counter!(
                            [("group", g.as_str()), ("where", "home")],
                            secs(c.run_home_ns)
                        );
                        counter!(
                            [("group", g.as_str()), ("where", "away")],
                            secs(c.run_away_ns)
                        );
                    }
                }
                "softpart_group_locality_ratio" => {
                    for (g, (home, _, c)) in &s.groups {
                        let all = c.run_home_ns + c.run_away_ns;
                        if !home.is_empty() && all > 0 {
                            gauge!([("group", g.as_str())], c.run_home_ns as f64 / all as f64);
                        }
                    }
                }
                "softpart_group_spills" => {
                    for (g, (_, _, c)) in &s.groups {
                        counter!([("group", g.as_str())], c.spills);
                    }
                }
                "softpart_group_returns" => {
                    for (g, (_, _, c)) in &s.groups {
                        counter!([("group", g.as_str())], c.returns);
                    }
                }
                "softpart_group_run_delay_seconds" => {
                    for (g, (_, _, c)) in &s.groups {
                        histogram!([("group", g.as_str())], c);
                    }
                }
                "softpart_group_migrations" => {
                    for (g, (_, _, c)) in &s.groups {
                        for (d, n) in ["smt", "llc", "node", "xnode"].iter().zip(c.migrations) {
                            counter!([("group", g.as_str()), ("distance", *d)], n);
                        }
                    }
                }
                "softpart_group_xnode_moves" => {
                    for (g, (home, _, c)) in &s.groups {
                        if home.is_empty() {
                            continue;
                        }
                        for (cause, n) in crate::stats::xnode_by_cause(&c.xnode, &[]) {
                            counter!([("group", g.as_str()), ("cause", cause.as_str())], n);
                        }
                    }
                }
                "softpart_group_balancer_moves" => {
                    for (g, (_, moves)) in &s.balanced {
                        counter!([("group", g.as_str())], *moves);
                    }
                }
                "softpart_partition_busy_seconds" => {
                    for (p, (_, _, c)) in &s.parts {
                        counter!([("partition", p.to_string())], secs(c.busy_ns));
                    }
                }
                "softpart_partition_foreign_seconds" => {
                    for (p, (_, _, c)) in &s.parts {
                        counter!([("partition", p.to_string())], secs(c.foreign_ns));
                    }
                }
                "softpart_partition_steals" => {
                    for (p, (_, _, c)) in &s.parts {
                        counter!([("partition", p.to_string())], c.steals);
                    }
                }
                "softpart_partition_cpus" => {
                    for (p, (cpus, nr, _)) in &s.parts {
                        gauge!(
                            [("partition", p.to_string()), ("cpus", cpus.clone())],
                            *nr as i64
                        );
                    }
                }
                "softpart_partition_run_delay_seconds" => {
                    for (p, (_, _, c)) in &s.parts {
                        histogram!([("partition", p.to_string())], c);
                    }
                }
                "softpart_cgroup_weight" => {
                    for (cg, t) in &tenants {
                        gauge!([("group", cg.as_str())], t.weight as i64);
                    }
                }
                "softpart_cgroup_cap_cpus" => {
                    for (cg, t) in &tenants {
                        if let Some(cap) = t.cap {
                            gauge!([("group", cg.as_str())], cap);
                        }
                    }
                }
                "softpart_cgroup_entitled_cpus" => {
                    for (cg, t) in &tenants {
                        gauge!([("group", cg.as_str())], t.entitled);
                    }
                }
                "softpart_cgroup_run_seconds" => {
                    for (cg, t) in &tenants {
                        counter!([("group", cg.as_str())], secs(t.run_ns));
                    }
                }
                "softpart_cgroup_throttled_seconds" => {
                    for (cg, t) in &tenants {
                        counter!([("group", cg.as_str())], secs(t.throttled_ns));
                    }
                }
                "softpart_cgroup_throttles" => {
                    for (cg, t) in &tenants {
                        counter!([("group", cg.as_str())], t.throttles);
                    }
                }
                "softpart_events" => {
                    for (name, n) in &s.events {
                        counter!([("event", *name)], *n);
                    }
                }
                "softpart_limit_refusals" => {
                    for (name, n) in &s.limits {
                        counter!([("limit", *name)], *n);
                    }
                }
                "softpart_memory_follow" => gauge!(NO_LABELS, i64::from(s.memory.follow)),
                "softpart_memory_rate_bytes_per_second" => {
                    gauge!(NO_LABELS, s.memory.rate_bytes_per_s as i64)
                }
                "softpart_memory_peak_bytes_per_second" => {
                    gauge!(NO_LABELS, s.memory.peak_bytes_per_s as i64)
                }
                "softpart_memory_mover_cpu_seconds" => me
                    .encode_family(&NO_LABELS)?
                    .encode_counter::<NoLabelSet, _, u64>(&s.memory.mover_cpu_s, None)?,
                "softpart_memory_bytes" => {
                    for t in &s.memory.tenants {
                        gauge!(
                            [("group", t.label.as_str()), ("where", "home")],
                            t.home_bytes as i64
                        );
                        gauge!(
                            [("group", t.label.as_str()), ("where", "away")],
                            t.away_bytes as i64
                        );
                    }
                }
                "softpart_memory_moved_bytes" => {
                    for t in &s.memory.tenants {
                        counter!([("group", t.label.as_str())], t.moved_bytes);
                    }
                }
                "softpart_memory_refused_bytes" => {
                    for t in &s.memory.tenants {
                        for (cause, b) in &t.refused_bytes {
                            counter!([("group", t.label.as_str()), ("cause", cause.as_str())], *b);
                        }
                    }
                }
                "softpart_memory_last_move_seconds_ago" => {
                    for t in &s.memory.tenants {
                        if let Some(ago) = t.last_move_s_ago {
                            me.encode_family(&[("group", t.label.as_str())])?
                                .encode_gauge(&ago)?;
                        }
                    }
                }
                other => unreachable!("family {other} has no encoder"),
            }
        }
        Ok(())
    }
}

/// The OpenMetrics text of one snapshot.
pub fn encode(snapshot: Snapshot, cgroups: CgroupSeries) -> Result<String> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape(snapshot, cgroups)));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .context("encoding the metrics")?;
    Ok(out)
}

/// How the metrics thread asks the main loop for a snapshot.
pub type SnapshotRequest = SyncSender<Snapshot>;

/// Serves `GET /metrics` on `addr`; each scrape sends a request on the
/// returned channel and waits (up to 5 s) for the main loop's snapshot.
/// While no scheduler is `attached` (the control plane attaches again
/// after a hotplug, for seconds), a scrape gets the build and
/// `softpart_attached 0` rather than an error.
pub fn serve(
    addr: &str,
    attached: Arc<AtomicBool>,
    cgroups: CgroupSeries,
) -> Result<Receiver<SnapshotRequest>> {
    let (tx, rx): (Sender<SnapshotRequest>, _) = std::sync::mpsc::channel();
    let render = move || {
        let (reply, answer) = sync_channel(1);
        let snap = tx
            .send(reply)
            .ok()
            .and_then(|()| answer.recv_timeout(Duration::from_secs(5)).ok())
            .or_else(|| (!attached.load(Ordering::Relaxed)).then(Snapshot::default));
        match snap.map(|snap| encode(snap, cgroups)) {
            Some(Ok(t)) => Served::Text(t),
            Some(Err(e)) => Served::Failed(format!("{e:#}")),
            None => Served::Unavailable("the scheduler did not answer".into()),
        }
    };
    softpart_core::metrics_http::serve(addr, render)?;
    info!("metrics at http://{addr}/metrics");
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EVENT_NAMES;
    use crate::stats::RawTenant;

    fn snapshot() -> Snapshot {
        let mut c = RawCounters {
            run_home_ns: 3_000_000_000,
            run_away_ns: 1_000_000_000,
            spills: 5,
            delay_ns: 2_000_000,
            nr_delays: 2,
            migrations: [1, 2, 3, 4],
            delay_hist: vec![0; hist::NR_BUCKETS],
            ..Default::default()
        };
        c.delay_hist[hist::bucket(20_000)] += 1;
        c.delay_hist[hist::bucket(1_900_000)] += 1;
        let mut s = Snapshot {
            events: vec![("pick_prev", 7)],
            limits: vec![("home_ids", 2)],
            service: crate::stats::ServiceState {
                attached: true,
                restarts: 0,
                reloads: Some(crate::reload::Reloads::started(1_700_000_000.0)),
                cost: softpart_core::control::ControlCost {
                    secs: 10.0,
                    cpu_s: 0.25,
                    map_read_bytes: 4096,
                    map_read_bytes_for_stats: 1024,
                    map_written_bytes: 64,
                    ..Default::default()
                },
            },
            ..Default::default()
        };
        s.groups
            .insert("/db".into(), ("0-3".into(), "home-first".into(), c.clone()));
        s.parts.insert(0, ("0-3".into(), 4, c));
        s.tenants.insert(
            "/db".into(),
            RawTenant {
                weight: 300,
                cap: Some(1.5),
                throttled_ns: 500_000_000,
                ..Default::default()
            },
        );
        s
    }

    #[test]
    fn every_family_is_served_and_described() {
        let text = encode(snapshot(), CgroupSeries::Contract).unwrap();
        let mut help = Vec::new();
        describe(&mut help).unwrap();
        let help = String::from_utf8(help).unwrap();
        for f in FAMILIES {
            assert!(
                text.contains(&format!("# HELP {} ", f.name)),
                "{} not served",
                f.name
            );
            assert!(help.contains(f.name), "{} not described", f.name);
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn while_detached_only_the_build_and_the_attach_state_are_served() {
        let text = encode(Snapshot::default(), CgroupSeries::Contract).unwrap();
        assert!(text.contains("softpart_attached 0\n"), "{text}");
        assert!(text.contains("softpart_build_info{version="), "{text}");
        assert!(
            !text.contains("softpart_config_last_reload_successful"),
            "{text}"
        );
        assert!(!text.contains("softpart_group_run_seconds"), "{text}");
    }

    #[test]
    fn a_refused_reload_reads_as_unsuccessful_with_the_last_good_time() {
        let mut s = snapshot();
        let mut r = crate::reload::Reloads::started(1_700_000_000.0);
        r.record(false, 1_700_000_100.0);
        s.service.reloads = Some(r);
        let text = encode(s, CgroupSeries::Contract).unwrap();
        for line in [
            "softpart_attached 1\n",
            "softpart_config_last_reload_successful 0\n",
            "softpart_config_last_reload_success_timestamp_seconds 1700000000.0\n",
            "softpart_config_reloads_total{result=\"refused\"} 1\n",
            "softpart_config_reloads_total{result=\"applied\"} 0\n",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
    }

    #[test]
    fn every_series_carries_only_the_labels_its_family_lists() {
        let text = encode(snapshot(), CgroupSeries::All).unwrap();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            let f = FAMILIES
                .iter()
                .find(|f| {
                    name.strip_prefix(f.name).is_some_and(|rest| {
                        ["", "_total", "_bucket", "_sum", "_count"].contains(&rest)
                    })
                })
                .unwrap_or_else(|| panic!("{name}: no family"));
            if let Some(labels) = line
                .split_once('{')
                .map(|(_, l)| l.split('}').next().unwrap())
            {
                for pair in labels.split("\",").filter(|p| !p.is_empty()) {
                    let label = pair.split('=').next().unwrap();
                    assert!(
                        f.labels.contains(&label),
                        "{name}: label {label} not listed"
                    );
                }
            }
        }
    }

    #[test]
    fn cgroups_without_a_contract_get_series_only_when_asked() {
        let mut s = snapshot();
        s.tenants.insert(
            "/plain".into(),
            RawTenant {
                weight: 100,
                run_ns: 1_000_000,
                ..Default::default()
            },
        );
        let contract = encode(s.clone(), CgroupSeries::Contract).unwrap();
        let all = encode(s.clone(), CgroupSeries::All).unwrap();
        let none = encode(s, CgroupSeries::None).unwrap();
        assert!(contract.contains("softpart_cgroup_weight{group=\"/db\"} 300"));
        assert!(!contract.contains("group=\"/plain\""), "{contract}");
        assert!(all.contains("softpart_cgroup_weight{group=\"/plain\"} 100"));
        // No cap: no cap series, not a 0.
        assert!(
            !all.contains("softpart_cgroup_cap_cpus{group=\"/plain\"}"),
            "{all}"
        );
        assert!(!none.contains("softpart_cgroup_weight{"), "{none}");
    }

    /// The series a scrape carries: README's figures (about 90 fixed, 35
    /// a homed and balanced group, 20 a partition, 6 a capped cgroup, one
    /// fewer for a cgroup without a cap).
    #[test]
    fn series_per_group_partition_and_cgroup_are_as_documented() {
        let series = |s: &Snapshot| {
            let text = encode(s.clone(), CgroupSeries::Contract).unwrap();
            text.lines().filter(|l| !l.starts_with('#')).count()
        };
        let mut s = Snapshot {
            service: snapshot().service,
            events: EVENT_NAMES.iter().map(|&e| (e, 0)).collect(),
            ..Default::default()
        };
        let fixed = series(&s);
        let (c, t) = (
            snapshot().groups["/db"].2.clone(),
            snapshot().tenants["/db"].clone(),
        );
        s.groups
            .insert("/g".into(), ("0-3".into(), "home-first".into(), c.clone()));
        s.balanced.insert("/g".into(), (Some(0), 0));
        let group = series(&s) - fixed;
        s.parts.insert(0, ("0-3".into(), 4, c));
        let part = series(&s) - fixed - group;
        s.tenants.insert("/g".into(), t);
        let cgroup = series(&s) - fixed - group - part;
        s.tenants.insert(
            "/weighted".into(),
            RawTenant {
                weight: 300,
                ..Default::default()
            },
        );
        let uncapped = series(&s) - fixed - group - part - cgroup;
        assert_eq!((group, part, cgroup, uncapped), (35, 20, 6, 5));
        assert!((80..=90).contains(&fixed), "fixed {fixed}");
    }

    #[test]
    fn values_read_as_the_counters_say() {
        let text = encode(snapshot(), CgroupSeries::Contract).unwrap();
        for line in [
            "softpart_group_run_seconds_total{group=\"/db\",where=\"home\"} 3.0",
            "softpart_group_locality_ratio{group=\"/db\"} 0.75",
            "softpart_control_cpu_seconds_total 0.25",
            "softpart_control_map_bytes_total{direction=\"read\"} 4096",
            "softpart_control_map_stats_read_bytes_total 1024",
            "softpart_group_spills_total{group=\"/db\"} 5",
            "softpart_group_migrations_total{group=\"/db\",distance=\"xnode\"} 4",
            "softpart_group_run_delay_seconds_count{group=\"/db\"} 2",
            "softpart_group_run_delay_seconds_bucket{le=\"0.00005\",group=\"/db\"} 1",
            "softpart_group_run_delay_seconds_bucket{le=\"0.0025\",group=\"/db\"} 2",
            "softpart_group_run_delay_seconds_bucket{le=\"+Inf\",group=\"/db\"} 2",
            "softpart_cgroup_throttled_seconds_total{group=\"/db\"} 0.5",
            "softpart_cgroup_weight{group=\"/db\"} 300",
            "softpart_cgroup_cap_cpus{group=\"/db\"} 1.5",
            "softpart_events_total{event=\"pick_prev\"} 7",
            "softpart_limit_refusals_total{limit=\"home_ids\"} 2",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
    }
}
