//! Nothing: the cases are in `fail/` and `jobs/`, run by `tests/ui.rs` beside them.
