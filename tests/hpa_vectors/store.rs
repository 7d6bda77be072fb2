//! The `store_scale_event` stage: which scale events are kept after one more is stored
//! (`storeScaleEvent` with `markScaleEventsOutdated`), run against infscale's own store.
//!
//! Inputs: the direction's rules as `scalingRules` (`null` or absent: `spec.behavior` is nil,
//! so nothing is stored), or a whole `behavior`; the change as `prevReplicas`/`newReplicas`, or
//! as `replicaChange` from 10 replicas (with `direction` `up`/`down`; both when absent, as
//! `TestStoreScaleEvents` runs each case); the direction's stored events as `priorScaleEvents`
//! (or `prevScaleEvents`, `events`, `priorScaleUp/DownEvents`). Expected: the list after the call
//! as `storedScaleEvents` (or `newScaleEvents`), `{replicaChange, outdated?}` in order, and
//! optionally `replicaChangeInPeriod` of the prior events over `periodSeconds` (default 60).

use super::{check, events, int, rules, uint, Outcome, NOW};
use infscale_core::control::hpa::{rate, ScaleEvent, State};
use infscale_core::policy::behavior::{Behavior, Rules};
use serde_json::Value;

/// The keys of `expected` this stage reads.
pub const EXPECTED_KEYS: &[&str] = &[
    "replicaChangeInPeriod",
    "expectedReplicasChange",
    "storedScaleEvents",
    "newScaleEvents",
    "storedScaleUpEvents",
    "storedScaleDownEvents",
    "events",
];

/// The first of `keys` that the object holds (not null).
fn first<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().map(|k| &v[*k]).find(|x| !x.is_null())
}

pub fn store_scale_event(inputs: &Value, expected: &Value) -> Outcome {
    let steps: Vec<(u32, u32)> = if inputs.get("prevReplicas").is_some() {
        vec![(uint(inputs, "prevReplicas")?, uint(inputs, "newReplicas")?)]
    } else if inputs.get("currentReplicas").is_some() {
        vec![(
            uint(inputs, "currentReplicas")?,
            uint(inputs, "desiredReplicas")?,
        )]
    } else {
        let change = uint(inputs, "replicaChange")?;
        let up = (10, 10 + change);
        let down = (
            10,
            10u32.checked_sub(change).ok_or("replicaChange above 10")?,
        );
        match inputs["direction"].as_str() {
            Some("up") => vec![up],
            Some("down") => vec![down],
            None => vec![up, down],
            Some(other) => return Err(format!("unknown direction {other:?}")),
        }
    };
    for (prev, new) in steps {
        one_direction(inputs, expected, prev, new).map_err(|e| format!("{prev} -> {new}: {e}"))?;
    }
    Ok(())
}

fn one_direction(inputs: &Value, expected: &Value, prev: u32, new: u32) -> Outcome {
    let up = new > prev;
    let (up_key, down_key) = ("priorScaleUpEvents", "priorScaleDownEvents");
    let direction_key = if up { up_key } else { down_key };
    let prior_value = first(
        inputs,
        &[
            "priorScaleEvents",
            "prevScaleEvents",
            "events",
            direction_key,
        ],
    );
    let prior = prior_value.map(events).transpose()?.unwrap_or_default();
    if let Some(want) = first(
        expected,
        &["replicaChangeInPeriod", "expectedReplicasChange"],
    ) {
        let period = uint(inputs, "periodSeconds").unwrap_or(60);
        let got = rate::change_in_period(period, &prior, NOW);
        check("replicaChangeInPeriod", Some(got), want.as_i64())?;
    }
    let behavior = behavior_for(inputs, up)?;
    let mut state = State::default();
    if up {
        state.scale_up_events = prior;
    } else {
        state.scale_down_events = prior;
    }
    rate::store_scale_event(&mut state, behavior.as_ref(), prev, new, NOW);
    let (stored, other) = if up {
        (&state.scale_up_events, &state.scale_down_events)
    } else {
        (&state.scale_down_events, &state.scale_up_events)
    };
    if !other.is_empty() {
        return Err(format!("stored in the other direction: {other:?}"));
    }
    let stored_up = if up {
        "storedScaleUpEvents"
    } else {
        "storedScaleDownEvents"
    };
    let want = first(
        expected,
        &["storedScaleEvents", "newScaleEvents", stored_up, "events"],
    )
    .ok_or("no expected event list")?
    .as_array()
    .ok_or("the expected events are not a list")?;
    compare(stored, want)
}

/// The rules the event is stored under: `None` is a nil `spec.behavior`.
fn behavior_for(inputs: &Value, up: bool) -> Result<Option<Behavior>, String> {
    if let Some(b) = inputs
        .get("behavior")
        .filter(|_| inputs.get("scalingRules").is_none())
    {
        if b.is_null() {
            return Ok(None);
        }
        return Ok(Some(Behavior {
            scale_up: rules(&b["scaleUp"], Rules::default_up())?,
            scale_down: rules(&b["scaleDown"], Rules::default_down())?,
        }));
    }
    let r = &inputs["scalingRules"];
    if r.is_null() {
        return Ok(None);
    }
    let mut b = Behavior::default();
    if up {
        b.scale_up = rules(r, Rules::default_up())?;
    } else {
        b.scale_down = rules(r, Rules::default_down())?;
    }
    Ok(Some(b))
}

fn compare(stored: &[ScaleEvent], want: &[Value]) -> Outcome {
    let got: Vec<(i64, bool)> = stored
        .iter()
        .map(|e| (i64::from(e.change), e.outdated))
        .collect();
    let shown = || format!("{got:?}");
    if got.len() != want.len() {
        return Err(format!("{} events stored: {}", got.len(), shown()));
    }
    for (i, (w, (change, outdated))) in want.iter().zip(&got).enumerate() {
        if int(w, "replicaChange")? != *change {
            return Err(format!("replicaChange differs at {i}: {}", shown()));
        }
        if w["outdated"].as_bool().is_some_and(|o| o != *outdated) {
            return Err(format!("outdated differs at {i}: {}", shown()));
        }
    }
    Ok(())
}
