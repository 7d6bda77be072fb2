//! Fuzz target `metadata`: the body is `infscale::fuzzing::metadata`, which tests/fuzz_corpus.rs replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| infscale::fuzzing::metadata(data));
