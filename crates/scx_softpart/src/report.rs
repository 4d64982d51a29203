//! What the scheduler reports: the balancer's table (`softpart stat`), the
//! scx_stats snapshot (`--stats`, `--monitor`) and the counters printed at
//! exit.

use crate::Scheduler;
use crate::bpf_skel::types;
use crate::{EVENT_NAMES, bpf_intf, homes, monotonic_ns, stats};
use libbpf_rs::{MapCore, MapFlags};
use softpart_core::control::{GroupView, Held, PartView, StatView};
use softpart_core::cpulist;

impl Scheduler<'_> {
    /// The balancer's report (`softpart stat`).
    pub(crate) fn stat(&self) -> StatView {
        let now = std::time::Instant::now();
        StatView {
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
                    overfull: self.overfull_steal
                        && self.balancer.overfull.get(i).copied().unwrap_or(false),
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
                        .zip(self.skel.maps.bss_data.as_ref())
                        .map(|(id, bss)| &bss.group_stats[id as usize]);
                    GroupView {
                        label: g.label.clone(),
                        part: g.part,
                        load: g.load,
                        part_load: g.part_load.clone(),
                        exclusivity: g.exclusivity(),
                        moves: g.moves,
                        last_move_s_ago: g.last_move.map(|t| now.duration_since(t).as_secs_f64()),
                        away_s: away.map_or(0.0, |gs| gs.run_away_ns as f64 / 1e9),
                        away_with_room_s: away.map_or(0.0, |gs| gs.run_away_room_ns as f64 / 1e9),
                    }
                })
                .collect(),
            held: self.held(),
        }
    }

    fn held(&self) -> Held {
        Held {
            task_homes: self.skel.maps.task_homes.keys().count(),
            cgroup_homes: self.skel.maps.cgroup_homes.keys().count(),
            home_ids: self.homes.iter().count(),
            balanced: self.balancer.groups.len(),
            restarts: self.restarts,
        }
    }

    /// One JSON line with the fast path's counters, for tests and scripts.
    pub(crate) fn print_counters(&self) {
        let Some(bss) = self.skel.maps.bss_data.as_ref() else {
            return;
        };
        let fields: Vec<String> = EVENT_NAMES
            .iter()
            .zip(bss.stats.iter())
            .map(|(n, v)| format!("\"{n}\":{v}"))
            .collect();
        println!("{{\"softpart_counters\":{{{}}}}}", fields.join(","));
    }

    fn hist(&self, slot: u32) -> Vec<u64> {
        self.skel
            .maps
            .delay_hists
            .lookup(&slot.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .map(|v| {
                v.chunks_exact(8)
                    .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn raw_group(&self, bss: &types::bss, slot: u32) -> stats::RawCounters {
        let g = &bss.group_stats[slot as usize];
        stats::RawCounters {
            run_home_ns: g.run_home_ns,
            run_away_ns: g.run_away_ns,
            spills: g.spills,
            returns: g.returns,
            delay_ns: g.delay_ns,
            nr_delays: g.nr_delays,
            migrations: g.migrations,
            delay_hist: self.hist(slot),
            ..Default::default()
        }
    }

    /// Everything `--stats` reports, as of now.
    pub(crate) fn snapshot(&self) -> stats::Snapshot {
        let mut snap = stats::Snapshot {
            at_ns: monotonic_ns(),
            ..Default::default()
        };
        let Some(bss) = self.skel.maps.bss_data.as_ref() else {
            return snap;
        };
        snap.events = EVENT_NAMES.iter().copied().zip(bss.stats).collect();
        for (id, home) in self.homes.iter() {
            snap.groups.insert(
                home.label.clone(),
                (
                    cpulist::format(&home.cpus),
                    home.softness.unwrap_or(self.softness).to_string(),
                    self.raw_group(bss, id),
                ),
            );
        }
        snap.groups.insert(
            "-".into(),
            (
                String::new(),
                "-".into(),
                self.raw_group(bss, homes::MAX_HOMES as u32),
            ),
        );
        for g in self.balancer.groups.values() {
            snap.balanced.insert(g.label.clone(), (g.part, g.moves));
        }
        let first_part_slot = bpf_intf::softpart_consts_SP_NR_GROUP_SLOTS;
        for (i, cpus) in self.parts.iter().enumerate() {
            let p = &bss.part_stats[i];
            snap.parts.insert(
                i as u32,
                (
                    cpulist::format(cpus),
                    cpus.len(),
                    stats::RawCounters {
                        delay_ns: p.delay_ns,
                        nr_delays: p.nr_delays,
                        steals: p.steals,
                        foreign_ns: p.foreign_ns,
                        busy_ns: cpus.iter().filter_map(|&c| bss.cpu_busy_ns.get(c)).sum(),
                        delay_hist: self.hist(first_part_slot + i as u32),
                        ..Default::default()
                    },
                ),
            );
        }
        snap
    }
}
