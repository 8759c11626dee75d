//! How deep in tool-calls-tool the current task is: a chain calling a chain, over
//! any number of backends. Kept with the stack because every relocating backend must
//! carry it to where it runs the layer below, so a cycle still ends.

tokio::task_local! {
    static DEPTH: usize;
}

/// How deep in chains the current task is (0 outside any).
pub(crate) fn current() -> usize {
    DEPTH.try_with(|depth| *depth).unwrap_or(0)
}

/// Runs `future` at chain depth `depth`.
pub(crate) async fn at<F: Future>(depth: usize, future: F) -> F::Output {
    DEPTH.scope(depth, future).await
}
