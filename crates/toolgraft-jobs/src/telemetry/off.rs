//! [`JobSpan`] without feature `otel`: every method does nothing.

use std::future::Future;
use std::time::SystemTime;

use toolgraft::context::Progress;

use crate::job::Job;

/// No span: the job runs as it would untraced.
#[derive(Clone, Debug)]
pub(crate) struct JobSpan;

impl JobSpan {
    pub(crate) fn start(_job: &Job, _queue: &str, _worker: &str, _picked_up: SystemTime) -> Self {
        Self
    }

    pub(crate) fn scope<F: Future>(&self, call: F) -> impl Future<Output = F::Output> + use<F> {
        call
    }

    pub(crate) fn continued<F: Future>(&self, body: F) -> impl Future<Output = F::Output> + use<F> {
        body
    }

    pub(crate) fn progress(&self, _progress: &Progress) {}

    pub(crate) fn withdrawn(&self, _after_ms: Option<u64>) {}

    pub(crate) fn failed(&self, _error_type: &'static str, _message: &dyn std::fmt::Display) {}
}
