//! What `tune` recommends is what runs: the `infscale` binary tunes single-point grids covering
//! lookahead, trend, tolerance, windows, rate policies and scale to zero; each printed
//! ScaledObject is read back into the policy it deploys, and its trigger metadata goes through
//! `serve`'s own parser with the flags the shipped scaler runs with (its `--allow-activator`),
//! naming the shipped activator (its admin Service beside the scaler), in serve mode for the
//! model's Service. Both must give back the policy `tune` chose.

mod common;

use infscale::serve::metadata::TargetSpec;
use infscale_core::policy::{scaled_object, Policy};
use std::collections::HashMap;

#[test]
fn every_tuned_key_reaches_serve_and_the_hpa() {
    let (service, namespace, port) = common::shipped::activator_admin();
    let cases = [
        ("48", "120", "60", "default", "60", "trend=45"),
        (
            "24",
            "90",
            "300",
            "downpods=1",
            "none",
            "tolerance=0.05,upwindow=30",
        ),
        (
            "32",
            "0",
            "120",
            "downpercent=50",
            "120",
            "uppercent=50,upperiod=30,downselect=Min",
        ),
        (
            "40",
            "60",
            "180",
            "downpods=2",
            "300",
            "uptolerance=0.2,downtolerance=0.05,activation=1",
        ),
        ("16", "0", "60", "default", "none", "legacy=true"),
        (
            "48",
            "0",
            "60",
            "default",
            "none",
            "deletioncost=true,deletioncostwrites=12",
        ),
    ];
    for (target, lookahead, window, down, cooldown, with) in cases {
        let (spec, yaml) = common::tune::tune(target, lookahead, window, down, cooldown, with);
        let chosen = Policy::parse(&spec).unwrap();
        // The whole policy, as KEDA and its HPA would deploy it.
        let deployed = scaled_object::read(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        assert_eq!(
            scaled_object::deploy_difference(&deployed.policy, &chosen),
            None,
            "{spec}\n{yaml}"
        );
        // The trigger, as `serve` reads it.
        let metadata: HashMap<String, String> = deployed.metadata.into_iter().collect();
        let read = TargetSpec::from_metadata(
            &deployed.name,
            &deployed.namespace,
            &metadata,
            &common::shipped::allowed_activators(),
        )
        .unwrap_or_else(|e| panic!("serve refused {spec}: {e}\n{yaml}"));
        let q = &read.policy;
        assert_eq!(
            (
                q.metric,
                q.target,
                q.activation,
                q.lookahead_s,
                q.trend_window_s
            ),
            (
                chosen.metric,
                chosen.target,
                chosen.activation,
                chosen.lookahead_s,
                chosen.trend_window_s
            ),
            "{spec}\n{yaml}"
        );
        if chosen.min == 0 {
            let url = metadata
                .get("activatorUrl")
                .expect("scale to zero names the activator");
            assert_eq!(url, &format!("http://{service}.{namespace}.svc:{port}"));
            assert!(read.activator.is_some());
            let mode = read.serve_mode.expect("scale to zero in serve mode");
            assert_eq!(mode.service, "chat");
        } else {
            assert!(!metadata.contains_key("activatorUrl"));
        }
    }
}
