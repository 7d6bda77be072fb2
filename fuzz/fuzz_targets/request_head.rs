//! Fuzz target `request_head`: the body is `infscale::fuzzing::request_head`, which tests/fuzz_corpus.rs replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| infscale::fuzzing::request_head(data));
