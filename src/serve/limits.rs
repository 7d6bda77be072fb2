//! Every operational bound of `infscale serve`, in one struct: how much callers can make the
//! scaler hold, how long it waits for pods, the Kubernetes API and activators, and how often it
//! looks again.
//!
//! [`Limits::default`] holds the defaults; the `serve` command sets the ones an operator may
//! need to change from its flags (named on each field), and the server passes the struct down to
//! every part that waits, retries or caps, so no part reads a constant of its own. Bounds on
//! what a caller may send (metadata sizes, durations, thresholds) are validation, not operation,
//! and stay in [`infscale_core::limits`].

use std::time::Duration;

/// The scaler's operational limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Triggers with a collector at once; a reading call for one more is `RESOURCE_EXHAUSTED`
    /// unless one gives way (`spec_only_stop`, `evict_after`). Default 1,000: far more
    /// ScaledObjects than one KEDA install runs, few enough to bound memory. `--max-targets`.
    pub max_targets: usize,
    /// Triggers with a collector at once in one namespace, so one namespace cannot take them
    /// all. Default 200: a fifth of `max_targets`. `--max-targets-per-namespace`.
    pub max_targets_per_namespace: usize,
    /// A collector that only `GetMetricSpec` asked for (KEDA reconciled a ScaledObject that may
    /// be gone since) stops after this long without a call, and gives way at once to a trigger
    /// KEDA reads. Default 60 s: a live ScaledObject is read within its polling interval.
    pub spec_only_stop: Duration,
    /// When a cap is reached, a collector no call has asked about for this long gives way to a
    /// new trigger (the least recently asked first). Default 120 s: four of KEDA's default
    /// polling intervals, so only a deleted or paused ScaledObject goes this quiet under load.
    pub evict_after: Duration,
    /// gRPC connections at once; at the cap a new one takes the place of the least recently
    /// useful connection of the address holding the most, or is closed as it is accepted
    /// ([`crate::edge::listener`]). Default 512: KEDA keeps one or two, and
    /// each costs a file descriptor. `--max-connections`.
    pub max_connections: usize,
    /// A gRPC connection is closed after this long without a byte from its client (the server
    /// pings three times in it, so a live client always answers in time), and after this long
    /// from its accept without a call (pings and a dribbled preface are not calls). Default
    /// 120 s.
    /// `--connection-idle-seconds`.
    pub connection_idle: Duration,
    /// A gRPC connection older than this is sent GOAWAY, and closed `drain` later with what is
    /// still open on it (KEDA reconnects, its `StreamIsActive` stream too), so answered pings
    /// or a dribbled preface cannot hold a place for ever; a metrics-port connection past this
    /// age is closed with its next answer. Default 600 s.
    /// `--connection-max-age-seconds`.
    pub connection_max_age: Duration,
    /// A new collector's calls wait at most this long after it starts for a reading that
    /// answers (the activator's held count arrives within milliseconds; a first scrape may take
    /// longer); later calls never wait. Default 1 s: well inside the 3 s KEDA gives the HPA's
    /// calls, and a polling trigger's first call answers rather than waiting a whole interval.
    pub first_answer_wait: Duration,
    /// Connections to the metrics port (`/metrics`, `/healthz`) at once; at the cap a new one
    /// makes room as on the gRPC port. Default 64:
    /// Prometheus and the kubelet need a few. `--metrics-max-connections`.
    pub metrics_max_connections: usize,
    /// A new connection to either port must send its first byte within this, and on the
    /// metrics port a whole request head (the same timer closes a keep-alive connection idle
    /// between requests there). Default 10 s. `--header-timeout-seconds`.
    pub header_timeout: Duration,
    /// A metrics-port connection is closed after this long without a byte from its client.
    /// Default 30 s.
    pub metrics_idle: Duration,
    /// After SIGTERM: streams are closed at once, and calls in flight get this long. Default
    /// 10 s, well inside Kubernetes' 30 s grace period. `--drain-seconds`.
    pub drain: Duration,
    /// How often `StreamIsActive` repeats the current answer when nothing changes. Default 10 s:
    /// KEDA needs no repeat, but a repeat shows a stream is alive.
    pub heartbeat: Duration,
    /// The pause after a failed `accept` (out of descriptors, say) before the next, on either
    /// port. Default 50 ms: short enough to recover at once, long enough not to spin.
    pub accept_backoff: Duration,
    /// A collector no call has asked about for this long stops. Default 600 s: KEDA asks every
    /// polling interval (30 s by default), so only a deleted ScaledObject goes this quiet.
    /// `--idle-stop-seconds`.
    pub idle_stop: Duration,
    /// How often a pod watch that has not listed yet is looked at again within a scrape round.
    /// Default 50 ms, so a first list is used almost as it arrives.
    pub unsynced_retry: Duration,
    /// The largest page read from a pod. Default 16 MiB: real pages are 10 KB to a few MB.
    /// `--max-page-bytes`.
    pub max_page_bytes: usize,
    /// Scrapes in flight at once, over all targets. Default 64. `--max-concurrent-scrapes`.
    pub max_concurrent_scrapes: usize,
    /// The bytes of pages and activator counts held at once, over all targets
    /// ([`super::budget`]): half in one share per scrape slot (a page within it always fits),
    /// half pooled for larger bodies, which fail for their pod alone when the pool is full.
    /// Default 64 MiB: 64 shares of 512 KiB and a 32 MiB pool, so two 16 MiB pages at once;
    /// with the connections' read buffers (64 x at most ~400 KiB) and the process itself
    /// (~20 MiB), under half the shipped 256 Mi limit. `--scrape-memory-bytes`.
    pub scrape_memory_bytes: usize,
    /// The longest a TCP connect to a pod or an activator may take. Default 5 s.
    pub connect_timeout: Duration,
    /// How long an idle pooled HTTP connection (to a pod or an activator) is kept. Default 4 s:
    /// under the 5 s after which the usual model servers (uvicorn, which vLLM runs on, and
    /// llama.cpp's server) close an idle keep-alive connection. A longer pool reuses a
    /// connection just as the pod closes it, and that scrape fails ("connection closed before
    /// message completed"): with 90 s, a pod scraped every 4.9 s was unreadable on every reuse
    /// (tests/upstream_churn.rs).
    pub pool_idle: Duration,
    /// The last pod list is trusted this long after the Kubernetes API stops answering. Default
    /// 300 s: a short API outage changes nothing, a long one is an error, not a guess.
    /// `--stale-after-seconds`.
    pub staleness: Duration,
    /// The longest wait for an activator's `/queue` answer or its watch's response head.
    /// Default 2 s: an activator answers from memory. `--activator-timeout-seconds`.
    pub activator_timeout: Duration,
    /// The longest silence on an activator's watch before it counts as stalled. Default 12 s:
    /// under three of the activator's 5-second keep-alives. `--activator-watch-idle-seconds`.
    pub activator_watch_idle: Duration,
    /// How often `/queue` is polled where there is no watch endpoint (the KEDA HTTP add-on's
    /// interceptor). Default 500 ms.
    pub activator_poll: Duration,
    /// The first pause before reconnecting to a failed activator; it doubles on every failure
    /// in a row. Default 100 ms.
    pub activator_backoff: Duration,
    /// The longest pause between reconnects. Default 5 s.
    pub activator_backoff_max: Duration,
    /// The largest counts document or event line accepted from an activator. Default 1 MiB:
    /// thousands of hosts' counts.
    pub activator_max_bytes: usize,
    /// The most activator pods followed for one trigger (the ready endpoints of its Service, or
    /// the URLs it names); ready ones past it count as unread, never as zero held. Default 32:
    /// an activator runs a few replicas.
    pub activator_max_endpoints: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_targets: 1000,
            max_targets_per_namespace: 200,
            spec_only_stop: Duration::from_secs(60),
            evict_after: Duration::from_secs(120),
            max_connections: 512,
            connection_idle: Duration::from_secs(120),
            connection_max_age: Duration::from_secs(600),
            first_answer_wait: Duration::from_secs(1),
            metrics_max_connections: 64,
            header_timeout: Duration::from_secs(10),
            metrics_idle: Duration::from_secs(30),
            drain: Duration::from_secs(10),
            heartbeat: Duration::from_secs(10),
            accept_backoff: Duration::from_millis(50),
            idle_stop: Duration::from_secs(600),
            unsynced_retry: Duration::from_millis(50),
            max_page_bytes: crate::edge::source::DEFAULT_MAX_BYTES,
            max_concurrent_scrapes: 64,
            scrape_memory_bytes: 64 << 20,
            connect_timeout: Duration::from_secs(5),
            pool_idle: Duration::from_secs(4),
            staleness: Duration::from_secs(300),
            activator_timeout: Duration::from_secs(2),
            activator_watch_idle: Duration::from_secs(12),
            activator_poll: Duration::from_millis(500),
            activator_backoff: Duration::from_millis(100),
            activator_backoff_max: Duration::from_secs(5),
            activator_max_bytes: 1 << 20,
            activator_max_endpoints: 32,
        }
    }
}

impl Limits {
    /// How often the Kubernetes API is probed: four times per staleness span, between 250 ms
    /// and 10 s.
    pub fn api_probe_every(&self) -> Duration {
        (self.staleness / 4).clamp(Duration::from_millis(250), Duration::from_secs(10))
    }

    /// How often idle collectors are looked for: four times per shortest idle span (of
    /// `idle_stop` and `spec_only_stop`), between 250 ms and 60 s.
    pub fn reap_every(&self) -> Duration {
        (self.idle_stop.min(self.spec_only_stop) / 4)
            .clamp(Duration::from_millis(250), Duration::from_secs(60))
    }
}
