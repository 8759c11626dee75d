//! The MCP request a call came in by, in the call's context: what a body and
//! every extension reach of it (its id and `_meta`, its progress token, the
//! cancellation signal, the client as a peer, the HTTP request), and the
//! progress and principal it gives toolgraft's own context entries.
//!
//! A body reads it the way it reads any entry of the
//! [call context](toolgraft::context):
//!
//! ```
//! use toolgraft::context::{self, Progress};
//! use toolgraft_mcp::call::McpCall;
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Job { steps: u32 }
//! let work = toolgraft::Tool::builder().name("work").description("Work in steps.")
//!     .body(|job: Job| async move {
//!         for step in 1..=job.steps {
//!             // Reaches the client when it asked for progress; `false` otherwise.
//!             context::report_progress(Progress::new(step.into()).with_total(job.steps.into()));
//!         }
//!         let client = McpCall::current().and_then(|call| call.peer().peer_info().map(|info| info.client_info.name.clone()));
//!         Ok(client.unwrap_or_else(|| "no MCP client".to_owned()))
//!     })
//!     .build()?;
//! # Ok::<(), toolgraft::error::InvalidName>(())
//! ```
//!
//! The W3C trace context the client sent (SEP-414: `traceparent` and
//! `tracestate` in the request's `_meta`; over HTTP, when `_meta` has no
//! `traceparent`, the request's headers of those names) is a
//! [`TraceContext`](toolgraft::context::TraceContext) in the call's context,
//! when valid: anything malformed is ignored, and the call goes on in a trace of
//! its own. It reaches worker threads and processes with the call; a body that
//! calls out sends it on:
//!
//! ```
//! use toolgraft::context::{self, TraceContext};
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Query {}
//! let fetch = toolgraft::Tool::builder().name("fetch").description("Call out, in the caller's trace.")
//!     .body(|_: Query| async {
//!         let mut headers = Vec::new();
//!         if let Some(trace) = context::get::<TraceContext>() {
//!             headers.push(("traceparent", trace.traceparent()));
//!             if !trace.tracestate().is_empty() {
//!                 headers.push(("tracestate", trace.tracestate().to_owned()));
//!             }
//!         }
//!         // .. the request out, with `headers` ..
//!         Ok(headers.len())
//!     })
//!     .build()?;
//! # Ok::<(), toolgraft::error::InvalidName>(())
//! ```
//!
//! Calls that do not come over MCP ([`Toolset::call`](toolgraft::Toolset::call)
//! from a test) have none of it: [`McpCall::current`] is `None`, and reporting
//! progress reaches no one.
//!
//! The entry reaches worker threads (a `pool` body reads it) and stays behind at
//! a process boundary: a body on a worker process has no peer (an imported rmcp
//! tool gets one there that relays what can travel: see
//! [`import`](crate::import)). An extension that
//! needs the peer (to ask the client's user, say) declares
//! `type Locality = CallerLocal;`, and the rules keep it outside every backend
//! (rule `caller-outside-relocation`), in typed combos and manifests alike.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, InputResponses,
    ProgressNotificationParam, ProgressToken, RequestId, RequestMetaObject,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};

use toolgraft::context::{
    self, Answer, Answered, Ask, Asker, Context, Entry, Identity, InProcess, InputRequest,
    LogLevel, LogMessage, LogSink, Progress, ProgressSink, Question, Reach, Unkeyed,
};
use toolgraft::store::{StoreError, StoreFuture};

use crate::trace_context::trace_of;

/// The MCP request a call came in by (`tools/call`), set by
/// [`ToolsetServer`](crate::ToolsetServer) for the whole call: every layer of the
/// combo and the body see it.
///
/// It reaches worker threads (a body on a `pool` thread reads it, and its peer
/// works from there) and stays behind at a process boundary: the peer is a
/// connection of the caller's process. What crosses to a worker process
/// (progress, cancellation, the principal) is issue of the relocation, not of
/// this entry.
#[derive(Clone)]
pub struct McpCall(Arc<Came>);

/// The request and what it brought, in one allocation that the call's
/// [`McpCall`] and its asker share.
struct Came {
    request: RequestContext<RoleServer>,
    brought: Brought,
}

impl McpCall {
    /// The current call's MCP request, when it came over MCP.
    ///
    /// ```
    /// assert!(toolgraft_mcp::call::McpCall::current().is_none());
    /// ```
    pub fn current() -> Option<Self> {
        context::get::<Self>()
    }

    /// The JSON-RPC id of the request.
    pub fn id(&self) -> &RequestId {
        &self.0.request.id
    }

    /// The request's `_meta`.
    pub fn meta(&self) -> &RequestMetaObject {
        &self.0.request.meta
    }

    /// The progress token the client sent, when it asked for progress
    /// ([`toolgraft::context::report_progress`] sends to it).
    pub fn progress_token(&self) -> Option<ProgressToken> {
        self.0.request.meta.get_progress_token()
    }

    /// The client, for requests of the server's own: elicitation, sampling,
    /// logging (`peer().create_message(..)`, `peer().notify_logging_message(..)`).
    pub fn peer(&self) -> &Peer<RoleServer> {
        &self.0.request.peer
    }

    /// Whether the client cancelled the request (or its connection ended).
    pub fn is_cancelled(&self) -> bool {
        self.0.request.ct.is_cancelled()
    }

    /// Waits until the client cancels the request (or its connection ends; for a
    /// call that became an MCP task, until the task is cancelled). The call is
    /// stopped then anyway (its future is dropped); a body waits for this only
    /// to stop work it handed elsewhere.
    pub async fn cancelled(&self) {
        self.0.request.ct.cancelled().await;
    }

    /// The responses the call brings to the input requests of an earlier
    /// input-required result, by key, as the client sent them.
    pub fn input_responses(&self) -> Option<&InputResponses> {
        self.0.brought.responses.as_ref()
    }

    /// The `requestState` the call brings back from an earlier input-required
    /// result, as the client echoed it (untrusted).
    pub fn request_state(&self) -> Option<&str> {
        self.0.brought.state.as_deref()
    }

    /// The handler of the session the call came in by
    /// ([`ToolsetServer::with_handler`](crate::ToolsetServer::with_handler): one
    /// per session, or a clone of one), when it is an `H`. Tools imported
    /// [per session](crate::import::per_session) run on it.
    ///
    /// ```
    /// use toolgraft_mcp::call::McpCall;
    /// # #[derive(Clone)] struct Counter;
    /// // In a body: the session's `Counter`, if the server was given one.
    /// let counter = McpCall::current().and_then(|call| call.handler::<Counter>());
    /// assert!(counter.is_none(), "outside an MCP call");
    /// ```
    pub fn handler<H: Send + Sync + 'static>(&self) -> Option<Arc<H>> {
        self.0.brought.handler.clone()?.downcast::<H>().ok()
    }

    /// The whole rmcp request context: what an rmcp tool gets.
    pub fn request_context(&self) -> &RequestContext<RoleServer> {
        &self.0.request
    }

    /// The HTTP request the call came in, over Streamable HTTP (its method,
    /// URI, headers, and the extensions the server's layers set).
    #[cfg(feature = "http")]
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn http_parts(&self) -> Option<&axum::http::request::Parts> {
        self.0
            .request
            .extensions
            .get::<axum::http::request::Parts>()
    }
}

impl fmt::Debug for McpCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpCall")
            .field("id", &self.0.request.id)
            .finish_non_exhaustive()
    }
}

impl Entry for McpCall {
    const NAME: &'static str = "toolgraft_mcp.call";
    type Travel = InProcess;
    type Key = Unkeyed;
}

/// The request's `_meta` (the client's own fields, trace ids, ..), as a context
/// entry that travels: unlike [`McpCall`], it crosses to worker processes,
/// serialized, so a body on a `remote` worker reads what the client sent.
///
/// ```
/// use toolgraft::context;
/// use toolgraft_mcp::call::RequestMeta;
/// assert!(context::get::<RequestMeta>().is_none(), "outside an MCP call");
/// ```
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct RequestMeta(pub serde_json::Map<String, serde_json::Value>);

impl RequestMeta {
    /// The field `key` of the request's `_meta`.
    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.get(key)
    }
}

impl Entry for RequestMeta {
    const NAME: &'static str = "toolgraft_mcp.request_meta";
    type Travel = toolgraft::context::Serialized;
    type Key = Unkeyed;
}

/// What a `tools/call` brings back after an input-required result: the answers
/// by key, and the state the result carried (both as the client sent them).
#[derive(Default)]
pub(crate) struct Brought {
    pub responses: Option<InputResponses>,
    pub state: Option<String>,
    /// Whether the call's protocol has input-required results (2026-07-28 and
    /// later): what the server found already, for the call's output shape.
    pub stateless: bool,
    /// The call's arguments as sent, kept where an approval may seal them
    /// (`stateless`: the seal is over what the client sends).
    pub arguments: Option<serde_json::Value>,
    /// Where progress goes instead of the client's progress token: a task's
    /// (whose request was answered when it became one).
    pub progress: Option<ProgressSink>,
    /// The offer to follow the call later, by its job's id (an MCP task).
    pub deferral: Option<toolgraft::relocation::Deferral>,
    /// The handler of the session the call came in.
    pub handler: Option<SessionHandler>,
    /// The session, for a tool whose answers are the session's: a cache keys on it.
    pub session: Option<Session>,
    /// The level the client set for its session (`logging/setLevel`), if it did.
    pub session_level: Option<LogLevel>,
}

/// A connection's session, as a context entry a cache keys on: set for the
/// calls of tools imported [per session](crate::import::per_session), whose
/// answers are the session's, so that no session reads another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Session(u64);

impl Session {
    /// One no other connection of this process has had.
    pub(crate) fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Self(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl Entry for Session {
    const NAME: &'static str = "toolgraft_mcp.session";
    type Travel = toolgraft::context::Stays;
    type Key = toolgraft::context::Keyed;
}

/// A session's handler, whatever its type: what [`McpCall::handler`] finds.
pub(crate) type SessionHandler = Arc<dyn std::any::Any + Send + Sync>;

/// How an MCP client's user is asked, for toolgraft's [`Asker`]: by an
/// input-required result on protocol 2026-07-28 and later, by elicitation
/// before it, and not at all by a client that declared no elicitation.
struct McpAsk(Arc<Came>);

/// An elicitation result as toolgraft's answer; one that is not one declines.
pub(crate) fn answer_of(result: &serde_json::Value) -> Answer {
    match serde_json::from_value::<ElicitResult>(result.clone()) {
        Ok(ElicitResult {
            action: ElicitationAction::Accept,
            content,
            ..
        }) => match content {
            Some(serde_json::Value::Object(fields)) => Answer::Accept(fields),
            _ => Answer::Accept(serde_json::Map::new()),
        },
        Ok(ElicitResult {
            action: ElicitationAction::Cancel,
            ..
        }) => Answer::Cancel,
        _ => Answer::Decline,
    }
}

impl Ask for McpAsk {
    fn answered(&self, key: &str) -> Option<Answered> {
        let response = self.0.brought.responses.as_ref()?.get(key)?;
        Some(Answered {
            answer: answer_of(response),
            state: self.0.brought.state.clone(),
        })
    }

    fn reach(&self) -> Reach {
        // Read only when asked: the client's capabilities are a copy to take.
        let elicits = self
            .0
            .request
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
        match (elicits, self.0.brought.stateless) {
            (false, _) => Reach::Not,
            (true, true) => Reach::Later,
            (true, false) => Reach::Now,
        }
    }

    fn arguments(&self) -> Option<&serde_json::Value> {
        self.0.brought.arguments.as_ref()
    }

    fn response(&self, key: &str) -> Option<serde_json::Value> {
        self.0.brought.responses.as_ref()?.get(key).cloned()
    }

    fn state(&self) -> Option<String> {
        self.0.brought.state.clone()
    }

    fn can_answer(&self, request: &InputRequest) -> bool {
        let Some(capabilities) = self.0.request.client_capabilities() else {
            return false;
        };
        match request {
            InputRequest::Ask(_) => capabilities.elicitation.is_some(),
            InputRequest::Protocol { method, .. } => match method.as_str() {
                "elicitation/create" => capabilities.elicitation.is_some(),
                "sampling/createMessage" => capabilities.sampling.is_some(),
                "roots/list" => capabilities.roots.is_some(),
                _ => false,
            },
            _ => false,
        }
    }

    fn ask_now(&self, question: Question) -> StoreFuture<'static, Answer> {
        let peer = self.0.request.peer.clone();
        Box::pin(async move {
            let params: ElicitRequestParams = serde_json::from_value(serde_json::json!({
                "mode": "form",
                "message": question.message,
                "requestedSchema": question.schema,
            }))
            .map_err(|error| {
                StoreError::new(format_args!("the question is not an elicitation: {error}"))
                    .with_source(error)
            })?;
            let result = peer
                .create_elicitation(params)
                .await
                .map_err(|error| StoreError::new(&error).with_source(error))?;
            Ok(answer_of(&serde_json::to_value(result).unwrap_or_default()))
        })
    }
}

/// The identity the HTTP layer found for `request`, if any: none over stdio,
/// where the caller is whoever launched the process (MCP's authorization is
/// HTTP's; a stdio server takes its credentials from its environment).
pub(crate) fn identity_of(request: &RequestContext<RoleServer>) -> Option<Identity> {
    #[cfg(feature = "http")]
    if let Some(identity) = request
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Identity>())
    {
        return Some(identity.clone());
    }
    let _ = request;
    None
}

tokio::task_local! {
    /// The identity of the HTTP request being handled, for what rmcp asks the
    /// handler outside any call (`get_tool`, which reads a tool's input schema
    /// to check a request's headers against it). Unset elsewhere: no identity.
    pub(crate) static CALLER: Option<Identity>;
}

/// The identity of the HTTP request rmcp is handling in this task, if any.
pub(crate) fn caller() -> Option<Identity> {
    CALLER.try_with(Clone::clone).ok().flatten()
}

/// Where a call refused for want of scopes a new token may bring leaves them,
/// for the HTTP layer to answer `403` with a challenge naming them: set by the
/// HTTP layer on a request's parts, filled by the server's `tools/call`.
#[cfg(feature = "http")]
#[derive(Clone, Debug, Default)]
pub(crate) struct StepUp(pub(crate) Arc<std::sync::OnceLock<Vec<String>>>);

/// The step-up slot of `request`, when it came over HTTP.
#[cfg(feature = "http")]
pub(crate) fn step_up_of(request: &RequestContext<RoleServer>) -> Option<StepUp> {
    request
        .extensions
        .get::<axum::http::request::Parts>()?
        .extensions
        .get::<StepUp>()
        .cloned()
}

/// The principal the HTTP layer found for `request`, if any.
pub(crate) fn principal_of(
    request: &RequestContext<RoleServer>,
) -> Option<toolgraft::context::Principal> {
    #[cfg(feature = "http")]
    if let Some(principal) = request
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<toolgraft::context::Principal>())
    {
        return Some(principal.clone());
    }
    let _ = request;
    None
}

/// Runs `call` as the call of `request`: with its [`McpCall`], the principal and
/// the identity the HTTP layer found, the W3C trace context it sent
/// ([`TraceContext`](toolgraft::context::TraceContext), when valid), an [`Asker`] for its client's user (with the answers
/// `brought`), when the client sent a progress token, a [`ProgressSink`] whose
/// reports reach the client in order, at most every [`PROGRESS_EVERY`](toolgraft::context::PROGRESS_EVERY) (the
/// newest of those made meanwhile), the last one before the reply, and, when
/// the client can receive them ([`log_level`]), a [`LogSink`] whose messages
/// reach it as `notifications/message`, in order, at most
/// [`LOG_BACKLOG`](toolgraft::context::LOG_BACKLOG) waiting (the oldest dropped
/// past them, and counted), all before the reply.
pub(crate) async fn serve<F: Future>(
    request: RequestContext<RoleServer>,
    brought: Brought,
    call: F,
) -> F::Output {
    let token = match brought.progress {
        Some(_) => None,
        None => request.meta.get_progress_token(),
    };
    let log_level = log_level(&request, &brought);
    let peer = request.peer.clone();
    let mut context = Context::current();
    if let Some(principal) = principal_of(&request) {
        context = context.with(principal);
    }
    // What the toolset's policies decide on, in the call and every call it
    // makes by name (a chain's next step included).
    if let Some(identity) = identity_of(&request) {
        context = context.with(identity);
    }
    // The client's trace, for the body to continue and to send on, wherever
    // the call runs.
    if let Some(trace) = trace_of(&request) {
        context = context.with(trace);
    }
    if !request.meta.0.0.is_empty() {
        context = context.with(RequestMeta(request.meta.0.0.clone()));
    }
    if let Some(progress) = brought.progress.clone() {
        context = context.with(progress);
    }
    if let Some(deferral) = brought.deferral.clone() {
        context = context.with(deferral);
    }
    if let Some(session) = brought.session {
        context = context.with(session);
    }
    let came = Arc::new(Came { request, brought });
    context = context.with(Asker::new(McpAsk(came.clone())));
    context = context.with(McpCall(came));
    if token.is_none() && log_level.is_none() {
        return context.scope(call).await;
    }
    // Progress folded for the client (the first report at once, then the newest
    // at most every `PROGRESS_EVERY`, the last one before the reply), log
    // messages queued. A fold or a queue whose sink is not set yields nothing:
    // the loop below waits on both either way.
    let (progress_sink, mut fold) = ProgressSink::folded();
    let (log_sink, logs) = LogSink::queue(log_level.unwrap_or(LogLevel::Emergency));
    if token.is_some() {
        context = context.with(progress_sink);
    }
    if log_level.is_some() {
        context = context.with(log_sink);
    }
    let call = context.scope(call);
    let send = |progress: Progress| {
        let peer = peer.clone();
        let notification = token.clone().map(|token| {
            let mut notification = ProgressNotificationParam::new(token, progress.progress);
            notification.total = progress.total;
            notification.message = progress.message;
            notification
        });
        // A client gone is the end of its progress, not of the call.
        async move {
            if let Some(notification) = notification {
                drop(peer.notify_progress(notification).await);
            }
        }
    };
    let log = |message: LogMessage| {
        let peer = peer.clone();
        // A client gone is the end of its log, not of the call. Logging is
        // deprecated by SEP-2577; clients still receive it.
        #[allow(deprecated)]
        async move {
            drop(peer.notify_logging_message(notification_of(message)).await)
        }
    };
    tokio::pin!(call);
    let output = loop {
        tokio::select! {
            biased;
            output = &mut call => break output,
            message = logs.next() => log(message).await,
            progress = fold.next() => send(progress).await,
        }
    };
    // What the body logged and reported last goes before the reply.
    while let Some(message) = logs.try_next() {
        log(message).await;
    }
    if let Some(progress) = fold.try_next() {
        send(progress).await;
    }
    output
}

/// The least severe level of the call's log messages its client receives, if
/// it receives any: the level the request asks for in its `_meta`
/// (`io.modelcontextprotocol/logLevel`); without one, on protocols before
/// 2026-07-28, the level the client set for its session with `logging/setLevel`
/// (none until it sets one: a call nobody listens to the log of costs nothing),
/// and none on 2026-07-28 and later, where a request that asks for no level gets
/// no log messages. A call that may become an MCP task gets none either: its request
/// is answered when it becomes one, and its log would outlive it.
#[allow(deprecated)] // `LoggingLevel`: logging, deprecated by SEP-2577.
fn log_level(request: &RequestContext<RoleServer>, brought: &Brought) -> Option<LogLevel> {
    if brought.progress.is_some() {
        return None;
    }
    let Some(level) = request.meta.log_level() else {
        return if brought.stateless {
            None
        } else {
            brought.session_level
        };
    };
    Some(level_of(level))
}

/// rmcp's logging level as toolgraft's.
#[allow(deprecated)] // `LoggingLevel`: logging, deprecated by SEP-2577.
pub(crate) fn level_of(level: rmcp::model::LoggingLevel) -> LogLevel {
    use rmcp::model::LoggingLevel as Level;
    match level {
        Level::Debug => LogLevel::Debug,
        Level::Info => LogLevel::Info,
        Level::Notice => LogLevel::Notice,
        Level::Warning => LogLevel::Warning,
        Level::Error => LogLevel::Error,
        Level::Critical => LogLevel::Critical,
        Level::Alert => LogLevel::Alert,
        Level::Emergency => LogLevel::Emergency,
    }
}

/// A log message as MCP's `notifications/message`.
#[allow(deprecated)] // Logging, deprecated by SEP-2577, which clients still receive.
fn notification_of(message: LogMessage) -> rmcp::model::LoggingMessageNotificationParam {
    let notification =
        rmcp::model::LoggingMessageNotificationParam::new(mcp_level(message.level), message.data);
    match message.logger {
        Some(logger) => notification.with_logger(logger),
        None => notification,
    }
}

/// MCP's `notifications/message` as a log message (another server's, passed on).
#[allow(deprecated)] // Logging, deprecated by SEP-2577, which clients still receive.
#[cfg(feature = "upstream")]
pub(crate) fn log_message_of(
    notification: rmcp::model::LoggingMessageNotificationParam,
) -> LogMessage {
    let message = LogMessage::new(level_of(notification.level), notification.data);
    match notification.logger {
        Some(logger) => message.with_logger(logger),
        None => message,
    }
}

/// toolgraft's logging level as rmcp's.
#[allow(deprecated)] // `LoggingLevel`: logging, deprecated by SEP-2577.
pub(crate) fn mcp_level(level: LogLevel) -> rmcp::model::LoggingLevel {
    use rmcp::model::LoggingLevel as Level;
    match level {
        LogLevel::Debug => Level::Debug,
        LogLevel::Info => Level::Info,
        LogLevel::Notice => Level::Notice,
        LogLevel::Warning => Level::Warning,
        LogLevel::Error => Level::Error,
        LogLevel::Critical => Level::Critical,
        LogLevel::Alert => Level::Alert,
        LogLevel::Emergency => Level::Emergency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_elicitation_result_is_an_answer_and_anything_else_declines() {
        let accepted = answer_of(&json!({"action": "accept", "content": {"approve": true}}));
        assert_eq!(accepted.field("approve"), Some(&json!(true)));
        assert_eq!(
            answer_of(&json!({"action": "accept"})),
            Answer::Accept(serde_json::Map::new())
        );
        assert_eq!(answer_of(&json!({"action": "cancel"})), Answer::Cancel);
        for other in [
            json!({"action": "decline"}),
            json!({"action": "sure"}),
            json!("yes"),
            json!(null),
        ] {
            assert_eq!(answer_of(&other), Answer::Decline, "{other}");
        }
    }
}
