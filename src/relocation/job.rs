//! [`JobRun`]: which job a relocated call runs as, for the layers beside its body.

use std::sync::Arc;

use crate::context::{Entry, Occurrences, Stays, Unkeyed};

/// The job a backend runs this call as, in the call's context on the worker:
/// its id in the job engine, the same each time the job runs (again after the
/// worker that had it died, say). A backend that may run a job more than once
/// sets it around the layer it runs; [`OncePerKey`](crate::ext::OncePerKey) inside that
/// backend keys a call by it when the call names no key of its own, so a job
/// run again answers the first run's outcome.
///
/// It stays where it was set: a backend further in runs a job of its own.
///
/// ```
/// use toolgraft::context;
/// use toolgraft::relocation::JobRun;
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let seen = context::with(JobRun::new("01JB7Z"), async { context::get::<JobRun>() }).await;
/// assert_eq!(seen.unwrap().id(), "01JB7Z");
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRun {
    id: Arc<str>,
    occurrences: Occurrences,
}

impl JobRun {
    /// The run of the job `id`.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self {
            id: id.into(),
            occurrences: Occurrences::default(),
        }
    }

    /// The job's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Counts `what` once more in this run: the count before (0 the first
    /// time). A run of the job again counts from 0 again, so the calls it makes
    /// in the same order get the same counts.
    #[cfg_attr(not(feature = "once"), allow(dead_code))]
    pub(crate) fn occurrence(&self, what: &str) -> u64 {
        self.occurrences.next(what)
    }
}

impl Entry for JobRun {
    const NAME: &'static str = "toolgraft.relocation.job_run";
    type Travel = Stays;
    type Key = Unkeyed;
}
