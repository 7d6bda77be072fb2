//! The HPA's behaviour as a policy states it: `spec.behavior`'s rules and rate policies with the
//! API's defaults, the controller's own flags, the tolerances they give, and the name of the limit
//! that set a result. This is vocabulary, not algorithm: the policy's keys, the ScaledObject and
//! the reasons speak it, and [`crate::control::hpa`] runs on it.

use serde::{Deserialize, Serialize};

/// Which way a `behavior` rule set picks among its policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Select {
    /// Allow the largest change (the API default).
    Max,
    /// Allow the smallest change.
    Min,
    /// Freeze this direction.
    Disabled,
}

/// A scaling policy's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RateKind {
    Pods,
    Percent,
}

/// `{type, value, periodSeconds}`: at most `value` pods or percent per period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RatePolicy {
    pub kind: RateKind,
    pub value: u32,
    pub period_s: u32,
}

/// `behavior.scaleUp` or `behavior.scaleDown`, with API defaults already applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rules {
    /// `stabilizationWindowSeconds`; `None` on scale-down means the controller's flag (300 s).
    pub window_s: Option<u32>,
    pub select: Select,
    /// Evaluated in order.
    pub policies: Vec<RatePolicy>,
    /// Per-direction tolerance (`HPAConfigurableTolerance`); `None` means the controller's.
    pub tolerance: Option<f64>,
}

impl Rules {
    /// The API defaults for `scaleUp`: no window, 4 pods or 100% per 15 s, whichever is more.
    pub fn default_up() -> Rules {
        Rules {
            window_s: Some(0),
            select: Select::Max,
            policies: vec![
                RatePolicy {
                    kind: RateKind::Pods,
                    value: 4,
                    period_s: 15,
                },
                RatePolicy {
                    kind: RateKind::Percent,
                    value: 100,
                    period_s: 15,
                },
            ],
            tolerance: None,
        }
    }

    /// The API defaults for `scaleDown`: the controller's window, 100% per 15 s.
    pub fn default_down() -> Rules {
        Rules {
            window_s: None,
            select: Select::Max,
            policies: vec![RatePolicy {
                kind: RateKind::Percent,
                value: 100,
                period_s: 15,
            }],
            tolerance: None,
        }
    }
}

/// `spec.behavior`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Behavior {
    pub scale_up: Rules,
    pub scale_down: Rules,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            scale_up: Rules::default_up(),
            scale_down: Rules::default_down(),
        }
    }
}

/// The controller's own flags, which apply to every HPA it runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Controller {
    /// `--horizontal-pod-autoscaler-tolerance` (0 means the default, 0.1).
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-downscale-stabilization`, seconds.
    pub downscale_window_s: u32,
    /// The legacy path's scale-up cap: max(factor x current, minimum).
    pub scale_up_limit_factor: f64,
    pub scale_up_limit_minimum: f64,
}

impl Default for Controller {
    fn default() -> Self {
        Controller {
            tolerance: 0.1,
            downscale_window_s: 300,
            scale_up_limit_factor: 2.0,
            scale_up_limit_minimum: 4.0,
        }
    }
}

impl Controller {
    /// The tolerances for one HPA: per direction from `behavior` where set, else the flag.
    pub fn tolerances(&self, behavior: Option<&Behavior>) -> Tolerances {
        let global = if self.tolerance == 0.0 {
            0.1
        } else {
            self.tolerance
        };
        Tolerances {
            scale_down: behavior
                .and_then(|b| b.scale_down.tolerance)
                .unwrap_or(global),
            scale_up: behavior
                .and_then(|b| b.scale_up.tolerance)
                .unwrap_or(global),
        }
    }
}

/// The tolerance test, per direction (1.33+): a ratio within it proposes no change.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerances {
    pub scale_down: f64,
    pub scale_up: f64,
}

impl Tolerances {
    pub fn uniform(tolerance: f64) -> Tolerances {
        Tolerances {
            scale_down: tolerance,
            scale_up: tolerance,
        }
    }

    /// `1 - down <= ratio <= 1 + up`. NaN and infinite ratios are never within.
    pub fn is_within(&self, ratio: f64) -> bool {
        (1.0 - self.scale_down) <= ratio && ratio <= (1.0 + self.scale_up)
    }
}

/// Which limit set the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Limited {
    DesiredWithinRange,
    ScaleUpLimit,
    ScaleDownLimit,
    TooManyReplicas,
    TooFewReplicas,
}

impl Limited {
    /// The condition reason the HPA would show.
    pub fn name(self) -> &'static str {
        match self {
            Limited::DesiredWithinRange => "DesiredWithinRange",
            Limited::ScaleUpLimit => "ScaleUpLimit",
            Limited::ScaleDownLimit => "ScaleDownLimit",
            Limited::TooManyReplicas => "TooManyReplicas",
            Limited::TooFewReplicas => "TooFewReplicas",
        }
    }
}
