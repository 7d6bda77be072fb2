//! From a model server's `/metrics` page to the load signals of one replica.
//!
//! [`exposition`] reads the text format without copying; [`profile`] knows what each server
//! (vLLM, llama.cpp, SGLang, TGI, Triton) calls running, waiting and KV usage and turns one page
//! into [`Signals`]; [`rates`] turns two scrapes of the same replica into rates (output tokens/s,
//! CPU, Triton's occupancies, the TTFT observations of the interval), [`histogram`] holds the
//! quantile arithmetic, and [`replica`] bundles a replica's signals and rates for the decision.
//! [`props`] reads the sleep state llama.cpp says on `/props` rather than on its page.

pub mod exposition;
pub mod histogram;
pub mod profile;
pub mod props;
pub mod rates;
pub mod replica;

pub use profile::{read_page, Counters, PageRead, ProfileError, Server, ServerChoice, Signals};
pub use rates::Rates;
pub use replica::Replica;
