//! Adversarial end-to-end tests: each module keeps one class of attack, found by probing wc as
//! an attacker would, fixed.

#[path = "../common/mod.rs"]
mod common;

mod identity;
mod limits;
mod local;
mod redact;
mod results;
mod sandbox;
