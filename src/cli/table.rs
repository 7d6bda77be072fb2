//! Rows of replica signals, as `parse` and `decide` print them.

use infscale_core::observe::metrics::Replica;
use infscale_core::project::fleet::ReplicaRead;
use infscale_core::table::Align::*;
use infscale_core::table::Table;

const HEADER: [&str; 9] = [
    "source", "server", "running", "waiting", "kv", "tok/s", "cpu%", "ttft_p95", "skipped",
];

fn number(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) => format!("{v:.decimals$}"),
        None => "-".to_owned(),
    }
}

fn cells(read: &ReplicaRead) -> [String; 9] {
    let skipped = read
        .scan
        .as_ref()
        .map_or("-".to_owned(), |s| s.skipped.to_string());
    match &read.vote {
        Some(Ok(r)) => row(r, skipped),
        _ => {
            let mut cells: [String; 9] = Default::default();
            cells[0] = read.name.clone();
            cells[1] = "?".to_owned();
            for c in &mut cells[2..8] {
                *c = "-".to_owned();
            }
            cells[8] = skipped;
            cells
        }
    }
}

fn row(r: &Replica, skipped: String) -> [String; 9] {
    let server = match r.signals.asleep {
        Some(true) => format!("{} (asleep)", r.signals.server),
        _ => r.signals.server.to_string(),
    };
    [
        r.name.clone(),
        server,
        number(r.running(), 0),
        number(Some(r.waiting()), 0),
        number(r.kv(), 2),
        number(r.output_tokens_per_s(), 1),
        number(r.cpu_percent(), 1),
        r.ttft_p95().map_or("-".to_owned(), |s| format!("{s:.3}s")),
        skipped,
    ]
}

/// The table: a header and one aligned row per source.
pub fn render(reads: &[ReplicaRead]) -> String {
    let mut t = Table::new(
        HEADER
            .iter()
            .enumerate()
            .map(|(i, h)| (*h, if i < 2 { Left } else { Right })),
    );
    for read in reads {
        t.row(cells(read));
    }
    t.render()
}
