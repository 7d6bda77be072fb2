//! The HorizontalPodAutoscaler that KEDA creates for a ScaledObject, as the Kubernetes
//! controller runs one sync of it (`pkg/controller/podautoscaler`): external metrics of type
//! `AverageValue` in milli-units, each proposing `ceil(usage / target)` unless the usage ratio
//! against the status replicas is within the tolerance (0.1, or the behavior's per-direction
//! `tolerance`); the largest proposal; no change when every metric failed, or some failed and
//! the rest would scale down; then the behavior (stabilisation windows over stored
//! recommendations, the Pods/Percent policies per period counted from the HPA's own scale
//! events, `selectPolicy`), or without a `behavior` the legacy rules (a 300 s scale-down window,
//! up to `max(2 * current, 4)`); min and max. At zero replicas it does nothing (scaling
//! disabled: KEDA owns 0 <-> 1). Times are seconds from any origin, already divided by the
//! test's time scale, so a sync is a pure function of what it is given and what it stored.

/// One direction's rules.
#[derive(Clone, Debug, PartialEq)]
pub struct Rules {
    pub window_s: f64,
    /// `Max`, `Min` or `Disabled`.
    pub select: String,
    /// `(Pods | Percent, value, period seconds)`.
    pub policies: Vec<(String, i64, f64)>,
    pub tolerance: Option<f64>,
}

/// What an HPA sync needs of a ScaledObject.
#[derive(Clone, Debug)]
pub struct Hpa {
    pub min: i64,
    pub max: i64,
    /// `(scaleUp, scaleDown)`, when the ScaledObject gives a `behavior`.
    pub behavior: Option<(Rules, Rules)>,
    /// The legacy scale-down window (the controller's flag, 300 s).
    pub legacy_window_s: f64,
    recommendations: Vec<(f64, i64)>,
    up_events: Vec<(f64, i64)>,
    down_events: Vec<(f64, i64)>,
}

const TOLERANCE: f64 = 0.1;

fn rules(v: &serde_yaml::Value, up: bool, scale: f64) -> Rules {
    let default_policies = if up {
        vec![
            ("Pods".to_owned(), 4, 15.0),
            ("Percent".to_owned(), 100, 15.0),
        ]
    } else {
        vec![("Percent".to_owned(), 100, 15.0)]
    };
    let policies = match v["policies"].as_sequence() {
        Some(ps) => ps
            .iter()
            .map(|p| {
                (
                    p["type"].as_str().unwrap_or("Pods").to_owned(),
                    p["value"].as_i64().unwrap_or(0),
                    p["periodSeconds"].as_f64().unwrap_or(15.0),
                )
            })
            .collect(),
        None => default_policies,
    };
    let tolerance = match &v["tolerance"] {
        serde_yaml::Value::String(s) => s.parse().ok(),
        t => t.as_f64(),
    };
    Rules {
        window_s: v["stabilizationWindowSeconds"]
            .as_f64()
            .unwrap_or(if up { 0.0 } else { 300.0 })
            / scale,
        select: v["selectPolicy"].as_str().unwrap_or("Max").to_owned(),
        policies: policies
            .into_iter()
            .map(|(k, n, p)| (k, n, p / scale))
            .collect(),
        tolerance,
    }
}

fn period_change(events: &[(f64, i64)], now: f64, period: f64) -> i64 {
    events
        .iter()
        .filter(|(t, _)| *t > now - period)
        .map(|(_, n)| n)
        .sum()
}

impl Hpa {
    /// The HPA KEDA makes for `so` (a ScaledObject): min `minReplicaCount` or 1, max
    /// `maxReplicaCount` (100), the behavior of `advanced.horizontalPodAutoscalerConfig`, every
    /// window and period divided by `scale`.
    pub fn of(so: &serde_yaml::Value, scale: f64) -> Hpa {
        let spec = &so["spec"];
        let min = spec["minReplicaCount"].as_i64().unwrap_or(0).max(1);
        let max = spec["maxReplicaCount"].as_i64().unwrap_or(100);
        let b = &spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"];
        let behavior = (!b.is_null()).then(|| {
            (
                rules(&b["scaleUp"], true, scale),
                rules(&b["scaleDown"], false, scale),
            )
        });
        Hpa {
            min,
            max,
            behavior,
            legacy_window_s: 300.0 / scale,
            recommendations: Vec::new(),
            up_events: Vec::new(),
            down_events: Vec::new(),
        }
    }

    /// `(up, down)` tolerances.
    fn tolerances(&self) -> (f64, f64) {
        match &self.behavior {
            Some((up, down)) => (
                up.tolerance.unwrap_or(TOLERANCE),
                down.tolerance.unwrap_or(TOLERANCE),
            ),
            None => (TOLERANCE, TOLERANCE),
        }
    }

    /// One metric's proposal: `value` its current value, `target` its per-replica target
    /// (both as KEDA hands them, floats), `status` the target's status replicas.
    pub fn proposal(&self, value: f64, target: f64, status: i64) -> i64 {
        let usage = (value * 1000.0) as i64;
        let per_pod = (target * 1000.0) as i64;
        let ratio = usage as f64 / (per_pod as f64 * status as f64);
        let (up, down) = self.tolerances();
        let within = (1.0 - down) <= ratio && ratio <= (1.0 + up);
        if within {
            status
        } else {
            (usage as f64 / per_pod as f64).ceil() as i64
        }
    }

    /// One sync at `now`: `current` the scale's spec replicas, `status` its status replicas,
    /// `metrics` each metric's `(value, target)` or its failure. The replica count to set (the
    /// current one for no change), or why nothing could be computed.
    pub fn sync(
        &mut self,
        now: f64,
        current: i64,
        status: i64,
        metrics: &[Result<(f64, f64), String>],
    ) -> Result<i64, String> {
        if current == 0 {
            return Ok(0);
        }
        let desired = if current > self.max {
            self.max
        } else if current < self.min {
            self.min
        } else {
            let proposals: Vec<i64> = metrics
                .iter()
                .filter_map(|m| m.as_ref().ok())
                .map(|(v, t)| self.proposal(*v, *t, status))
                .collect();
            let invalid = metrics.len() - proposals.len();
            let best = proposals.iter().copied().max();
            match best {
                None => {
                    return Err(metrics
                        .iter()
                        .find_map(|m| m.as_ref().err().cloned())
                        .unwrap_or_else(|| "no metric".to_owned()))
                }
                Some(b) if invalid > 0 && b < current => {
                    return Err("a metric failed and the others would scale down".to_owned())
                }
                Some(b) => self.normalize(now, current, b),
            }
        };
        if desired != current {
            let change = desired - current;
            let events = if change > 0 {
                &mut self.up_events
            } else {
                &mut self.down_events
            };
            events.push((now, change.abs()));
            let longest = self
                .behavior
                .iter()
                .flat_map(|(u, d)| u.policies.iter().chain(&d.policies))
                .map(|(_, _, p)| *p)
                .fold(0.0, f64::max);
            self.up_events.retain(|(t, _)| *t > now - longest);
            self.down_events.retain(|(t, _)| *t > now - longest);
        }
        Ok(desired)
    }

    /// Stores `desired` as a recommendation at `now` and returns the count after the
    /// stabilisation and rate rules.
    fn normalize(&mut self, now: f64, current: i64, desired: i64) -> i64 {
        let Some((up, down)) = self.behavior.clone() else {
            let cutoff = now - self.legacy_window_s;
            let stabilized = self
                .recommendations
                .iter()
                .filter(|(t, _)| *t >= cutoff)
                .map(|(_, r)| *r)
                .fold(desired, i64::max);
            self.record(now, desired, cutoff);
            let up_limit = (2 * current).max(4);
            return stabilized.clamp(self.min, self.max.min(up_limit).max(self.min));
        };
        let (up_cut, down_cut) = (now - up.window_s, now - down.window_s);
        let mut up_rec = desired;
        let mut down_rec = desired;
        for (t, r) in &self.recommendations {
            if *t > up_cut {
                up_rec = up_rec.min(*r);
            }
            if *t > down_cut {
                down_rec = down_rec.max(*r);
            }
        }
        let mut stabilized = current;
        if stabilized < up_rec {
            stabilized = up_rec;
        }
        if stabilized > down_rec {
            stabilized = down_rec;
        }
        self.record(now, desired, up_cut.min(down_cut));
        if stabilized > current {
            let limit = self.limit(&up, now, current, true).max(current);
            stabilized.min(self.max.min(limit))
        } else if stabilized < current {
            let limit = self.limit(&down, now, current, false).min(current);
            stabilized.max(self.min.max(limit))
        } else {
            stabilized
        }
    }

    fn record(&mut self, now: f64, desired: i64, cutoff: f64) {
        match self.recommendations.iter().position(|(t, _)| *t < cutoff) {
            Some(i) => self.recommendations[i] = (now, desired),
            None => self.recommendations.push((now, desired)),
        }
    }

    /// The scale-up (or scale-down) limit of `rules` from the HPA's scale events.
    fn limit(&self, rules: &Rules, now: f64, current: i64, up: bool) -> i64 {
        if rules.select == "Disabled" {
            return current;
        }
        // Scaling up, Max takes the largest limit; scaling down, the smallest one (the most
        // change either way). Min the other.
        let most_change = rules.select != "Min";
        let pick = |a: i64, b: i64| {
            if most_change == up {
                a.max(b)
            } else {
                a.min(b)
            }
        };
        let mut result: Option<i64> = None;
        for (kind, value, period) in &rules.policies {
            let added = period_change(&self.up_events, now, *period);
            let deleted = period_change(&self.down_events, now, *period);
            let start = current - added + deleted;
            let proposed = match (kind.as_str(), up) {
                ("Percent", true) => (start as f64 * (1.0 + *value as f64 / 100.0)).ceil() as i64,
                ("Percent", false) => (start as f64 * (1.0 - *value as f64 / 100.0)) as i64,
                (_, true) => start + value,
                (_, false) => start - value,
            };
            result = Some(result.map_or(proposed, |r| pick(r, proposed)));
        }
        result.unwrap_or(current)
    }
}
