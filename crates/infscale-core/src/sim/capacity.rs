//! What one replica really carries: the engine itself, saturated.
//!
//! The closed-form numbers `infscale gpu` prints (decode step, prefill rate) leave out what the
//! engine does between them: prefill stalling decode, the KV cache limiting the batch, long
//! outputs holding slots. So the capacity a user should compare a target with is measured the
//! way a load test would: one ready replica under a backlog of the scenario's requests, counting
//! the requests admitted per second once the batch is full.

use super::cluster::Cluster;
use super::gpu::GpuModel;
use super::replica::Hardware;
use super::trace::{Request, Scenario, Trace, TraceError};

/// Offered load, requests per second: far beyond any replica the model describes.
const OFFERED: f64 = 400.0;
/// Seconds before counting (the batch fills) and seconds counted.
const WARM_UP_S: f64 = 60.0;
const MEASURED_S: f64 = 240.0;
const DT: f64 = 0.25;

/// Requests per second one saturated replica admits with `scenario`'s length distributions
/// (its rates are ignored).
pub fn saturated_rate(gpu: &GpuModel, scenario: &Scenario) -> Result<f64, TraceError> {
    let end = WARM_UP_S + MEASURED_S;
    let backlog = Scenario {
        name: format!("{} at saturation", scenario.name),
        duration: end,
        rates: vec![(0.0, OFFERED), (end, OFFERED)],
        bursts: None,
        ..scenario.clone()
    };
    Ok(admitted_per_s(gpu, &backlog.generate()?.requests))
}

/// Requests per second one saturated replica admits with the lengths of `trace`'s requests,
/// taken in turn (its arrival times are ignored).
pub fn saturated_rate_of(gpu: &GpuModel, trace: &Trace) -> Result<f64, TraceError> {
    if trace.requests.is_empty() {
        return Err(TraceError(format!(
            "{}: no requests to measure a replica with",
            trace.name
        )));
    }
    let n = (OFFERED * (WARM_UP_S + MEASURED_S)) as usize;
    let backlog: Vec<Request> = trace
        .requests
        .iter()
        .cycle()
        .take(n)
        .enumerate()
        .map(|(i, r)| Request {
            arrival: i as f64 / OFFERED,
            ..*r
        })
        .collect();
    Ok(admitted_per_s(gpu, &backlog))
}

/// What one replica admits per second of `backlog` (arriving far faster than it serves), once
/// its batch is full.
fn admitted_per_s(gpu: &GpuModel, backlog: &[Request]) -> f64 {
    let end = WARM_UP_S + MEASURED_S;
    let mut cluster = Cluster::new(Hardware::new(gpu.clone()), 1, f64::INFINITY);
    let mut next = 0;
    let mut admitted = 0u64;
    let mut t = 0.0;
    while t < end {
        while let Some(request) = backlog.get(next).filter(|r| r.arrival < t + DT) {
            cluster.arrive(next as u32, request);
            next += 1;
        }
        let counting = t >= WARM_UP_S;
        cluster.step(t, DT, backlog, &mut |_, _| {
            if counting {
                admitted += 1;
            }
        });
        t += DT;
    }
    admitted as f64 / MEASURED_S
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bigger_batch_or_shorter_outputs_carry_more() {
        let day = Scenario::default_day();
        let base = saturated_rate(&GpuModel::default(), &day).unwrap();
        assert!(base > 1.0 && base < OFFERED / 4.0, "{base}");
        let small = GpuModel {
            max_batch: 16,
            ..GpuModel::default()
        };
        assert!(saturated_rate(&small, &day).unwrap() < base);
        let short = Scenario {
            output: crate::sim::rng::Lengths::Constant { value: 50 },
            ..day
        };
        assert!(saturated_rate(&GpuModel::default(), &short).unwrap() > base);
    }
}
