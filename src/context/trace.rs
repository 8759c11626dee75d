//! [`TraceContext`]: the W3C trace context a call continues (`traceparent` and
//! `tracestate`), parsed and bounded, so that whatever a client sent reaches the
//! body, a worker thread and a worker process only as a valid, small value.
//!
//! The grammar and the limits are the W3C's
//! ([Trace Context](https://www.w3.org/TR/trace-context/)): a `traceparent` of
//! version `00` is `00-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>`, in
//! lowercase, neither id all zeros; a `tracestate` is at most 32 `key=value`
//! members, at most 512 characters in all.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Entry, Serialized, Unkeyed};
use crate::hex::{hex, push_hex};

/// At most this many `tracestate` list members are kept (W3C).
pub const MAX_TRACESTATE_MEMBERS: usize = 32;
/// At most this many characters of `tracestate` are kept (W3C: 512).
pub const MAX_TRACESTATE_LEN: usize = 512;

/// The length of a version-`00` `traceparent`: `2 + 1 + 32 + 1 + 16 + 1 + 2`.
const TRACEPARENT_LEN: usize = 55;
/// A `traceparent` of a later version may carry fields after the ones version
/// `00` defines; past this length it is not one anyone sends, and is ignored
/// (so an oversized header costs a length check only).
const MAX_TRACEPARENT_LEN: usize = 512;
/// The flags version `00` and level 2 define: `sampled` (bit 0) and `random`
/// (bit 1). Others are not sent on: their meaning is unknown here.
const KNOWN_FLAGS: u8 = 0b11;
const SAMPLED: u8 = 0b01;

/// The W3C trace context of a call: which trace it belongs to, its parent span,
/// whether the caller samples it, and the vendors' `tracestate`.
///
/// Read from what the caller sent (an MCP request's `_meta`, an HTTP request's
/// `traceparent` and `tracestate` headers) with [`parse`](Self::parse), which
/// ignores anything malformed: a call whose trace context is bad starts a trace
/// of its own, it is never refused for it. It travels to worker threads and to
/// worker processes ([`Serialized`]), checked again when it arrives, so a body
/// anywhere continues the caller's trace; a body that calls out sends it on with
/// [`traceparent`](Self::traceparent) and [`tracestate`](Self::tracestate). A
/// cache does not key on it ([`Unkeyed`]): two traces of one question share an
/// answer.
///
/// ```
/// use toolgraft::context::{self, TraceContext};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let trace = TraceContext::parse(
///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
///     Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
/// )
/// .unwrap();
/// let seen = context::with(trace, async { context::get::<TraceContext>() }).await;
/// assert_eq!(seen.unwrap().trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// # }
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TraceContext {
    trace_id: [u8; 16],
    parent_id: [u8; 8],
    flags: u8,
    /// Checked and bounded; empty when none was sent (or none was valid).
    tracestate: Arc<str>,
}

impl TraceContext {
    /// The trace context a caller sent, when its `traceparent` is valid; `None`
    /// otherwise (a new trace starts). The `tracestate` is kept only beside a
    /// valid `traceparent`, and only its valid members: at most
    /// [`MAX_TRACESTATE_MEMBERS`], at most [`MAX_TRACESTATE_LEN`] characters in
    /// all (the ones past either limit are dropped), each key once (the first).
    ///
    /// Ignored as malformed: a length other than 55 for version `00` (extra
    /// fields included), uppercase or other non-hex digits, a trace-id or a
    /// parent-id of all zeros, version `ff`, and any `traceparent` over 512
    /// characters. A later version than `00` is read as the W3C says, by its
    /// version-`00` fields, and sent on as version `00`.
    ///
    /// ```
    /// use toolgraft::context::TraceContext;
    /// let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    /// assert!(TraceContext::parse(valid, None).is_some());
    /// for malformed in [
    ///     "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // uppercase
    ///     "00-00000000000000000000000000000000-00f067aa0ba902b7-01", // trace-id all zeros
    ///     "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
    ///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // extra field
    /// ] {
    ///     assert_eq!(TraceContext::parse(malformed, None), None, "{malformed}");
    /// }
    /// let kept = TraceContext::parse(valid, Some("a=1,not a member,b=2")).unwrap();
    /// assert_eq!(kept.tracestate(), "a=1,b=2");
    /// ```
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let (trace_id, parent_id, flags) = parse_traceparent(traceparent)?;
        Some(Self {
            trace_id,
            parent_id,
            flags: flags & KNOWN_FLAGS,
            tracestate: tracestate.map(bounded_tracestate).unwrap_or_default(),
        })
    }

    /// The trace-id, as 32 lowercase hex digits.
    ///
    /// ```
    /// # use toolgraft::context::TraceContext;
    /// let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None).unwrap();
    /// assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
    /// ```
    pub fn trace_id(&self) -> String {
        hex(&self.trace_id)
    }

    /// The trace-id's 16 bytes (what a tracing library's id is made of).
    ///
    /// ```
    /// # use toolgraft::context::TraceContext;
    /// let trace = TraceContext::parse("00-000000000000000000000000000000ff-00f067aa0ba902b7-01", None).unwrap();
    /// assert_eq!(trace.trace_id_bytes()[15], 0xff);
    /// ```
    pub fn trace_id_bytes(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The parent-id (the caller's span), as 16 lowercase hex digits.
    ///
    /// ```
    /// # use toolgraft::context::TraceContext;
    /// let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None).unwrap();
    /// assert_eq!(trace.parent_id(), "00f067aa0ba902b7");
    /// ```
    pub fn parent_id(&self) -> String {
        hex(&self.parent_id)
    }

    /// The parent-id's 8 bytes.
    ///
    /// ```
    /// # use toolgraft::context::TraceContext;
    /// let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00000000000000b7-01", None).unwrap();
    /// assert_eq!(trace.parent_id_bytes(), [0, 0, 0, 0, 0, 0, 0, 0xb7]);
    /// ```
    pub fn parent_id_bytes(&self) -> [u8; 8] {
        self.parent_id
    }

    /// The trace flags the caller sent (those the W3C defines: `sampled`,
    /// `random`; the others are cleared).
    ///
    /// ```
    /// # use toolgraft::context::TraceContext;
    /// let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", None).unwrap();
    /// assert_eq!(trace.flags(), 0b11);
    /// ```
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// Whether the caller records this trace (the `sampled` flag).
    ///
    /// ```
    /// # use toolgraft::context::TraceContext;
    /// let id = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7";
    /// assert!(TraceContext::parse(&format!("00-{id}-01"), None).unwrap().sampled());
    /// assert!(!TraceContext::parse(&format!("00-{id}-00"), None).unwrap().sampled());
    /// ```
    pub fn sampled(&self) -> bool {
        self.flags & SAMPLED != 0
    }

    /// The `traceparent` to send on (version `00`), for a call out of the body.
    ///
    /// ```
    /// # use toolgraft::context::TraceContext;
    /// let sent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    /// assert_eq!(TraceContext::parse(sent, None).unwrap().traceparent(), sent);
    /// ```
    pub fn traceparent(&self) -> String {
        let mut header = String::with_capacity(TRACEPARENT_LEN);
        header.push_str("00-");
        push_hex(&mut header, &self.trace_id);
        header.push('-');
        push_hex(&mut header, &self.parent_id);
        header.push('-');
        push_hex(&mut header, &[self.flags]);
        header
    }

    /// The `tracestate` to send on: the valid members the caller sent, within
    /// the W3C's limits; empty when there are none (send no header then).
    ///
    /// ```
    /// # use toolgraft::context::TraceContext;
    /// let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    /// let trace = TraceContext::parse(parent, Some("rojo=00f067aa0ba902b7 , congo=t61rcWkgMzE")).unwrap();
    /// assert_eq!(trace.tracestate(), "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    /// assert_eq!(TraceContext::parse(parent, None).unwrap().tracestate(), "");
    /// ```
    pub fn tracestate(&self) -> &str {
        &self.tracestate
    }

    /// The trace context of a child span `span_id` of this one: the same trace,
    /// flags and `tracestate`, with `span_id` as the parent-id (what a call out
    /// of a span sends). A span id of all zeros is invalid.
    ///
    /// ```
    /// # use toolgraft::context::TraceContext;
    /// let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None).unwrap();
    /// let child = trace.with_parent([1, 2, 3, 4, 5, 6, 7, 8])?;
    /// assert_eq!(child.trace_id(), trace.trace_id());
    /// assert_eq!(child.traceparent(), "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01");
    /// assert!(trace.with_parent([0; 8]).is_err());
    /// # Ok::<(), toolgraft::context::ZeroSpanId>(())
    /// ```
    pub fn with_parent(&self, span_id: [u8; 8]) -> Result<Self, ZeroSpanId> {
        if span_id == [0; 8] {
            return Err(ZeroSpanId);
        }
        Ok(Self {
            parent_id: span_id,
            ..self.clone()
        })
    }
}

/// The trace context to send on, and the OpenTelemetry side of it (feature
/// `otel`).
impl TraceContext {
    /// The trace context of the code running now, for a call out of a body to
    /// send on (its [`traceparent`](Self::traceparent) and
    /// [`tracestate`](Self::tracestate) as headers, or in an MCP request's
    /// `_meta`). With the `otel` feature, the current `tracing` span's
    /// OpenTelemetry span context when it has a valid one (the body's layer's
    /// span, so the callee is its child), else the call's entry (what the caller
    /// sent, as [`context::get`](super::get) reads it); without the feature, the
    /// call's entry. `None` outside any trace.
    ///
    /// ```
    /// use toolgraft::context::TraceContext;
    /// use toolgraft::{Tool, Toolset};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Query {}
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let fetch = Tool::builder().name("fetch").description("Call out, in the caller's trace.")
    ///     .body(|_: Query| async {
    ///         let mut headers = Vec::new();
    ///         if let Some(trace) = TraceContext::current() {
    ///             headers.push(("traceparent", trace.traceparent()));
    ///             if !trace.tracestate().is_empty() {
    ///                 headers.push(("tracestate", trace.tracestate().to_owned()));
    ///             }
    ///         }
    ///         // .. the request out, with `headers` ..
    ///         Ok(headers.len())
    ///     })
    ///     .build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((fetch.combo(),))?;
    /// let sent = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None).unwrap();
    /// let call = toolset.call("fetch", serde_json::json!({}));
    /// assert_eq!(toolgraft::context::with(sent, call).await?, 1);
    /// assert_eq!(TraceContext::current(), None);
    /// # Ok(()) }
    /// ```
    pub fn current() -> Option<Self> {
        #[cfg(feature = "otel")]
        if let Some(trace) = Self::of_span(&tracing::Span::current()) {
            return Some(trace);
        }
        super::get::<Self>()
    }

    /// The trace context of `span`: its OpenTelemetry span context, when a
    /// tracing-opentelemetry layer records it and it is valid.
    #[cfg(feature = "otel")]
    pub(crate) fn of_span(span: &tracing::Span) -> Option<Self> {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        if span.is_disabled() {
            return None;
        }
        Self::from_span_context(span.context().span().span_context())
    }

    /// The trace context of an OpenTelemetry span context, when it is valid; its
    /// `tracestate` kept within the W3C's limits as [`parse`](Self::parse) keeps
    /// it, its flags but `sampled` and `random` cleared.
    ///
    /// ```
    /// use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    /// use toolgraft::context::TraceContext;
    /// let span = SpanContext::new(
    ///     TraceId::from_bytes([0x4b; 16]),
    ///     SpanId::from_bytes([7; 8]),
    ///     TraceFlags::SAMPLED,
    ///     false,
    ///     "rojo=1".parse::<TraceState>()?,
    /// );
    /// let trace = TraceContext::from_span_context(&span).unwrap();
    /// assert_eq!(trace.parent_id(), "0707070707070707");
    /// assert_eq!(trace.tracestate(), "rojo=1");
    /// assert!(trace.sampled());
    /// assert_eq!(TraceContext::from_span_context(&SpanContext::empty_context()), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "otel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
    pub fn from_span_context(span: &opentelemetry::trace::SpanContext) -> Option<Self> {
        if !span.is_valid() {
            return None;
        }
        let state = span.trace_state().header();
        Some(Self {
            trace_id: span.trace_id().to_bytes(),
            parent_id: span.span_id().to_bytes(),
            flags: span.trace_flags().to_u8() & KNOWN_FLAGS,
            tracestate: bounded_tracestate(&state),
        })
    }

    /// This trace context as OpenTelemetry's: a context whose span is this one's
    /// parent, remote (what a span made in it continues), with its
    /// `tracestate`.
    ///
    /// ```
    /// use opentelemetry::trace::TraceContextExt;
    /// use toolgraft::context::TraceContext;
    /// let trace = TraceContext::parse(
    ///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ///     Some("rojo=00f067aa0ba902b7"),
    /// ).unwrap();
    /// let context = trace.otel_context();
    /// let parent = context.span().span_context().clone();
    /// assert!(parent.is_remote() && parent.is_sampled());
    /// assert_eq!(parent.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
    /// assert_eq!(parent.trace_state().header(), "rojo=00f067aa0ba902b7");
    /// assert_eq!(TraceContext::from_span_context(&parent), Some(trace));
    /// ```
    #[cfg(feature = "otel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
    pub fn otel_context(&self) -> opentelemetry::Context {
        use opentelemetry::trace::{
            SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
        };
        // Kept members are valid W3C ones, which OpenTelemetry's parser takes; a
        // member it refused would only lose the vendors' state, not the trace.
        let state = self.tracestate.parse::<TraceState>().unwrap_or_default();
        let parent = SpanContext::new(
            TraceId::from_bytes(self.trace_id),
            SpanId::from_bytes(self.parent_id),
            TraceFlags::new(self.flags),
            true,
            state,
        );
        opentelemetry::Context::new().with_remote_span_context(parent)
    }

    /// Makes `span` continue this trace: its parent becomes this trace
    /// context's span (see [`otel_context`](Self::otel_context)), as a worker
    /// does with the trace context a job brought. Call it before the span is
    /// first entered; an error when no tracing-opentelemetry layer records the
    /// span, or it started already.
    ///
    /// ```
    /// use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
    /// use opentelemetry_sdk::trace::SdkTracerProvider;
    /// use tracing_opentelemetry::OpenTelemetrySpanExt;
    /// use tracing_subscriber::layer::SubscriberExt;
    /// use toolgraft::context::TraceContext;
    /// let provider = SdkTracerProvider::builder().build();
    /// let subscriber = tracing_subscriber::registry()
    ///     .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("worker")));
    /// tracing::subscriber::with_default(subscriber, || {
    ///     let arrived = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None).unwrap();
    ///     let job = tracing::info_span!("job");
    ///     arrived.continue_in(&job).unwrap();
    ///     let context = job.context();
    ///     assert_eq!(context.span().span_context().trace_id().to_string(), arrived.trace_id());
    /// });
    /// ```
    #[cfg(feature = "otel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
    pub fn continue_in(
        &self,
        span: &tracing::Span,
    ) -> Result<(), tracing_opentelemetry::SetParentError> {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        span.set_parent(self.otel_context())
    }
}

/// A span id of all zeros, which the W3C makes invalid (see
/// [`TraceContext::with_parent`]).
///
/// ```
/// let error = toolgraft::context::ZeroSpanId;
/// assert_eq!(error.to_string(), "a span id of all zeros is invalid (W3C trace context)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a span id of all zeros is invalid (W3C trace context)")]
pub struct ZeroSpanId;

/// The headers themselves: the ids are what a reader of logs looks for.
impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceContext")
            .field("traceparent", &self.traceparent())
            .field("tracestate", &self.tracestate)
            .finish()
    }
}

impl Entry for TraceContext {
    const NAME: &'static str = "toolgraft.trace_context";
    type Travel = Serialized;
    type Key = Unkeyed;
}

/// On the wire to a worker process: the two headers, as a caller would send
/// them.
#[derive(Serialize, Deserialize)]
struct Wire<'a> {
    traceparent: std::borrow::Cow<'a, str>,
    #[serde(default, skip_serializing_if = "str::is_empty")]
    tracestate: std::borrow::Cow<'a, str>,
}

impl Serialize for TraceContext {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Wire {
            traceparent: self.traceparent().into(),
            tracestate: (&*self.tracestate).into(),
        }
        .serialize(serializer)
    }
}

/// Parsed again, as if a caller had sent it: a job is input like any other, and
/// one that does not read as a trace context arrives as none.
impl<'de> Deserialize<'de> for TraceContext {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        let tracestate = Some(&*wire.tracestate).filter(|state| !state.is_empty());
        Self::parse(&wire.traceparent, tracestate)
            .ok_or_else(|| serde::de::Error::custom("not a valid W3C traceparent"))
    }
}

/// The trace-id, parent-id and flags of a valid `traceparent`.
fn parse_traceparent(header: &str) -> Option<([u8; 16], [u8; 8], u8)> {
    if header.len() < TRACEPARENT_LEN || header.len() > MAX_TRACEPARENT_LEN {
        return None;
    }
    let bytes = header.as_bytes();
    let version = hex_byte(bytes[0], bytes[1])?;
    // Version 00 is exactly its four fields; a later one may add fields, after
    // a dash (W3C: "parse the first 55 characters").
    let fits = match version {
        0xff => false,
        0x00 => bytes.len() == TRACEPARENT_LEN,
        _ => bytes.len() == TRACEPARENT_LEN || bytes[TRACEPARENT_LEN] == b'-',
    };
    if !fits || bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
        return None;
    }
    let mut trace_id = [0; 16];
    let mut parent_id = [0; 8];
    decode_hex(&bytes[3..35], &mut trace_id)?;
    decode_hex(&bytes[36..52], &mut parent_id)?;
    let flags = hex_byte(bytes[53], bytes[54])?;
    if trace_id == [0; 16] || parent_id == [0; 8] {
        return None;
    }
    Some((trace_id, parent_id, flags))
}

/// The valid members of `header`, in order, within the W3C's limits, joined as
/// they are sent on. The scan stops at the first member past a limit, so a
/// header of any size costs one pass and keeps at most 512 characters.
fn bounded_tracestate(header: &str) -> Arc<str> {
    let mut kept = String::new();
    let mut keys: Vec<&str> = Vec::new();
    for member in header.split(',') {
        // Optional whitespace around members (W3C: OWS); an empty one is allowed.
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let Some((key, value)) = member.split_once('=') else {
            continue;
        };
        if !valid_key(key) || !valid_value(value) || keys.contains(&key) {
            continue;
        }
        let separator = usize::from(!kept.is_empty());
        if keys.len() == MAX_TRACESTATE_MEMBERS
            || kept.len() + separator + member.len() > MAX_TRACESTATE_LEN
        {
            break;
        }
        if separator == 1 {
            kept.push(',');
        }
        kept.push_str(member);
        keys.push(key);
    }
    kept.into()
}

/// A `tracestate` key: `lcalpha 0*255(lcalpha / DIGIT / "_" / "-"/ "*" / "/")`,
/// or a multi-tenant `tenant@system` (tenant up to 241 characters starting with
/// a letter or digit, system up to 14 starting with a letter).
fn valid_key(key: &str) -> bool {
    let rest = |part: &[u8]| {
        part.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-' | b'*' | b'/')
        })
    };
    match key.split_once('@') {
        None => {
            let bytes = key.as_bytes();
            (1..=256).contains(&bytes.len()) && bytes[0].is_ascii_lowercase() && rest(&bytes[1..])
        }
        Some((tenant, system)) => {
            let (tenant, system) = (tenant.as_bytes(), system.as_bytes());
            (1..=241).contains(&tenant.len())
                && (tenant[0].is_ascii_lowercase() || tenant[0].is_ascii_digit())
                && rest(&tenant[1..])
                && (1..=14).contains(&system.len())
                && system[0].is_ascii_lowercase()
                && rest(&system[1..])
        }
    }
}

/// A `tracestate` value: 1 to 256 printable ASCII characters but `,` and `=`,
/// not ending in a space.
fn valid_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    (1..=256).contains(&bytes.len())
        && bytes.last() != Some(&b' ')
        && bytes
            .iter()
            .all(|&c| (0x20..=0x7e).contains(&c) && c != b',' && c != b'=')
}

/// Lowercase hex digits into `out`, all of them, or `None`.
fn decode_hex(digits: &[u8], out: &mut [u8]) -> Option<()> {
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = hex_byte(pair[0], pair[1])?;
    }
    Some(())
}

/// Two lowercase hex digits as a byte (uppercase is not the W3C's).
fn hex_byte(high: u8, low: u8) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(digit(high)? << 4 | digit(low)?)
}
