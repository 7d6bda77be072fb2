//! Every profile against a page shaped like its server's real output (fixtures/).

use super::*;
use crate::observe::metrics::rates::Rates;

fn signals(page: &[u8], choice: ServerChoice) -> Signals {
    let read = read_page(page, choice);
    assert_eq!(read.scan.skipped, 0, "{:?}", read.scan.errors);
    read.signals.expect("signals")
}

fn auto(page: &[u8]) -> Signals {
    signals(page, ServerChoice::Auto)
}

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/",
            $name
        ))
        .as_slice()
    };
}

#[test]
fn vllm_busy() {
    let s = auto(fixture!("vllm-busy.prom"));
    assert_eq!(s.server, Server::Vllm);
    assert_eq!((s.running, s.waiting, s.kv), (Some(48.0), 17.0, Some(0.93)));
    assert_eq!(s.counters.output_tokens, Some(184220.0));
    assert_eq!(s.counters.cpu_seconds, Some(5120.25));
    let ttft = s.counters.ttft.expect("ttft histogram");
    assert_eq!(ttft.buckets.len(), 23);
    assert_eq!(ttft.observations(), Some(1730.0));
}

#[test]
fn vllm_idle_reads_zero_not_missing() {
    let s = auto(fixture!("vllm-idle.prom"));
    assert_eq!((s.running, s.waiting, s.kv), (Some(0.0), 0.0, Some(0.0)));
}

#[test]
fn vllm_two_engines_sum_queues_and_take_the_fullest_kv() {
    let s = auto(fixture!("vllm-two-engines.prom"));
    assert_eq!((s.running, s.waiting), (Some(58.0), 12.0));
    assert_eq!(s.kv, Some(0.95));
    assert_eq!(s.counters.output_tokens, Some(184220.0 + 190002.0));
    // Both engines' TTFT histograms are summed by bucket.
    let ttft = s.counters.ttft.unwrap();
    assert_eq!(ttft.observations(), Some(2.0 * 1730.0));
}

#[test]
fn vllm_sleep_state_reads_asleep_from_the_awake_series() {
    let s = auto(fixture!("vllm-asleep.prom"));
    assert_eq!((s.server, s.asleep), (Server::Vllm, Some(true)));
    // No sleep series (an older vLLM): not said.
    assert_eq!(auto(fixture!("vllm-idle.prom")).asleep, None);
    // One engine of two asleep: the replica is not all capacity, so it reads asleep.
    let two =
        "vllm:num_requests_running{engine=\"0\"} 0\nvllm:num_requests_waiting{engine=\"0\"} 0\n\
        vllm:engine_sleep_state{engine=\"0\",sleep_state=\"awake\"} 1\n\
        vllm:engine_sleep_state{engine=\"1\",sleep_state=\"awake\"} 0\n\
        vllm:engine_sleep_state{engine=\"1\",sleep_state=\"discard_all\"} 1\n";
    assert_eq!(auto(two.as_bytes()).asleep, Some(true));
    let awake = two.replace(
        "\"1\",sleep_state=\"awake\"} 0",
        "\"1\",sleep_state=\"awake\"} 1",
    );
    assert_eq!(auto(awake.as_bytes()).asleep, Some(false));
}

#[test]
fn llamacpp_and_sglang_pages_carry_no_sleep_state() {
    // llama.cpp's page while it sleeps is the one cached when it fell asleep: idle-looking.
    let s = auto(fixture!("llamacpp-asleep.prom"));
    assert_eq!((s.server, s.asleep), (Server::LlamaCpp, None));
    assert_eq!((s.running, s.waiting), (Some(0.0), 0.0));
    assert_eq!(auto(fixture!("sglang.prom")).asleep, None);
}

#[test]
fn vllm_older_kv_gauge_name() {
    let s = auto(fixture!("vllm-old-gauge.prom"));
    assert_eq!((s.running, s.waiting, s.kv), (Some(9.0), 0.0, Some(0.37)));
}

#[test]
fn newer_kv_name_wins_when_both_appear() {
    let page = b"vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n\
        vllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.2\n";
    assert_eq!(auto(page).kv, Some(0.2));
}

#[test]
fn vllm_openmetrics_with_created_and_exemplar() {
    let s = auto(fixture!("vllm-openmetrics.prom"));
    assert_eq!((s.running, s.waiting, s.kv), (Some(12.0), 3.0, Some(0.42)));
    // The _created sample (a timestamp) is not mistaken for the counter.
    assert_eq!(s.counters.output_tokens, Some(52000.0));
    assert_eq!(s.counters.cpu_seconds, Some(88.5));
    assert_eq!(s.counters.ttft.unwrap().observations(), Some(100.0));
}

#[test]
fn llamacpp() {
    let s = auto(fixture!("llamacpp.prom"));
    assert_eq!(s.server, Server::LlamaCpp);
    assert_eq!((s.running, s.waiting, s.kv), (Some(4.0), 3.0, None));
    assert_eq!(s.counters.output_tokens, Some(93127.0));
    assert_eq!(s.counters.ttft, None);
}

#[test]
fn sglang() {
    let s = auto(fixture!("sglang.prom"));
    assert_eq!(s.server, Server::Sglang);
    assert_eq!((s.running, s.waiting, s.kv), (Some(37.0), 4.0, Some(0.71)));
    assert_eq!(s.counters.output_tokens, Some(2.1e6));
    assert_eq!(s.counters.ttft.unwrap().observations(), Some(1000.0));
}

#[test]
fn tgi() {
    let s = auto(fixture!("tgi.prom"));
    assert_eq!(s.server, Server::Tgi);
    assert_eq!((s.running, s.waiting, s.kv), (Some(32.0), 6.0, None));
    assert_eq!(s.counters.output_tokens, Some(402133.0));
}

#[test]
fn triton_running_needs_two_scrapes() {
    let s = auto(fixture!("triton.prom"));
    assert_eq!(s.server, Server::Triton);
    assert_eq!((s.running, s.waiting), (None, 8.0));
    assert_eq!(s.counters.request_us, Some(4.0e9));
    assert_eq!(s.counters.queue_us, Some(1.0e9));
    assert_eq!(s.counters.compute_us, Some(2.5e9));
}

#[test]
fn trtllm_serve() {
    let s = auto(fixture!("trtllm-serve.prom"));
    assert_eq!(s.server, Server::Trtllm);
    assert_eq!(
        (s.running, s.waiting, s.kv),
        (Some(12.0), 5.0, Some(0.6875))
    );
    assert_eq!(s.counters.output_tokens, Some(402133.0));
    assert_eq!(s.counters.ttft.unwrap().observations(), Some(1742.0));
}

#[test]
fn triton_tensorrt_llm_backend_reads_active_and_waiting_not_triton_pending() {
    // Triton's own pending count is 0 on this page: the backend queues inside its executor.
    let s = auto(fixture!("triton-trtllm.prom"));
    assert_eq!(s.server, Server::Trtllm);
    assert_eq!((s.running, s.waiting, s.kv), (Some(7.0), 3.0, Some(0.4875)));
    let named = signals(fixture!("triton-trtllm.prom"), "trtllm".parse().unwrap());
    assert_eq!((named.running, named.waiting), (Some(7.0), 3.0));
}

#[test]
fn triton_tensorrt_llm_backend_without_waiting_type_stays_triton() {
    // Backends before the "waiting" request type: no TensorRT-LLM queue series, so auto falls
    // back to Triton's pending count instead of failing on a missing series.
    let page = String::from_utf8(fixture!("triton-trtllm.prom").to_vec()).unwrap();
    let old: String = page
        .lines()
        .filter(|l| !l.contains("request_type=\"waiting\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let s = auto(old.as_bytes());
    assert_eq!(s.server, Server::Triton);
    assert_eq!(s.waiting, 0.0);
    let named = read_page(old.as_bytes(), ServerChoice::Is(Server::Trtllm));
    assert_eq!(
        named.signals,
        Err(ProfileError::WrongServer {
            configured: Server::Trtllm,
            seen: Server::Triton
        })
    );
}

#[test]
fn label_selector_matches_only_its_value() {
    let page = b"nv_trt_llm_request_metrics{request_type=\"max\"} 512\n\
nv_trt_llm_request_metrics{request_type=\"active\"} 4\n\
nv_trt_llm_request_metrics{request_type=\"scheduled\"} 4\n\
nv_trt_llm_request_metrics{request_type=\"waiting\"} 2\n\
nv_trt_llm_request_metrics 99\n";
    let s = auto(page);
    assert_eq!(
        (s.server, s.running, s.waiting),
        (Server::Trtllm, Some(4.0), 2.0)
    );
}

#[test]
fn triton_pair_gives_occupancies() {
    let before = auto(fixture!("pairs/triton-0.prom"));
    let after = auto(fixture!("pairs/triton-1.prom"));
    let r = Rates::between(&after.counters, &before.counters, 15.0).unwrap();
    assert_eq!(r.in_flight, Some(6.0));
    assert_eq!(r.executing, Some(4.0));
}

#[test]
fn vllm_pair_ttft_p95_half_way_through_the_one_second_bucket() {
    let before = auto(fixture!("pairs/vllm-ttft-0.prom"));
    let after = auto(fixture!("pairs/vllm-ttft-1.prom"));
    let r = Rates::between(&after.counters, &before.counters, 15.0).unwrap();
    // 100 new first tokens: 90 at or below 0.75 s, 10 in (0.75, 1.0]; rank 95 is the 5th of
    // those 10, half way from 0.75 to 1.0.
    assert_eq!(r.ttft_p95(), Some(0.875));
    assert_eq!(r.output_tokens_per_s, Some(1200.0));
    assert_eq!(r.cpu_cores, Some(1.0));
}

#[test]
fn vllm_pair_counter_reset() {
    let before = auto(fixture!("pairs/vllm-reset-0.prom"));
    let after = auto(fixture!("pairs/vllm-reset-1.prom"));
    let r = Rates::between(&after.counters, &before.counters, 15.0).unwrap();
    // Every counter went down: the server restarted, and all it counted since is new.
    assert_eq!(r.output_tokens_per_s, Some(100.0));
    assert_eq!(r.cpu_cores, Some(0.4));
    let ttft = r.ttft.as_ref().unwrap();
    assert_eq!(ttft.observations(), Some(10.0));
    assert!(r.ttft_p95().unwrap() > 0.0);
}

#[test]
fn vllm_pair_without_new_requests_has_no_ttft() {
    let before = auto(fixture!("pairs/vllm-quiet-0.prom"));
    let after = auto(fixture!("pairs/vllm-quiet-1.prom"));
    let r = Rates::between(&after.counters, &before.counters, 15.0).unwrap();
    assert_eq!(r.ttft_p95(), None);
    assert_eq!(r.output_tokens_per_s, Some(0.0));
}

#[test]
fn a_named_server_reads_only_its_own_series() {
    let read = read_page(fixture!("vllm-busy.prom"), ServerChoice::Is(Server::Sglang));
    assert_eq!(
        read.signals,
        Err(ProfileError::WrongServer {
            configured: Server::Sglang,
            seen: Server::Vllm
        })
    );
    let s = signals(fixture!("vllm-busy.prom"), ServerChoice::Is(Server::Vllm));
    assert_eq!(s.running, Some(48.0));
}

#[test]
fn a_page_of_no_known_server_lists_what_was_looked_for() {
    let read = read_page(fixture!("malformed/no-server.prom"), ServerChoice::Auto);
    let message = read.signals.unwrap_err().to_string();
    for name in [
        "vllm:num_requests_waiting",
        "llamacpp:requests_deferred",
        "sglang:num_queue_reqs",
        "tgi_queue_size",
        "nv_inference_pending_request_count",
        "trtllm_num_requests_waiting",
        "nv_trt_llm_request_metrics{request_type=\"waiting\"}",
    ] {
        assert!(message.contains(name), "{message}");
    }
}

#[test]
fn a_missing_queue_series_is_an_error_not_zero() {
    let read = read_page(fixture!("malformed/no-waiting.prom"), ServerChoice::Auto);
    assert_eq!(
        read.signals,
        Err(ProfileError::MissingSeries {
            server: Server::Vllm,
            missing: "vllm:num_requests_waiting"
        })
    );
}

#[test]
fn broken_lines_are_skipped_and_the_page_still_reads() {
    let read = read_page(fixture!("malformed/broken-lines.prom"), ServerChoice::Auto);
    assert_eq!(read.scan.skipped, 3);
    assert_eq!(
        read.scan.errors.iter().map(|e| e.line).collect::<Vec<_>>(),
        [4, 10, 16]
    );
    let s = read.signals.unwrap();
    assert_eq!((s.running, s.waiting), (Some(6.0), 2.0));
}

#[test]
fn garbage_is_unusable() {
    let read = read_page(fixture!("malformed/garbage.prom"), ServerChoice::Auto);
    assert_eq!(read.signals, Err(ProfileError::Unusable { skipped: 3 }));
}

#[test]
fn nan_and_negative_readings_are_ignored() {
    let page = b"vllm:num_requests_running{engine=\"0\"} NaN\nvllm:num_requests_running{engine=\"1\"} 4\n\
        vllm:num_requests_waiting -3\nvllm:num_requests_waiting{engine=\"1\"} 2\nvllm:kv_cache_usage_perc +Inf\n";
    let s = auto(page);
    assert_eq!((s.running, s.waiting, s.kv), (Some(4.0), 2.0, None));
}

#[test]
fn server_names_parse() {
    assert_eq!("auto".parse(), Ok(ServerChoice::Auto));
    assert_eq!("llama.cpp".parse(), Ok(ServerChoice::Is(Server::LlamaCpp)));
    assert_eq!("Triton".parse(), Ok(ServerChoice::Is(Server::Triton)));
    assert_eq!("trtllm".parse(), Ok(ServerChoice::Is(Server::Trtllm)));
    assert_eq!("TensorRT-LLM".parse(), Ok(ServerChoice::Is(Server::Trtllm)));
    assert!("ollama".parse::<ServerChoice>().is_err());
}

#[test]
fn another_servers_page_is_a_configuration_error_naming_it() {
    let read = read_page(fixture!("llamacpp.prom"), ServerChoice::Is(Server::Vllm));
    assert_eq!(
        read.signals.unwrap_err(),
        ProfileError::WrongServer {
            configured: Server::Vllm,
            seen: Server::LlamaCpp
        }
    );
    // A page of the configured server that lacks a series is still that server's error.
    let read = read_page(
        b"vllm:num_requests_running 1\n",
        ServerChoice::Is(Server::Vllm),
    );
    assert!(matches!(
        read.signals,
        Err(ProfileError::MissingSeries { .. })
    ));
}
