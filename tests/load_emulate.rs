//! `infscale load --sweep` against a real `infscale emulate`: the knee it reports is the emulated
//! replica's batch limit, the per-replica target a user would pick.

use infscale::emulate::{spawn, EmulateConfig};
use infscale::load::{self, Config};
use infscale::sim::gpu::GpuModel;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_finds_the_emulated_batch_limit() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cfg = EmulateConfig {
        gpu: GpuModel {
            max_batch: 8,
            ..GpuModel::default()
        },
        speed: 10.0,
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
    c.output_tokens = 200;
    let sweep = load::sweep(&c, &[2, 4, 8, 16, 32]).await.unwrap();
    let knee = sweep.knee.as_ref().map(|k| k.concurrency);
    assert_eq!(knee, Some(8), "{:?}", sweep.verdict());
    emulator.stop().await;
}
