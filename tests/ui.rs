//! The compile-time rules, proved by compiling: every forbidden composition in
//! `ui-tests/fail` must fail with the reviewed message next to it, and every
//! allowed one in `ui-tests/pass` must compile and run.

#[test]
fn forbidden_compositions_do_not_compile() {
    trybuild::TestCases::new().compile_fail("ui-tests/fail/*.rs");
}

#[test]
fn allowed_compositions_compile_and_run() {
    trybuild::TestCases::new().pass("ui-tests/pass/*.rs");
}
