//! The core's integration tests: one test binary (one link of the dependency
//! tree), one module per area of the contract. The compile-time side is in
//! `ui-tests/`, a crate of its own.
//!
//! A module that exercises built-ins compiles with their features only, so that
//! `cargo test --no-default-features` runs what the core alone can.

mod common;

#[cfg(all(
    feature = "authorize",
    feature = "cache",
    feature = "chain",
    feature = "pool"
))]
mod access;
#[cfg(feature = "cel")]
mod access_cel;
#[cfg(all(feature = "cache", feature = "trace"))]
mod access_hostile;
#[cfg(all(feature = "cache", feature = "chain", feature = "limit"))]
mod audiences;
#[cfg(all(feature = "batch", feature = "pool", feature = "proxy"))]
mod agreement;
#[cfg(all(feature = "approve", feature = "pool"))]
mod approve;
#[cfg(all(feature = "cache", feature = "proxy", feature = "trace"))]
mod authoring;
#[cfg(all(feature = "cache", feature = "trace"))]
mod bind;
mod builder;
#[cfg(all(
    feature = "batch",
    feature = "cache",
    feature = "proxy",
    feature = "trace"
))]
mod builtins;
#[cfg(all(feature = "batch", feature = "cache", feature = "trace"))]
mod calls;
#[cfg(all(
    feature = "batch",
    feature = "cache",
    feature = "pool",
    feature = "trace"
))]
mod clones;
#[cfg(all(feature = "cache", feature = "chain"))]
mod context;
#[cfg(all(feature = "pool", feature = "trace"))]
mod depth;
#[cfg(all(
    feature = "otel",
    feature = "cache",
    feature = "pool",
    feature = "retry",
    feature = "trace"
))]
mod otel;
#[cfg(all(
    feature = "batch",
    feature = "cache",
    feature = "chain",
    feature = "output-schema",
    feature = "pool",
    feature = "proxy",
    feature = "trace"
))]
mod dynamic;
#[cfg(all(
    feature = "cache",
    feature = "pool",
    feature = "proxy",
    feature = "trace"
))]
mod edit;
#[cfg(all(feature = "cache", feature = "trace"))]
mod helpers;
#[cfg(feature = "jq")]
mod jq_chain;
mod kinds;
#[cfg(feature = "limit")]
mod limits;
#[cfg(all(feature = "cache", feature = "trace"))]
mod manifest_match;
mod manifest_shape;
#[cfg(all(feature = "metrics", feature = "timeout"))]
mod metrics;
#[cfg(all(feature = "batch", feature = "trace"))]
mod naming;
#[cfg(all(feature = "once", feature = "retry", feature = "trace"))]
mod once;
#[cfg(all(
    feature = "batch",
    feature = "cache",
    feature = "pool",
    feature = "proxy",
    feature = "retry",
    feature = "timeout",
    feature = "trace"
))]
mod pass;
#[cfg(all(feature = "cache", feature = "timeout"))]
mod pins;
#[cfg(all(feature = "cache", feature = "trace"))]
mod publish;
#[cfg(all(feature = "cache", feature = "trace"))]
mod publish_clients;
#[cfg(all(feature = "cache", feature = "trace"))]
mod rebase_unbind;
#[cfg(all(
    feature = "batch",
    feature = "cache",
    feature = "pool",
    feature = "proxy",
    feature = "trace"
))]
mod relocation;
#[cfg(all(feature = "batch", feature = "cache", feature = "trace"))]
mod schemas;
#[cfg(all(
    feature = "batch",
    feature = "cache",
    feature = "limit",
    feature = "pool",
    feature = "retry",
    feature = "trace"
))]
mod side_effects;
#[cfg(all(feature = "cache", feature = "proxy"))]
mod third_party;
#[cfg(all(feature = "pool", feature = "timeout"))]
mod timeout;
#[cfg(feature = "tower")]
mod tower_ext;
mod trace_context;
#[cfg(all(
    feature = "batch",
    feature = "cache",
    feature = "chain",
    feature = "output-schema",
    feature = "trace"
))]
mod typed_params;
#[cfg(all(feature = "cache", feature = "trace"))]
mod wrappers;
