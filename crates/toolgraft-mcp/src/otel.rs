//! OpenTelemetry (feature `otel`): a server span per `tools/call` and `tools/list` request and MCP's
//! metrics, by the OpenTelemetry semantic conventions for MCP.
//!
//! The span is named `{mcp.method.name} {target}` (`tools/call get_weather`;
//! `tools/call` alone for a name the server does not serve, so a caller cannot
//! mint span names), of kind `SERVER`, its parent the trace context the request
//! sent (`_meta`'s, else the HTTP headers': see [`call`](crate::call)), the
//! layers of the combo its children. Its attributes: `mcp.method.name`,
//! `gen_ai.tool.name` and `gen_ai.operation.name = execute_tool` (tools/call),
//! `jsonrpc.request.id`, `mcp.session.id` (over HTTP: a digest of the session
//! header, never the id itself, which is the session's credential),
//! `mcp.protocol.version`, `network.transport` (`tcp` over HTTP, `pipe`
//! otherwise) and `network.protocol.name` (`http`); on failure `error.type` (the
//! JSON-RPC error code, or `tool_error` for a result with `isError`),
//! `rpc.response.status_code` and the span's status `ERROR`.
//!
//! The metrics go through the OpenTelemetry metrics API's global meter
//! (`toolgraft-mcp`), made when the server is: install the meter provider
//! first. `mcp.server.operation.duration` (histogram, seconds, the conventions'
//! buckets) per request, with the span's low-cardinality attributes;
//! `mcp.server.session.duration` per connection that initialized.
//!
//! The core's `metrics` wrapper keeps its own series
//! (`toolgraft_tool_calls_total`, ..) beside these, through the `metrics` facade:
//! those are per bound name and layer, for Prometheus users of the facade;
//! these are per MCP request, by the conventions OpenTelemetry backends read.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;
use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, ErrorData};
use rmcp::service::RequestContext;
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::trace_context::trace_of;

/// The meter's instrumentation scope.
const METER: &str = "toolgraft-mcp";
/// The conventions' bucket boundaries for MCP durations, in seconds.
const BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// A connection's instruments, from the global meter provider of when the
/// server was made, and its session's clock.
pub(crate) struct Instruments {
    operation: Histogram<f64>,
    session: Histogram<f64>,
    opened: Instant,
    /// Whether a client initialized a session on this connection (a template
    /// server that only makes others, or a stateless one, has none to time).
    initialized: AtomicBool,
    session_attributes: std::sync::Mutex<Vec<KeyValue>>,
}

impl std::fmt::Debug for Instruments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instruments").finish_non_exhaustive()
    }
}

impl Instruments {
    pub(crate) fn new() -> Self {
        let meter = opentelemetry::global::meter(METER);
        let operation = meter
            .f64_histogram("mcp.server.operation.duration")
            .with_unit("s")
            .with_description("MCP request duration as observed on the receiver from the time it was received until the result is sent.")
            .with_boundaries(BUCKETS.to_vec())
            .build();
        let session = meter
            .f64_histogram("mcp.server.session.duration")
            .with_unit("s")
            .with_description("The duration of the MCP session as observed on the MCP server.")
            .with_boundaries(BUCKETS.to_vec())
            .build();
        Self {
            operation,
            session,
            opened: Instant::now(),
            initialized: AtomicBool::new(false),
            session_attributes: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The connection's session began (`initialize`), as `request` says it.
    pub(crate) fn initialized(&self, request: &RequestContext<RoleServer>, version: &str) {
        if !self.initialized.swap(true, Ordering::Relaxed) {
            let (transport, protocol) = transport_of(request);
            let mut attributes = vec![
                KeyValue::new("mcp.protocol.version", known_version(version)),
                KeyValue::new("network.transport", transport),
            ];
            if let Some(protocol) = protocol {
                attributes.push(KeyValue::new("network.protocol.name", protocol));
            }
            if let Ok(mut kept) = self.session_attributes.lock() {
                *kept = attributes;
            }
        }
    }
}

impl Drop for Instruments {
    fn drop(&mut self) {
        if self.initialized.load(Ordering::Relaxed) {
            let attributes = self
                .session_attributes
                .get_mut()
                .map(std::mem::take)
                .unwrap_or_default();
            self.session
                .record(self.opened.elapsed().as_secs_f64(), &attributes);
        }
    }
}

/// One MCP request as its span and its metric point describe it.
pub(crate) struct Operation<'a> {
    /// `mcp.method.name`.
    pub(crate) method: &'static str,
    /// The tool a tools/call names, and whether the server serves it (only
    /// then is it the span name's target and a metric attribute: a caller does
    /// not mint span names or series).
    pub(crate) tool: Option<(&'a str, bool)>,
}

/// How a request failed: `error.type`, the JSON-RPC error code, its message.
pub(crate) struct Failure {
    kind: String,
    code: Option<i32>,
    message: Option<String>,
}

/// The failure of a request answered with a JSON-RPC error.
pub(crate) fn failed_request<T>(outcome: &Result<T, ErrorData>) -> Option<Failure> {
    let error = outcome.as_ref().err()?;
    Some(Failure {
        kind: error.code.0.to_string(),
        code: Some(error.code.0),
        message: Some(shorten(&error.message)),
    })
}

/// The failure of a tools/call: a JSON-RPC error, or a result with `isError`
/// (the conventions' `tool_error`).
pub(crate) fn failed_call(outcome: &Result<CallToolResponse, ErrorData>) -> Option<Failure> {
    match outcome {
        Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => Some(Failure {
            kind: "tool_error".to_owned(),
            code: None,
            message: None,
        }),
        other => failed_request(other),
    }
}

/// A request being served: its server span, and what its metric point says.
pub(crate) struct Served {
    span: tracing::Span,
    attributes: Vec<KeyValue>,
    started: Instant,
}

impl Served {
    /// The server span of `request`, a child of the trace context it sent.
    pub(crate) fn new(operation: Operation<'_>, request: &RequestContext<RoleServer>) -> Self {
        let started = Instant::now();
        let (transport, protocol) = transport_of(request);
        let version = request
            .protocol_version()
            .map(|version| known_version(version.as_str()));
        let target = operation
            .tool
            .filter(|(_, served)| *served)
            .map(|(tool, _)| tool);
        let tool_call = operation.tool.is_some();
        let span = tracing::info_span!(
            "mcp.server",
            otel.name = %SpanName(operation.method, target),
            otel.kind = "server",
            mcp.method.name = operation.method,
            gen_ai.tool.name = operation.tool.map(|(tool, _)| shorten(tool)),
            gen_ai.operation.name = tool_call.then_some("execute_tool"),
            jsonrpc.request.id = %shorten(&request.id.to_string()),
            mcp.session.id = session_of(request),
            mcp.protocol.version = version,
            network.transport = transport,
            network.protocol.name = protocol,
            error.type = Empty,
            rpc.response.status_code = Empty,
            otel.status_code = Empty,
            otel.status_description = Empty,
        );
        if !span.is_disabled() {
            // The client's trace, or one of its own: not the child of the span
            // rmcp keeps open around the whole connection (a link to it).
            toolgraft::otel::begin(&span, trace_of(request).as_ref());
        }
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", operation.method),
            KeyValue::new("network.transport", transport),
        ];
        if let Some(protocol) = protocol {
            attributes.push(KeyValue::new("network.protocol.name", protocol));
        }
        if let Some(version) = version {
            attributes.push(KeyValue::new("mcp.protocol.version", version));
        }
        if let Some(tool) = target {
            attributes.push(KeyValue::new("gen_ai.tool.name", shorten(tool)));
        }
        if tool_call {
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        }
        Self {
            span,
            attributes,
            started,
        }
    }

    /// `handle`, the request's handling, in the span; its outcome recorded
    /// there (as `failure` reads it) and as a point of
    /// `mcp.server.operation.duration`.
    pub(crate) async fn serve<T, F: Future<Output = T>>(
        self,
        instruments: &Instruments,
        failure: fn(&T) -> Option<Failure>,
        handle: F,
    ) -> T {
        let Self {
            span,
            mut attributes,
            started,
        } = self;
        let output = handle.instrument(span.clone()).await;
        if let Some(Failure {
            kind,
            code,
            message,
        }) = failure(&output)
        {
            span.record("error.type", kind.as_str());
            span.record("otel.status_code", "ERROR");
            if let Some(code) = code {
                let code = code.to_string();
                span.record("rpc.response.status_code", code.as_str());
                attributes.push(KeyValue::new("rpc.response.status_code", code));
            }
            if let Some(message) = message {
                span.record("otel.status_description", message.as_str());
            }
            attributes.push(KeyValue::new("error.type", kind));
        }
        instruments
            .operation
            .record(started.elapsed().as_secs_f64(), &attributes);
        output
    }
}

/// `network.transport` and `network.protocol.name`: over Streamable HTTP,
/// `tcp` and `http`; any other transport is a pipe to this server (stdio, or
/// an in-process duplex).
fn transport_of(request: &RequestContext<RoleServer>) -> (&'static str, Option<&'static str>) {
    #[cfg(feature = "http")]
    if request
        .extensions
        .get::<axum::http::request::Parts>()
        .is_some()
    {
        return ("tcp", Some("http"));
    }
    let _ = request;
    ("pipe", None)
}

/// `mcp.session.id` over HTTP: a digest of the `mcp-session-id` header, not the
/// header, which lets whoever holds it act in the session.
fn session_of(request: &RequestContext<RoleServer>) -> Option<String> {
    #[cfg(feature = "http")]
    {
        let parts = request.extensions.get::<axum::http::request::Parts>()?;
        use std::hash::{Hash as _, Hasher as _};
        let session = parts.headers.get("mcp-session-id")?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        session.as_bytes().hash(&mut hasher);
        Some(format!("{:016x}", hasher.finish()))
    }
    #[cfg(not(feature = "http"))]
    {
        let _ = request;
        None
    }
}

/// `mcp.protocol.version`: a version rmcp knows, or `_OTHER` (the conventions'
/// value for one outside the list): a client's string is not a metric series.
fn known_version(version: &str) -> &'static str {
    rmcp::model::ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .map(|known| known.as_str())
        .find(|known| *known == version)
        .unwrap_or("_OTHER")
}

fn shorten(text: &str) -> String {
    toolgraft::error::shorten(text).into_owned()
}

/// `{method} {target}`, or the method alone.
struct SpanName<'a>(&'static str, Option<&'a str>);

impl std::fmt::Display for SpanName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            Some(target) => write!(f, "{} {}", self.0, toolgraft::error::shorten(target)),
            None => f.write_str(self.0),
        }
    }
}
