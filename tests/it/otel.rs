//! The `otel` feature: a span per layer in the caller's trace, what each layer
//! records (an error's kind and rule, a cache's hit, a retry's attempts), the
//! body on a pool thread and on a worker process as the backend span's child,
//! and a malformed trace context starting a trace of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use opentelemetry::trace::{SpanId, Status, TraceId, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use toolgraft::context::{self, TraceContext};
use toolgraft::error::Transient;
use toolgraft::ext::{Cache, Pool, Retry, Trace};
use toolgraft::extension::{Anywhere, Next, Stack, Wrapper};
use toolgraft::prelude::*;
use toolgraft::relocation::{Departure, WireContext};
use toolgraft::rulebook::Rule;
use toolgraft::{Name, Registry, ToolError, Wrap};
use tracing_subscriber::layer::SubscriberExt;

use crate::common::{self, Shout};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// An OpenTelemetry pipeline for this test's thread alone (tests run in
/// parallel in one binary): every span kept, exported as it ends.
struct Traced {
    exporter: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    _default: tracing::subscriber::DefaultGuard,
}

fn traced() -> Traced {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("toolgraft-tests")));
    Traced {
        exporter,
        _provider: provider,
        _default: common::subscribe(subscriber),
    }
}

impl Traced {
    fn spans(&self) -> Vec<SpanData> {
        self.exporter.get_finished_spans().unwrap()
    }

    /// The spans named `name`, in the order they ended.
    fn named(&self, name: &str) -> Vec<SpanData> {
        self.spans()
            .into_iter()
            .filter(|span| span.name == name)
            .collect()
    }

    /// The one span named `name`.
    fn one(&self, name: &str) -> SpanData {
        let mut named = self.named(name);
        let names: Vec<_> = self.spans().iter().map(|s| s.name.to_string()).collect();
        assert_eq!(named.len(), 1, "{name} among {names:?}");
        named.remove(0)
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|KeyValue { key: k, .. }| k.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn text(span: &SpanData, key: &str) -> Option<String> {
    attribute(span, key).map(|value| value.as_str().into_owned())
}

fn incoming() -> TraceContext {
    TraceContext::parse(VALID, Some("rojo=1")).unwrap()
}

fn parent_id() -> SpanId {
    SpanId::from_hex(PARENT_ID).unwrap()
}

fn trace_id() -> TraceId {
    TraceId::from_hex(TRACE_ID).unwrap()
}

/// Refuses every call, citing rule `side-effects`.
#[derive(Clone, Debug)]
struct Refuse;

impl Extension for Refuse {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "refuse"
    }
}

impl<S: Stack> Wrap<S> for Refuse {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        _: S::Input,
    ) -> Result<S::Output, ToolError> {
        Err(next.refuse(format!("not here ({})", Rule::SideEffects.cited())))
    }
}

#[tokio::test]
async fn a_three_layer_combo_is_a_span_tree_in_the_callers_trace() {
    let traced = traced();
    let toolset = Toolset::new();
    toolset
        .bind((common::shout()
            .combo()
            .with(Cache::default())
            .with(common::marker("audit"))
            .with(Trace),))
        .unwrap();
    let call = toolset.call("shout_cache_audit_trace", json!({"text": "hi"}));
    let answer = context::with(incoming(), call).await.unwrap();
    assert_eq!(answer, json!("hi|audit"));

    let trace = traced.one("wrapper trace");
    let tool_call = traced.one("tool_call");
    let audit = traced.one("wrapper audit");
    let cache = traced.one("wrapper cache");
    // Outermost first: each layer's span the parent of the one below (`trace`
    // through its own `tool_call` span), the outermost the caller's span's
    // child, all in the caller's trace.
    assert_eq!(trace.parent_span_id, parent_id());
    assert!(trace.parent_span_is_remote);
    assert_eq!(tool_call.parent_span_id, trace.span_context.span_id());
    assert_eq!(audit.parent_span_id, tool_call.span_context.span_id());
    assert_eq!(cache.parent_span_id, audit.span_context.span_id());
    for span in [&trace, &audit, &cache] {
        assert_eq!(span.span_context.trace_id(), trace_id(), "{}", span.name);
        assert_eq!(span.span_context.trace_state().header(), "rojo=1");
        assert_eq!(span.status, Status::Unset, "{}", span.name);
        assert_eq!(
            text(span, "toolgraft.extension.kind").as_deref(),
            Some("wrapper")
        );
        assert_eq!(text(span, "error.type"), None);
    }
    assert_eq!(
        text(&audit, "toolgraft.extension.name").as_deref(),
        Some("audit")
    );
    assert_eq!(
        text(&audit, "toolgraft.branch.name").as_deref(),
        Some("shout_cache_audit")
    );
    assert_eq!(
        text(&audit, "toolgraft.layer.input").as_deref(),
        Some("shout_cache")
    );
    assert_eq!(
        text(&cache, "toolgraft.layer.input").as_deref(),
        Some("shout")
    );
    // The `trace` built-in's own span is inside its layer's.
    assert_eq!(
        traced.one("tool_call").parent_span_id,
        trace.span_context.span_id()
    );
}

#[tokio::test]
async fn a_manifests_combo_has_the_same_spans() {
    let traced = traced();
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register(toolgraft::runtime::Configured::new(Cache::default()))
        .unwrap();
    let toolset = Toolset::new();
    let manifest = toolgraft::runtime::manifest::Manifest::from_value(
        &json!({"tools": {"shout": [["cache", "trace"]]}}),
    )
    .unwrap();
    let outcome = toolset.bind_manifest(
        &registry,
        &toolgraft::toolset::BaseTools::new().with(&common::shout()),
        &manifest,
    );
    outcome[0].1.clone().unwrap();
    let call = toolset.call("shout_cache_trace", json!({"text": "hi"}));
    context::with(incoming(), call).await.unwrap();

    let trace = traced.one("wrapper trace");
    let cache = traced.one("wrapper cache");
    let tool_call = traced.one("tool_call");
    assert_eq!(trace.parent_span_id, parent_id());
    assert_eq!(tool_call.parent_span_id, trace.span_context.span_id());
    // The layer below `trace` runs inside its `tool_call` span.
    assert_eq!(cache.parent_span_id, tool_call.span_context.span_id());
    assert_eq!(cache.span_context.trace_id(), trace_id());
    assert_eq!(
        text(&cache, "toolgraft.branch.name").as_deref(),
        Some("shout_cache")
    );
}

#[tokio::test]
async fn a_refusal_records_its_kind_and_the_rule_it_cites() {
    let traced = traced();
    let (refused,) = Toolset::new()
        .bind((common::shout().combo().with(Refuse).with(Trace),))
        .unwrap();
    let error = refused.call(Shout::new("hi")).await.unwrap_err();
    assert_eq!(error.rule(), Some(Rule::SideEffects));

    // The refusing layer and every layer it passes through record it.
    for name in ["wrapper refuse", "wrapper trace"] {
        let span = traced.one(name);
        assert_eq!(
            text(&span, "error.type").as_deref(),
            Some("refused"),
            "{name}"
        );
        assert_eq!(
            text(&span, "toolgraft.rule").as_deref(),
            Some("side-effects"),
            "{name}"
        );
        assert!(
            matches!(span.status, Status::Error { .. }),
            "{name}: {:?}",
            span.status
        );
    }
}

#[tokio::test]
async fn cache_records_a_miss_then_a_hit() {
    let traced = traced();
    let (cached,) = Toolset::new()
        .bind((common::shout().combo().with(Cache::default()),))
        .unwrap();
    cached.call(Shout::new("hi")).await.unwrap();
    cached.call(Shout::new("hi")).await.unwrap();

    let spans = traced.named("wrapper cache");
    let hits: Vec<_> = spans
        .iter()
        .map(|span| attribute(span, "toolgraft.cache.hit"))
        .collect();
    assert_eq!(hits, [Some(Value::Bool(false)), Some(Value::Bool(true))]);
}

#[tokio::test(start_paused = true)]
async fn retry_adds_an_event_per_attempt() {
    let traced = traced();
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let flaky = Tool::builder()
        .name("flaky")
        .description("Fail twice, then answer.")
        .read_only()
        .body(move |input: Shout| {
            let call = seen.fetch_add(1, Ordering::SeqCst);
            async move {
                if call < 2 {
                    return Err(Transient::new("warming up").into());
                }
                Ok(input.text)
            }
        })
        .build()
        .unwrap();
    let (retried,) = Toolset::new()
        .bind((flaky.combo().with(Retry::attempts(3)),))
        .unwrap();
    assert_eq!(retried.call(Shout::new("hi")).await.unwrap(), "hi");

    let retry = traced.one("wrapper retry");
    let attempts: Vec<_> = retry
        .events
        .iter()
        .filter(|event| event.name == "toolgraft.retry")
        .map(|event| {
            event
                .attributes
                .iter()
                .find(|kv| kv.key.as_str() == "toolgraft.retry.attempt")
                .map(|kv| kv.value.clone())
        })
        .collect();
    assert_eq!(
        attempts,
        [
            Some(Value::I64(1)),
            Some(Value::I64(2)),
            Some(Value::I64(3))
        ]
    );
    assert_eq!(retry.status, Status::Unset);
}

#[tokio::test]
async fn a_pool_body_is_a_child_of_the_pool_span() {
    let traced = traced();
    let work = Tool::builder()
        .name("work")
        .description("Say which trace the body is in.")
        .body(|_: common::Ping| async {
            let span = tracing::info_span!("body");
            let _in = span.enter();
            // What a call out of the body sends: the body's own span.
            let current = TraceContext::current().map(|trace| trace.traceparent());
            // What travelled with the call: the pool span's context.
            let entry = context::get::<TraceContext>().map(|trace| trace.parent_id());
            Ok(json!({"current": current, "entry": entry}))
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((work.combo().with(Trace).with(Pool::new(1).unwrap()),))
        .unwrap();
    let call = toolset.call("work_trace_pool", json!({}));
    let seen = context::with(incoming(), call).await.unwrap();

    let pool = traced.one("backend pool");
    let trace = traced.one("wrapper trace");
    let body = traced.one("body");
    assert_eq!(pool.parent_span_id, parent_id());
    assert_eq!(
        text(&pool, "toolgraft.extension.kind").as_deref(),
        Some("backend")
    );
    assert_eq!(
        text(&pool, "toolgraft.branch.name").as_deref(),
        Some("work_trace_pool")
    );
    assert_eq!(
        text(&pool, "toolgraft.layer.input").as_deref(),
        Some("work_trace")
    );
    // On the pool's thread: the layer below and the body under the pool span.
    assert_eq!(trace.parent_span_id, pool.span_context.span_id());
    assert_eq!(
        traced.one("tool_call").parent_span_id,
        trace.span_context.span_id()
    );
    assert_eq!(
        body.parent_span_id,
        traced.one("tool_call").span_context.span_id()
    );
    assert_eq!(body.span_context.trace_id(), trace_id());
    assert_eq!(
        seen["entry"],
        json!(pool.span_context.span_id().to_string())
    );
    assert_eq!(
        seen["current"],
        json!(format!("00-{TRACE_ID}-{}-01", body.span_context.span_id()))
    );
}

#[tokio::test]
async fn a_worker_process_continues_the_backend_span() {
    let traced = traced();
    let below = Name::new("shout_audit").unwrap();
    // The caller's side: a backend leaves with the job.
    let departure = context::with(incoming(), async { Departure::new("remote", &below) })
        .await
        .unwrap();
    let wire = serde_json::to_string(&departure.to_wire().unwrap()).unwrap();
    drop(departure);
    let backend = traced.one("backend remote");
    assert_eq!(backend.parent_span_id, parent_id());

    // The worker's side: the layer below, bound there, continues the trace the
    // job brought as the backend span's child.
    let toolset = Toolset::new();
    toolset
        .bind((common::shout().combo().with(common::marker("audit")),))
        .unwrap();
    let wire: WireContext = serde_json::from_str(&wire).unwrap();
    wire.arrive(toolset.call("shout_audit", json!({"text": "hi"})))
        .await
        .unwrap();
    let audit = traced.one("wrapper audit");
    assert_eq!(audit.span_context.trace_id(), trace_id());
    assert_eq!(audit.parent_span_id, backend.span_context.span_id());
    assert!(audit.parent_span_is_remote);
}

#[tokio::test]
async fn a_malformed_trace_context_starts_a_trace_of_its_own() {
    let traced = traced();
    let toolset = Toolset::new();
    toolset
        .bind((common::shout().combo().with(common::marker("audit")),))
        .unwrap();
    // As a job would bring it: a traceparent that does not parse, and a huge
    // tracestate, arrive as no trace context at all.
    let hostile = json!([{"name": "toolgraft.trace_context", "value": {
        "traceparent": VALID.to_uppercase(),
        "tracestate": "k=v,".repeat(100_000),
    }}]);
    let wire: WireContext = serde_json::from_value(hostile).unwrap();
    let answer = wire
        .arrive(toolset.call("shout_audit", json!({"text": "hi"})))
        .await;
    assert_eq!(answer.unwrap(), json!("hi|audit"));

    let audit = traced.one("wrapper audit");
    assert_ne!(audit.span_context.trace_id(), trace_id());
    assert_eq!(audit.parent_span_id, SpanId::INVALID);
    assert!(
        audit
            .attributes
            .iter()
            .all(|kv| kv.value.as_str().len() <= 256)
    );
}

#[tokio::test]
async fn without_a_subscriber_the_current_trace_context_is_the_entry() {
    let toolset = Toolset::new();
    let traced = Tool::builder()
        .name("traced")
        .description("Say which trace a call out would send.")
        .body(|_: common::Ping| async {
            Ok(TraceContext::current().map(|trace| trace.traceparent()))
        })
        .build()
        .unwrap();
    toolset.bind((traced.combo().with(Trace),)).unwrap();
    let call = toolset.call("traced_trace", json!({}));
    assert_eq!(context::with(incoming(), call).await.unwrap(), json!(VALID));
}
