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
use crate::extension::{Extension, Layer, LayerInput, Wrap, Wrapped};
use crate::kind::Wrapper;
use crate::rules::Anywhere;
use crate::stack::{Next, Stack};

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
/// use toolgraft::{BaseTool, Tool, Toolset};
/// use toolgraft::ext::Metrics;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shout = Tool::builder().name("shout").description("Return the text.")
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind_combos((shout.combo().with(Metrics),))?;
/// // With no recorder installed, the numbers go nowhere and the call is unchanged.
/// assert_eq!(toolset.call("shout_metrics", json!({"text": "hi"})).await?, json!("hi"));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Metrics;

impl Extension for Metrics {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "metrics"
    }
}

impl<S: Stack> Layer<S> for Metrics {
    type Branch = Wrapped<Measured, S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch {
        let measured = Measured {
            tool: Label::new(
                "tool",
                SharedString::from(Arc::<str>::from(below.name.as_str())),
            ),
            described: Arc::new(Once::new()),
        };
        Wrapped::new(measured, inner, below)
    }
}

/// One branch's metrics: what the [`Metrics`] branch wraps its layer input with
/// (its `tool` label made once).
#[derive(Clone)]
pub struct Measured {
    tool: Label,
    described: Arc<Once>,
}

impl std::fmt::Debug for Measured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Measured")
            .field("tool", &self.tool.value())
            .finish_non_exhaustive()
    }
}

impl Extension for Measured {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "metrics"
    }
}

impl Measured {
    fn labels(&self, key: &'static str, value: &'static str) -> Vec<Label> {
        vec![self.tool.clone(), Label::from_static_parts(key, value)]
    }

    /// Describes the metrics to the recorder of the first call (once per branch).
    fn describe(&self) {
        self.described.call_once(|| {
            metrics::describe_counter!(CALLS, "Tool calls by outcome (success, error, cancelled).");
            metrics::describe_counter!(ERRORS, "Failed tool calls by error kind.");
            metrics::describe_histogram!(
                DURATION,
                metrics::Unit::Seconds,
                "Tool call durations, success or error."
            );
        });
    }
}

/// Counts a call that never returned (its future was dropped) as `cancelled`.
struct Pending<'a> {
    measured: &'a Measured,
    finished: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.finished {
            metrics::counter!(CALLS, self.measured.labels("outcome", "cancelled")).increment(1);
        }
    }
}

impl<S: Stack> Wrap<S> for Measured {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        self.describe();
        let mut pending = Pending {
            measured: self,
            finished: false,
        };
        // tokio's clock: the system's, or a test's paused one.
        let started = tokio::time::Instant::now();
        let result = next.call(input).await;
        let took = started.elapsed();
        pending.finished = true;
        metrics::histogram!(DURATION, vec![self.tool.clone()]).record(took);
        match &result {
            Ok(_) => {
                metrics::counter!(CALLS, self.labels("outcome", "success")).increment(1);
            }
            Err(error) => {
                metrics::counter!(CALLS, self.labels("outcome", "error")).increment(1);
                metrics::counter!(ERRORS, self.labels("kind", error_kind(error))).increment(1);
            }
        }
        result
    }
}

/// The `kind` label of a failed call: the [`ToolError`] variant, in snake case.
///
/// ```
/// use toolgraft::ToolError;
/// use toolgraft::ext::metrics::error_kind;
/// assert_eq!(error_kind(&ToolError::UnknownTool { name: "x".into() }), "unknown_tool");
/// ```
pub fn error_kind(error: &ToolError) -> &'static str {
    match error {
        ToolError::UnknownTool { .. } => "unknown_tool",
        ToolError::InvalidArguments { .. } => "invalid_arguments",
        ToolError::Body { .. } => "body",
        ToolError::Panicked { .. } => "panicked",
        ToolError::Refused { .. } => "refused",
        ToolError::Relocation { .. } => "relocation",
        ToolError::TimedOut { .. } => "timed_out",
        ToolError::Reported { .. } => "reported",
        ToolError::OutputMismatch { .. } => "output_mismatch",
        ToolError::Chain { .. } => "chain",
        ToolError::Output { .. } => "output",
    }
}
