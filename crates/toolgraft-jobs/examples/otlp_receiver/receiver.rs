//! An OTLP/HTTP trace receiver on a loopback port: what an OpenTelemetry
//! Collector accepts on 4318, `POST /v1/traces` with an
//! `ExportTraceServiceRequest` in protobuf (`application/x-protobuf`),
//! decoded by the OpenTelemetry project's own generated types
//! (`opentelemetry-proto`) and answered with an `ExportTraceServiceResponse`.
//! It keeps the spans for whoever reads them: the `otlp_receiver` example
//! prints each as a JSON line, tests/jobs/otel.rs reads them back.
//!
//! JSON (`application/json`) and compressed bodies are refused (415): the
//! exporters here send uncompressed protobuf, and a receiver that accepted
//! more would check less of what a collector reads.
// The example prints spans as they come, the test reads them back: each uses
// a part of this.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde::Serialize;
use serde_json::Value;

/// A span as the receiver got it: ids in lowercase hex, times in nanoseconds
/// since the Unix epoch, attributes as JSON values.
#[derive(Clone, Debug, Serialize)]
pub struct ReceivedSpan {
    /// The resource's `service.name`: which process sent it.
    pub service: String,
    /// The instrumentation scope's name.
    pub scope: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// `internal`, `server`, `client`, `producer`, `consumer` (or `unspecified`).
    pub kind: &'static str,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub attributes: BTreeMap<String, Value>,
    pub events: Vec<ReceivedEvent>,
    /// `unset`, `ok` or `error`, and its message.
    pub status: (&'static str, String),
}

/// An event of a [`ReceivedSpan`].
#[derive(Clone, Debug, Serialize)]
pub struct ReceivedEvent {
    pub name: String,
    pub time_unix_nano: u64,
    pub attributes: BTreeMap<String, Value>,
}

impl ReceivedSpan {
    /// The span's length.
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.end_unix_nano.saturating_sub(self.start_unix_nano))
    }
}

type OnSpan = Box<dyn Fn(&ReceivedSpan) + Send + Sync>;

struct Shared {
    spans: Mutex<Vec<ReceivedSpan>>,
    arrived: tokio::sync::Notify,
    on_span: OnSpan,
}

/// A running receiver: serves until dropped.
pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Serves on `127.0.0.1:port` (0: a free port); `on_span` sees each span
    /// as it arrives, before it is kept.
    pub async fn start(
        port: u16,
        on_span: impl Fn(&ReceivedSpan) + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            spans: Mutex::new(Vec::new()),
            arrived: tokio::sync::Notify::new(),
            on_span: Box::new(on_span),
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let router = axum::Router::new()
            .route("/v1/traces", axum::routing::post(export))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                eprintln!("otlp_receiver: the server stopped: {error}");
            }
        });
        Ok(Self {
            addr,
            shared,
            server,
        })
    }

    /// What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to for an exporter to send
    /// here (the exporter adds `/v1/traces`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The spans received so far, in the order they arrived.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.shared
            .spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The spans once `done` holds of them, or `None` after `within`.
    pub async fn wait_for(
        &self,
        within: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Option<Vec<ReceivedSpan>> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let arrived = self.shared.arrived.notified();
            let spans = self.spans();
            if done(&spans) {
                return Some(spans);
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return None;
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn export(
    axum::extract::State(shared): axum::extract::State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let protobuf = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"application/x-protobuf"));
    if !protobuf || headers.contains_key(header::CONTENT_ENCODING) {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "uncompressed application/x-protobuf only",
        )
            .into_response();
    }
    let request = match ExportTraceServiceRequest::decode(body) {
        Ok(request) => request,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("not an ExportTraceServiceRequest: {error}"),
            )
                .into_response();
        }
    };
    let spans = received(request);
    for span in &spans {
        (shared.on_span)(span);
    }
    shared
        .spans
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(spans);
    shared.arrived.notify_waiters();
    (
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
        .into_response()
}

/// The spans of `request`, each with its resource's service and its scope.
fn received(request: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut spans = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|resource| attributes(resource.attributes))
            .unwrap_or_default();
        let service = resource
            .get("service.name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        for scope_spans in resource_spans.scope_spans {
            let scope = scope_spans
                .scope
                .map(|scope| scope.name)
                .unwrap_or_default();
            for span in scope_spans.spans {
                let kind = match SpanKind::try_from(span.kind) {
                    Ok(SpanKind::Internal) => "internal",
                    Ok(SpanKind::Server) => "server",
                    Ok(SpanKind::Client) => "client",
                    Ok(SpanKind::Producer) => "producer",
                    Ok(SpanKind::Consumer) => "consumer",
                    _ => "unspecified",
                };
                let status = span.status.map_or(("unset", String::new()), |status| {
                    let code = match status.code {
                        1 => "ok",
                        2 => "error",
                        _ => "unset",
                    };
                    (code, status.message)
                });
                spans.push(ReceivedSpan {
                    service: service.clone(),
                    scope: scope.clone(),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name,
                    kind,
                    start_unix_nano: span.start_time_unix_nano,
                    end_unix_nano: span.end_time_unix_nano,
                    attributes: attributes(span.attributes),
                    events: span
                        .events
                        .into_iter()
                        .map(|event| ReceivedEvent {
                            name: event.name,
                            time_unix_nano: event.time_unix_nano,
                            attributes: attributes(event.attributes),
                        })
                        .collect(),
                    status,
                });
            }
        }
    }
    spans
}

fn attributes(pairs: Vec<KeyValue>) -> BTreeMap<String, Value> {
    pairs
        .into_iter()
        .map(|pair| (pair.key, pair.value.map_or(Value::Null, json)))
        .collect()
}

fn json(value: AnyValue) -> Value {
    match value.value {
        Some(any_value::Value::StringValue(text)) => Value::from(text),
        Some(any_value::Value::BoolValue(flag)) => Value::from(flag),
        Some(any_value::Value::IntValue(number)) => Value::from(number),
        Some(any_value::Value::DoubleValue(number)) => Value::from(number),
        Some(any_value::Value::ArrayValue(array)) => {
            Value::Array(array.values.into_iter().map(json).collect())
        }
        Some(any_value::Value::KvlistValue(list)) => {
            Value::Object(attributes(list.values).into_iter().collect())
        }
        Some(any_value::Value::BytesValue(bytes)) => Value::from(hex(&bytes)),
        // A kind newer than these types, or none.
        _ => Value::Null,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
