//! Fuzz target `policy`: the body is `infscale::fuzzing::policy`, which tests/fuzz_corpus.rs replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| infscale::fuzzing::policy(data));
