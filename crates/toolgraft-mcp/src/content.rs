//! [`McpContent`]: a tool's answer as MCP content blocks (images, audio,
//! embedded resources, several texts), passed to the client as it is.

use std::borrow::Cow;

use rmcp::model::{CallToolResult, ContentBlock};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// The keyword that marks an output schema as [`McpContent`]'s: the one thing
/// the server reads to pass such a result through.
pub(crate) const CONTENT_KEYWORD: &str = "x-toolgraft-mcp-content";

/// A tool's answer as MCP content blocks, for a tool whose answer is not one
/// JSON value: an image, audio, an embedded resource, several blocks at once.
///
/// Return it from a body (typed or [`DynTool`](toolgraft::runtime::DynTool));
/// the server answers with its blocks as they are and advertises no
/// `outputSchema` for it. Layers that keep the output (a cache, a timeout, a
/// pool) keep it too, so a cached image is still an image; a layer that
/// reshapes the output (a batch) makes it JSON, which a client reads as text.
///
/// It is a success to every layer (a cache keeps it, metrics count it so):
/// fail with `Err(..)` for a failure, which the server answers `isError`, rather
/// than with a `CallToolResult::error` inside.
///
/// ```
/// use rmcp::model::ContentBlock;
/// use toolgraft_mcp::McpContent;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Chart {}
/// let chart = toolgraft::Tool::builder().name("chart").description("Draw the chart.")
///     .body(|_: Chart| async move {
///         Ok(McpContent::new(vec![
///             ContentBlock::text("Sales by month:"),
///             ContentBlock::image("iVBORw0KGgo=", "image/png"),
///         ]))
///     })
///     .build()?;
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct McpContent(pub CallToolResult);

impl McpContent {
    /// An answer of these blocks.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        Self(CallToolResult::success(content))
    }
}

impl From<CallToolResult> for McpContent {
    fn from(result: CallToolResult) -> Self {
        Self(result)
    }
}

impl JsonSchema for McpContent {
    fn schema_name() -> Cow<'static, str> {
        "McpContent".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "MCP content blocks, passed to the client as they are.",
            "properties": {"content": {"type": "array"}},
            "required": ["content"],
            CONTENT_KEYWORD: true,
        })
    }
}

/// Whether an output schema is [`McpContent`]'s.
pub(crate) fn is_content_schema(schema: &Schema) -> bool {
    schema.get(CONTENT_KEYWORD) == Some(&serde_json::Value::Bool(true))
}
