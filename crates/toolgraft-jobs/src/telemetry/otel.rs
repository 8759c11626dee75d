//! [`JobSpan`] with feature `otel`: a job's run as a consumer span that
//! continues the trace the job carries, by the OpenTelemetry messaging
//! conventions (`process <queue>`), and its queue wait as a span of its own.
//!
//! The job span is a `tracing` span (bridged by `tracing-opentelemetry`), so
//! the spans of the layers the worker runs, and the body's own, are its
//! children. The queue wait cannot be one: it started in another process,
//! before the worker saw the job, and a `tracing` span starts when it is made.
//! It is made with the OpenTelemetry API instead, through the global tracer
//! provider (`opentelemetry::global::set_tracer_provider`), which the
//! application sets to the provider its `tracing-opentelemetry` layer uses.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{KeyValue, global};
use toolgraft::context::{self, Progress, TraceContext};
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::job::Job;

/// The longest wait a job's queue-wait span shows (see [`queue_wait`]).
const MAX_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// The instrumentation scope of the spans made with the OpenTelemetry API.
const SCOPE: &str = "toolgraft-jobs";
/// `messaging.system`: the conventions' list has no value for it; the jobs are
/// toolgraft's, whatever engine carries them.
const SYSTEM: &str = "toolgraft";

/// The span of one job's run on this worker.
#[derive(Clone, Debug)]
pub(crate) struct JobSpan {
    span: tracing::Span,
    /// The trace context the body continues: the job's, with the job span as
    /// its parent. `None` when the job carried none (nothing is made up for a
    /// call in no trace) or when no OpenTelemetry layer records the span.
    body: Option<TraceContext>,
}

impl JobSpan {
    /// Opens the span of `job`, which this worker picked up from `queue` at
    /// `picked_up`, in the call context the job brought (its trace context
    /// is the parent); records its queue wait, from when it became runnable.
    ///
    /// The wait starts by the caller's clock and ends by the worker's: a skew
    /// between the two machines' clocks lengthens or shortens it by as much.
    /// One that would end before it starts (a worker's clock behind) is shown
    /// as no wait, with the difference in `toolgraft.job.clock_skew_us`.
    pub(crate) fn start(job: &Job, queue: &str, worker: &str, picked_up: SystemTime) -> Self {
        let carried = context::get::<TraceContext>();
        let span = tracing::info_span!(
            target: "toolgraft_jobs::worker",
            "process",
            otel.name = format!("process {queue}"),
            otel.kind = "consumer",
        );
        if span.is_disabled() {
            return Self { span, body: None };
        }
        // The caller's trace, or a trace of its own: not the child of a span the
        // worker happens to be in.
        toolgraft::otel::begin(&span, carried.as_ref());
        // A job is input like any other: what it names is shortened.
        for (key, value) in [
            ("messaging.system", SYSTEM),
            ("messaging.operation.name", "process"),
            ("messaging.operation.type", "process"),
            ("messaging.destination.name", queue),
            ("messaging.message.id", &job.id),
            ("messaging.client.id", worker),
            ("toolgraft.job.tool", &job.tool),
        ] {
            span.set_attribute(key, shorten(value));
        }
        let own = span.context().span().span_context().clone();
        let body = carried
            .as_ref()
            .and_then(|_| TraceContext::from_span_context(&own));
        if job.queued_at_us > 0 && (own.is_valid() || carried.is_some()) {
            let parent = match &carried {
                Some(trace) => trace.otel_context(),
                // A job in no trace: its wait is in the trace its run starts.
                None => span.context(),
            };
            queue_wait(job, queue, picked_up, &parent);
        }
        Self { span, body }
    }

    /// Runs `call` (the job's whole run) in the job span.
    pub(crate) fn scope<F: Future>(&self, call: F) -> impl Future<Output = F::Output> + use<F> {
        call.instrument(self.span.clone())
    }

    /// Runs `body` (the call of the layer the job names) with the job span as
    /// the parent in its trace context, so that what the body sends on (a
    /// call out, a job of its own) continues from the job, not from its caller.
    pub(crate) fn continued<F: Future>(&self, body: F) -> impl Future<Output = F::Output> + use<F> {
        let trace = self.body.clone();
        async move {
            match trace {
                Some(trace) => context::with(trace, body).await,
                None => body.await,
            }
        }
    }

    /// A progress report, as it went to the caller: an event on the job span.
    pub(crate) fn progress(&self, progress: &Progress) {
        let mut attributes = vec![KeyValue::new("toolgraft.progress", progress.progress)];
        if let Some(total) = progress.total {
            attributes.push(KeyValue::new("toolgraft.progress.total", total));
        }
        if let Some(message) = &progress.message {
            attributes.push(KeyValue::new(
                "toolgraft.progress.message",
                toolgraft::error::shorten(message).into_owned(),
            ));
        }
        self.span.add_event("toolgraft.job.progress", attributes);
    }

    /// The caller withdrew the job: before it ran (`None`), or after it had
    /// run `after_ms` (its body stopped).
    pub(crate) fn withdrawn(&self, after_ms: Option<u64>) {
        let attributes = after_ms
            .and_then(|ms| i64::try_from(ms).ok())
            .map(|ms| KeyValue::new("toolgraft.job.ran_ms", ms))
            .into_iter()
            .collect();
        self.span.add_event("toolgraft.job.withdrawn", attributes);
    }

    /// The job ended with an error: `error.type` is its kind (a low-cardinality
    /// name: `body`, `refused`, `timed_out`...), the status its message.
    pub(crate) fn failed(&self, error_type: &'static str, message: &dyn std::fmt::Display) {
        if self.span.is_disabled() {
            return;
        }
        self.span.set_attribute("error.type", error_type);
        self.span
            .set_status(Status::error(shorten(&message.to_string())));
    }
}

/// Records `job`'s wait in `queue`, from when it became runnable to
/// `picked_up`, as a span of `parent`'s trace.
fn queue_wait(job: &Job, queue: &str, picked_up: SystemTime, parent: &opentelemetry::Context) {
    let mut attributes = vec![
        KeyValue::new("messaging.system", SYSTEM),
        KeyValue::new("messaging.destination.name", queue.to_owned()),
        KeyValue::new("messaging.message.id", shorten(&job.id)),
    ];
    // The caller's clock says when; it is believed within a day of the worker's
    // (a job waits minutes, not days: one older than its retention is gone), and
    // what is beyond is shown as the clocks' skew, not as a wait.
    let latest_start = picked_up.checked_sub(MAX_WAIT).unwrap_or(UNIX_EPOCH);
    let queued = UNIX_EPOCH
        .checked_add(Duration::from_micros(job.queued_at_us))
        .unwrap_or(picked_up);
    let start = queued.clamp(latest_start, picked_up);
    let skew = match queued.duration_since(start) {
        Ok(ahead) => ahead,
        Err(behind) => behind.duration(),
    };
    if !skew.is_zero() {
        attributes.push(KeyValue::new(
            "toolgraft.job.clock_skew_us",
            i64::try_from(skew.as_micros()).unwrap_or(i64::MAX),
        ));
    }
    let tracer = global::tracer(SCOPE);
    let mut wait = tracer
        .span_builder(format!("wait {queue}"))
        .with_kind(SpanKind::Internal)
        .with_start_time(start)
        .with_attributes(attributes)
        .start_with_context(&tracer, parent);
    wait.end_with_timestamp(picked_up);
}

fn shorten(text: &str) -> String {
    toolgraft::error::shorten(text).into_owned()
}
