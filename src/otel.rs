//! OpenTelemetry (feature `otel`): a span per layer of a combo, and the W3C trace
//! context carried across relocation as the current span's.
//!
//! With the feature on, every layer a call passes through opens a `tracing` span
//! named [`LAYER_SPAN`], a child of the span current where the layer is called
//! (the MCP request's server span, with toolgraft-mcp's `otel` feature; the
//! layer outside): a wrapper's and a transformer's around its `around`/`call`,
//! a backend's from its [`Departure`](crate::relocation::Departure) to its end,
//! the body it runs on a worker thread inside it. Typed combos and manifests'
//! combos alike: both call a layer through the same branch. A backend's
//! departure carries the trace context of its own span
//! ([`TraceContext`], replacing the caller's), so a
//! worker process continues the trace as the backend span's child, on every tier.
//!
//! The spans are `tracing` spans in OpenTelemetry's terms (tracing-opentelemetry
//! reads `otel.name`, `otel.status_code`): the application installs the SDK, its
//! exporter and its sampler, and `tracing_opentelemetry::layer()` over them; the
//! core opens spans only. Without a subscriber a layer costs a disabled span's
//! check; without the feature, nothing (the call path is compiled without it).
//!
//! | field | when | value |
//! |---|---|---|
//! | `otel.name` | always | `{kind} {extension}`: `wrapper cache`, `backend pool` (the span name OpenTelemetry shows) |
//! | [`EXTENSION_NAME`] | always | the extension's name (shortened) |
//! | [`EXTENSION_KIND`] | always | `wrapper`, `transformer` or `backend` |
//! | [`LAYER_INPUT`] | always | the name of the layer below (the tool the layer calls) |
//! | [`BRANCH_NAME`] | wrappers, transformers, backends that say | the branch's name (the tool this layer is) |
//! | `error.type` | the layer failed | [`ToolError::code`] (`refused`, `timed_out`, ..) |
//! | `otel.status_code` | the layer failed | `ERROR` |
//! | [`RULE`] | the error cites a rule | the [rulebook](crate::rulebook) section, as [`Rule::as_str`](crate::rulebook::Rule::as_str) |
//! | [`CACHE_HIT`] | `cache` looked the call up | `true` when answered from the store |
//! | [`LIMIT_WAIT`] | `rate_limit` or `concurrency` made the call wait | the wait, in seconds |
//!
//! `retry` adds an event [`RETRY_EVENT`] per attempt, with [`RETRY_ATTEMPT`] its
//! number (1 for the first). Span names carry no value of a call (names are
//! what backends group by); no argument or result is copied into a span, and a
//! layer's span records an error by its kind and rule, not its message (which may
//! quote the call's values). (toolgraft-mcp's server span and toolgraft-jobs's job
//! span give the span's status the error's message, shortened, as the
//! conventions for a failed request say.)
//!
//! A request that arrives from elsewhere (an MCP request, a job on a worker)
//! begins its span with [`begin`]: the child of the trace context it brought,
//! or the root of a trace of its own, never the child of whatever span the
//! transport had open around it.
//!
//! A third-party extension records on its own layer's span the same way the
//! built-ins do: inside `around`, [`tracing::Span::current`] is that span; a
//! field declared here takes `record`, any other attribute
//! `tracing_opentelemetry::OpenTelemetrySpanExt::set_attribute`.
//!
//! ## Installing an exporter
//!
//! The usual OpenTelemetry setup for `tracing`: a tracer provider with the
//! exporter (OTLP with `opentelemetry-otlp`) and the sampler of the
//! application's choice, and tracing-opentelemetry's layer on the subscriber.
//! Here an in-memory exporter stands for OTLP:
//!
//! ```
//! use opentelemetry::trace::TracerProvider as _;
//! use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider};
//! use tracing_subscriber::layer::SubscriberExt;
//! use toolgraft::ext::Trace;
//! use toolgraft::{Tool, Toolset};
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // In an application: `opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?`
//! // (or `.with_http()`), pointed at a collector by `OTEL_EXPORTER_OTLP_ENDPOINT`.
//! let exporter = InMemorySpanExporter::default();
//! let provider = SdkTracerProvider::builder()
//!     .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(1.0))))
//!     .with_simple_exporter(exporter.clone())
//!     .build();
//! let subscriber = tracing_subscriber::registry()
//!     .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("my-server")));
//! // In an application: `tracing::subscriber::set_global_default(subscriber)?`.
//! let _default = tracing::subscriber::set_default(subscriber);
//!
//! let ping = Tool::builder().name("ping").description("Pong.")
//!     .body(|_: Ping| async { Ok("pong") }).build()?;
//! let toolset = Toolset::new();
//! toolset.bind((ping.combo().with(Trace),))?;
//! toolset.call("ping_trace", serde_json::json!({})).await?;
//!
//! provider.force_flush()?;
//! let spans = exporter.get_finished_spans()?;
//! assert!(spans.iter().any(|span| span.name == "wrapper trace"));
//! # Ok(()) }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tracing::field::Empty;

use crate::context::TraceContext;
use crate::error::{ToolError, shorten};
use crate::kind::ExtensionKind;
use crate::name::Name;

/// The `tracing` name of every layer's span; OpenTelemetry shows its `otel.name`,
/// `{kind} {extension}` (see the [module docs](self)).
///
/// ```
/// assert_eq!(toolgraft::otel::LAYER_SPAN, "toolgraft.layer");
/// ```
pub const LAYER_SPAN: &str = "toolgraft.layer";
/// A layer span's attribute: the extension's name.
pub const EXTENSION_NAME: &str = "toolgraft.extension.name";
/// A layer span's attribute: the extension's kind (`wrapper`, `transformer`,
/// `backend`).
pub const EXTENSION_KIND: &str = "toolgraft.extension.kind";
/// A layer span's attribute: the name of the layer below, which the layer calls.
pub const LAYER_INPUT: &str = "toolgraft.layer.input";
/// A layer span's attribute: the name of the branch the layer is.
pub const BRANCH_NAME: &str = "toolgraft.branch.name";
/// A layer span's attribute on failure: the rulebook rule the error cites.
pub const RULE: &str = "toolgraft.rule";
/// A layer span's attribute: whether `cache` answered from its store.
///
/// ```
/// // Inside a wrapper's `around`, the current span is its layer's:
/// tracing::Span::current().record(toolgraft::otel::CACHE_HIT, true);
/// ```
pub const CACHE_HIT: &str = "toolgraft.cache.hit";
/// A layer span's attribute: how long a limit made the call wait, in seconds.
pub const LIMIT_WAIT: &str = "toolgraft.limit.wait";
/// The event `retry` adds to its span per attempt.
pub const RETRY_EVENT: &str = "toolgraft.retry";
/// The attempt's number (1 for the first) on a [`RETRY_EVENT`].
pub const RETRY_ATTEMPT: &str = "toolgraft.retry.attempt";

/// The span of one layer's call, a child of the current span (or of the call's
/// trace context entry, outside any), its fields that are known later declared
/// empty (a `tracing` span takes a value only for a field it declared when
/// made).
pub(crate) fn layer_span(
    kind: ExtensionKind,
    extension: &str,
    branch: Option<&Name>,
    below: &Name,
) -> tracing::Span {
    let span = tracing::info_span!(
        "toolgraft.layer",
        otel.name = %SpanName(kind, extension),
        toolgraft.extension.name = %shorten(extension),
        toolgraft.extension.kind = kind.as_str(),
        toolgraft.layer.input = %below,
        toolgraft.branch.name = branch.map(tracing::field::display),
        error.type = Empty,
        otel.status_code = Empty,
        toolgraft.rule = Empty,
        toolgraft.cache.hit = Empty,
        toolgraft.limit.wait = Empty,
    );
    if !span.is_disabled() {
        continue_entry(&span);
    }
    span
}

/// Begins `span`, the span of a request that arrived from elsewhere: the child
/// of `trace`, the trace context the request brought, or without one the root of
/// a trace of its own, with the span current where it is made (a transport's
/// span around a whole connection, say) as a link, not as its parent: a
/// connection's requests are not one trace, and a malformed `traceparent`
/// starts a new one. Call it before the span is entered. Nothing happens when no
/// OpenTelemetry layer records the span.
///
/// ```
/// use opentelemetry::trace::TracerProvider as _;
/// use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
/// use tracing_subscriber::layer::SubscriberExt;
/// use toolgraft::context::TraceContext;
///
/// let exporter = InMemorySpanExporter::default();
/// let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
/// let subscriber = tracing_subscriber::registry()
///     .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("server")));
/// tracing::subscriber::with_default(subscriber, || {
///     let connection = tracing::info_span!("connection");
///     let _in = connection.enter();
///     // A request that sent a trace context continues it...
///     let sent = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None);
///     let traced = tracing::info_span!("request");
///     toolgraft::otel::begin(&traced, sent.as_ref());
///     drop(traced);
///     // ...one that sent none is a trace of its own, not the connection's child.
///     let untraced = tracing::info_span!("request");
///     toolgraft::otel::begin(&untraced, None);
///     drop(untraced);
/// });
/// provider.force_flush()?;
/// let spans = exporter.get_finished_spans()?;
/// assert_eq!(spans[0].span_context.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert_eq!(spans[0].parent_span_id.to_string(), "00f067aa0ba902b7");
/// assert_eq!(spans[1].parent_span_id, opentelemetry::trace::SpanId::INVALID);
/// assert_eq!(spans[1].links.links.len(), 1); // the connection's span
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn begin(span: &tracing::Span, trace: Option<&TraceContext>) {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    if span.is_disabled() {
        return;
    }
    // Errors only say no OpenTelemetry layer records the span.
    match trace {
        Some(trace) => {
            let _ = trace.continue_in(span);
        }
        None => {
            let ambient = tracing::Span::current()
                .context()
                .span()
                .span_context()
                .clone();
            let _ = span.set_parent(opentelemetry::Context::new());
            span.add_link(ambient);
        }
    }
}

/// Makes `span` continue the call's [`TraceContext`] entry when no span it is
/// made in has a trace of its own: the outermost layer of a call that came with
/// a trace context and no span (a worker process's, whatever its tier; a call
/// from code that reads headers itself) is the sender's child, not a new trace.
fn continue_entry(span: &tracing::Span) {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let current = tracing::Span::current();
    if !current.is_disabled() && current.context().span().span_context().is_valid() {
        return;
    }
    if let Some(trace) = crate::context::get::<TraceContext>() {
        // An error only says no OpenTelemetry layer records the span: nothing
        // to continue then.
        let _ = trace.continue_in(span);
    }
}

/// `call`, a layer's, inside its span (see [`layer_span`]), its error recorded
/// there. The span is made when the call first runs, not when its future is
/// made: it is the child of the span current then, which a layer outside may
/// have entered around the call (the `trace` built-in's own), whichever way the
/// future was made (a typed combo's, or a manifest's boxed one).
pub(crate) fn in_layer<'a, T, F>(
    kind: ExtensionKind,
    extension: &'a str,
    branch: &'a Name,
    below: &'a Name,
    call: F,
) -> InLayer<'a, F>
where
    F: Future<Output = Result<T, ToolError>> + Send,
{
    InLayer {
        layer: Layer {
            kind,
            extension,
            branch,
            below,
        },
        span: None,
        call,
    }
}

/// What a layer's span says of it.
struct Layer<'a> {
    kind: ExtensionKind,
    extension: &'a str,
    branch: &'a Name,
    below: &'a Name,
}

pin_project_lite::pin_project! {
    /// A layer's call in its span (see [`in_layer`]): one future, where
    /// `Instrumented` and an async block recording the error would be two levels
    /// more of nesting per layer of a combo (each counts against the compiler's
    /// layout depth in a deep combo).
    pub(crate) struct InLayer<'a, F> {
        layer: Layer<'a>,
        span: Option<tracing::Span>,
        #[pin]
        call: F,
    }
}

impl<T, F: Future<Output = Result<T, ToolError>>> Future for InLayer<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        // No subscriber takes an `INFO` span (none is installed, or a filter
        // says so): the call is polled as it is, without making one.
        if this.span.is_none() && !tracing::level_enabled!(tracing::Level::INFO) {
            return this.call.poll(cx);
        }
        let layer = &*this.layer;
        let span = this.span.get_or_insert_with(|| {
            layer_span(layer.kind, layer.extension, Some(layer.branch), layer.below)
        });
        let _in = span.enter();
        let result = std::task::ready!(this.call.poll(cx));
        if let Err(error) = &result {
            record_error(span, error);
        }
        Poll::Ready(result)
    }
}

/// An error on `span`: its kind as `error.type`, the span's status, and the rule
/// it cites. Its message is not copied: it may quote the call's values.
pub(crate) fn record_error(span: &tracing::Span, error: &ToolError) {
    span.record("error.type", error.code());
    span.record("otel.status_code", "ERROR");
    if let Some(rule) = error.rule() {
        span.record("toolgraft.rule", rule.as_str());
    }
}

/// `{kind} {extension}`, written only when a subscriber takes the span.
struct SpanName<'a>(ExtensionKind, &'a str);

impl fmt::Display for SpanName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0.as_str(), shorten(self.1))
    }
}
