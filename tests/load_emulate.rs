//! `infscale load --sweep` against a real `infscale emulate`: the knee it reports is the emulated
//! replica's batch limit, the per-replica target a user would pick.

use infscale::emulate::{spawn, EmulateConfig};
use infscale::load::{self, Config};
use infscale_core::sim::gpu::GpuModel;
use std::time::Duration;

/// The knee is read where the modelled engine decides it, not off millisecond differences a
/// busy machine makes: at twice the GPU's speed the engine's steps (25 ms) dwarf the scheduling
/// noise of a loaded 2-core machine, and the concurrencies straddle the batch of 8 by a factor of
/// four each way. Below it, 8 streams take four times the requests/s of 2 at the same
/// first-step TTFT; past it, three in four of 32 wait a whole answer (about 250 ms) for a slot,
/// TTFT p50 far above twice the lightest. Shown to hold beside two spin loops (docs/benchmark.md,
/// "Tests that do not time the machine").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_finds_the_emulated_batch_limit() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cfg = EmulateConfig {
        gpu: GpuModel {
            max_batch: 8,
            ..GpuModel::default()
        },
        speed: 2.0,
        ..EmulateConfig::default()
    };
    let emulator = spawn(listener, cfg).await.unwrap();
    let mut c = Config::closed(
        format!("http://{}", emulator.addr()),
        1,
        Duration::from_millis(1500),
    );
    c.stream = true;
    c.prompt_tokens = 200;
    c.output_tokens = 50;
    let sweep = load::sweep(&c, &[2, 8, 32]).await.unwrap();
    let knee = sweep.knee.as_ref().map(|k| k.concurrency);
    assert_eq!(knee, Some(8), "{:?}", sweep.verdict());
    emulator.stop().await;
}
