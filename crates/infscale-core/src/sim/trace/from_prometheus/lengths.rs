//! Request lengths from what a server exports about them: a histogram of lengths per request
//! (vLLM's `vllm:request_prompt_tokens`, SGLang's `sglang:prompt_tokens_histogram`), or only a
//! token counter (llama.cpp), which gives a mean per step and nothing of the spread.
//!
//! From a histogram, each request draws a bucket in proportion to the step's bucket increases,
//! then a length uniformly within the bucket (linear interpolation); the `+Inf` bucket is read
//! as reaching twice the last finite bound. The step's lengths are then scaled so their mean is
//! the histogram's `_sum` over `_count` for that step: the one exact figure a histogram keeps.

use super::increase::{increases, Seen, Window};
use super::response::Series;
use crate::sim::rng::Rng;

/// Lengths known per step.
#[derive(Debug, Clone, PartialEq)]
pub enum Lengths {
    /// Upper bounds of the finite buckets (ascending); per step, requests per bucket (not
    /// cumulative, the last is `+Inf`), and the step's `_sum` and `_count` increases.
    Histogram {
        bounds: Vec<f64>,
        buckets: Vec<Vec<f64>>,
        sums: Vec<f64>,
        counts: Vec<f64>,
    },
    /// Only tokens per step (a counter) and requests per step; each request gets its step's
    /// tokens / requests (the window's, in a step with no requests counted).
    Mean {
        tokens: Vec<f64>,
        requests: Vec<f64>,
    },
}

impl Lengths {
    /// A histogram from its `_bucket`, `_sum` and `_count` series (any number of pods).
    pub fn histogram(
        bucket: &[Series],
        sum: &[Series],
        count: &[Series],
        w: &Window,
        seen: &mut Seen,
    ) -> Result<Lengths, String> {
        let mut by_le: Vec<(f64, Vec<Series>)> = Vec::new();
        for s in bucket {
            let le = s
                .labels
                .get("le")
                .ok_or("a _bucket series has no le label")?;
            let le: f64 = match le.as_str() {
                "+Inf" | "Inf" | "inf" => f64::INFINITY,
                x => x
                    .parse()
                    .map_err(|_| format!("a _bucket series has le={le:?}, not a number"))?,
            };
            match by_le.iter_mut().find(|(b, _)| *b == le) {
                Some((_, group)) => group.push(s.clone()),
                None => by_le.push((le, vec![s.clone()])),
            }
        }
        by_le.sort_by(|a, b| a.0.total_cmp(&b.0));
        if by_le.last().is_none_or(|(le, _)| le.is_finite()) {
            return Err("the _bucket series have no le=\"+Inf\" bucket".to_owned());
        }
        let cumulative: Vec<Vec<f64>> = by_le
            .iter()
            .map(|(_, group)| increases(group, w, seen))
            .collect();
        let buckets = (0..w.steps)
            .map(|k| {
                let mut below = 0.0;
                cumulative
                    .iter()
                    .map(|c| {
                        let n = (c[k] - below).max(0.0);
                        below = below.max(c[k]);
                        n
                    })
                    .collect()
            })
            .collect();
        Ok(Lengths::Histogram {
            bounds: by_le
                .iter()
                .map(|(b, _)| *b)
                .filter(|b| b.is_finite())
                .collect(),
            buckets,
            sums: increases(sum, w, seen),
            counts: increases(count, w, seen),
        })
    }

    /// `n` lengths for the requests of step `k`.
    pub fn draw(&self, k: usize, n: usize, rng: &mut Rng) -> Vec<u32> {
        match self {
            Lengths::Mean { tokens, requests } => {
                let mean =
                    per(tokens[k], requests[k]).or_else(|| per(total(tokens), total(requests)));
                vec![whole(mean.unwrap_or(1.0)); n]
            }
            Lengths::Histogram {
                bounds,
                buckets,
                sums,
                counts,
            } => {
                let mut weights = buckets[k].clone();
                if weights.iter().sum::<f64>() <= 0.0 {
                    weights = (0..bounds.len() + 1)
                        .map(|b| buckets.iter().map(|s| s[b]).sum())
                        .collect();
                }
                let drawn: Vec<f64> = (0..n).map(|_| within(bounds, &weights, rng)).collect();
                let mean = per(sums[k], counts[k]).or_else(|| per(total(sums), total(counts)));
                let drawn_mean = drawn.iter().sum::<f64>() / n.max(1) as f64;
                let scale = match mean {
                    Some(m) if drawn_mean > 0.0 => m / drawn_mean,
                    _ => 1.0,
                };
                drawn.iter().map(|v| whole(v * scale)).collect()
            }
        }
    }

    /// Whether every per-step list has `steps` entries (and each step every bucket).
    pub fn fits(&self, steps: usize) -> bool {
        match self {
            Lengths::Mean { tokens, requests } => tokens.len() == steps && requests.len() == steps,
            Lengths::Histogram {
                bounds,
                buckets,
                sums,
                counts,
            } => {
                buckets.len() == steps
                    && sums.len() == steps
                    && counts.len() == steps
                    && buckets.iter().all(|b| b.len() == bounds.len() + 1)
            }
        }
    }

    /// Whether any length data was seen over the window.
    pub fn is_empty(&self) -> bool {
        match self {
            Lengths::Mean { tokens, .. } => total(tokens) <= 0.0,
            Lengths::Histogram { buckets, .. } => buckets.iter().flatten().sum::<f64>() <= 0.0,
        }
    }
}

fn total(v: &[f64]) -> f64 {
    v.iter().sum()
}

fn per(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a >= 0.0).then(|| a / b)
}

/// A token count from a drawn length: at least 1, at most `u32::MAX`.
fn whole(v: f64) -> u32 {
    v.round().clamp(1.0, f64::from(u32::MAX)) as u32
}

/// A length drawn from the buckets by weight, uniformly within the bucket drawn.
fn within(bounds: &[f64], weights: &[f64], rng: &mut Rng) -> f64 {
    let sum: f64 = weights.iter().sum();
    let mut x = rng.uniform() * sum;
    let mut b = weights.len() - 1;
    for (i, w) in weights.iter().enumerate() {
        if x < *w {
            b = i;
            break;
        }
        x -= w;
    }
    let last = bounds.last().copied().unwrap_or(1.0);
    let lo = if b == 0 { 0.0 } else { bounds[b - 1] };
    let hi = bounds.get(b).copied().unwrap_or(2.0 * last);
    lo + rng.uniform() * (hi - lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_step(bounds: &[f64], buckets: &[f64], sum: f64, count: f64) -> Lengths {
        Lengths::Histogram {
            bounds: bounds.to_vec(),
            buckets: vec![buckets.to_vec()],
            sums: vec![sum],
            counts: vec![count],
        }
    }

    #[test]
    fn lengths_keep_the_steps_mean_and_the_buckets_shape() {
        // 100 requests of 128 tokens sit in (100, 200]: drawn uniformly there (mean 150), then
        // scaled to the exact mean the _sum and _count give.
        let h = one_step(
            &[50.0, 100.0, 200.0],
            &[0.0, 0.0, 100.0, 0.0],
            12_800.0,
            100.0,
        );
        let got = h.draw(0, 1000, &mut Rng::new(7));
        let mean = got.iter().map(|&v| f64::from(v)).sum::<f64>() / 1000.0;
        assert!((mean - 128.0).abs() < 1.0, "{mean}");
        assert!(got.iter().all(|&v| (80..=175).contains(&v)), "{got:?}");
    }

    #[test]
    fn the_inf_bucket_reaches_twice_the_last_bound() {
        let h = one_step(&[10.0], &[0.0, 5.0], 0.0, 0.0);
        let got = h.draw(0, 500, &mut Rng::new(1));
        assert!(got.iter().all(|&v| (10..=20).contains(&v)), "{got:?}");
    }

    #[test]
    fn a_step_without_buckets_draws_from_the_window() {
        let h = Lengths::Histogram {
            bounds: vec![10.0, 20.0],
            buckets: vec![vec![0.0, 0.0, 0.0], vec![0.0, 4.0, 0.0]],
            sums: vec![0.0, 60.0],
            counts: vec![0.0, 4.0],
        };
        let got = h.draw(0, 200, &mut Rng::new(3));
        let mean = got.iter().map(|&v| f64::from(v)).sum::<f64>() / 200.0;
        assert!((mean - 15.0).abs() < 0.5, "{mean}");
        assert!(!h.is_empty());
    }

    #[test]
    fn token_counters_give_the_steps_mean() {
        let m = Lengths::Mean {
            tokens: vec![300.0, 0.0],
            requests: vec![2.0, 0.0],
        };
        assert_eq!(m.draw(0, 2, &mut Rng::new(0)), vec![150, 150]);
        assert_eq!(m.draw(1, 1, &mut Rng::new(0)), vec![150]);
    }

    #[test]
    fn buckets_from_pods_are_summed_by_le() {
        let s = |le: &str, pod: &str, v: [f64; 2]| Series {
            labels: [("le", le), ("pod", pod)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            points: vec![(0.0, v[0]), (1.0, v[1])],
        };
        let w = Window::new(0.0, 1.0, 1.0).unwrap();
        let bucket = [
            s("10", "a", [0.0, 1.0]),
            s("+Inf", "a", [0.0, 3.0]),
            s("10", "b", [0.0, 2.0]),
            s("+Inf", "b", [0.0, 2.0]),
        ];
        let h = Lengths::histogram(&bucket, &[], &[], &w, &mut Seen::default()).unwrap();
        let Lengths::Histogram {
            bounds, buckets, ..
        } = h
        else {
            panic!("a histogram")
        };
        assert_eq!(bounds, vec![10.0]);
        assert_eq!(buckets, vec![vec![3.0, 2.0]]);
        let no_inf = [s("10", "a", [0.0, 1.0])];
        let e = Lengths::histogram(&no_inf, &[], &[], &w, &mut Seen::default()).unwrap_err();
        assert!(e.contains("+Inf"), "{e}");
    }
}
