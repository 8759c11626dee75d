//! The `otel` feature: a tools/call's server span by the OpenTelemetry
//! semantic conventions for MCP, in the trace the client sent in `_meta`, the
//! combo's layers its children; a tool error's `error.type`; a malformed trace
//! context starting a trace of its own; `mcp.server.operation.duration`.

use std::sync::OnceLock;

use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use serde_json::{Value as Json, json};
use toolgraft::ext::Trace;
use toolgraft::prelude::*;
use toolgraft_mcp::ToolsetServer;
use tracing_subscriber::layer::SubscriberExt;

use crate::support::{self, within};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct City {
    city: String,
}

/// `otel_weather_trace` (`otel_weather` in `trace`), and `otel_broken`, whose body fails.
fn toolset() -> Toolset {
    let weather = Tool::builder()
        .name("otel_weather")
        .description("Say the weather.")
        .body(|input: City| async move { Ok(format!("sunny in {}", input.city)) })
        .build()
        .unwrap();
    let broken = Tool::builder()
        .name("otel_broken")
        .description("Fail.")
        .body(|_: City| async { Err::<String, _>(std::io::Error::other("down").into()) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((weather.combo().with(Trace), broken.combo()))
        .unwrap();
    toolset
}

/// The process's meter provider, installed once (the global one: servers made
/// after it record into it), and its exporter.
fn metrics() -> &'static (SdkMeterProvider, InMemoryMetricExporter) {
    static METRICS: OnceLock<(SdkMeterProvider, InMemoryMetricExporter)> = OnceLock::new();
    METRICS.get_or_init(|| {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        opentelemetry::global::set_meter_provider(provider.clone());
        (provider, exporter)
    })
}

/// A tracer for this test's thread alone; the server's tasks run on it too
/// (a current-thread runtime).
fn traced() -> (
    InMemorySpanExporter,
    SdkTracerProvider,
    tracing::subscriber::DefaultGuard,
) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("toolgraft-mcp-tests")));
    let guard = support::subscribe(subscriber);
    (exporter, provider, guard)
}

fn call(name: &'static str, meta: Json) -> CallToolRequestParams {
    let mut params = support::request(name, json!({"city": "Oslo"}));
    if let Json::Object(meta) = meta {
        params.meta = Some(RequestMetaObject::from(meta));
    }
    params
}

fn text(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|KeyValue { key: k, .. }| k.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

fn one<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let named: Vec<_> = spans.iter().filter(|span| span.name == name).collect();
    assert_eq!(
        named.len(),
        1,
        "{name} among {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    named[0]
}

#[tokio::test]
async fn a_tools_call_is_a_server_span_in_the_clients_trace() {
    let (provider_metrics, metric_exporter) = metrics();
    let (exporter, _provider, _guard) = traced();
    let client = support::connect(ToolsetServer::new(toolset())).await;

    let meta = json!({"traceparent": VALID, "tracestate": "rojo=1"});
    let answer = within(
        "tools/call",
        client.call_tool(call("otel_weather_trace", meta)),
    )
    .await
    .unwrap();
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    client.cancel().await.unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let server = one(&spans, "tools/call otel_weather_trace");
    assert_eq!(server.span_kind, SpanKind::Server);
    assert_eq!(
        server.span_context.trace_id(),
        TraceId::from_hex(TRACE_ID).unwrap()
    );
    assert_eq!(server.parent_span_id, SpanId::from_hex(PARENT_ID).unwrap());
    assert!(server.parent_span_is_remote);
    assert_eq!(server.status, Status::Unset);
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "otel_weather_trace"),
        ("gen_ai.operation.name", "execute_tool"),
        ("network.transport", "pipe"),
    ] {
        assert_eq!(text(server, key).as_deref(), Some(value), "{key}");
    }
    assert!(text(server, "jsonrpc.request.id").is_some());
    assert!(text(server, "mcp.protocol.version").is_some());
    assert_eq!(text(server, "error.type"), None);
    // The combo's layer, and the `trace` built-in's span inside it, are the
    // server span's descendants.
    let layer = one(&spans, "wrapper trace");
    assert_eq!(layer.parent_span_id, server.span_context.span_id());
    assert_eq!(
        layer.span_context.trace_id(),
        server.span_context.trace_id()
    );

    // The duration histogram's point for this tool, with the conventions'
    // attributes.
    provider_metrics.force_flush().unwrap();
    let exported = metric_exporter.get_finished_metrics().unwrap();
    let point = exported
        .iter()
        .flat_map(|resource| resource.scope_metrics())
        .flat_map(|scope| scope.metrics())
        .filter(|metric| metric.name() == "mcp.server.operation.duration")
        .inspect(|metric| assert_eq!(metric.unit(), "s"))
        .filter_map(|metric| match metric.data() {
            AggregatedMetrics::F64(MetricData::Histogram(histogram)) => Some(histogram),
            _ => None,
        })
        .flat_map(|histogram| histogram.data_points())
        .find(|point| {
            point.attributes().any(|kv| {
                kv.key.as_str() == "gen_ai.tool.name"
                    && kv.value == Value::from("otel_weather_trace")
            })
        })
        .expect("a point for otel_weather_trace");
    assert!(point.count() >= 1);
    let attributes: Vec<_> = point
        .attributes()
        .map(|kv| (kv.key.as_str().to_owned(), kv.value.as_str().into_owned()))
        .collect();
    for expected in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.operation.name", "execute_tool"),
        ("network.transport", "pipe"),
    ] {
        assert!(
            attributes.contains(&(expected.0.to_owned(), expected.1.to_owned())),
            "{expected:?} in {attributes:?}"
        );
    }
    assert!(!attributes.iter().any(|(key, _)| key == "error.type"));
}

#[tokio::test]
async fn a_tool_error_is_recorded_as_the_conventions_say() {
    let (exporter, _provider, _guard) = traced();
    let client = support::connect(ToolsetServer::new(toolset())).await;
    let answer = within(
        "tools/call",
        client.call_tool(call("otel_broken", Json::Null)),
    )
    .await
    .unwrap();
    assert_eq!(answer.is_error, Some(true));
    client.cancel().await.unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let server = one(&spans, "tools/call otel_broken");
    assert_eq!(text(server, "error.type").as_deref(), Some("tool_error"));
    assert!(
        matches!(server.status, Status::Error { .. }),
        "{:?}",
        server.status
    );
}

#[tokio::test]
async fn a_name_the_server_does_not_serve_names_no_span() {
    let (exporter, _provider, _guard) = traced();
    let client = support::connect(ToolsetServer::new(toolset())).await;
    let unknown = CallToolRequestParams::new("x".repeat(10_000));
    let _ = within("tools/call", client.call_tool(unknown)).await;
    client.cancel().await.unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let server = one(&spans, "tools/call");
    let tool = text(server, "gen_ai.tool.name").unwrap();
    assert!(tool.len() < 300, "shortened: {} bytes", tool.len());
}

#[tokio::test]
async fn a_malformed_traceparent_starts_a_trace_of_its_own() {
    let (exporter, _provider, _guard) = traced();
    let client = support::connect(ToolsetServer::new(toolset())).await;
    let meta = json!({"traceparent": VALID.to_uppercase(), "tracestate": "k=v,".repeat(10_000)});
    let answer = within(
        "tools/call",
        client.call_tool(call("otel_weather_trace", meta)),
    )
    .await
    .unwrap();
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    client.cancel().await.unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let server = one(&spans, "tools/call otel_weather_trace");
    assert_ne!(
        server.span_context.trace_id(),
        TraceId::from_hex(TRACE_ID).unwrap()
    );
    assert!(server.span_context.trace_id() != TraceId::INVALID);
    // A root: neither the malformed one's child nor the child of the span rmcp
    // keeps open around the connection (a link to it, when it is recorded).
    assert_eq!(server.parent_span_id, SpanId::INVALID);
    assert!(
        server
            .links
            .links
            .iter()
            .all(|link| link.span_context.trace_id() != server.span_context.trace_id()),
        "a link to another trace, not a parent: {:?}",
        server.links
    );
    assert_eq!(server.span_context.trace_state().header(), "");
}
