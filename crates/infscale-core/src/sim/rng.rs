//! A small deterministic random source (xoshiro256++ seeded by SplitMix64) and the length
//! distributions traces draw from.
//!
//! Written here rather than taken from a crate so that a trace generated from a seed stays the
//! same trace across dependency upgrades: results quoted in the README must be reproducible.

use serde::{Deserialize, Serialize};

/// xoshiro256++.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponential with the given rate.
    pub fn exponential(&mut self, rate: f64) -> f64 {
        -(1.0 - self.uniform()).ln() / rate
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// A distribution of token counts, clamped to `[min, max]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum Lengths {
    Constant {
        value: u32,
    },
    Uniform {
        min: u32,
        max: u32,
    },
    /// Log-normal with the given mean (not median) and log-space sigma.
    Lognormal {
        mean: f64,
        sigma: f64,
        #[serde(default = "one")]
        min: u32,
        #[serde(default = "big")]
        max: u32,
    },
    Exponential {
        mean: f64,
        #[serde(default = "one")]
        min: u32,
        #[serde(default = "big")]
        max: u32,
    },
}

impl std::fmt::Display for Lengths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = crate::reasons::fmt;
        match *self {
            Lengths::Constant { value } => write!(f, "always {value}"),
            Lengths::Uniform { min, max } => write!(f, "uniform {min}..{max}"),
            Lengths::Lognormal {
                mean,
                sigma,
                min,
                max,
            } => write!(
                f,
                "log-normal mean {} sigma {} {min}..{max}",
                g(mean),
                g(sigma)
            ),
            Lengths::Exponential { mean, min, max } => {
                write!(f, "exponential mean {} {min}..{max}", g(mean))
            }
        }
    }
}

fn one() -> u32 {
    1
}

fn big() -> u32 {
    32_768
}

impl Lengths {
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        let x = match *self {
            Lengths::Constant { value } => return value.max(1),
            Lengths::Uniform { min, max } => {
                let span = f64::from(max.saturating_sub(min)) + 1.0;
                f64::from(min) + (rng.uniform() * span).floor()
            }
            Lengths::Lognormal { mean, sigma, .. } => {
                let mu = mean.ln() - sigma * sigma / 2.0;
                (mu + sigma * rng.normal()).exp().round()
            }
            Lengths::Exponential { mean, .. } => rng.exponential(1.0 / mean).round(),
        };
        let (min, max) = self.range().unwrap_or((1, u32::MAX));
        x.clamp(f64::from(min.max(1)), f64::from(max.max(1))) as u32
    }

    /// The same shape with every length `factor` times as long (its mean, its bounds), for
    /// perturbed days: prompts 20% longer are `scaled(1.2)`.
    pub fn scaled(&self, factor: f64) -> Lengths {
        let by = |n: u32| ((f64::from(n) * factor).round() as u32).max(1);
        match *self {
            Lengths::Constant { value } => Lengths::Constant { value: by(value) },
            Lengths::Uniform { min, max } => Lengths::Uniform {
                min: by(min),
                max: by(max),
            },
            Lengths::Lognormal {
                mean,
                sigma,
                min,
                max,
            } => Lengths::Lognormal {
                mean: mean * factor,
                sigma,
                min: by(min),
                max: by(max),
            },
            Lengths::Exponential { mean, min, max } => Lengths::Exponential {
                mean: mean * factor,
                min: by(min),
                max: by(max),
            },
        }
    }

    /// The `[min, max]` a sample is clamped to (none for a constant).
    fn range(&self) -> Option<(u32, u32)> {
        match *self {
            Lengths::Constant { .. } => None,
            Lengths::Uniform { min, max }
            | Lengths::Lognormal { min, max, .. }
            | Lengths::Exponential { min, max, .. } => Some((min, max)),
        }
    }

    /// The parameters make sense; the message names the distribution's field.
    pub fn validate(&self, what: &str) -> Result<(), String> {
        let bad = |m: String| Err(format!("{what}: {m}"));
        if let Some((min, max)) = self.range().filter(|(min, max)| min > max) {
            return bad(format!("min {min} is above max {max}"));
        }
        let most = crate::limits::MAX_TOKENS;
        if let Some((_, max)) = self.range().filter(|(_, max)| *max > most) {
            return bad(format!("max {max} is above {most} tokens"));
        }
        match *self {
            Lengths::Constant { value: 0 } => bad("value must be at least 1".into()),
            Lengths::Constant { value } if value > most => {
                bad(format!("value {value} is above {most} tokens"))
            }
            Lengths::Lognormal { mean, .. } | Lengths::Exponential { mean, .. }
                if !(mean.is_finite() && mean > 0.0) =>
            {
                bad(format!(
                    "mean {} must be positive",
                    crate::limits::show(mean)
                ))
            }
            Lengths::Lognormal { mean, .. } | Lengths::Exponential { mean, .. }
                if mean > f64::from(most) =>
            {
                bad(format!(
                    "mean {} is above {most} tokens",
                    crate::limits::show(mean)
                ))
            }
            Lengths::Lognormal { sigma, .. }
                if !(sigma.is_finite() && (0.0..=3.0).contains(&sigma)) =>
            {
                bad(format!(
                    "sigma {} must be from 0 to 3",
                    crate::limits::show(sigma)
                ))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_numbers() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn distributions_have_their_means_and_bounds() {
        let mut rng = Rng::new(7);
        let d = Lengths::Lognormal {
            mean: 500.0,
            sigma: 0.8,
            min: 1,
            max: 1_000_000,
        };
        let n = 200_000;
        let mean = (0..n).map(|_| f64::from(d.sample(&mut rng))).sum::<f64>() / f64::from(n);
        assert!((mean - 500.0).abs() < 10.0, "{mean}");
        let u = Lengths::Uniform { min: 10, max: 20 };
        for _ in 0..1000 {
            let x = u.sample(&mut rng);
            assert!((10..=20).contains(&x));
        }
        let clamped = Lengths::Exponential {
            mean: 100.0,
            min: 50,
            max: 60,
        };
        assert!((0..1000).all(|_| (50..=60).contains(&clamped.sample(&mut rng))));
    }
}
