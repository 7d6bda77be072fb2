//! The simulator's speed on the three runs the README quotes: the default `simulate` (seven
//! policies and the clairvoyant bound on the 25-minute default trace), one policy over a
//! 24-hour trace at 30 req/s, `tune` over 500 points of the default trace on all cores, and
//! `simulate --seeds 100` (the seven policies and each seed's bound on seeds 1..100, generating
//! the traces included).
//!
//! Run with `scripts/bench-sim.sh`, which prints the medians.

use criterion::{criterion_group, criterion_main, Criterion};
use infscale_core::policy::Policy;
use infscale_core::sim::bound::clairvoyant;
use infscale_core::sim::gpu::GpuModel;
use infscale_core::sim::replica::Hardware;
use infscale_core::sim::run::{run, Settings};
use infscale_core::sim::seeds::{judge, Day};
use infscale_core::sim::trace::Scenario;
use infscale_core::sim::tune::{run_points, sample, Grid};
use std::hint::black_box;

const DEFAULT_POLICIES: [&str; 7] = [
    "cpu:60,max=8",
    "cpu:25,max=8",
    "queue:24,max=8",
    "queue:24,lookahead=90,max=8",
    "queue:24,min=0,cooldown=120,max=8",
    "queue:192,lookahead=45,forecast=history,downwindow=30,max=8",
    "queue:192,lookahead=45,forecast=history,downwindow=30,min=0,cooldown=60,max=8",
];

fn bench(c: &mut Criterion) {
    let hw = Hardware::new(GpuModel::default());
    let settings = Settings::default();
    let mut group = c.benchmark_group("sim");
    group.sample_size(10);

    group.bench_function("default_run_all_policies", |b| {
        b.iter(|| {
            let trace = Scenario::default_day().generate().unwrap();
            for spec in DEFAULT_POLICIES {
                let p = Policy::parse(spec).unwrap();
                black_box(run(&trace, &hw, &p, &settings));
            }
            black_box(clairvoyant(&trace, &hw, &settings, 64))
        })
    });

    let day = Scenario::steady(30.0, 86_400.0, 1).generate().unwrap();
    let queue = Policy::parse("queue:24,max=8").unwrap();
    group.bench_function("day_30rps_one_policy", |b| {
        b.iter(|| black_box(run(&day, &hw, &queue, &settings)))
    });
    group.bench_function("day_30rps_bound", |b| {
        b.iter(|| black_box(clairvoyant(&day, &hw, &settings, 64)))
    });

    let trace = Scenario::default_day().generate().unwrap();
    let specs = sample(Grid::default().policies(), 500);
    let policies: Vec<Policy> = specs.iter().map(|s| Policy::parse(s).unwrap()).collect();
    let days = Day::all(vec![trace], &hw, &settings);
    group.bench_function("tune_500_points", |b| {
        b.iter(|| black_box(run_points(&specs, &policies, &days, &|| {})))
    });
    let specs: Vec<String> = DEFAULT_POLICIES.iter().map(|s| s.to_string()).collect();
    let policies: Vec<Policy> = specs.iter().map(|s| Policy::parse(s).unwrap()).collect();
    group.bench_function("seeds_100_all_policies", |b| {
        b.iter(|| {
            let traces: Vec<_> = (1..=100)
                .map(|seed| {
                    let mut scenario = Scenario::default_day();
                    scenario.seed = seed;
                    scenario.generate().unwrap()
                })
                .collect();
            let days = Day::all(traces, &hw, &settings);
            black_box(judge(&specs, &policies, &days, 64, &|| {}))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
