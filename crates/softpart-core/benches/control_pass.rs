//! The control plane's per-pass work at a large host's sizes, without a
//! kernel: the cgroup contract (charge rates and entitlements, every
//! contract refresh) over 2,048 and 16,384 cgroups, and the group
//! balancer's decision (every balance period) for 16 groups, the most it
//! searches exactly, and for 4,096 homes, which it places greedily.
//! `cargo bench -p softpart-core`; figures in docs/results/scale.md.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use softpart_core::balance::{self, Group, Part};
use softpart_core::shares::{CgroupLoad, contract_pass};
use std::hint::black_box;

/// A container or VM host's tree: the root, slices of 256 cgroups each;
/// every 8th cgroup capped, every 4th weighted other than 100, half of
/// them with runnable tasks.
fn tree(n: usize) -> Vec<CgroupLoad> {
    let slices = n.div_ceil(256);
    let mut out = vec![CgroupLoad {
        parent: None,
        weight: 100,
        cap: None,
        runnable_weight: 0.0,
        runnable: 0.0,
    }];
    for s in 0..slices {
        out.push(CgroupLoad {
            parent: Some(0),
            weight: 100 + (s as u32 % 5) * 50,
            cap: None,
            runnable_weight: 0.0,
            runnable: 0.0,
        });
    }
    for i in out.len()..n {
        let busy = i % 2 == 0;
        out.push(CgroupLoad {
            parent: Some(1 + i % slices),
            weight: if i % 4 == 0 {
                50 + (i as u32 % 400)
            } else {
                100
            },
            cap: (i % 8 == 0).then_some(0.5 + (i % 3) as f64),
            runnable_weight: if busy {
                100.0 * (1 + i % 3) as f64
            } else {
                0.0
            },
            runnable: if busy { (1 + i % 3) as f64 } else { 0.0 },
        });
    }
    out
}

fn contract(c: &mut Criterion) {
    let mut g = c.benchmark_group("contract_pass");
    for n in [2_048, 16_384] {
        let cgroups = tree(n);
        // One pass: the rates and the entitlements, what the control
        // plane runs at each contract refresh.
        g.bench_with_input(BenchmarkId::new("pass", n), &cgroups, |b, cg| {
            b.iter(|| black_box(contract_pass(black_box(cg), 384.0)))
        });
    }
    g.finish();
}

fn balancer(c: &mut Criterion) {
    let mut g = c.benchmark_group("balance_step");
    let parts = vec![
        Part {
            capacity: 48.0,
            background: 4.0,
        };
        8
    ];
    // 16 groups all in one partition: the exact search's hardest start.
    let crowded: Vec<Group> = (0..16)
        .map(|i| Group {
            load: 2.0 + (i % 5) as f64,
            home: Some(0),
        })
        .collect();
    g.bench_function("16_groups_exact", |b| {
        b.iter(|| black_box(balance::step(black_box(&parts), black_box(&crowded), 0.1)))
    });
    let many: Vec<Group> = (0..4_096)
        .map(|i| Group {
            load: 0.05 + (i % 7) as f64 * 0.02,
            home: Some(i % 8),
        })
        .collect();
    g.bench_function("4096_groups_greedy", |b| {
        b.iter(|| black_box(balance::step(black_box(&parts), black_box(&many), 0.1)))
    });
    g.finish();
}

criterion_group!(benches, contract, balancer);
criterion_main!(benches);
