//! `reserve=auto` as a user sees it in `decide`: a burst that outran the policy leaves a learned
//! reserve, which holds the replica count up (with its reason) once the traffic is quiet again,
//! carried between runs by the state file, as it is across a restart.

use std::process::Command;

const MODEL: &str = r#"engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct""#;

/// A vLLM page whose counters have grown as `prompt_per_s` prompt tokens a second would grow
/// them (1,000-token prompts), nothing waiting.
fn page(prompt_tokens: f64, admitted: f64) -> String {
    format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{MODEL}}} 4\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{MODEL}}} 0\n\
         # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{{MODEL}}} {prompt_tokens}\n\
         # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{{MODEL}}} 0\n\
         # TYPE vllm:time_to_first_token_seconds histogram\n\
         vllm:time_to_first_token_seconds_bucket{{{MODEL},le=\"+Inf\"}} {admitted}\n\
         vllm:time_to_first_token_seconds_count{{{MODEL}}} {admitted}\n"
    )
}

#[test]
fn a_burst_that_outran_the_policy_keeps_its_level_standing() {
    let dir = std::env::temp_dir().join(format!("infscale-reserve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page_path = dir.join("chat-0.prom");
    let state = dir.join("state.json");
    let (page_s, state_s) = (
        page_path.to_string_lossy().into_owned(),
        state.to_string_lossy().into_owned(),
    );
    let policy = "work:1.0,downwindow=0,reserve=auto,max=8";
    let decide = |now: f64| {
        let out = Command::new(env!("CARGO_BIN_EXE_infscale"))
            .args([
                "decide", &page_s, "--policy", policy, "--state", &state_s, "--json",
            ])
            .args(["--now", &now.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    // A quiet replica (a tenth of its prefill) for two minutes, then a burst of three replicas'
    // worth for a minute, then quiet again; a scrape every 5 s.
    let rate = |t: f64| {
        if (120.0..180.0).contains(&t) {
            3.0 * 24_750.0
        } else {
            2_475.0
        }
    };
    let (mut prompt, mut admitted) = (1_000_000.0, 1_000.0);
    let mut last = serde_json::Value::Null;
    let mut t = 0.0;
    while t <= 300.0 {
        std::fs::write(&page_path, page(prompt, admitted)).unwrap();
        last = decide(1000.0 + t);
        if t < 120.0 {
            assert_eq!(last["desired"], 1, "quiet at {t} s: {last}");
        }
        prompt += rate(t) * 5.0;
        admitted += rate(t) * 5.0 / 1000.0;
        t += 5.0;
    }
    // Two minutes after the burst the need is a tenth of a replica, and the HPA is asked for
    // the burst's level (at least its three replicas; the line through the burst's readings
    // rises past it), one page of one replica: the scale-up limit takes it there in steps.
    let proposal = last["proposal"].as_u64().unwrap();
    assert!((3..=5).contains(&proposal), "{last}");
    assert_eq!(last["value"].as_f64(), Some(proposal as f64), "{last}");
    let reasons = last["reasons"].to_string();
    assert!(reasons.contains("reserve:"), "{reasons}");
    // The reserve is in the state file; a fresh state forgets it.
    let saved = std::fs::read_to_string(&state).unwrap();
    assert!(saved.contains("\"reserve\""), "{saved}");
    std::fs::remove_file(&state).unwrap();
    for (i, now) in [1400.0, 1405.0].into_iter().enumerate() {
        let p = prompt + i as f64 * 2_475.0 * 5.0;
        std::fs::write(&page_path, page(p, admitted + i as f64 * 12.4)).unwrap();
        last = decide(now);
    }
    assert_eq!(last["proposal"], 1, "{last}");
    assert!(!last["reasons"].to_string().contains("reserve:"), "{last}");
    std::fs::remove_dir_all(&dir).unwrap();
}
