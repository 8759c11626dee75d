//! A call's outcome as MCP answers it, and a published name called outside any
//! MCP request ([`ToolsetServer::call`]).

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult, JsonObject};
use serde_json::Value;

use super::ToolsetServer;
use crate::outcome::{self, BadArguments, to_mcp};
use crate::task::Settled;
use crate::tool::{OutputShape, Rendering};

impl<H> ToolsetServer<H> {
    /// Calls a published name for a client on `shape`, outside any MCP request
    /// (no [`McpCall`](crate::call::McpCall), progress or principal): what
    /// `tools/call` returns, with errors mapped as the [crate docs](crate) say.
    /// Over MCP, the server's `call_tool` is the call with the request's context.
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// use toolgraft_mcp::{OutputShape, ToolsetServer};
    /// use rmcp::model::ErrorCode;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let shout = Tool::builder().name("shout").description("Return the text.")
    ///     .body(|i: Shout| async move {
    ///         if i.text.is_empty() { return Err("nothing to shout".into()) }
    ///         Ok(i.text.to_uppercase())
    ///     }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// let server = ToolsetServer::new(toolset);
    ///
    /// let args = |v: serde_json::Value| v.as_object().cloned();
    /// let ok = server.call("shout", args(json!({"text": "hi"})), OutputShape::AnyJson).await?;
    /// assert_eq!(ok.structured_content, Some(json!("HI")));
    ///
    /// let failed = server.call("shout", args(json!({"text": ""})), OutputShape::AnyJson).await?;
    /// assert_eq!(failed.is_error, Some(true));
    ///
    /// let invalid = server.call("shout", args(json!({"txt": "hi"})), OutputShape::AnyJson).await;
    /// assert_eq!(invalid.unwrap_err().code, ErrorCode::INVALID_PARAMS);
    /// # Ok(()) }
    /// ```
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        shape: OutputShape,
    ) -> Result<CallToolResult, ErrorData> {
        // Whether to structure follows the listing the client read; a name changed
        // meanwhile is looked up again by the call, which reports it if it is gone.
        let identity = toolgraft::context::get::<toolgraft::context::Identity>();
        let rendering = self.rendering(name, identity.as_ref(), shape);
        let arguments = arguments.map_or(Value::Null, Value::Object);
        to_mcp(
            self.toolset.call_published(name, arguments).await,
            name,
            rendering,
            self.bad_arguments,
        )
    }
}

/// A call's outcome as MCP answers it.
pub(super) fn settled(
    outcome: Result<Value, toolgraft::ToolError>,
    called: &str,
    rendering: Rendering,
    bad_arguments: BadArguments,
    shape: OutputShape,
) -> Settled {
    match outcome::input_required(&outcome, shape) {
        Some(needed) => Settled::Needs(needed),
        None => Settled::Answered(to_mcp(outcome, called, rendering, bad_arguments)),
    }
}

impl From<Settled> for Result<CallToolResponse, ErrorData> {
    fn from(settled: Settled) -> Self {
        match settled {
            Settled::Answered(answered) => answered.map(Into::into),
            Settled::Needs(needed) => Ok(needed.into()),
        }
    }
}
