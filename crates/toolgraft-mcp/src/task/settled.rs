//! How a task's call ends, as MCP answers it, and the objects a task inlines.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, InputRequiredResult, InputResponses, JsonObject};
use serde_json::Value;

/// How a call ended, as MCP answers it.
pub(crate) enum Settled {
    /// A result, or a protocol error.
    Answered(Result<CallToolResult, ErrorData>),
    /// The caller must answer these first.
    Needs(InputRequiredResult),
}

/// A call's future, to its end.
pub(crate) type Running = Pin<Box<dyn Future<Output = Settled> + Send>>;

/// Runs the call again with the responses and the state an input brought.
pub(crate) type Resume = Arc<dyn Fn(InputResponses, Option<String>) -> Running + Send + Sync>;

/// so an id reveals nothing.
pub(crate) fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no task `{id}`"), None)
}

/// A result as the object a completed task inlines.
pub(crate) fn object_of(result: &CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(Value::Object(result)) => result,
        _ => JsonObject::new(),
    }
}

/// A JSON-RPC error as the object a failed task inlines.
pub(crate) fn error_object(error: &ErrorData) -> JsonObject {
    match serde_json::to_value(error) {
        Ok(Value::Object(error)) => error,
        _ => JsonObject::new(),
    }
}
