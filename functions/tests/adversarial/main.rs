//! Adversarial end-to-end suites: each module keeps one class of attack shut.

#[path = "../common/mod.rs"]
mod common;

mod sandbox;
