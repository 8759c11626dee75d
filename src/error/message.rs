//! The long messages of the errors, and the lists they quote.

use std::fmt;

use crate::name::Name;
use crate::quote::shorten;

pub(super) fn timed_out(
    tool: &Name,
    extension: &Name,
    job: Option<&str>,
    after: &std::time::Duration,
) -> String {
    match job {
        Some(job) => format!(
            "backend `{extension}` waited {after:?} for job `{}` (running `{tool}`) and gave up; \
             is a worker serving its queue?",
            shorten(job)
        ),
        None => format!("`{tool}` did not finish within {after:?}; `{extension}` cancelled it"),
    }
}

pub(super) fn side_effects(
    tool: &Name,
    extension: &Name,
    layer: &Name,
    demand: crate::annotations::Demand,
    transformer: Option<&Name>,
) -> String {
    use crate::annotations::Demand;
    let does = match demand {
        Demand::Repeatable => "makes a call again after a failure",
        Demand::Skippable => "answers calls without making them",
    };
    let needs = demand.needs();
    if let Some(transformer) = transformer {
        return format!(
            "on `{tool}`, `{extension}` {does}, but it sits on `{layer}`, the branch of `{transformer}`: \
             a new tool whose hints say nothing of its side effects; place `{extension}` inside \
             `{transformer}`, on a layer of `{tool}` that is {needs}"
        );
    }
    let fix = match demand {
        Demand::Repeatable => format!(
            "if a second call does no more than the first, annotate `{tool}` idempotent \
             (`.idempotent()` in its builder, `#[tool(annotations(idempotent_hint = true))]` on \
             an rmcp tool, or \"annotations\": {{\"idempotentHint\": true}} for it in the \
             manifest); otherwise put `once` inside `{extension}` (it answers a repeated call \
             with the first one's outcome), or leave `{extension}` off"
        ),
        _ => format!(
            "if a call not made loses nothing, annotate `{tool}` so (`.read_only()` in its \
             builder, or `.destructive(false)` on an idempotent one; \
             `#[tool(annotations(read_only_hint = true))]` on an rmcp tool; in the manifest \
             \"annotations\": {{\"readOnlyHint\": true}} or {{\"idempotentHint\": true, \
             \"destructiveHint\": false}} for it), or let `{extension}` skip its calls anyway where its config allows it (`cache`: \
             \"side_effects\": \"allowed\")"
        ),
    };
    format!("on `{tool}`, `{extension}` {does}, but `{tool}` is not annotated {needs}; {fix}")
}

pub(super) fn overloaded(
    tool: &Name,
    extension: &Name,
    reason: &str,
    retry_after: Option<&std::time::Duration>,
) -> String {
    match retry_after {
        Some(after) => format!(
            "`{extension}` refused the call to `{tool}`: {reason}; retry after {}",
            Millis(*after)
        ),
        None => format!("`{extension}` refused the call to `{tool}`: {reason}"),
    }
}

/// A wait as people read it: whole milliseconds, at least 1 ms for any wait.
struct Millis(std::time::Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        let ms = nanos.div_ceil(1_000_000);
        write!(f, "{ms} ms")
    }
}

pub(crate) fn ticked(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", shorten(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Items as `a, b, c` (names, combo elements, chain links).
pub(crate) fn listed<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|item| shorten(&item.to_string()).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}
