//! A property-based state-machine test of the Workflow Session message board: random sequences
//! of posts, resolves, assignments, fenced completions, ACKs, observations and listings are
//! issued through the real router (MCP and REST) of two server instances sharing one real
//! database, one after the other or two at once (one on each instance, their results then
//! explained by one of the two orders), and every result is compared with a reference model
//! of the board.
//!
//! Besides each tool's result, every step checks invariants of the stored board: the message
//! set, numbers, statuses and counters, observation revisions that are unique and bumped
//! exactly once per observable change (read with SQL), assignment revisions that move exactly
//! when assignment-local state moves, and an observer that never skips a change and never
//! receives one twice across pages. A failure prints the shrunk operation sequence and a trace
//! of what each operation did. A few scenarios are also checked as fixed cases.
//!
//! The binary's modules: the [`ops`] a case is made of and the [`strategy`] that draws them;
//! the reference [`model`] of the board; the [`stored`] board read with SQL; the [`env`] of two
//! instances that serves the calls; a [`case`] that runs operations one at a time or racing,
//! with the checks of each tool's result in [`posting`], [`assignment`], [`ack`],
//! [`observation`] and [`listing`]; and the tests: the [`property`] and the [`known_cases`].

#[path = "../common/mod.rs"]
mod common;

#[macro_use]
mod checks;

mod ack;
mod assignment;
mod case;
mod env;
mod known_cases;
mod listing;
mod model;
mod observation;
mod ops;
mod posting;
mod property;
mod stored;
mod strategy;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use axum::http::StatusCode;
use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner as PropRunner};
use serde_json::{Value, json};
use wc_functions::AppState;
use wc_store::testing::TestDatabase;

use case::*;
use checks::{Check, failed, output, text};
use env::*;
use model::*;
use ops::*;
use stored::*;
use strategy::*;

/// The project every case's session works on.
const PROJECT: &str = "agent:local:board";
/// A well-formed message id that names nothing on any board.
const BOGUS: &str = "wc_msg_0000000000000000000000";
/// The answers completions choose from.
const ANSWERS: [&str; 3] = [
    "done: the build is green",
    "done: see the diff",
    "won't fix",
];
/// A listing's default limit.
const DEFAULT_LIMIT: usize = 50;
