//! Postgres state for wc.
//!
//! Everything wc remembers lives in Postgres and every piece of SQL lives in this crate. The
//! modules are the pool and its typed configuration ([`config`], [`pool`]), the one way every
//! connection is made, with TLS and IAM database authentication ([`connect`], [`iam_auth`]),
//! `LISTEN` wake-up hints ([`notify`]), the embedded schema migrations ([`migrate`]), the
//! compare-and-swap mutation helper every aggregate uses ([`cas`]),
//! one repository module per aggregate ([`credentials`], [`projects`]), the runner work queue
//! and its SQS outbox ([`work`], [`outbox`]), database health ([`health`]) and a local
//! PostgreSQL cluster manager for the embedded default ([`cluster`]).
#![warn(missing_docs)]

pub mod audit;
mod batch;
pub mod board;
pub mod cas;
pub mod cluster;
pub mod config;
pub mod connect;
pub mod credentials;
mod error;
pub mod evidence;
pub mod health;
pub mod iam_auth;
pub mod migrate;
pub mod notify;
pub mod outbox;
pub mod pipeline;
pub mod pool;
pub mod projects;
pub mod runners;
pub mod sessions;
#[cfg(feature = "testing")]
pub mod testing;
pub mod work;

pub use deadpool_postgres::{GenericClient, Pool, PoolError, Transaction};
pub use error::StoreError;
