//! The compile-time rule of `submit`, proved by compiling: `submit` anywhere but
//! right outside a `remote` branch fails with the reviewed message next to it.

#[test]
fn submit_only_over_remote() {
    trybuild::TestCases::new().compile_fail("ui-tests/*.rs");
}
