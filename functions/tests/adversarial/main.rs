//! Adversarial end-to-end tests: what a hostile or careless caller must not achieve.

#[path = "../common/mod.rs"]
mod common;

mod limits;
