//! End-to-end suites that keep the findings of an attacker's probe fixed, one module per
//! finding.

#[path = "../common/mod.rs"]
mod common;

mod results;
