//! Logging and, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the standard
//! variable), OpenTelemetry traces exported over OTLP/HTTP: what the examples
//! (and the tests' worker processes) install first. The application picks the
//! exporter and the sampler; these are the SDK's defaults (`ParentBased`
//! `AlwaysOn`: a trace the caller samples is kept), with the batch processor.
//!
//! Point it at an OpenTelemetry Collector (or Jaeger, which takes OTLP):
//!
//! ```text
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 cargo run -p toolgraft-jobs --features otel --example traced -- worker
//! ```
//!
//! `OTEL_SERVICE_NAME` names the process in the traces; `OTEL_BSP_SCHEDULE_DELAY`
//! (ms, 5000 by default) is how long spans wait to be sent in a batch.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The variable that turns the export on, and names where it goes.
pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// The tracer provider: its spans are sent when it is dropped, so a process
/// that ends by returning from `main` loses none.
#[derive(Debug)]
pub struct Otel(SdkTracerProvider);

impl Drop for Otel {
    fn drop(&mut self) {
        if let Err(error) = self.0.shutdown() {
            eprintln!("the OTLP exporter did not flush: {error}");
        }
    }
}

/// Logs to stderr (`INFO` and above, as `tracing_subscriber::fmt()` does)
/// and, when [`ENDPOINT`] is set, exports traces there as
/// `service` (unless `OTEL_SERVICE_NAME` says otherwise): the global `tracing`
/// subscriber, with the `tracing-opentelemetry` layer, and the global tracer
/// provider (what toolgraft-jobs' queue-wait spans are made with).
///
/// The exporter is the blocking reqwest client: the batch processor sends from
/// a thread of its own, with no tokio reactor, where an async client would
/// need one.
pub fn init(service: &'static str) -> Result<Option<Otel>, Box<dyn std::error::Error>> {
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let Some(endpoint) = std::env::var_os(ENDPOINT) else {
        tracing_subscriber::registry()
            .with(LevelFilter::INFO)
            .with(log)
            .try_init()?;
        return Ok(None);
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(service);
    }
    let provider = SdkTracerProvider::builder()
        .with_resource(resource.build())
        .with_batch_exporter(exporter)
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    let traces = tracing_opentelemetry::layer().with_tracer(provider.tracer(service));
    // The log's events in a span are the span's events in the trace too.
    tracing_subscriber::registry()
        .with(LevelFilter::INFO)
        .with(log)
        .with(traces)
        .try_init()?;
    eprintln!(
        "{service}: exporting traces over OTLP/HTTP to {}",
        endpoint.to_string_lossy()
    );
    Ok(Some(Otel(provider)))
}
