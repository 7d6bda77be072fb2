//! Reading a page costs memory that does not grow with the page: `serve` charges a page's bytes
//! to its scrape budget, and this is what makes that charge the whole cost. A counting
//! allocator measures the peak a 16 MiB hostile page adds while it is read (every line a wanted
//! sample with labels, a TTFT bucket of its own bound, or a malformed line): a few KB, not a
//! multiple of the page.

use infscale_core::observe::metrics::{read_page, ProfileError, ServerChoice};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
            PEAK.fetch_max(live, Ordering::SeqCst);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const PAGE: usize = 16 << 20;

/// The counts are the process's: one test measures at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `line(i)` repeated to 16 MiB, after a vLLM page's queue series.
fn page(line: impl Fn(u64) -> String) -> Vec<u8> {
    let mut page = Vec::with_capacity(PAGE + 256);
    page.extend_from_slice(
        b"vllm:num_requests_running{model_name=\"m\"} 1\nvllm:num_requests_waiting{model_name=\"m\"} 2\n",
    );
    let mut i = 0;
    while page.len() < PAGE {
        page.extend_from_slice(line(i).as_bytes());
        i += 1;
    }
    page
}

/// What reading `page` adds at its peak to what is live before, bytes.
fn peak_while_reading(page: &[u8]) -> (usize, Result<(), ProfileError>) {
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let read = read_page(page, ServerChoice::Auto);
    let peak = PEAK.load(Ordering::SeqCst) - before;
    (peak, read.signals.map(|_| ()))
}

#[test]
fn a_16_mib_page_costs_a_few_kb_to_read_whatever_its_lines() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let wanted = page(|i| {
        format!(
            "vllm:num_requests_running{{model_name=\"m\",pad=\"xxxxxxxxxxxxxxxx\",i=\"{i}\"}} 1\n"
        )
    });
    let buckets = page(|i| {
        format!(
            "vllm:time_to_first_token_seconds_bucket{{model_name=\"m\",le=\"{}\"}} 1\n",
            1e9 - i as f64
        )
    });
    let broken = page(|i| format!("not a sample {{{i}\n"));
    for (what, page, expect_ok) in [
        ("wanted samples", wanted, true),
        ("distinct buckets", buckets, false),
        ("malformed lines", broken, true),
    ] {
        let (peak, signals) = peak_while_reading(&page);
        assert_eq!(signals.is_ok(), expect_ok, "{what}: {signals:?}");
        assert!(
            peak < 64 << 10,
            "{what}: reading a {} MiB page peaked at {peak} bytes",
            page.len() >> 20
        );
    }
}

#[test]
fn a_histogram_of_more_bounds_than_any_real_one_is_refused_by_name() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let page = page(|i| {
        format!(
            "vllm:time_to_first_token_seconds_bucket{{le=\"{}\"}} 1\n",
            i as f64
        )
    });
    let (_, signals) = peak_while_reading(&page[..200_000]);
    match signals {
        Err(e @ ProfileError::TooManyBuckets { max: 256, .. }) => {
            assert!(
                e.to_string()
                    .contains("vllm:time_to_first_token_seconds_bucket"),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
}
