//! The core's integration tests: one test binary (one link of the dependency
//! tree), one module per area of the contract. The compile-time side is in
//! `ui-tests/`, a crate of its own.

mod common;

mod agreement;
mod approve;
mod authoring;
mod bind;
mod builder;
mod builtins;
mod calls;
mod clones;
mod context;
mod depth;
mod dynamic;
mod edit;
mod helpers;
#[cfg(feature = "jq")]
mod jq_chain;
mod kinds;
mod limits;
mod manifest_shape;
#[cfg(feature = "metrics")]
mod metrics;
mod naming;
mod pass;
mod pins;
mod publish;
mod publish_clients;
mod relocation;
mod schemas;
mod side_effects;
mod third_party;
mod timeout;
#[cfg(feature = "tower")]
mod tower_ext;
mod typed_params;
mod wrappers;
