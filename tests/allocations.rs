//! A profile read allocates a fixed amount, whatever the page's size: no allocation per sample.

use infscale_core::observe::metrics::{read_page, ServerChoice};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_to_read(page: &[u8]) -> usize {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let read = read_page(page, ServerChoice::Auto);
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    assert!(read.signals.is_ok());
    after - before
}

#[test]
fn allocations_do_not_grow_with_the_page() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/");
    let small = std::fs::read(format!("{dir}vllm-busy.prom")).unwrap();
    let large = std::fs::read(format!("{dir}bench/vllm-large.prom")).unwrap();
    let lines_small = small.iter().filter(|&&b| b == b'\n').count();
    let lines_large = large.iter().filter(|&&b| b == b'\n').count();
    assert!(lines_large > 5 * lines_small);
    let a_small = allocations_to_read(&small);
    let a_large = allocations_to_read(&large);
    // Both are a few dozen (the name table, one histogram's buckets), not thousands.
    eprintln!("{a_small} allocations for {lines_small} lines, {a_large} for {lines_large}");
    assert!(
        a_small < 64,
        "{a_small} allocations for {lines_small} lines"
    );
    assert!(
        a_large < 64,
        "{a_large} allocations for {lines_large} lines"
    );
}
