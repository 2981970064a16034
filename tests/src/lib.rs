//! Harness for suites and benchmarks that drive wc from outside: spawn the real binaries, talk
//! to them over real HTTP.
#![warn(missing_docs)]

pub mod bench;
pub mod client;
pub mod server;
