//! The allowed compositions in `ui-tests/pass/` compile and run: each case is a
//! module of this test crate and its `main` a test. Here rather than through
//! trybuild, which would build every dependency again in a target directory of
//! its own just to compile programs that are meant to compile; the forbidden
//! ones, whose errors are the point, stay with trybuild (`ui-tests/tests/ui.rs`).

macro_rules! allowed {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            include!(concat!("../../ui-tests/pass/", stringify!($case), ".rs"));

            #[test]
            fn compiles_and_runs() {
                main();
            }
        }
    )*};
}

allowed!(
    deep_16,
    deep_64,
    deep_128,
    generic_helpers,
    heavy_16,
    many_wrappers_and_transformers,
    one_backend_per_combo,
    pool_then_cache,
    pool_then_caller_local,
    proxy_then_pool,
    retry_deep,
    retry_on_a_tool_returned_with_its_hints,
    retry_over_once,
);
