//! Fuzz target `scenario`: the body is `infscale::fuzzing::scenario`, which tests/fuzz_corpus.rs replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| infscale::fuzzing::scenario(data));
