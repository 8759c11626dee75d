//! A job's trace on its worker ([`JobSpan`]): with feature `otel`, the job's
//! run as an OpenTelemetry span that continues the caller's trace, beside its
//! queue wait, its progress and its withdrawal; without it, nothing, at no
//! cost. The worker calls the same methods either way, so that every tier (and
//! any tier added later) is traced by the worker's one job loop.

#[cfg(feature = "otel")]
mod otel;
#[cfg(feature = "otel")]
pub(crate) use otel::JobSpan;

#[cfg(not(feature = "otel"))]
mod off;
#[cfg(not(feature = "otel"))]
pub(crate) use off::JobSpan;
