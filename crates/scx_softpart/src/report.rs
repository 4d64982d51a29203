//! What the scheduler reports: the balancer's table (`softpart stat`), the
//! scx_stats snapshot (`--stats`, `--monitor`) and the counters printed at
//! exit.

use crate::Scheduler;
use crate::bpf_skel::types::sp_cg_budget;
use crate::{EVENT_NAMES, counters, monotonic_ns, stats};
use libbpf_rs::MapCore;
use log::info;
use softpart_core::control::{GroupView, Held, HomeMovesView, PartView, StatView, TenantView};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long after a `softpart stat` request every home's counters are
/// still read each second: a monitor that polls keeps the rates a second
/// wide, and while nobody asks they cost nothing (a read is one entry per
/// home per CPU id: 6 MB at 500 homes and 64 CPUs).
const HOME_READERS_KEEP: Duration = Duration::from_secs(60);

/// A request finds a sample older than this stale and takes one.
const HOME_SAMPLE_FRESH_NS: u64 = 2_000_000_000;

/// Each homed group's counters at the last two samples: (when, by label).
#[derive(Default)]
pub(crate) struct HomeSamples {
    prev: Option<(u64, BTreeMap<String, stats::RawCounters>)>,
    last: Option<(u64, BTreeMap<String, stats::RawCounters>)>,
    /// Sampled each second until then (`HOME_READERS_KEEP` after a request).
    readers_until: Option<Instant>,
}

impl HomeSamples {
    /// Whether someone asked lately, so that a sample each second is read.
    pub(crate) fn wanted(&self, now: Instant) -> bool {
        self.readers_until.is_some_and(|t| now < t)
    }

    /// The time between the last two samples, s (0 without two).
    fn window_s(&self) -> f64 {
        match (&self.prev, &self.last) {
            (Some((t0, _)), Some((t1, _))) => t1.saturating_sub(*t0) as f64 / 1e9,
            _ => 0.0,
        }
    }

    /// The moves per s of each group between the last two samples.
    fn rates(&self) -> Vec<HomeMovesView> {
        let (Some((t0, before)), Some((t1, now))) = (&self.prev, &self.last) else {
            return Vec::new();
        };
        let secs = t1.saturating_sub(*t0) as f64 / 1e9;
        if secs <= 0.0 {
            return Vec::new();
        }
        let zero = stats::RawCounters::default();
        now.iter()
            .map(|(label, c)| {
                let p = before.get(label).unwrap_or(&zero);
                HomeMovesView {
                    label: label.clone(),
                    spills_per_s: c.spills.saturating_sub(p.spills) as f64 / secs,
                    returns_per_s: c.returns.saturating_sub(p.returns) as f64 / secs,
                    xnode_per_s: stats::xnode_by_cause(&c.xnode, &p.xnode)
                        .into_iter()
                        .map(|(k, n)| (k, n as f64 / secs))
                        .collect(),
                }
            })
            .collect()
    }
}
use softpart_core::cpulist;

impl Scheduler<'_> {
    /// Takes each homed group's counters, for `softpart stat`'s rates.
    pub(crate) fn sample_homes(&mut self) {
        let groups: BTreeMap<String, stats::RawCounters> = self
            .homes
            .iter()
            .map(|(id, home)| {
                (
                    home.label.clone(),
                    counters::group_counts(&self.group_stats, id),
                )
            })
            .collect();
        // Each home's counters, one copy per CPU id.
        self.traffic
            .read_for_stats::<crate::bpf_intf::sp_group_stats>(
                groups.len() * self.group_stats.nr_cpus(),
            );
        self.home_samples.prev = self.home_samples.last.take();
        self.home_samples.last = Some((monotonic_ns(), groups));
    }

    /// A `softpart stat` request: the report, its homes' rates over the
    /// last two samples; a sample taken now if the last is stale (the
    /// rates then span the time since the one before), and one each
    /// second for `HOME_READERS_KEEP` from now.
    pub(crate) fn stat_request(&mut self) -> StatView {
        let stale = self
            .home_samples
            .last
            .as_ref()
            .is_none_or(|(t, _)| monotonic_ns().saturating_sub(*t) > HOME_SAMPLE_FRESH_NS);
        if stale {
            self.sample_homes();
        }
        self.home_samples.readers_until = Some(Instant::now() + HOME_READERS_KEEP);
        let (view, budgets_read) = self.stat();
        // Each balanced group's counters (one copy per CPU id), each
        // tenant's budget, and the keys of the thread and cgroup homes.
        let homed = view
            .groups
            .iter()
            .filter(|g| self.homes.find(&g.label).is_some());
        self.traffic
            .read_for_stats::<crate::bpf_intf::sp_group_stats>(
                homed.count() * self.group_stats.nr_cpus(),
            );
        self.traffic.read_for_stats::<sp_cg_budget>(budgets_read);
        self.traffic
            .read_for_stats::<crate::bpf_skel::types::sp_cgroup>(self.cgroup_table.slots().len());
        self.traffic.read_for_stats::<u32>(view.held.task_homes);
        self.traffic.read_for_stats::<u64>(view.held.cgroup_homes);
        view
    }

    /// The balancer's report (`softpart stat`), and how many tenants'
    /// budgets it read.
    fn stat(&self) -> (StatView, usize) {
        let now = std::time::Instant::now();
        let slots = self.tenant_slots();
        let budgets_read = slots.len();
        let view = StatView {
            period_ms: self.balance_period.as_millis() as u64,
            parts: self
                .parts
                .iter()
                .enumerate()
                .map(|(i, cpus)| PartView {
                    id: i,
                    cpus: cpulist::format(cpus),
                    load: self.balancer.part_load.get(i).copied().unwrap_or(0.0),
                    demand: self.balancer.relative_demand.get(i).copied().unwrap_or(0.0),
                    overfull: self.balancer.overfull.get(i).copied().unwrap_or(false),
                })
                .collect(),
            groups: self
                .balancer
                .groups
                .values()
                .map(|g| {
                    let away = self
                        .homes
                        .find(&g.label)
                        .map(|id| counters::group_counts(&self.group_stats, id));
                    GroupView {
                        label: g.label.clone(),
                        part: g.part,
                        load: g.load,
                        part_load: g.part_load.clone(),
                        exclusivity: g.exclusivity(),
                        moves: g.moves,
                        last_move_s_ago: g.last_move.map(|t| now.duration_since(t).as_secs_f64()),
                        away_s: away.as_ref().map_or(0.0, |gs| gs.run_away_ns as f64 / 1e9),
                        away_with_room_s: away
                            .as_ref()
                            .map_or(0.0, |gs| gs.run_away_room_ns as f64 / 1e9),
                    }
                })
                .collect(),
            held: self.held(),
            tenants: Self::tenants(slots),
            homes: self.home_samples.rates(),
            homes_window_s: self.home_samples.window_s(),
            limits: self.limits.view(&crate::limits::all(self.homes.capacity())),
            cost: self.cost(),
            memory: self.memory.view(),
        };
        (view, budgets_read)
    }

    /// The control plane's cost since the attachment (traffic.rs).
    pub(crate) fn cost(&self) -> softpart_core::control::ControlCost {
        softpart_core::control::ControlCost {
            secs: self.attached_at.elapsed().as_secs_f64(),
            cpu_s: crate::traffic::thread_cpu_ns().saturating_sub(self.cpu_at_attach) as f64 / 1e9,
            map_read_bytes: self.traffic.read,
            map_written_bytes: self.traffic.written,
            map_read_bytes_for_stats: self.traffic.read_for_stats,
            cpu_s_by_phase: self.phase_cpu.secs(),
            map_read_bytes_by_phase: self.phase_cpu.read_bytes(),
            runs: self.phase_cpu.runs(),
        }
    }

    /// The cgroups `softpart stat` and `--stats` list: a contract set or
    /// CPU time run.
    fn tenant_slots(&self) -> Vec<(String, &crate::contract::CgroupView, sp_cg_budget)> {
        let Some(bss) = self.skel.maps.bss_data.as_ref() else {
            return Vec::new();
        };
        let mut out: Vec<_> = self
            .contract
            .view
            .iter()
            .filter(|(_, v)| v.weight != 100 || v.cap.is_some() || v.run_ns > 0)
            .filter_map(|(cgid, v)| {
                let path = self.cgroup_paths.get(cgid)?;
                let b = bss.cg_budgets.get(v.slot).copied().unwrap_or_default();
                Some((path.clone(), v, b))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn tenants(
        slots: Vec<(String, &crate::contract::CgroupView, sp_cg_budget)>,
    ) -> Vec<TenantView> {
        slots
            .into_iter()
            .filter(|(_, v, _)| v.weight != 100 || v.cap.is_some() || v.cpus_used >= 0.01)
            .map(|(path, v, b)| TenantView {
                path,
                weight: v.weight,
                cap_cpus: v.cap,
                entitled_cpus: v.entitled,
                cpus_used: v.cpus_used,
                throttled_s: b.throttled_ns as f64 / 1e9,
                throttles: b.nr_throttled,
            })
            .collect()
    }

    fn held(&self) -> Held {
        Held {
            task_homes: self.skel.maps.task_homes.keys().count(),
            cgroup_homes: self.skel.maps.cgroup_homes.keys().count(),
            home_ids: self.homes.iter().count(),
            balanced: self.balancer.groups.len(),
            restarts: self.restarts,
            cgroup_slots: self.cgroup_slots_in_use(),
        }
    }

    /// The cgroup slots taken now: the table up to the highest slot ever
    /// taken, not its 16,384 entries.
    fn cgroup_slots_in_use(&self) -> usize {
        self.skel.maps.bss_data.as_ref().map_or(0, |bss| {
            // SAFETY: an aligned u32 of the mapped .bss, written whole.
            let used = unsafe { std::ptr::read_volatile(&bss.cgroups_used) } as usize;
            bss.cgroups[..used.min(bss.cgroups.len())]
                .iter()
                .filter(|c| c.cgid != 0)
                .count()
        })
    }

    /// One JSON line with the fast path's counters, for tests and scripts.
    pub(crate) fn print_counters(&self) {
        let per_cpu = counters::cpu_stats(&self.skel.maps);
        let events = counters::events(&per_cpu);
        let mut fields: Vec<String> = EVENT_NAMES
            .iter()
            .zip(events)
            .map(|(n, v)| format!("\"{n}\":{v}"))
            .collect();
        // The longest wait and (--diag) the most rounds any task waited.
        let most = |f: fn(&crate::bpf_intf::sp_cpu_stats) -> u64| per_cpu.iter().map(f).max();
        fields.push(format!(
            "\"max_delay_ns\":{}",
            most(|c| c.max_delay_ns).unwrap_or(0)
        ));
        fields.push(format!(
            "\"max_wait_rounds\":{}",
            most(|c| c.max_wait_rounds).unwrap_or(0)
        ));
        info!(
            "exit counters: {{\"softpart_counters\":{{{}}}}}",
            fields.join(",")
        );
    }

    /// Everything `--stats` reports, as of now.
    pub(crate) fn snapshot(&mut self) -> stats::Snapshot {
        let mut snap = stats::Snapshot {
            at_ns: monotonic_ns(),
            service: stats::ServiceState {
                attached: true,
                restarts: self.restarts,
                reloads: Some(self.reloads.clone()),
                cost: self.cost(),
            },
            ..Default::default()
        };
        snap.memory = self.memory.view();
        snap.limits = crate::limits::all(self.homes.capacity())
            .iter()
            .map(|l| (l.name, self.limits.hits(l.name)))
            .collect();
        let maps = &self.skel.maps;
        let per_cpu = counters::cpu_stats(maps);
        snap.events = EVENT_NAMES
            .iter()
            .copied()
            .zip(counters::events(&per_cpu))
            .collect();
        for (id, home) in self.homes.iter() {
            snap.groups.insert(
                home.label.clone(),
                (
                    cpulist::format(&home.cpus),
                    home.softness.unwrap_or(self.softness).to_string(),
                    counters::group(maps, &self.group_stats, id),
                ),
            );
        }
        snap.groups.insert(
            "-".into(),
            (
                String::new(),
                "-".into(),
                counters::group(maps, &self.group_stats, self.homes.capacity() as u32),
            ),
        );
        for g in self.balancer.groups.values() {
            snap.balanced.insert(g.label.clone(), (g.part, g.moves));
        }
        for (path, v, b) in self.tenant_slots() {
            snap.tenants.insert(
                path,
                stats::RawTenant {
                    weight: v.weight,
                    cap: v.cap,
                    entitled: v.entitled,
                    run_ns: v.run_ns,
                    throttled_ns: b.throttled_ns,
                    throttles: b.nr_throttled,
                },
            );
        }
        for (i, cpus) in self.parts.iter().enumerate() {
            let mut raw = counters::partition(&per_cpu, cpus);
            raw.busy_ns = self.busy_ns(cpus);
            snap.parts
                .insert(i as u32, (cpulist::format(cpus), cpus.len(), raw));
        }
        // Every CPU's counters, and every home's (and the homeless
        // slot's) per CPU id, histograms per load domain, budgets.
        let nr_cpus = self.group_stats.nr_cpus();
        let slots = snap.groups.len();
        self.traffic
            .read_for_stats::<crate::bpf_intf::sp_cpu_stats>(per_cpu.len());
        self.traffic
            .read_for_stats::<crate::bpf_intf::sp_group_stats>(slots * nr_cpus);
        self.traffic.read_for_stats::<crate::bpf_intf::sp_hist>(
            slots * counters::hist_domains(&self.skel.maps),
        );
        self.traffic
            .read_for_stats::<sp_cg_budget>(snap.tenants.len());
        snap
    }
}
