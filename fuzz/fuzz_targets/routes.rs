//! Fuzz target `routes`: the body is `infscale::fuzzing::routes`, which tests/fuzz_corpus.rs replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| infscale::fuzzing::routes(data));
