//! The compile-time rules, proved by compiling: every forbidden composition must
//! fail with the reviewed message next to it (`.stderr`, read by a human eye: its
//! first line names the rule, its notes the fix).
//!
//! One `TestCases`, so trybuild type-checks the dependencies once and all the
//! cases in one cargo run: `cargo test -p toolgraft-ui-tests` (set
//! `TRYBUILD=overwrite` only after reading what changed).

#[test]
fn forbidden_compositions_do_not_compile() {
    let cases = trybuild::TestCases::new();
    // The core's rules: kinds, locality, schemas, params, side effects.
    cases.compile_fail("fail/*.rs");
    // toolgraft-jobs's: `submit` only right outside a `remote` branch, and
    // `approve` (which needs the caller) and `authorize` (which decides before a
    // job is sent) outside one.
    cases.compile_fail("jobs/*.rs");
}
