//! Postgres state for wc.
//!
//! Everything wc remembers lives in Postgres and every piece of SQL lives in this crate. The
//! modules are the pool and its typed configuration ([`config`], [`pool`]), the one way every
//! connection is made, with TLS and IAM database authentication ([`connect`], [`iam_auth`]),
//! `LISTEN` wake-up hints ([`notify`]), the embedded schema migrations ([`migrate`]), one
//! module per aggregate ([`sessions`] and its [`board`], [`audit`], [`credentials`],
//! [`projects`], [`runners`], the runner work queue [`work`], session [`shells`], MCP [`tasks`] and its SQS [`outbox`]), database
//! health ([`health`]) and a local PostgreSQL cluster manager for the embedded default
//! ([`cluster`]).
//!
//! Each aggregate module is the only way to change its aggregate. How it writes is its own
//! private choice, stated in its module documentation: a read–decide–write transaction under
//! the root row's lock (`change`), one guarded statement, or writes to one busy row combined
//! in one transaction (`batch`) sent in one round trip (`pipeline`); none of these strategies
//! is reachable from outside the crate.
#![warn(missing_docs)]

pub mod audit;
mod batch;
pub mod board;
mod change;
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
mod pipeline;
pub mod pool;
pub mod projects;
pub mod runners;
pub mod sessions;
pub mod shells;
pub mod tasks;
#[cfg(feature = "testing")]
pub mod testing;
pub mod work;

pub use change::ChangeOutcome;
pub use deadpool_postgres::{GenericClient, Object as Client, Pool, PoolError, Transaction};
pub use error::StoreError;
