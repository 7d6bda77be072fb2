//! Fuzz target `trace`: the body is `infscale::fuzzing::trace`, which tests/fuzz_corpus.rs replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| infscale::fuzzing::trace(data));
