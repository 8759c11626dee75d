//! What the current task is inside of, carried by tokio task-locals: how deep in
//! tool-calls-tool it is (a chain calling a chain, over any number of backends),
//! and which body-local layer's call it is in. A relocating backend reads both: it
//! carries the depth to where it runs the layer below, so a cycle still ends, and it
//! refuses to relocate a body from inside a body-local layer, which would then not
//! apply to the body (rule `locality-inside-relocation` in the
//! [rulebook](crate::rulebook), at run time, for the compositions types cannot see:
//! a tool body that calls a branch, say).

use crate::name::Name;

tokio::task_local! {
    static DEPTH: usize;
    static BODY_LOCAL: BodyLocalScope;
}

/// How deep in chains the current task is (0 outside any).
pub(crate) fn current() -> usize {
    DEPTH.try_with(|depth| *depth).unwrap_or(0)
}

/// Runs `future` at chain depth `depth`.
pub(crate) async fn at<F: Future>(depth: usize, future: F) -> F::Output {
    DEPTH.scope(depth, future).await
}

/// The body-local layer whose call the current task is in.
#[derive(Clone, Debug)]
pub(crate) struct BodyLocalScope {
    /// The extension (`proxy`).
    pub(crate) extension: Name,
    /// The branch it runs in (`fetch_proxy`).
    pub(crate) branch: Name,
}

/// The innermost body-local layer the current task is in, if any.
pub(crate) fn body_local() -> Option<BodyLocalScope> {
    BODY_LOCAL.try_with(Clone::clone).ok()
}

/// Runs `future` inside the body-local layer `scope`.
pub(crate) fn in_body_local<F: Future>(
    scope: BodyLocalScope,
    future: F,
) -> impl Future<Output = F::Output> {
    BODY_LOCAL.scope(scope, future)
}
