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
use toolgraft::context::{self, Asker, Progress, ProgressSink, Reach, TraceContext};
use toolgraft::error::{BoxError, Transient};
use toolgraft::schema::Args;

use super::client::Listener;
use super::config::UpstreamConfig;
use super::link::{self, Current, Protocol};
use crate::call::McpCall;

/// What every forwarded call of one upstream shares.
pub(super) struct Forwarder {
    pub(super) current: Current,
    /// A link of protocol 2025-11-25 for callers of it, when `current` speaks
    /// 2026-07-28: opened at the first such call (see [`Protocol::Initialize`]).
    pub(super) older: tokio::sync::OnceCell<Current>,
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
        structured: bool,
        args: Args,
    ) -> Result<Value, BoxError> {
        let call_in = McpCall::current();
        let mut params = CallToolRequestParams::new(name.to_string()).with_arguments(args);
        if let Some(call) = &call_in {
            params.input_responses = call.input_responses().cloned();
            params.request_state = call.request_state().map(str::to_owned);
        }
        let asks_now = context::get::<Asker>().is_some_and(|asker| asker.reach() == Reach::Now);
        // The upstream's reports go where the call's progress goes; with no
        // one to take them, they are not followed at all.
        let followed = context::get::<ProgressSink>().is_some();
        let deadline = tokio::time::Instant::now() + self.call_timeout;
        for _ in 0..MAX_ROUNDS {
            // Only a call that asks its caller now is sent again: the others
            // give their request away.
            let sent = if call_in.is_some() && asks_now {
                params.clone()
            } else {
                std::mem::replace(&mut params, CallToolRequestParams::new(""))
            };
            let response = self
                .round(sent, call_in.as_ref(), followed, deadline)
                .await?;
            let (Some(call), Ok(CallToolResponse::InputRequired(needed)), true) =
                (&call_in, &response, asks_now)
            else {
                return self.settle(response, structured);
            };
            params.input_responses = Some(
                answer_now(
                    call.peer(),
                    needed.input_requests.clone().unwrap_or_default(),
                )
                .await?,
            );
            params.request_state = needed.request_state.clone();
        }
        Err(format!(
            "the upstream {} asked for input more than {MAX_ROUNDS} times in one call",
            self.endpoint
        )
        .into())
    }

    /// One `tools/call` of the upstream, by `deadline`, its progress passed
    /// on when `followed` (the call has a progress sink).
    async fn round(
        &self,
        params: CallToolRequestParams,
        call_in: Option<&McpCall>,
        followed: bool,
        deadline: tokio::time::Instant,
    ) -> Result<Result<CallToolResponse, rmcp::ErrorData>, BoxError> {
        let (peer, listener) = self.link_for(call_in).await?;
        let mut options = PeerRequestOptions::no_options();
        options.meta = Some(meta_for_upstream(call_in));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|error| self.lost(&error))?;
        let (mut reports, _following) = if followed {
            let (reports, following) = listener.follow(handle.progress_token.clone());
            (Some(reports), Some(following))
        } else {
            (None, None)
        };
        let _asking = call_in.map(|call| {
            let number = self.calls.fetch_add(1, Ordering::Relaxed);
            self.listener.asking(number, call.peer().clone())
        });
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
        // Reports the upstream sent before its answer, not yet passed on. rmcp
        // hands each notification to a task of its own, so the last one may
        // still be on its way: its task is given the chance to run first. One
        // that comes later still is dropped, as a report after the answer.
        if let Some(reports) = &mut reports {
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
            while let Ok(report) = reports.try_recv() {
                context::report_progress(report);
            }
        }
        match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(Ok(CallToolResponse::Complete(result))),
            Ok(ServerResult::InputRequiredResult(result)) => {
                Ok(Ok(CallToolResponse::InputRequired(result)))
            }
            Ok(ServerResult::CreateTaskResult(task)) => Ok(Ok(CallToolResponse::Task(task))),
            Ok(_) => Err("the upstream answered `tools/call` with another kind of result".into()),
            Err(ServiceError::McpError(error)) => Ok(Err(error)),
            Err(error) => Err(self.lost(&error)),
        }
    }

    /// The link a call of `call_in`'s caller goes by, with its listener: the
    /// upstream's newest, unless that speaks 2026-07-28 and the caller an
    /// older protocol, whose upstream tools may ask it within the call.
    async fn link_for(
        &self,
        call_in: Option<&McpCall>,
    ) -> Result<(Peer<RoleClient>, Listener), BoxError> {
        let Some(newest) = self.current.borrow().clone() else {
            return Err(self.away("is not connected (connecting again)"));
        };
        let older_caller = call_in.is_some_and(|call| {
            call.request_context()
                .protocol_version()
                .is_none_or(|version| version < ProtocolVersion::V_2026_07_28)
        });
        if !(older_caller && link::is_newest(&newest)) {
            return Ok((newest, self.listener.clone()));
        }
        let listener = self.listener.for_link(OLDER_LINK);
        let older = self
            .older
            .get_or_try_init(|| {
                link::open(
                    &self.config,
                    &listener,
                    Protocol::Initialize,
                    self.stop.clone(),
                )
            })
            .await
            .map_err(|error| {
                self.away(&format!(
                    "cannot be reached on protocol 2025-11-25: {error}"
                ))
            })?;
        let peer = older.borrow().clone();
        let peer = peer.ok_or_else(|| self.away("is not connected (connecting again)"))?;
        Ok((peer, listener))
    }

    /// The upstream's answer as the body's outcome, within `max_result_bytes`.
    fn settle(
        &self,
        response: Result<CallToolResponse, rmcp::ErrorData>,
        structured: bool,
    ) -> Result<Value, BoxError> {
        if let Ok(CallToolResponse::Complete(result)) = &response {
            let size = json_size(result);
            if size > self.max_result_bytes {
                return Err(format!(
                    "the upstream {} answered {size} bytes, more than `max_result_bytes` ({})",
                    self.endpoint, self.max_result_bytes
                )
                .into());
            }
        }
        crate::import::outcome(response, structured)
    }

    fn away(&self, what: &str) -> BoxError {
        Transient::new(io::Error::new(
            io::ErrorKind::NotConnected,
            format!("the upstream {} {what}", self.endpoint),
        ))
        .into()
    }

    /// A request that did not come back because the connection failed:
    /// transient, the same call may be answered on the next connection.
    fn lost(&self, error: &ServiceError) -> BoxError {
        self.away(&format!("did not answer: {error}"))
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

/// The older link's listener tag (the newest's is 0).
const OLDER_LINK: u8 = 1;

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
/// can answer; and the call's trace context, which a layer may have
/// continued.
fn meta_for_upstream(call: Option<&McpCall>) -> RequestMetaObject {
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
