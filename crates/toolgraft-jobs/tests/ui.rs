//! The compile-time rules of this crate's backends, proved by compiling, each
//! failing with the reviewed message next to it: `submit` anywhere but right
//! outside a `remote` branch, and `approve` (which needs the caller) inside one.

#[test]
fn submit_only_over_remote_and_approve_only_outside_it() {
    trybuild::TestCases::new().compile_fail("ui-tests/*.rs");
}
