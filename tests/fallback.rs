//! KEDA's `fallback` only fires when `GetMetrics` fails: if `GetMetricSpec` fails too, KEDA
//! never gets a metric spec and the fallback never applies (kedacore/keda#8056). So `serve`
//! must answer `GetMetricSpec` from the trigger's metadata alone, whatever the state of the
//! pods, the Kubernetes API and the activator (issue 16, point 1), and fail `GetMetrics`
//! explicitly (never a zero) when it cannot tell the value. This test starts `serve` with
//! discovery through a Kubernetes API stand-in and an activator, kills all three (or hangs them:
//! they accept and never answer), and checks.

mod common;

use common::activator::activator;
use common::faulty::{relay, Mode};
use common::keda::{client, metric_spec, metrics_request, object, Client};
use common::kube::{FakePod, Kube};
use common::pods::{pod, vllm_running, Behaviour};
use common::scaler::{config, start};
use common::timed::{Timed, KEDA_DEADLINE};
use infscale::serve::limits::Limits;
use infscale::serve::proto::ScaledObjectRef;
use infscale::serve::server::Config;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the last pod list is trusted once the API is silent.
const STALENESS: Duration = Duration::from_secs(2);

/// `GetMetricSpec` within KEDA's deadline: the metric name and the target.
async fn spec(c: &mut Client, so: &ScaledObjectRef) -> Result<(String, f64), tonic::Status> {
    // The deadline is what is tested: KEDA gives up on a call after 3 s.
    tokio::time::timeout(KEDA_DEADLINE, metric_spec(c, so))
        .await
        .unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded("GetMetricSpec")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn get_metric_spec_answers_with_pods_api_and_activator_all_dead() {
    case("dead", Mode::Gone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn get_metric_spec_answers_with_pods_api_and_activator_all_hung() {
    case("hung", Mode::Hang).await;
}

/// `fault`: `Gone` (connections refused) or `Hang` (accepted, never answered), for the pod, the
/// Kubernetes API and the activator at once, each behind a relay.
async fn case(name: &str, fault: Mode) {
    let replica = pod("127.0.0.2:0", Behaviour::Page(vllm_running(3)));
    let port = replica.server.addr.port();
    let api = Kube::model(
        "llm",
        "chat",
        vec![FakePod {
            name: "chat-0".into(),
            ip: "127.0.0.2".into(),
            ready: true,
        }],
    );
    let act = activator("chat");
    let api_front = relay("127.0.0.1:0", api.server.addr, Arc::new(Mutex::new(None)));
    let act_front = relay("127.0.0.1:0", act.server.addr, Arc::new(Mutex::new(None)));
    let running = start(Config {
        kube_api: Some(api_front.url()),
        use_kube: true,
        allowed_activators: vec![act_front.url()],
        limits: Limits {
            staleness: STALENESS,
            // One target fills the scaler: a second trigger's spec must still be answered.
            max_targets: 1,
            ..Limits::default()
        },
        ..config()
    })
    .await;
    let mut c = client(running.grpc).await;
    let act_url = act_front.url();
    let metadata = |name: &str, threshold: &str| {
        object(
            name,
            &[
                ("threshold", threshold.into()),
                ("metricsPort", port.to_string()),
                ("scrapeIntervalSeconds", "0.2".into()),
                ("activatorUrl", act_url.clone()),
            ],
        )
    };
    let so = metadata("chat", "2");
    let want = ("infscale-queue-chat".to_owned(), 2.0);
    assert_eq!(spec(&mut c, &so).await.expect("spec, all up"), want);
    let req = metrics_request(&so, "infscale-queue-chat");
    let mut t = Timed::new(c.clone());
    let deadline = Instant::now() + Duration::from_secs(15);
    while t.metrics(&req).await.ok() != Some(3.0) {
        assert!(Instant::now() < deadline, "never read the pod");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // All three fail at once: the pod, the Kubernetes API, the activator.
    if fault == Mode::Hang {
        replica.set(Behaviour::Hang);
    } else {
        drop(replica);
    }
    api_front.set(fault);
    act_front.set(fault);
    let died = Instant::now();
    let (mut specs, mut first_error) = (0, None);
    while died.elapsed() < STALENESS * 3 + Duration::from_secs(2) {
        assert_eq!(spec(&mut c, &so).await.expect("spec, all failing"), want);
        specs += 1;
        match t.metrics(&req).await {
            Ok(v) => {
                assert_eq!(v, 3.0, "a value other than the last one read");
                assert!(first_error.is_none(), "a value after an error");
            }
            Err(e) => {
                assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
                first_error.get_or_insert(died.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let failed_after = first_error.expect("GetMetrics never failed with everything failing");

    // A trigger never seen before, asked only now (and past --max-targets): its spec too.
    let other = metadata("other", "7.5");
    assert_eq!(
        spec(&mut c, &other).await.expect("a new trigger's spec"),
        ("infscale-queue-other".to_owned(), 7.5)
    );
    let other_metrics = t
        .metrics(&metrics_request(&other, "infscale-queue-other"))
        .await;
    assert!(other_metrics.is_err(), "{other_metrics:?}");
    // Metadata that is not valid is still refused.
    let bad = object("bad", &[("threshold", "-1".into())]);
    assert_eq!(
        spec(&mut c, &bad).await.unwrap_err().code(),
        tonic::Code::InvalidArgument
    );
    println!(
        "FALLBACK {name}: GetMetricSpec answered {specs} times over {:.1} s with pods, API and activator {name}; GetMetrics UNAVAILABLE from {:.1} s; slowest call {} ms",
        died.elapsed().as_secs_f64(),
        failed_after.as_secs_f64(),
        t.max.as_millis()
    );
    drop((api, act, api_front, act_front));
}
