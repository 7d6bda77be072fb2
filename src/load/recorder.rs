//! Where outcomes go during a run: three latency histograms, the tokens, and the errors by kind.
//! Constant memory whatever the run's length; recorders of several workers merge.

use super::histogram::Histogram;
use super::outcome::{ErrorKind, Outcome};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub struct Recorder {
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    pub ok: u64,
    pub output_tokens: u64,
    pub errors: BTreeMap<ErrorKind, u64>,
}

impl Recorder {
    pub fn record(&mut self, outcome: Outcome) {
        match outcome {
            Ok(sample) => {
                self.ok += 1;
                self.output_tokens += sample.output_tokens;
                self.ttft.record(sample.ttft);
                self.e2e.record(sample.e2e);
                for gap in sample.gaps {
                    self.itl.record(gap as f64);
                }
            }
            Err(kind) => self.error(kind),
        }
    }

    pub fn error(&mut self, kind: ErrorKind) {
        *self.errors.entry(kind).or_default() += 1;
    }

    pub fn failed(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn merge(&mut self, other: &Recorder) {
        self.ttft.merge(&other.ttft);
        self.itl.merge(&other.itl);
        self.e2e.merge(&other.e2e);
        self.ok += other.ok;
        self.output_tokens += other.output_tokens;
        for (kind, n) in &other.errors {
            *self.errors.entry(*kind).or_default() += n;
        }
    }
}
