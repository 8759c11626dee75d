//! `trace`: a `tracing` span around every call.

use tracing::Instrument;
use tracing::field::{Empty, display};

use crate::error::ToolError;
use crate::extension::Wrap;
use crate::extension::{Next, Stack};
use crate::kind::property::Anywhere;

/// Wraps each call in an `INFO` span named `tool_call`, whose `tool` field is the
/// layer input's name; a failed call records its error in the span's `error` field
/// and emits a `WARN` event inside the span.
///
/// The span is named after the layer input through its `tool` field: `tracing`
/// span names are static strings, and subscribers (and OpenTelemetry exporters)
/// group by name, so one name with a field is also what dashboards want.
///
/// ```
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::Trace;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// let shout = Tool::builder().name("shout").description("Return the text.")
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let combo = shout.combo().with(Trace);
/// assert_eq!(combo.name(), "shout_trace");
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Trace;

impl crate::Extension for Trace {
    type Kind = crate::kind::Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "trace"
    }
}

impl<S: Stack> Wrap<S> for Trace {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        // The call is made inside this future: a future made outside and awaited
        // inside is stored twice (as captured, and as awaited), doubling per layer.
        let span = tracing::info_span!("tool_call", tool = %next.name(), error = Empty);
        let result = next.call(input).instrument(span.clone()).await;
        if let Err(error) = &result {
            span.record("error", display(error));
            tracing::warn!(parent: &span, %error, "tool call failed");
        }
        result
    }
}
