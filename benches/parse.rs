//! Parse throughput on a realistic 254 KB vLLM page (four models on two engines, every
//! histogram vLLM exports): infscale's profile read and full scan against a full parse of the
//! same page by the `prometheus-parse` crate (on a colon-free copy, so both read every series).
//!
//! Run with `scripts/bench-parse.sh`, which prints the medians in MB/s and the ratio.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use infscale_core::observe::metrics::exposition::{collect, scan, Sample, Visitor};
use infscale_core::observe::metrics::{read_page, ServerChoice};
use std::hint::black_box;

fn page(name: &str) -> String {
    let path = format!("{}/fixtures/bench/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Wants nothing: the cost of validating every line without materialising a sample.
struct Nothing;

impl Visitor for Nothing {
    fn wants(&mut self, _: &str) -> bool {
        false
    }
    fn sample(&mut self, _: &Sample<'_>) {}
}

fn bench(c: &mut Criterion) {
    let with_colons = page("vllm-large.prom");
    let colon_free = page("vllm-large-nocolon.prom");
    assert_eq!(with_colons.len(), colon_free.len());
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(with_colons.len() as u64));
    group.bench_function("infscale_profile", |b| {
        b.iter(|| read_page(black_box(with_colons.as_bytes()), ServerChoice::Auto))
    });
    group.bench_function("infscale_validate_only", |b| {
        b.iter(|| scan(black_box(with_colons.as_bytes()), &mut Nothing))
    });
    group.bench_function("infscale_collect_all", |b| {
        b.iter(|| collect(black_box(colon_free.as_bytes())))
    });
    group.bench_function("prometheus_parse_full", |b| {
        b.iter(|| {
            let lines = black_box(&colon_free).lines().map(|l| Ok(l.to_owned()));
            prometheus_parse::Scrape::parse(lines)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
