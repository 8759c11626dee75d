//! The compile-time rules, proved by compiling: every forbidden composition in
//! `ui-tests/fail` must fail with the reviewed message next to it. The allowed
//! ones in `ui-tests/pass` compile and run as part of the integration tests
//! (`tests/it/pass.rs`).
//!
//! A test crate of its own, not a module of `tests/it`: trybuild runs cargo on a
//! generated project, and `cargo test --test ui` (or skipping it) stays one flag.

#[test]
fn forbidden_compositions_do_not_compile() {
    trybuild::TestCases::new().compile_fail("ui-tests/fail/*.rs");
}
