//! The stateless HTTP functions of wc.
//!
//! [`app`] builds the one axum [`Router`](axum::Router) every entry point serves: the Lambda
//! binary hands it to `lambda_http::run`, `wc-local` to `axum::serve`. Nothing here survives
//! between requests except what is in Postgres (through `wc-store`).
//!
//! Modules: [`config`] (typed configuration), [`http`] (request context, body limit, error
//! shaping), [`auth`] (bearer credentials and principals), [`health`] (the health check),
//! [`telemetry`] (JSON logs) and [`admin`] (the `wc-admin` commands). The embedded `wc-local`
//! stack is the `wc-local` crate: it links the runner agent, which no binary here does.
#![warn(missing_docs)]

pub mod admin;
mod app;
pub mod audit;
pub mod auth;
pub mod board;
pub mod config;
pub mod deps;
pub mod docs;
pub mod execution;
pub mod hardening;
pub mod health;
pub mod http;
pub mod kernel;
pub mod lambda;
pub mod limits;
pub mod maintenance;
pub mod materials;
pub mod mcp;
pub mod redaction;
pub mod rest;
pub mod result;
pub mod runner_api;
pub mod state;
pub mod telemetry;
pub mod tokens;
pub mod tools;
pub mod wake;
pub mod workflow;

pub use app::{Surfaces, app, app_for, queue_publisher};
pub use state::AppState;

/// The allocator the server binaries install (`#[global_allocator]`): mimalloc. A request
/// builds and drops many small JSON values and buffers; glibc's malloc and free were a tenth
/// of the CPU time of a busy `wc-local` (see docs/BENCHMARKS.md).
pub use mimalloc::MiMalloc as Allocator;

/// The version every surface reports.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
