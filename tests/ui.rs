//! The compile-time rules, proved by compiling: every forbidden composition in
//! `ui-tests/fail` must fail with the reviewed message next to it. The allowed
//! ones in `ui-tests/pass` compile and run as part of the integration tests
//! (`tests/it/pass.rs`).
//!
//! A test crate of its own, not a module of `tests/it`: trybuild runs cargo on a
//! generated project, and `cargo test --test ui` (or skipping it) stays one flag.
//!
//! The cases use the built-ins, and rustc's lists of a trait's implementors name
//! them: the expectations are written with every default built-in on (the opt-in
//! `metrics`, `jq` and `tower` add no implementor a case lists), so the suite runs
//! when they all are.
#![cfg(all(
    feature = "trace",
    feature = "cache",
    feature = "proxy",
    feature = "batch",
    feature = "pool",
    feature = "output-schema",
    feature = "chain",
    feature = "timeout",
    feature = "retry",
    feature = "limit",
    feature = "approve"
))]

#[test]
fn forbidden_compositions_do_not_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui-tests/fail/*.rs");
    // A case whose message lists every `Wrap` implementor (what a value that is
    // no extension at all lacks): `metrics` and `tower` add theirs to the list,
    // so it is checked with the default set only.
    #[cfg(not(any(feature = "metrics", feature = "tower")))]
    cases.compile_fail("ui-tests/fail-default/*.rs");
}
