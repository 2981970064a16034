//! Workflow Sessions in the functions: ids, authority, execution defaults, and the pure
//! projections the session tools return (bounded excerpts, the handoff brief, continuation
//! feedback). Only `authority` touches the store; the projections are plain functions from
//! already-loaded evidence to bounded JSON, with no I/O, clock or state.

pub mod authority;
pub mod evidence;
pub mod excerpt;
pub mod exec_context;
pub mod feedback;
pub mod handoff;
pub mod mutation;
pub mod recording;
pub mod validation;
