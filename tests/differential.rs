//! infscale's exposition scanner against the `prometheus-parse` crate, on pages both can read.
//!
//! `prometheus-parse` drops series whose names hold a colon, splits label values on commas and
//! never unescapes them, so it is only a fair referee on colon-free pages with plain label
//! values. On those, both must see exactly the same samples: same names, labels and values.

use infscale_core::observe::metrics::exposition::collect;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// One sample, normalised: name, labels (with `le`/`quantile` as parsed numbers), value bits.
type Norm = (String, BTreeMap<String, String>, u64);

fn bound(v: f64) -> String {
    format!("{v:?}")
}

fn value_bits(v: f64) -> u64 {
    if v.is_nan() {
        f64::NAN.to_bits()
    } else {
        v.to_bits()
    }
}

fn ours(page: &str) -> Vec<Norm> {
    let (samples, scan) = collect(page.as_bytes());
    assert_eq!(scan.skipped, 0, "{:?}", scan.errors);
    let mut out: Vec<Norm> = samples
        .into_iter()
        .map(|s| {
            let labels = s
                .labels
                .into_iter()
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        "le" | "quantile" => bound(v.parse::<f64>().unwrap()),
                        _ => v,
                    };
                    (k, v)
                })
                .collect();
            (s.name, labels, value_bits(s.value))
        })
        .collect();
    out.sort();
    out
}

fn theirs(page: &str) -> Vec<Norm> {
    use prometheus_parse::{Scrape, Value};
    let lines = page.lines().map(|l| Ok(l.to_owned()));
    let scrape = Scrape::parse(lines).unwrap();
    let mut out = Vec::new();
    for s in scrape.samples {
        let labels: BTreeMap<String, String> = s
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => {
                out.push((s.metric, labels, value_bits(v)))
            }
            Value::Histogram(buckets) => {
                for b in buckets {
                    let mut labels = labels.clone();
                    labels.insert("le".into(), bound(b.less_than));
                    out.push((format!("{}_bucket", s.metric), labels, value_bits(b.count)));
                }
            }
            Value::Summary(quantiles) => {
                for q in quantiles {
                    let mut labels = labels.clone();
                    labels.insert("quantile".into(), bound(q.quantile));
                    out.push((s.metric.clone(), labels, value_bits(q.count)));
                }
            }
        }
    }
    out.sort();
    out
}

fn fixture(name: &str) -> String {
    let path = format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn same_samples_on_colon_free_fixtures() {
    for name in ["bench/vllm-large-nocolon.prom", "tgi.prom", "triton.prom"] {
        let page = fixture(name);
        let ours = ours(&page);
        assert!(ours.len() > 10, "{name}");
        assert_eq!(ours, theirs(&page), "{name}");
    }
}

#[test]
fn prometheus_parse_drops_colon_names_that_we_keep() {
    let page = fixture("vllm-busy.prom");
    let ours = ours(&page);
    let theirs = theirs(&page);
    let colon = |s: &&Norm| s.0.contains(':');
    assert!(ours.iter().filter(colon).count() > 100);
    assert_eq!(theirs.iter().filter(colon).count(), 0);
}

fn name() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,12}"
}

fn label_value() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ./-]{0,10}"
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-1e12f64..1e12f64),
        Just(0.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::NAN),
        (0u32..100_000).prop_map(f64::from),
    ]
}

fn render(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v:?}")
    }
}

#[derive(Debug, Clone)]
struct Family {
    name: String,
    kind: &'static str,
    series: Vec<(Vec<(String, String)>, f64)>,
}

fn family() -> impl Strategy<Value = Family> {
    // `le` and `quantile` are reserved for histogram and summary samples, which these
    // gauge/counter/untyped families are not.
    let label_name =
        "[a-z][a-z0-9_]{0,6}".prop_filter("reserved label", |k| k != "le" && k != "quantile");
    let labels = prop::collection::btree_map(label_name, label_value(), 0..4)
        .prop_map(|m| m.into_iter().collect::<Vec<_>>());
    (
        name(),
        prop_oneof![Just("gauge"), Just("counter"), Just("untyped")],
        prop::collection::vec((labels, value()), 1..5),
    )
        .prop_map(|(name, kind, series)| Family { name, kind, series })
}

proptest! {
    #[test]
    fn agrees_on_random_colon_free_pages(families in prop::collection::vec(family(), 1..6)) {
        let mut page = String::new();
        let mut seen = std::collections::HashSet::new();
        for (i, f) in families.iter().enumerate() {
            let name = format!("{}_{i}", f.name);
            if !seen.insert(name.clone()) {
                continue;
            }
            page.push_str(&format!("# HELP {name} generated family\n# TYPE {name} {}\n", f.kind));
            for (labels, v) in &f.series {
                let set: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
                if set.is_empty() {
                    page.push_str(&format!("{name} {}\n", render(*v)));
                } else {
                    page.push_str(&format!("{name}{{{}}} {}\n", set.join(","), render(*v)));
                }
            }
        }
        prop_assert_eq!(ours(&page), theirs(&page));
    }

    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let (samples, scan) = collect(&bytes);
        prop_assert!(samples.len() <= scan.samples);
        prop_assert!(scan.errors.len() <= scan.skipped);
    }

    #[test]
    fn never_panics_on_near_miss_lines(line in r#"[a-z:_]{0,5}(\{([a-z]{0,3}(=("[^"\n]{0,5}"?|[0-9]))?,?){0,3}\}?)? ?[-+0-9.eEInfNa#]{0,8}( [0-9#{}]{0,5})?"#) {
        // One line: it is either a sample, a comment or blank, or one skipped line.
        let (samples, scan) = collect(line.as_bytes());
        prop_assert!(samples.len() + scan.skipped <= 1);
    }
}
