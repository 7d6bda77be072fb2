//! Tests that walk the whole key table, so a key whose entry is missing, misspelt or reads back
//! something other than it writes fails here rather than in a deployment.

use super::*;
use crate::policy::scaled_object::deploy_difference;
use crate::policy::Metric;

#[test]
fn names_flags_and_metadata_names_are_unique() {
    for (i, a) in KEYS.iter().enumerate() {
        for b in &KEYS[i + 1..] {
            assert_ne!(a.name, b.name);
            assert_ne!(a.flag, b.flag);
            if let (Some(x), Some(y)) = (a.metadata(), b.metadata()) {
                assert_ne!(x, y);
            }
        }
    }
    assert_eq!(by_metadata("threshold").map(|k| k.name), Some("target"));
    assert_eq!(key("downwindow").map(|k| k.flag), Some("down-window"));
}

/// A policy on which every key is written when set: the `work` metric (its rates), a lookahead
/// (the trend), deletion costs (their write budget).
fn base() -> Policy {
    let mut p = Policy::new(Metric::Work, 1.0);
    p.lookahead_s = 60.0;
    p.deletion_cost = true;
    p
}

/// Values of every kind of key: the bounds of a number, each word, each flag.
fn samples(key: &Key) -> Vec<String> {
    match key.kind {
        Kind::Number { min, max } => vec![num(min), num(max), num((min + max) / 2.0)],
        Kind::Whole { min, max } => vec![min.to_string(), max.to_string()],
        Kind::Word(words) => words.iter().map(|w| (*w).to_owned()).collect(),
        Kind::Flag => vec!["true".to_owned(), "false".to_owned()],
    }
}

/// [`base`] with `key` at its default, where the default is a value.
fn at_default(key: &Key) -> Policy {
    let mut p = base();
    match (key.parse)(key, &mut p, key.default) {
        Ok(()) => p,
        Err(_) => base(),
    }
}

#[test]
fn every_key_reads_back_what_it_writes() {
    for key in KEYS {
        let mut written = 0;
        for sample in samples(key) {
            let mut p = base();
            (key.parse)(key, &mut p, &sample).unwrap_or_else(|e| panic!("{sample}: {e}"));
            match (key.render)(&p) {
                Some(back) => {
                    written += 1;
                    assert!(
                        back.eq_ignore_ascii_case(&sample),
                        "{}={sample} renders {back}",
                        key.name
                    );
                    let mut again = base();
                    (key.parse)(key, &mut again, &back).unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(again, p, "{}={back}", key.name);
                }
                // Left out only where leaving it out deploys as the default does.
                None => assert_eq!(
                    deploy_difference(&p, &at_default(key)),
                    None,
                    "{}={sample} is not written",
                    key.name
                ),
            }
        }
        assert!(written > 0, "{} never renders", key.name);
    }
}

#[test]
fn every_bad_value_names_its_key_and_value() {
    for key in KEYS {
        let mut bad = vec!["no-such-value".to_owned()];
        match key.kind {
            Kind::Number { min, max } => bad.extend([num(max * 2.0 + 1.0), num(min - 1.0)]),
            Kind::Whole { max, .. } => bad.push((u64::from(max) + 1).to_string()),
            _ => {}
        }
        for value in bad {
            let mut p = base();
            let e = (key.parse)(key, &mut p, &value).map_err(|e| e.to_string());
            let e = e
                .err()
                .unwrap_or_else(|| panic!("{}={value} accepted", key.name));
            assert!(e.contains(key.name) && e.contains(&value), "{e}");
            assert_eq!(p, base(), "{}={value} changed the policy", key.name);
        }
    }
}

#[test]
fn every_policy_field_has_a_key_or_is_derived() {
    let fields = |p: &Policy| match serde_yaml::to_value(p) {
        Ok(serde_yaml::Value::Mapping(m)) => m,
        other => panic!("{other:?}"),
    };
    let before = fields(&base());
    for field in before.keys().filter_map(|f| f.as_str()) {
        if DERIVED.iter().any(|d| d.0 == field) {
            continue;
        }
        let set_by_a_key = KEYS.iter().any(|key| {
            samples(key).iter().any(|sample| {
                let mut p = base();
                let set = (key.parse)(key, &mut p, sample).is_ok();
                set && fields(&p).get(field) != before.get(field)
            })
        });
        assert!(
            set_by_a_key,
            "no key sets Policy::{field}: add one, or list it in DERIVED"
        );
    }
}

#[test]
fn the_table_defaults_are_the_policy_defaults() {
    let fresh = [Policy::new(Metric::Queue, 1.0), base()];
    for key in KEYS {
        let same = fresh.iter().any(|fresh| {
            let mut p = fresh.clone();
            match (key.parse)(key, &mut p, key.default) {
                // A default that is no value (`required`, `the controller's`) is not checked.
                Err(_) => true,
                Ok(()) if matches!(key.home, Home::Behavior(..)) => {
                    deploy_difference(&p, fresh).is_none()
                }
                Ok(()) => p == *fresh,
            }
        });
        assert!(
            same,
            "{}'s default {} is not Policy::new's",
            key.name, key.default
        );
    }
}

#[test]
fn a_policys_spec_reads_back_to_the_same_policy() {
    let specs = [
        "queue:24",
        "queue+work:192,1.0,lookahead=45,forecast=history,downwindow=120,reserve=auto",
        "queue+work:192,1.0,lookahead=45,forecast=history,downwindow=120,reserve=auto,min=0,cooldown=300",
        "queue+work:192,1.0,lookahead=45,forecast=history,downwindow=120,reserve=auto,min=0,cooldown=300,hold=idle",
        "work:0.8,lookahead=auto,min=2,max=7,downpods=1,downperiod=30,uppercent=50",
        "kv:0.8,tolerance=0.05,upwindow=30,legacy=true",
        "queue+kv:48,0.8,slo=1.5,guard=true,deletioncost=true,hold=auto",
    ];
    for written in specs {
        let p = Policy::parse(written).unwrap_or_else(|e| panic!("{written}: {e}"));
        let spec = super::spec(&p);
        let back = Policy::parse(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(back, p, "{written} -> {spec}");
    }
    // Every key at every sample value on the base policy deploys the same read back.
    for key in KEYS {
        for sample in samples(key) {
            let mut p = base();
            if (key.parse)(key, &mut p, &sample).is_err() || p.validate().is_err() {
                continue;
            }
            let spec = super::spec(&p);
            let back = Policy::parse(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            // The same deployment (a behavior list given key by key is marked as given).
            assert_eq!(
                deploy_difference(&back, &p),
                None,
                "{}={sample} -> {spec}",
                key.name
            );
        }
    }
}
