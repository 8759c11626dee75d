//! What an imported rmcp tool gets of its MCP request, and how its failures
//! leave it, wherever its body runs.
//!
//! Called over MCP in this process (an [`McpCall`] in the call's context, on a
//! pool thread too), the tool gets the request as it came, peer and all, at no
//! cost beyond a clone. Called without one (on a worker process of a backend
//! like toolgraft-jobs' `remote`, or by [`Toolset::call`](toolgraft::Toolset::call)),
//! it gets a request made from what travelled with the call: the request's
//! `_meta` ([`RequestMeta`], so `meta.get_progress_token()` is the client's
//! token), a cancellation token cancelled when the call is dropped (a job
//! withdrawn, a timeout), and a peer whose client is a relay:
//!
//! * `notifications/progress` go to the call's [`ProgressSink`], which a
//!   backend carries back to the caller and its server to the client's
//!   progress token;
//! * `notifications/message` (logging) go to the call's [`LogSink`], which a
//!   backend carries back to the caller and its server to the client as
//!   `notifications/message` (when the client can receive them); without a
//!   sink (a call from outside MCP, a backend that carries no log back) they
//!   are written to this process's `tracing` log, at their level, under the
//!   target `toolgraft_mcp::relay`; other notifications are dropped;
//! * a request to the client (elicitation, sampling, roots, ping) fails with a
//!   JSON-RPC error naming rule `caller-outside-relocation` and the fix.
//!
//! A failure leaves the tool as a [`Detailed`] error, [`Transient`] when the
//! tool [marked it](transient): a backend carries it to the caller whole, so the
//! server answers it alike wherever the body ran.

use std::borrow::Cow;
use std::convert::Infallible;

use rmcp::model::{
    CallToolResult, ErrorCode, JsonRpcMessage, NumberOrString, ServerNotification, ServerRequest,
};
use rmcp::service::{RequestContext, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use toolgraft::context::{self, LogLevel, LogMessage, LogSink, Progress, ProgressSink};
use toolgraft::error::{BoxError, Detailed, Transient};
use toolgraft::rulebook::Rule;

use crate::call::{McpCall, RequestMeta};
use crate::outcome::JSONRPC_ERROR;
use crate::server::ToolsOnly;

/// The key that marks an rmcp tool's failure transient: in a JSON-RPC error's
/// `data` (an object), or in an `isError` result's `_meta`, set to `true`
/// ([`transient`], [`transient_result`] set it). An imported tool's failure so
/// marked is [`Transient`], which `retry` makes the call again after, in
/// process and from a worker process alike.
///
/// ```
/// assert_eq!(toolgraft_mcp::import::TRANSIENT, "toolgraft/transient");
/// ```
pub const TRANSIENT: &str = "toolgraft/transient";

/// `error`, marked transient for toolgraft ([`TRANSIENT`] in its `data`; data
/// that is not an object is kept under `"data"`): the same call may succeed
/// later, and `retry` around the imported tool makes it again. The client that
/// gets the error sees the mark too.
///
/// ```
/// use rmcp::ErrorData;
/// use rmcp::handler::server::wrapper::Parameters;
/// use rmcp::{tool, tool_router};
/// use serde_json::json;
/// use toolgraft::Toolset;
/// use toolgraft::ext::Retry;
/// use toolgraft_mcp::import;
///
/// #[derive(Clone, Default)]
/// struct Index { calls: std::sync::Arc<std::sync::atomic::AtomicU32> }
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Query { q: String }
///
/// #[tool_router]
/// impl Index {
///     #[tool(description = "Search the index.", annotations(read_only_hint = true))]
///     async fn search(&self, Parameters(query): Parameters<Query>) -> Result<String, ErrorData> {
///         if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
///             return Err(import::transient(ErrorData::internal_error("the index is warming up", None)));
///         }
///         Ok(format!("nothing on {}", query.q))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let marked = import::transient(ErrorData::internal_error("busy", Some(json!({"db": "notes"}))));
/// assert_eq!(marked.data, Some(json!({"db": "notes", "toolgraft/transient": true})));
///
/// let tools = import::tools(Index::tool_router(), Index::default())?;
/// let toolset = Toolset::new();
/// toolset.bind((tools["search"].combo().with(Retry::attempts(2)),))?;
/// let found = toolset.call("search_retry", json!({"q": "rust"})).await?;
/// assert_eq!(found["content"][0]["text"], "nothing on rust");
/// # Ok(()) }
/// ```
pub fn transient(mut error: ErrorData) -> ErrorData {
    let mut data = match error.data.take() {
        Some(Value::Object(fields)) => fields,
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(other) => serde_json::Map::from_iter([("data".to_owned(), other)]),
    };
    data.insert(TRANSIENT.to_owned(), Value::Bool(true));
    error.data = Some(Value::Object(data));
    error
}

/// `result`, an `isError` result, marked transient for toolgraft ([`TRANSIENT`]
/// in its `_meta`; see [`transient`]).
///
/// ```
/// use rmcp::model::{CallToolResult, ContentBlock};
/// let busy = toolgraft_mcp::import::transient_result(CallToolResult::error(vec![ContentBlock::text("busy")]));
/// assert_eq!(busy.meta.unwrap().0["toolgraft/transient"], true);
/// ```
pub fn transient_result(mut result: CallToolResult) -> CallToolResult {
    result
        .meta
        .get_or_insert_with(Default::default)
        .0
        .insert(TRANSIENT.to_owned(), Value::Bool(true));
    result
}

/// An rmcp tool's protocol error (not invalid params) as the body's error: a
/// [`Detailed`] one that keeps the whole JSON-RPC error, so the server answers
/// with it wherever the body ran.
pub(crate) fn protocol_failure(error: ErrorData) -> BoxError {
    let marked = error
        .data
        .as_ref()
        .is_some_and(|data| data.get(TRANSIENT) == Some(&Value::Bool(true)));
    let message = error.message.to_string();
    let detailed = Detailed::new(message, json!({JSONRPC_ERROR: error}));
    marked_if(detailed, marked)
}

/// An rmcp tool's `isError` result as the body's error: its `text`, the same
/// from a worker as in process.
pub(crate) fn result_failure(result: &CallToolResult, text: String) -> BoxError {
    let marked = result
        .meta
        .as_ref()
        .is_some_and(|meta| meta.0.get(TRANSIENT) == Some(&Value::Bool(true)));
    marked_if(Detailed::new(text, Value::Null), marked)
}

fn marked_if(error: Detailed, transient: bool) -> BoxError {
    if transient {
        Transient::new(error).into()
    } else {
        error.into()
    }
}

/// The request an rmcp tool's method gets: the MCP request `call` came by, or,
/// without one, a request made from what travelled with the call, whose relay
/// lives as long as the [`Relay`] (held for the call, dropped with it).
pub(crate) fn request(call: Option<&McpCall>) -> (RequestContext<RoleServer>, Option<Relay>) {
    if let Some(call) = call {
        return (call.request_context().clone(), None);
    }
    let (answers, inbox) = mpsc::unbounded_channel();
    let transport = Client {
        // Taken here, in the call's context: the transport runs in a task of
        // its own, which has none.
        progress: context::get::<ProgressSink>(),
        log: context::get::<LogSink>(),
        answers,
        inbox,
    };
    let service = rmcp::service::serve_directly(ToolsOnly, transport, None);
    let mut request = RequestContext::new(NumberOrString::Number(0), service.peer().clone());
    if let Some(meta) = context::get::<RequestMeta>() {
        request.meta.0.0 = meta.0;
    }
    let cancel = CancellationToken::new();
    request.ct = cancel.clone();
    let relay = Relay {
        _service: service,
        _cancel: cancel.drop_guard(),
    };
    (request, Some(relay))
}

/// A relayed request's client, and the cancellation of its call: the call
/// dropped (it ended, or was withdrawn or timed out) cancels the request's `ct`
/// and stops the relay.
pub(crate) struct Relay {
    _service: RunningService<RoleServer, ToolsOnly>,
    _cancel: DropGuard,
}

/// The relay's end of the peer: what a client would get.
struct Client {
    progress: Option<ProgressSink>,
    log: Option<LogSink>,
    /// Answers to the peer's requests, which `receive` hands back.
    answers: mpsc::UnboundedSender<RxJsonRpcMessage<RoleServer>>,
    inbox: mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleServer>>,
}

impl Client {
    fn notify(&self, notification: ServerNotification) {
        match notification {
            ServerNotification::ProgressNotification(notification) => {
                let params = notification.params;
                let progress = Progress {
                    progress: params.progress,
                    total: params.total,
                    message: params.message,
                };
                // No sink: the caller did not ask for progress.
                if let Some(sink) = &self.progress {
                    sink.send(progress);
                }
            }
            ServerNotification::LoggingMessageNotification(notification) => {
                // Logging, deprecated by SEP-2577, which tools written for
                // earlier protocols still send.
                #[allow(deprecated)]
                let (level, logger, data) = {
                    let params = notification.params;
                    (params.level, params.logger, params.data)
                };
                let message = LogMessage {
                    level: crate::call::level_of(level),
                    logger,
                    data,
                };
                match &self.log {
                    // Below the sink's level: the caller asked not to hear it.
                    Some(sink) => drop(sink.send(message)),
                    None => trace(message),
                }
            }
            // Resource and list changes are the server's to tell its clients,
            // not one call's.
            _ => {}
        }
    }
}

/// A log message nobody takes, in this process's `tracing` log at its level.
fn trace(message: LogMessage) {
    let (logger, data) = (message.logger.unwrap_or_default(), message.data);
    match message.level {
        LogLevel::Debug => {
            tracing::debug!(target: "toolgraft_mcp::relay", %logger, %data, "an rmcp tool's log message");
        }
        LogLevel::Info | LogLevel::Notice => {
            tracing::info!(target: "toolgraft_mcp::relay", %logger, %data, "an rmcp tool's log message");
        }
        LogLevel::Warning => {
            tracing::warn!(target: "toolgraft_mcp::relay", %logger, %data, "an rmcp tool's log message");
        }
        _ => {
            tracing::error!(target: "toolgraft_mcp::relay", %logger, %data, "an rmcp tool's log message");
        }
    }
}

/// What a request to the client is answered with: there is none here to ask.
fn refusal(request: &ServerRequest) -> ErrorData {
    let method = serde_json::to_value(request)
        .ok()
        .and_then(|request| Some(request.get("method")?.as_str()?.to_owned()))
        .unwrap_or_else(|| "a request".to_owned());
    let rule = Rule::CallerOutsideRelocation;
    ErrorData::new(
        ErrorCode::INTERNAL_ERROR,
        format!(
            "`{method}` asks the MCP client, and this call has none here: the tool runs apart from \
             the caller's MCP session (in a worker process, or called outside MCP), where only \
             progress, logging and cancellation reach (requests to the client do not; {}); ask \
             the caller before the call is relocated, with a layer outside the backend \
             (`[remote, approve]`) or an input-required result, or run the tool in process",
            rule.cited()
        ),
        Some(json!({"rule": rule})),
    )
}

impl Transport<RoleServer> for Client {
    type Error = Infallible;

    fn name() -> Cow<'static, str> {
        "toolgraft relay (no MCP client)".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Handled here, not in the future: sends run concurrently, and progress
        // must keep its order.
        match item {
            JsonRpcMessage::Request(request) => {
                let answer = JsonRpcMessage::error(refusal(&request.request), Some(request.id));
                // The relay gone: nobody waits for the answer either.
                drop(self.answers.send(answer));
            }
            JsonRpcMessage::Notification(notification) => self.notify(notification.notification),
            // The relay's service is asked nothing, so it answers nothing.
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
        }
        std::future::ready(Ok(()))
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inbox.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        std::future::ready(Ok(()))
    }
}
