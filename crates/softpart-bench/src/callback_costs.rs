//! Where the scheduler's time goes: the kernel's run time and call count of
//! every BPF program (kernel.bpf_stats_enabled, which the agent turns on),
//! read on both sides of the measured window (scenario key
//! `callback_costs`). Each of scx_softpart's sched_ext callbacks is its own
//! struct_ops program, so the figures say how much of the machine each
//! callback took; every other BPF program (the observer's tracing, present
//! under every policy) is summed into one baseline of what a BPF call
//! costs on the same guest. The kernel times a program with the guest's
//! clock, so under TCG a vCPU that the host deschedules in the middle of a
//! call counts that time too, as it does for the tasks' CPU time.

use crate::plan::ProgCost;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// sched_ext_ops members, to name a callback from its program's name,
/// which the kernel truncates to 15 characters ("softpart_dispat").
const CALLBACKS: &[&str] = &[
    "select_cpu",
    "enqueue",
    "dequeue",
    "dispatch",
    "tick",
    "runnable",
    "running",
    "stopping",
    "quiescent",
    "yield",
    "core_sched_before",
    "set_weight",
    "set_cpumask",
    "update_idle",
    "cpu_acquire",
    "cpu_release",
    "init_task",
    "exit_task",
    "enable",
    "disable",
    "dump",
    "dump_cpu",
    "dump_task",
    "cgroup_init",
    "cgroup_exit",
    "cgroup_prep_move",
    "cgroup_move",
    "cgroup_cancel_move",
    "cgroup_set_weight",
    "cpu_online",
    "cpu_offline",
    "init",
    "exit",
];

/// Run time and calls so far, struct_ops programs by callback name, every
/// other program under the key "other".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Costs(pub BTreeMap<String, ProgCost>);

/// The label the key "other" gets in the figures.
pub const OTHER: &str = "other";

impl Costs {
    /// Every BPF program on the machine now.
    pub fn read() -> Costs {
        let mut c = Costs::default();
        for p in libbpf_rs::query::ProgInfoIter::default() {
            let name = p.name.to_string_lossy();
            let key = if p.ty == libbpf_rs::ProgramType::StructOps {
                callback_name(&name)
            } else {
                OTHER.to_string()
            };
            c.add(&key, p.run_time_ns, p.run_cnt);
            if let Some(e) = c.0.get_mut(&key) {
                e.verified_insns += u64::from(p.verified_insns);
            }
        }
        c
    }

    pub fn add(&mut self, key: &str, run_ns: u64, calls: u64) {
        let e = self.0.entry(key.to_string()).or_default();
        e.run_ns += run_ns;
        e.calls += calls;
    }

    /// The select_cpu callbacks' share, as the tables' select_cpu cost row
    /// reports it; None where no scheduler has one.
    pub fn select_cpu(&self) -> Option<ProgCost> {
        self.0.get("select_cpu").copied()
    }

    /// What ran between `self` (read first) and `later`. A program that
    /// appeared in between counts from zero; one that went counts nothing.
    pub fn since(&self, later: &Costs) -> Costs {
        let mut d = Costs::default();
        for (k, b) in &later.0 {
            let a = self.0.get(k).copied().unwrap_or_default();
            d.0.insert(
                k.clone(),
                ProgCost {
                    run_ns: b.run_ns.saturating_sub(a.run_ns),
                    calls: b.calls.saturating_sub(a.calls),
                    verified_insns: b.verified_insns,
                },
            );
        }
        d
    }
}

/// The callback a struct_ops program implements: its name past the
/// scheduler's prefix (up to the first '_'), completed to the one
/// sched_ext_ops member it begins (an exact match first); the truncated
/// remainder where none or several do.
pub fn callback_name(prog: &str) -> String {
    let rest = prog.split_once('_').map_or(prog, |(_, r)| r);
    if CALLBACKS.contains(&rest) {
        return rest.to_string();
    }
    let mut matches = CALLBACKS.iter().filter(|c| c.starts_with(rest));
    match (matches.next(), matches.next()) {
        (Some(only), None) if !rest.is_empty() => only.to_string(),
        _ => rest.to_string(),
    }
}

/// `figure` lines for the programs that ran in a window of `window_s`:
/// per callback `cb_NAME_ms_per_s` (CPU-ms per s over the whole machine)
/// and `cb_NAME_us_per_call`; the callbacks' sum as `cb_all_cpu_s_per_s`,
/// `cb_all_calls_per_s` and `cb_all_us_per_call`; the other programs as
/// `other_bpf_ms_per_s` and `other_bpf_us_per_call`. Nothing for a
/// program not called, nothing at all for an empty window.
pub fn figures(d: &Costs, window_s: f64) -> String {
    let mut text = String::new();
    if window_s <= 0.0 {
        return text;
    }
    let us_per_call = |c: &ProgCost| c.run_ns as f64 / c.calls as f64 / 1e3;
    let mut all = ProgCost::default();
    for (name, c) in d.0.iter().filter(|(_, c)| c.calls > 0) {
        if name == OTHER {
            let _ = writeln!(
                text,
                "figure other_bpf_ms_per_s {:.3}",
                c.run_ns as f64 / 1e6 / window_s
            );
            let _ = writeln!(text, "figure other_bpf_us_per_call {:.3}", us_per_call(c));
            continue;
        }
        all.run_ns += c.run_ns;
        all.calls += c.calls;
        let _ = writeln!(
            text,
            "figure cb_{name}_ms_per_s {:.3}",
            c.run_ns as f64 / 1e6 / window_s
        );
        let _ = writeln!(text, "figure cb_{name}_us_per_call {:.3}", us_per_call(c));
        if c.verified_insns > 0 {
            let _ = writeln!(text, "figure cb_{name}_verified_insns {}", c.verified_insns);
        }
    }
    if all.calls > 0 {
        let _ = writeln!(
            text,
            "figure cb_all_cpu_s_per_s {:.3}",
            all.run_ns as f64 / 1e9 / window_s
        );
        let _ = writeln!(
            text,
            "figure cb_all_calls_per_s {:.0}",
            all.calls as f64 / window_s
        );
        let _ = writeln!(text, "figure cb_all_us_per_call {:.3}", us_per_call(&all));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(text: &str, name: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("figure {name} ")))
            .map(|v| v.parse().unwrap())
    }

    #[test]
    fn truncated_program_names_become_their_callbacks() {
        assert_eq!(callback_name("softpart_select"), "select_cpu");
        assert_eq!(callback_name("softpart_dispat"), "dispatch");
        assert_eq!(callback_name("softpart_runnin"), "running");
        assert_eq!(callback_name("softpart_runnab"), "runnable");
        assert_eq!(callback_name("softpart_update"), "update_idle");
        assert_eq!(callback_name("softpart_init_t"), "init_task");
        assert_eq!(callback_name("softpart_cgroup"), "cgroup");
        // Exact before prefix: "init" also begins "init_task".
        assert_eq!(callback_name("softpart_init"), "init");
        assert_eq!(callback_name("softpart_exit"), "exit");
        assert_eq!(callback_name("softpart_tick"), "tick");
        assert_eq!(callback_name("lonely"), "lonely");
    }

    #[test]
    fn figures_cover_the_window_only() {
        let mut a = Costs::default();
        a.add("dispatch", 5_000_000, 1_000);
        a.add("select_cpu", 1_000_000, 100);
        a.add(OTHER, 7_000_000, 10);
        let mut b = a.clone();
        // 2 s window: dispatch 400 ms over 20 000 calls, select_cpu idle,
        // enqueue new (loaded in between), the observer 10 ms over 1 000.
        b.add("dispatch", 400_000_000, 20_000);
        b.add("enqueue", 100_000_000, 5_000);
        b.add(OTHER, 10_000_000, 1_000);
        b.0.get_mut("dispatch").unwrap().verified_insns = 4_321;
        let d = a.since(&b);
        assert_eq!(
            d.select_cpu(),
            Some(ProgCost {
                run_ns: 0,
                calls: 0,
                verified_insns: 0
            })
        );
        let t = figures(&d, 2.0);
        assert_eq!(figure(&t, "cb_dispatch_ms_per_s"), Some(200.0));
        assert_eq!(figure(&t, "cb_dispatch_us_per_call"), Some(20.0));
        assert_eq!(figure(&t, "cb_enqueue_ms_per_s"), Some(50.0));
        assert_eq!(figure(&t, "cb_dispatch_verified_insns"), Some(4_321.0));
        assert_eq!(figure(&t, "cb_enqueue_verified_insns"), None);
        assert_eq!(figure(&t, "cb_select_cpu_ms_per_s"), None);
        assert_eq!(figure(&t, "cb_all_cpu_s_per_s"), Some(0.25));
        assert_eq!(figure(&t, "cb_all_calls_per_s"), Some(12_500.0));
        assert_eq!(figure(&t, "cb_all_us_per_call"), Some(20.0));
        assert_eq!(figure(&t, "other_bpf_ms_per_s"), Some(5.0));
        assert_eq!(figure(&t, "other_bpf_us_per_call"), Some(10.0));
    }

    #[test]
    fn no_scheduler_leaves_only_the_baseline() {
        let mut a = Costs::default();
        a.add(OTHER, 0, 0);
        let mut b = Costs::default();
        b.add(OTHER, 3_000_000, 300);
        let t = figures(&a.since(&b), 3.0);
        assert_eq!(figure(&t, "cb_all_cpu_s_per_s"), None);
        assert_eq!(figure(&t, "other_bpf_ms_per_s"), Some(1.0));
        assert!(figures(&a.since(&b), 0.0).is_empty());
    }
}
