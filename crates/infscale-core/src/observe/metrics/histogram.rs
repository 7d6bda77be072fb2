//! Cumulative histograms (`_bucket{le=...}` series) and the quantile PromQL computes from them.
//!
//! A TTFT p95 is the SLO itself, but a histogram's buckets only count up, so the p95 of the last
//! interval comes from the difference of two scrapes, interpolated inside its bucket exactly as
//! PromQL's `histogram_quantile` does.

use serde::{Deserialize, Serialize};

/// One cumulative bucket: observations less than or equal to `le`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Serialised as in the text format, so `+Inf` survives JSON.
    #[serde(with = "bound")]
    pub le: f64,
    pub count: f64,
}

/// A bucket bound as JSON: a number, or `"+Inf"` / `"-Inf"` (JSON has no infinities).
mod bound {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(le: &f64, s: S) -> Result<S::Ok, S::Error> {
        if le.is_finite() {
            s.serialize_f64(*le)
        } else if *le > 0.0 {
            s.serialize_str("+Inf")
        } else {
            s.serialize_str("-Inf")
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Number(f64),
        Text(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        match Written::deserialize(d)? {
            Written::Number(v) => Ok(v),
            Written::Text(t) => crate::observe::metrics::exposition::parse_float(&t)
                .filter(|v| !v.is_nan())
                .ok_or_else(|| serde::de::Error::custom(format!("bad bucket bound {t:?}"))),
        }
    }
}

/// Cumulative buckets, sorted by upper bound, one per distinct `le`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub buckets: Vec<Bucket>,
}

impl Histogram {
    /// Adds `count` to the bucket with upper bound `le` (summing series that differ only in
    /// their other labels, as `sum by (le)` does).
    pub fn add(&mut self, le: f64, count: f64) {
        match self.buckets.binary_search_by(|b| b.le.total_cmp(&le)) {
            Ok(i) => self.buckets[i].count += count,
            Err(i) => self.buckets.insert(i, Bucket { le, count }),
        }
    }

    /// As [`Histogram::add`], but a new bound past `max` buckets is refused (`false`): a page
    /// is the tenant's, and one of distinct bounds on every line would otherwise cost 16 bytes
    /// a line here (kept between scrapes for rates) and a sorted insert each.
    pub fn add_within(&mut self, le: f64, count: f64, max: usize) -> bool {
        match self.buckets.binary_search_by(|b| b.le.total_cmp(&le)) {
            Ok(i) => self.buckets[i].count += count,
            Err(_) if self.buckets.len() >= max => return false,
            Err(i) => self.buckets.insert(i, Bucket { le, count }),
        }
        true
    }

    /// Adds every bucket of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for b in &other.buckets {
            self.add(b.le, b.count);
        }
    }

    /// Observations in the histogram: the count of the `+Inf` bucket, if there is one.
    pub fn observations(&self) -> Option<f64> {
        self.buckets
            .last()
            .filter(|b| b.le == f64::INFINITY)
            .map(|b| b.count)
    }

    /// What was observed between `earlier` and `self`. When any bucket went down, or the bucket
    /// layout changed, the server restarted in between and everything in `self` is new.
    pub fn increase_since(&self, earlier: &Histogram) -> Histogram {
        let same_layout = self.buckets.len() == earlier.buckets.len()
            && self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .all(|(a, b)| a.le == b.le && a.count >= b.count);
        if !same_layout {
            return self.clone();
        }
        Histogram {
            buckets: self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .map(|(now, then)| Bucket {
                    le: now.le,
                    count: now.count - then.count,
                })
                .collect(),
        }
    }

    /// The q-quantile, as PromQL's `histogram_quantile` computes it for classic buckets: linear
    /// inside the bucket that holds the rank, 0 as the lower bound of a first bucket with a
    /// positive bound, and the second-highest bound when the rank falls in `+Inf`. `None` where
    /// PromQL returns NaN: no `+Inf` bucket, fewer than two buckets, or no observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if !(0.0..=1.0).contains(&q) {
            return None;
        }
        let mut buckets = self.buckets.clone();
        if buckets.len() < 2 || buckets.last()?.le != f64::INFINITY {
            return None;
        }
        // Counts should never fall with a higher bound; where they do, take the running maximum.
        let mut max = 0.0f64;
        for b in &mut buckets {
            max = max.max(b.count);
            b.count = max;
        }
        let observations = buckets.last()?.count;
        if observations <= 0.0 {
            return None;
        }
        let mut rank = q * observations;
        let last = buckets.len() - 1;
        let b = buckets[..last]
            .iter()
            .position(|bucket| bucket.count >= rank)
            .unwrap_or(last);
        if b == last {
            return Some(buckets[last - 1].le);
        }
        if b == 0 && buckets[0].le <= 0.0 {
            return Some(buckets[0].le);
        }
        let end = buckets[b].le;
        let mut count = buckets[b].count;
        let mut start = 0.0;
        if b > 0 {
            start = buckets[b - 1].le;
            count -= buckets[b - 1].count;
            rank -= buckets[b - 1].count;
        }
        Some(start + (end - start) * (rank / count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(pairs: &[(f64, f64)]) -> Histogram {
        let mut h = Histogram::default();
        for &(le, count) in pairs {
            h.add(le, count);
        }
        h
    }

    const INF: f64 = f64::INFINITY;

    #[test]
    fn p95_half_way_through_a_bucket() {
        // 90 observations at or below 0.5 s, 10 more at or below 1.0 s: rank 95 is the 5th of
        // the 10 in (0.5, 1.0], half way through that bucket.
        let h = hist(&[(0.25, 40.0), (0.5, 90.0), (1.0, 100.0), (INF, 100.0)]);
        assert_eq!(h.quantile(0.95), Some(0.75));
    }

    #[test]
    fn first_bucket_interpolates_from_zero() {
        let h = hist(&[(0.1, 10.0), (INF, 10.0)]);
        assert_eq!(h.quantile(0.5), Some(0.05));
    }

    #[test]
    fn rank_in_inf_bucket_gives_the_highest_finite_bound() {
        let h = hist(&[(0.1, 1.0), (1.0, 2.0), (INF, 10.0)]);
        assert_eq!(h.quantile(0.95), Some(1.0));
    }

    #[test]
    fn no_observations_or_no_inf_bucket_gives_none() {
        assert_eq!(hist(&[(0.1, 0.0), (INF, 0.0)]).quantile(0.95), None);
        assert_eq!(hist(&[(0.1, 3.0), (1.0, 4.0)]).quantile(0.95), None);
        assert_eq!(hist(&[(INF, 4.0)]).quantile(0.95), None);
    }

    #[test]
    fn non_monotonic_counts_are_evened_out() {
        let h = hist(&[(0.5, 10.0), (1.0, 8.0), (2.0, 20.0), (INF, 20.0)]);
        // Treated as 10, 10, 20: rank 10 of 20 sits at the top of the first bucket.
        assert_eq!(h.quantile(0.5), Some(0.5));
    }

    #[test]
    fn add_sums_series_by_bound_and_keeps_order() {
        let h = hist(&[(INF, 2.0), (0.5, 1.0), (INF, 3.0), (0.5, 1.0)]);
        assert_eq!(
            h.buckets,
            vec![
                Bucket {
                    le: 0.5,
                    count: 2.0
                },
                Bucket {
                    le: INF,
                    count: 5.0
                }
            ]
        );
    }

    #[test]
    fn infinite_bounds_survive_json() {
        let h = hist(&[(0.5, 1.0), (INF, 2.0)]);
        let json = serde_json::to_string(&h).unwrap();
        assert!(json.contains("\"+Inf\""), "{json}");
        assert_eq!(serde_json::from_str::<Histogram>(&json).unwrap(), h);
    }

    #[test]
    fn increase_subtracts_and_detects_restarts() {
        let before = hist(&[(0.5, 10.0), (INF, 12.0)]);
        let after = hist(&[(0.5, 15.0), (INF, 20.0)]);
        assert_eq!(
            after.increase_since(&before),
            hist(&[(0.5, 5.0), (INF, 8.0)])
        );
        let restarted = hist(&[(0.5, 1.0), (INF, 2.0)]);
        assert_eq!(restarted.increase_since(&before), restarted);
        let relaid = hist(&[(1.0, 15.0), (INF, 20.0)]);
        assert_eq!(relaid.increase_since(&before), relaid);
    }
}
