//! Fuzz target `exposition`: the body is `infscale::fuzzing::exposition`, which tests/fuzz_corpus.rs replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| infscale::fuzzing::exposition(data));
