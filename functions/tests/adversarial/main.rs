//! Adversarial end-to-end tests: each module keeps one class of attack fixed.

#[path = "../common/mod.rs"]
mod common;

mod local;
