//! A call of an upstream tool: sent to the upstream with the caller's `_meta`
//! and trace context, its progress passed back, cancelled upstream when the
//! call is dropped or runs out of time, and its answer read as an imported
//! rmcp tool's is.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotificationParam,
    ClientRequest, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde_json::Value;
use toolgraft::context::{self, TraceContext};
use toolgraft::error::{BoxError, Transient};
use toolgraft::schema::Args;

use super::client::Listener;
use super::link::Current;
use crate::call::McpCall;

/// What every forwarded call of one upstream shares.
pub(super) struct Forwarder {
    pub(super) current: Current,
    pub(super) listener: Listener,
    pub(super) endpoint: String,
    pub(super) call_timeout: Duration,
    pub(super) max_result_bytes: usize,
    /// Numbers the calls in flight (see [`Listener::asking`]).
    pub(super) calls: AtomicU64,
}

impl Forwarder {
    /// Calls the upstream's tool `name` with `args`, in the current call's
    /// context.
    pub(super) async fn call(
        self: Arc<Self>,
        name: Arc<str>,
        structured: bool,
        args: Args,
    ) -> Result<Value, BoxError> {
        let Some(peer) = self.current.borrow().clone() else {
            return Err(self.away("is not connected (connecting again)"));
        };
        let call_in = McpCall::current();
        let mut params = CallToolRequestParams::new(name.to_string()).with_arguments(args);
        if let Some(call) = &call_in {
            params.input_responses = call.input_responses().cloned();
            params.request_state = call.request_state().map(str::to_owned);
        }
        let mut options = PeerRequestOptions::no_options();
        options.meta = Some(meta_for_upstream(call_in.as_ref()));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|error| self.lost(&error))?;
        let (mut progress, _following) = self.listener.follow(handle.progress_token.clone());
        let _asking = call_in.as_ref().map(|call| {
            let number = self.calls.fetch_add(1, Ordering::Relaxed);
            self.listener.asking(number, call.peer().clone())
        });
        let mut unanswered = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
        };
        let answer = handle.await_response();
        tokio::pin!(answer);
        let deadline = tokio::time::sleep(self.call_timeout);
        tokio::pin!(deadline);
        let answer = loop {
            tokio::select! {
                answer = &mut answer => break answer,
                Some(report) = progress.recv() => {
                    context::report_progress(report);
                }
                () = &mut deadline => {
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
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        while let Ok(report) = progress.try_recv() {
            context::report_progress(report);
        }
        let response = match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(CallToolResponse::Complete(result)),
            Ok(ServerResult::InputRequiredResult(result)) => {
                Ok(CallToolResponse::InputRequired(result))
            }
            Ok(ServerResult::CreateTaskResult(task)) => Ok(CallToolResponse::Task(task)),
            Ok(_) => {
                return Err(
                    "the upstream answered `tools/call` with another kind of result".into(),
                );
            }
            Err(ServiceError::McpError(error)) => Err(error),
            Err(error) => return Err(self.lost(&error)),
        };
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

/// The `_meta` a forwarded request carries: the caller's (a client's own keys,
/// such as a trace context or an application's), but for what names the
/// caller's own request or client (its progress token, MCP's reserved
/// `io.modelcontextprotocol/` keys: this process is the upstream's client),
/// and the call's trace context, which a layer may have continued.
fn meta_for_upstream(call: Option<&McpCall>) -> RequestMetaObject {
    let mut meta = RequestMetaObject::default();
    if let Some(call) = call {
        for (key, value) in call.meta().0.iter() {
            if key != "progressToken" && !key.starts_with("io.modelcontextprotocol/") {
                meta.0.insert(key.clone(), value.clone());
            }
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
