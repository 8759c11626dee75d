//! A call of an upstream tool: sent to the upstream with the caller's `_meta`
//! and trace context, its progress passed back, cancelled upstream when the
//! call is dropped or runs out of time, and its answer read as an imported
//! rmcp tool's is.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotificationParam,
    ClientRequest, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::model::{InputRequest, InputRequests, InputResponses, ProtocolVersion};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolgraft::context::{self, Asker, LogSink, Progress, ProgressSink, Reach, TraceContext};
use toolgraft::error::{ArgsError, ArgsErrorKind, BoxError, Transient};
use toolgraft::schema::Args;

use super::client::Listener;
use super::config::{UpstreamConfig, urls_redacted};
use super::link::{self, Current, Live, Protocol};
use super::stdio;
use crate::call::McpCall;
use crate::task::{Hold, TaskMoment};

/// What an upstream tool answers, by its output schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// No output schema: content blocks.
    Content,
    /// An output schema of a string: the text, or structured content.
    Text,
    /// Any other output schema: structured content.
    Json,
}

/// What every forwarded call of one upstream shares.
pub(super) struct Forwarder {
    pub(super) current: Current,
    /// The links of protocol 2025-11-25, one per session of a caller of it,
    /// when `current` speaks 2026-07-28 (see [`Protocol::Initialize`]).
    pub(super) sessions: Sessions,
    pub(super) config: UpstreamConfig,
    pub(super) stop: CancellationToken,
    pub(super) listener: Listener,
    pub(super) endpoint: String,
    pub(super) call_timeout: Duration,
    pub(super) max_result_bytes: usize,
    /// Numbers the calls in flight (see [`Listener::asking`]).
    pub(super) calls: AtomicU64,
}

impl Forwarder {
    /// Calls the upstream's tool `name` with `args`, in the current call's
    /// context. An input-required answer is asked of the caller now, and the
    /// tool called again with the answers, when the caller's protocol asks
    /// within a call (elicitation, sampling, roots requests); otherwise it
    /// passes through to the caller, whose answers come back with its call
    /// again.
    pub(super) async fn call(
        self: Arc<Self>,
        name: Arc<str>,
        shape: Shape,
        args: Args,
    ) -> Result<Value, BoxError> {
        let call_in = McpCall::current();
        let mut params = CallToolRequestParams::new(name.to_string()).with_arguments(args);
        // The answers a caller brings back are this tool's only when the
        // state it echoes says so: in a combo of several upstream tools, one
        // tool's answers never reach another's upstream.
        if let Some(call) = &call_in
            && let Some(echoed) = call.request_state()
        {
            match opened(echoed, &name) {
                // The answers to an upstream task's requests: given to it,
                // and the task followed on.
                Some(Some(state)) if state.starts_with(TASK_STATE) => {
                    let task = state[TASK_STATE.len()..].to_owned();
                    let answers = call.input_responses().cloned().unwrap_or_default();
                    return self
                        .resume_task(&name, task, answers, call_in.as_ref(), shape)
                        .await;
                }
                Some(state) => {
                    params.input_responses = call.input_responses().cloned();
                    params.request_state = state;
                }
                // Another upstream tool's state: its answers are not this one's.
                None if is_sealed(echoed) => {}
                None => {
                    return Err(ArgsError {
                        field: None,
                        kind: ArgsErrorKind::InvalidValue,
                        problem: "the request state is not one this server gave, or was changed"
                            .to_owned(),
                    }
                    .into());
                }
            }
        }
        // A call that may become a task here is one when the upstream makes
        // it one: held from now until the upstream answers (see `TaskMoment`).
        let mut held = context::get::<TaskMoment>().map(|moment| moment.hold());
        let asks_now = context::get::<Asker>().is_some_and(|asker| asker.reach() == Reach::Now);
        // The upstream's reports go where the call's progress goes; with no
        // one to take them, they are not followed at all.
        let followed = context::get::<ProgressSink>().is_some();
        let deadline = tokio::time::Instant::now() + self.call_timeout;
        // An upstream task waiting on answers asked now: they go to it.
        let mut waiting: Option<(String, InputResponses)> = None;
        for _ in 0..MAX_ROUNDS {
            let mut response = if let Some((task, answers)) = waiting.take() {
                self.task_round(task, answers, call_in.as_ref(), deadline)
                    .await?
            } else {
                // Only a call that asks its caller now is sent again: the
                // others give their request away.
                let sent = if call_in.is_some() && asks_now {
                    params.clone()
                } else {
                    std::mem::replace(&mut params, CallToolRequestParams::new(""))
                };
                self.round(sent, call_in.as_ref(), followed, deadline, &mut held)
                    .await?
            };
            let (Some(call), Ok(CallToolResponse::InputRequired(needed)), true) =
                (&call_in, &response, asks_now)
            else {
                if let Ok(CallToolResponse::InputRequired(needed)) = &mut response {
                    needed.request_state = Some(sealed(&name, needed.request_state.take()));
                }
                return self.settle(response, shape);
            };
            let requests = needed.input_requests.clone().unwrap_or_default();
            let answers = tokio::time::timeout_at(deadline, answer_now(call.peer(), requests))
                .await
                .map_err(|_| {
                    format!(
                        "the caller did not answer the upstream {}'s question within {} ms (`call_timeout_ms`)",
                        self.endpoint,
                        self.call_timeout.as_millis()
                    )
                })??;
            match needed
                .request_state
                .as_deref()
                .and_then(|state| state.strip_prefix(TASK_STATE))
            {
                Some(task) => waiting = Some((task.to_owned(), answers)),
                None => {
                    params.input_responses = Some(answers);
                    params.request_state = needed.request_state.clone();
                }
            }
        }
        Err(format!(
            "the upstream {} asked for input more than {MAX_ROUNDS} times in one call",
            self.endpoint
        )
        .into())
    }

    /// One `tools/call` of the upstream, by `deadline`, its progress passed
    /// on when `followed` (the call has a progress sink). The call's task
    /// moment is `held` until the upstream makes the call a task, or for as
    /// long as it answers, if it makes tasks at all.
    async fn round(
        &self,
        params: CallToolRequestParams,
        call_in: Option<&McpCall>,
        followed: bool,
        deadline: tokio::time::Instant,
        held: &mut Option<Hold>,
    ) -> Result<Result<CallToolResponse, rmcp::ErrorData>, BoxError> {
        let (live, listener, link) = self.link_for(call_in).await?;
        let log = context::get::<LogSink>();
        // On 2025-11-25 the call cannot name its caller's log level: the
        // connection is asked for it first.
        if let Some(log) = &log
            && !link::is_newest(&live.peer)
        {
            live.log_level
                .include(&live.peer, log.level(), deadline)
                .await;
        }
        let peer = live.peer;
        if !peer
            .peer_info()
            .is_some_and(|info| info.capabilities.supports_tasks())
        {
            // It answers whenever it answers: this server decides.
            held.take();
        }
        let mut options = PeerRequestOptions::no_options();
        options.meta = Some(meta_for_upstream(call_in, log.as_ref()));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut asking = listener.asking(
            self.calls.fetch_add(1, Ordering::Relaxed),
            call_in.map(|call| call.peer().clone()),
            log.clone(),
        );
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|error| self.lost(&error, &link))?;
        asking.sent_as(handle.id.clone());
        let (mut reports, _following) = if followed {
            let (reports, following) = listener.follow(handle.progress_token.clone());
            (Some(reports), Some(following))
        } else {
            (None, None)
        };
        let mut unanswered = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
        };
        let answer = handle.await_response();
        tokio::pin!(answer);
        let out_of_time = tokio::time::sleep_until(deadline);
        tokio::pin!(out_of_time);
        let answer = loop {
            tokio::select! {
                answer = &mut answer => break answer,
                Some(report) = next_report(&mut reports) => {
                    context::report_progress(report);
                }
                () = &mut out_of_time => {
                    // `unanswered` cancels it upstream as it drops.
                    return Err(Transient::new(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the upstream {} did not answer within {} ms (`call_timeout_ms`); the call is cancelled there",
                            self.endpoint,
                            self.call_timeout.as_millis()
                        ),
                    ))
                    .into());
                }
            }
        };
        unanswered.id = None;
        // Reports and log messages the upstream sent before its answer, not
        // yet passed on. rmcp hands each notification to a task of its own, so
        // the last one may still be on its way: its task is given the chance to
        // run first. One that comes later still is dropped, as a report after
        // the answer.
        if reports.is_some() || log.is_some() {
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
        }
        if let Some(reports) = &mut reports {
            while let Ok(report) = reports.try_recv() {
                context::report_progress(report);
            }
        }
        match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(Ok(CallToolResponse::Complete(result))),
            Ok(ServerResult::InputRequiredResult(result)) => {
                Ok(Ok(CallToolResponse::InputRequired(result)))
            }
            // The upstream made the call a task of its own (its tool takes one,
            // and the caller's capabilities say tasks): followed here to its
            // end, within the call's time; this process answers the caller,
            // with a task of its own where it makes one.
            Ok(ServerResult::CreateTaskResult(created)) => {
                held.take();
                self.follow_task(&peer, &link, &created.task, deadline)
                    .await
            }
            Ok(_) => Err("the upstream answered `tools/call` with another kind of result".into()),
            Err(ServiceError::McpError(error)) => Ok(Err(error)),
            Err(error) => Err(self.lost(&error, &link)),
        }
    }

    /// The upstream's task `task`, polled (at its interval, between 50 ms and
    /// 2 s) until it ends or `deadline`; cancelled upstream if the call stops
    /// waiting first.
    async fn follow_task(
        &self,
        peer: &Peer<RoleClient>,
        link: &Current,
        task: &rmcp::model::Task,
        deadline: tokio::time::Instant,
    ) -> Result<Result<CallToolResponse, rmcp::ErrorData>, BoxError> {
        use rmcp::model::{GetTaskParams, TaskPayload};
        let every = Duration::from_millis(task.poll_interval_ms.unwrap_or(200).clamp(50, 2000));
        let mut unfinished = CancelTaskOnDrop {
            peer: peer.clone(),
            task: Some(task.task_id.clone()),
        };
        loop {
            if tokio::time::Instant::now() + every > deadline {
                return Err(Transient::new(format!(
                    "the upstream {}'s task did not end within {} ms (`call_timeout_ms`); it is cancelled there",
                    self.endpoint,
                    self.call_timeout.as_millis()
                ))
                .into());
            }
            tokio::time::sleep(every).await;
            let got = peer
                .get_task(GetTaskParams::new(task.task_id.clone()))
                .await
                .map_err(|error| self.lost(&error, link))?;
            let ended = match got.task.payload {
                TaskPayload::Working => continue,
                TaskPayload::Completed { result } => Ok(Ok(CallToolResponse::Complete(
                    serde_json::from_value(Value::Object(result))?,
                ))),
                TaskPayload::Failed { error } => {
                    Ok(Err(serde_json::from_value(Value::Object(error))?))
                }
                // Asked of the caller as an input-required answer whose state
                // names the task; the answers come back to `resume_task`.
                TaskPayload::InputRequired { input_requests } => Ok(Ok(
                    CallToolResponse::InputRequired(rmcp::model::InputRequiredResult::new(
                        Some(input_requests),
                        Some(format!("{TASK_STATE}{}", task.task_id)),
                    )),
                )),
                _ => Err("the upstream's task was cancelled there".into()),
            };
            unfinished.task = None;
            return ended;
        }
    }

    /// The upstream task `task` given the caller's `answers` to its requests
    /// (`tasks/update`), then followed to its end, or its next question.
    async fn resume_task(
        &self,
        name: &str,
        task: String,
        answers: InputResponses,
        call_in: Option<&McpCall>,
        shape: Shape,
    ) -> Result<Value, BoxError> {
        let deadline = tokio::time::Instant::now() + self.call_timeout;
        let mut response = self.task_round(task, answers, call_in, deadline).await?;
        if let Ok(CallToolResponse::InputRequired(needed)) = &mut response {
            needed.request_state = Some(sealed(name, needed.request_state.take()));
        }
        self.settle(response, shape)
    }

    /// One round of an upstream task: the answers given to it
    /// (`tasks/update`), then the task followed to its end or next question.
    async fn task_round(
        &self,
        task: String,
        answers: InputResponses,
        call_in: Option<&McpCall>,
        deadline: tokio::time::Instant,
    ) -> Result<Result<CallToolResponse, rmcp::ErrorData>, BoxError> {
        let (Live { peer, .. }, _, link) = self.link_for(call_in).await?;
        peer.update_task(rmcp::model::UpdateTaskParams::new(task.clone(), answers))
            .await
            .map_err(|error| match error {
                ServiceError::McpError(error) => crate::relay::protocol_failure(error),
                error => self.lost(&error, &link),
            })?;
        let mut followed: rmcp::model::Task = serde_json::from_value(serde_json::json!({
            "taskId": task, "status": "working", "createdAt": "", "lastUpdatedAt": ""
        }))?;
        followed.poll_interval_ms = None;
        self.follow_task(&peer, &link, &followed, deadline).await
    }

    /// The link a call of `call_in`'s caller goes by, with its listener: the
    /// upstream's newest, unless that speaks 2026-07-28 and the caller an
    /// older protocol, whose upstream tools may ask it within the call: then
    /// a link of protocol 2025-11-25 of the caller's session's own, so that
    /// what the upstream sends on it (requests, log messages) is that
    /// session's, and never another caller's.
    async fn link_for(
        &self,
        call_in: Option<&McpCall>,
    ) -> Result<(Live, Listener, Current), BoxError> {
        let Some(newest) = self.current.live() else {
            return Err(self.away("is not connected (connecting again)"));
        };
        let Some(call) = call_in.filter(|call| {
            call.request_context()
                .protocol_version()
                .is_none_or(|version| version < ProtocolVersion::V_2026_07_28)
        }) else {
            return Ok((newest, self.listener.clone(), self.current.clone()));
        };
        if !link::is_newest(&newest.peer) {
            return Ok((newest, self.listener.clone(), self.current.clone()));
        }
        let (cell, listener, stop) =
            self.sessions
                .link_of(session_of(call), &self.listener, &self.stop)?;
        let older = cell
            .get_or_try_init(|| link::open(&self.config, &listener, Protocol::Initialize, stop))
            .await
            .map_err(|error| {
                self.away(&format!(
                    "cannot be reached on protocol 2025-11-25: {error}"
                ))
            })?;
        let live = older
            .live()
            .ok_or_else(|| self.away("is not connected (connecting again)"))?;
        Ok((live, listener, older.clone()))
    }

    /// The upstream's answer as the body's outcome, within `max_result_bytes`:
    /// an answer read and found larger fails the call as one too large for the
    /// stdio transport to read does.
    fn settle(
        &self,
        response: Result<CallToolResponse, rmcp::ErrorData>,
        shape: Shape,
    ) -> Result<Value, BoxError> {
        let size = match &response {
            Ok(CallToolResponse::Complete(result)) => Some(json_size(result)),
            Err(error) => stdio::answer_size(error),
            Ok(_) => None,
        };
        if let Some(size) = size
            && size > self.max_result_bytes
        {
            return Err(format!(
                "the upstream {} answered {size} bytes, more than `max_result_bytes` ({})",
                self.endpoint, self.max_result_bytes
            )
            .into());
        }
        let mut response = response;
        // A string answer is structured content on protocol 2026-07-28 and
        // text alone on older ones (structured content is an object there):
        // a link of the older protocol answers the text.
        if let (Ok(CallToolResponse::Complete(result)), Shape::Text) = (&mut response, shape)
            && result.structured_content.is_none()
            && result.is_error != Some(true)
        {
            let text: Vec<&str> = result
                .content
                .iter()
                .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
                .collect();
            result.structured_content = Some(Value::String(text.join("\n")));
        }
        crate::import::outcome(response, shape != Shape::Content)
    }

    fn away(&self, what: &str) -> BoxError {
        Transient::new(io::Error::new(
            io::ErrorKind::NotConnected,
            urls_redacted(&format!("the upstream {} {what}", self.endpoint)),
        ))
        .into()
    }

    /// A request that did not come back because the connection failed:
    /// transient, the same call may be answered on the next connection. One
    /// the upstream refused for its credentials (a token rotated or expired)
    /// has the link made again with them read or got again.
    fn lost(&self, error: &ServiceError, link: &Current) -> BoxError {
        if refused_credentials(error) {
            link.renew();
        }
        self.away(&format!("did not answer: {error}"))
    }
}

/// How the state of an upstream task's input-required answer starts (the
/// task's id follows): its answers go to the task, not to a new call.
const TASK_STATE: &str = "toolgraft-upstream-task:";

/// The key of the state this crate hands a caller for an upstream's
/// input-required answer: the upstream's own state, and the tool it is of.
const STATE_KEY: &str = "toolgraft/upstream";

/// The state a caller echoes for the upstream tool `tool`'s input-required
/// answer whose own state is `state`.
fn sealed(tool: &str, state: Option<String>) -> String {
    serde_json::json!({STATE_KEY: {"tool": tool, "state": state}}).to_string()
}

/// The upstream's own state in `echoed`, when it is the state of `tool`'s
/// answer (`Some(None)`: it had none); `None` for any other.
fn opened(echoed: &str, tool: &str) -> Option<Option<String>> {
    let echoed: Value = serde_json::from_str(echoed).ok()?;
    let of = echoed.get(STATE_KEY)?;
    if of.get("tool")?.as_str()? != tool {
        return None;
    }
    match of.get("state")? {
        Value::Null => Some(None),
        Value::String(state) => Some(Some(state.clone())),
        _ => None,
    }
}

/// The next report on `reports`; never, when the call's progress is not
/// followed.
async fn next_report(reports: &mut Option<mpsc::Receiver<Progress>>) -> Option<Progress> {
    match reports {
        Some(reports) => reports.recv().await,
        None => std::future::pending().await,
    }
}

/// Whether `echoed` is a state this crate sealed (for whichever tool).
fn is_sealed(echoed: &str) -> bool {
    serde_json::from_str::<Value>(echoed).is_ok_and(|echoed| {
        echoed
            .get(STATE_KEY)
            .and_then(|of| of.get("tool"))
            .is_some_and(Value::is_string)
    })
}

/// The downstream session a call came in by: over Streamable HTTP its
/// `Mcp-Session-Id`; otherwise the process's one client (stdio).
fn session_of(call: &McpCall) -> Option<String> {
    #[cfg(feature = "http")]
    {
        call.http_parts()?
            .headers
            .get("mcp-session-id")?
            .to_str()
            .ok()
            .map(str::to_owned)
    }
    #[cfg(not(feature = "http"))]
    {
        let _ = call;
        None
    }
}

/// The links of protocol 2025-11-25, by downstream session.
#[derive(Default)]
pub(super) struct Sessions {
    links: std::sync::Mutex<SessionLinks>,
}

#[derive(Default)]
struct SessionLinks {
    by_session: std::collections::HashMap<Option<String>, SessionLink>,
    /// The tag of the next link's listener (the newest link's is 0).
    next: u64,
}

struct SessionLink {
    current: Arc<tokio::sync::OnceCell<Current>>,
    tag: u64,
    /// Stops this link (its session idle), or with the upstream.
    stop: CancellationToken,
    used: std::time::Instant,
}

/// A session's link unused this long is closed: MCP tells no server when a
/// client's session ends.
const SESSION_IDLE: Duration = Duration::from_secs(300);

/// At most this many sessions' links at once; a call of one more session,
/// while none is idle, fails (transient).
const MAX_SESSION_LINKS: usize = 64;

impl Sessions {
    /// The link of `session` (made, not yet opened, when it has none), its
    /// listener, and what stops it.
    #[allow(clippy::type_complexity)]
    fn link_of(
        &self,
        session: Option<String>,
        listener: &Listener,
        stop: &CancellationToken,
    ) -> Result<
        (
            Arc<tokio::sync::OnceCell<Current>>,
            Listener,
            CancellationToken,
        ),
        BoxError,
    > {
        let mut links = self
            .links
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        links.by_session.retain(|_, link| {
            let idle = link.used.elapsed() >= SESSION_IDLE;
            if idle {
                link.stop.cancel();
            }
            !idle
        });
        if !links.by_session.contains_key(&session) && links.by_session.len() >= MAX_SESSION_LINKS {
            return Err(Transient::new(format!(
                "{MAX_SESSION_LINKS} sessions of protocol 2025-11-25 reach the upstream already; try again later"
            ))
            .into());
        }
        links.next += 1;
        let tag = links.next;
        let link = links
            .by_session
            .entry(session)
            .or_insert_with(|| SessionLink {
                current: Arc::default(),
                tag,
                stop: stop.child_token(),
                used: std::time::Instant::now(),
            });
        link.used = std::time::Instant::now();
        Ok((
            link.current.clone(),
            listener.for_session(link.tag),
            link.stop.clone(),
        ))
    }
}

/// Whether the upstream refused `error`'s request for its credentials (not
/// for a scope they lack: getting them again would not grant it).
#[cfg(feature = "upstream-http")]
fn refused_credentials(error: &ServiceError) -> bool {
    error
        .auth_challenge()
        .is_some_and(|challenge| !challenge.contains("insufficient_scope"))
}

/// Over stdio there are no credentials to refuse.
#[cfg(not(feature = "upstream-http"))]
fn refused_credentials(_error: &ServiceError) -> bool {
    false
}

/// How many times one call asks its caller for the upstream at most (rmcp's
/// own bound on input-required rounds).
const MAX_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// Asks the caller each of the upstream's requests now (the caller's
/// protocol takes requests within a call), and returns the answers under the
/// upstream's keys.
async fn answer_now(
    caller: &Peer<RoleServer>,
    requests: InputRequests,
) -> Result<InputResponses, BoxError> {
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        #[expect(
            deprecated,
            reason = "sampling and roots: upstreams written before SEP-2577 ask for them"
        )]
        let response = match request {
            InputRequest::Elicitation(asked) => {
                serde_json::to_value(caller.create_elicitation(asked.params).await?)?
            }
            InputRequest::CreateMessage(asked) => {
                serde_json::to_value(caller.create_message(asked.params).await?)?
            }
            InputRequest::ListRoots(_) => serde_json::to_value(caller.list_roots().await?)?,
            other => {
                return Err(format!(
                    "the upstream asked the caller something this version cannot relay: {}",
                    serde_json::to_value(&other)
                        .map_or_else(|_| "?".into(), |value| value["method"].to_string())
                )
                .into());
            }
        };
        responses.insert(key, response);
    }
    Ok(responses)
}

/// The `_meta` a forwarded request carries: the caller's (a client's own keys,
/// such as a trace context or an application's), but for what names the
/// caller's own request or client (its progress token, MCP's reserved
/// `io.modelcontextprotocol/` keys: this process is the upstream's client);
/// the caller's capabilities, so that the upstream asks only what the caller
/// can answer; the level its caller takes `log` at; and the call's trace
/// context, which a layer may have continued.
fn meta_for_upstream(call: Option<&McpCall>, log: Option<&LogSink>) -> RequestMetaObject {
    let mut meta = RequestMetaObject::default();
    if let Some(call) = call {
        for (key, value) in call.meta().0.iter() {
            if key != "progressToken" && !key.starts_with("io.modelcontextprotocol/") {
                meta.0.insert(key.clone(), value.clone());
            }
        }
        let capabilities = call.meta().client_capabilities().or_else(|| {
            call.peer()
                .peer_info()
                .map(|client| client.capabilities.clone())
        });
        if let Some(capabilities) = capabilities {
            meta.set_client_capabilities(capabilities);
        }
    }
    // The level the caller takes log messages at: an upstream of 2026-07-28
    // sends none without it.
    if let Some(log) = log {
        meta.set_log_level(crate::call::mcp_level(log.level()));
    }
    if let Some(trace) = context::get::<TraceContext>() {
        meta.0
            .insert("traceparent".to_owned(), trace.traceparent().into());
        if trace.tracestate().is_empty() {
            meta.0.remove("tracestate");
        } else {
            meta.0
                .insert("tracestate".to_owned(), trace.tracestate().into());
        }
    }
    meta
}

/// A request the upstream has not answered: told it is cancelled when the call
/// stops waiting for it (dropped, or out of time).
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        // Dropped outside a runtime (a runtime shutting down), there is no
        // one left to tell.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("the caller stopped waiting".to_owned()),
                    ))
                    .await;
            });
        }
    }
}

/// An upstream task whose call stopped waiting for it: cancelled there.
struct CancelTaskOnDrop {
    peer: Peer<RoleClient>,
    task: Option<String>,
}

impl Drop for CancelTaskOnDrop {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer
                    .cancel_task(rmcp::model::CancelTaskParams::new(task))
                    .await;
            });
        }
    }
}

/// How many bytes `value` is as JSON, without writing them anywhere.
fn json_size(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::{opened, sealed};

    #[test]
    fn a_state_opens_for_its_own_tool_only() {
        let state = sealed("up_ask", Some("upstream's own".into()));
        assert_eq!(
            opened(&state, "up_ask"),
            Some(Some("upstream's own".into()))
        );
        assert_eq!(opened(&state, "up_other"), None, "another tool's answers");
        assert_eq!(opened(&sealed("up_ask", None), "up_ask"), Some(None));
        for forged in [
            "",
            "not json",
            "{}",
            r#"{"toolgraft/upstream": {"tool": "up_ask", "state": 5}}"#,
        ] {
            assert_eq!(opened(forged, "up_ask"), None, "{forged}");
        }
    }
}
