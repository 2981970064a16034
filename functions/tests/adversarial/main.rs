#[path = "../common/mod.rs"]
mod common;
mod redact;
