//! The wc runner agent: executes work for the projects of one build host.
//!
//! `wc-runner` (the binary) and `wc-local` (its embedded runner) both run [`config`]-driven
//! agents from this library; the agent speaks only the runner protocol: over HTTP, and through
//! an SQS queue of work envelopes when configured with `queue = "sqs"` ([`sqs`]). Jobs run in a
//! bubblewrap sandbox by default, and every process a job starts ends with it ([`sandbox`]).

pub mod agent;
mod answer;
mod beneath;
pub mod boundary;
pub mod cgroup;
pub mod client;
pub mod config;
pub mod confine;
pub mod edit;
pub mod exec;
pub mod explore;
pub mod git;
pub mod opened;
pub mod program;
pub mod sandbox;
pub mod shell;
pub mod sqs;
pub mod validate;
pub mod workspace;
