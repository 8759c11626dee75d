//! `metrics` (feature `metrics`): call counts, error counts and durations per bound
//! name, through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! The recorder is the embedding application's choice (Prometheus, StatsD,
//! OpenTelemetry, ...): install one with `metrics::set_global_recorder` or an
//! exporter's `install`; without one, the wrapper costs a few atomic loads a call.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | [`CALLS`] `toolgraft_tool_calls_total` | counter | `tool`, `outcome` = `success` / `error` / `cancelled` |
//! | [`ERRORS`] `toolgraft_tool_errors_total` | counter | `tool`, `kind` (see [`error_kind`]) |
//! | [`DURATION`] `toolgraft_tool_call_duration_seconds` | histogram | `tool` |
//!
//! `tool` is the layer input's name: `[metrics]` on `fetch` counts `fetch`,
//! `[cache, metrics]` counts `fetch_cache` (so cache hits show as fast successes).
//! A call is a success when it returns no error; one whose caller stopped waiting
//! (a timeout outside, a dropped request) counts as `cancelled`, with no duration.
//! Arguments refused while decoding never reach a branch, so they are not counted.

use std::sync::{Arc, Once};

use metrics::{Label, SharedString};

use crate::error::ToolError;
use crate::extension::{LayerInput, Next, Stack, Wrap};
use crate::kind::property::Anywhere;

/// Calls by `tool` and `outcome`.
pub const CALLS: &str = "toolgraft_tool_calls_total";
/// Failed calls by `tool` and `kind`.
pub const ERRORS: &str = "toolgraft_tool_errors_total";
/// Call durations in seconds by `tool` (calls that returned, success or error).
pub const DURATION: &str = "toolgraft_tool_call_duration_seconds";

/// A wrapper that records, per bound name, calls by outcome, errors by kind and
/// call durations (see the [module](self)).
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::Metrics;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shout = Tool::builder().name("shout").description("Return the text.")
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((shout.combo().with(Metrics::default()),))?;
/// // With no recorder installed, the numbers go nowhere and the call is unchanged.
/// assert_eq!(toolset.call("shout_metrics", json!({"text": "hi"})).await?, json!("hi"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    /// Whether this branch described its metrics to the recorder yet: made when it
    /// is layered, so each branch describes them to the recorder of its first call.
    described: Option<Arc<Once>>,
}

// Nor among those that implement `Extension`, for the same reason.
#[diagnostic::do_not_recommend]
impl crate::Extension for Metrics {
    type Kind = crate::kind::Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "metrics"
    }
}

// Not listed among "the types that implement `Wrap<S>`" in compile errors: the list
// would then depend on the crate's features.
#[diagnostic::do_not_recommend]
impl<S: Stack> Wrap<S> for Metrics {
    type Params = ();

    fn for_branch(mut self, _: &LayerInput<'_, Self>) -> Self {
        self.described = Some(Arc::new(Once::new()));
        self
    }

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        if let Some(described) = &self.described {
            described.call_once(describe);
        }
        // The layer input's name, shared (no copy per call).
        let tool = Label::new("tool", SharedString::from(next.name().shared()));
        let labels = |key: &'static str, value: &'static str| {
            vec![tool.clone(), Label::from_static_parts(key, value)]
        };
        let mut pending = Pending {
            labels: Some(labels("outcome", "cancelled")),
        };
        // tokio's clock: the system's, or a test's paused one.
        let started = tokio::time::Instant::now();
        let result = next.call(input).await;
        let took = started.elapsed();
        pending.labels = None;
        metrics::histogram!(DURATION, vec![tool.clone()]).record(took);
        match &result {
            Ok(_) => {
                metrics::counter!(CALLS, labels("outcome", "success")).increment(1);
            }
            Err(error) => {
                metrics::counter!(CALLS, labels("outcome", "error")).increment(1);
                metrics::counter!(ERRORS, labels("kind", error_kind(error))).increment(1);
            }
        }
        result
    }
}

/// Describes the metrics to the recorder.
fn describe() {
    metrics::describe_counter!(CALLS, "Tool calls by outcome (success, error, cancelled).");
    metrics::describe_counter!(ERRORS, "Failed tool calls by error kind.");
    metrics::describe_histogram!(
        DURATION,
        metrics::Unit::Seconds,
        "Tool call durations, success or error."
    );
}

/// Counts a call that never returned (its future was dropped) as `cancelled`.
struct Pending {
    labels: Option<Vec<Label>>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(labels) = self.labels.take() {
            metrics::counter!(CALLS, labels).increment(1);
        }
    }
}

/// The `kind` label of a failed call: the [`ToolError`] variant, in snake case
/// ([`ToolError::code`]).
///
/// ```
/// use toolgraft::ToolError;
/// use toolgraft::ext::metrics::error_kind;
/// assert_eq!(error_kind(&ToolError::UnknownTool { name: "x".into() }), "unknown_tool");
/// ```
pub fn error_kind(error: &ToolError) -> &'static str {
    error.code()
}
