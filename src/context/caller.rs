//! What the caller's side puts in a call's context: who the caller is, and where
//! the call's progress goes. The server in front sets them (toolgraft-mcp from an
//! MCP request); bodies and extensions read them the same way whatever serves the
//! call, and a call that nothing in front set them for simply has none.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Entry, InProcess, Keyed, Serialized, Unkeyed};

/// Who a call is for: the authenticated caller, as the server in front knows it
/// (toolgraft-mcp takes it from the application's check of the bearer token).
///
/// It travels to every worker, serialized, and a cache inside keys on it, so one
/// caller's cached answer never answers another.
///
/// ```
/// use toolgraft::context::{self, Principal};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// assert_eq!(context::get::<Principal>(), None);
/// let seen = context::with(Principal::new("alice"), async { context::get::<Principal>() }).await;
/// assert_eq!(seen.unwrap().as_str(), "alice");
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Principal(Arc<str>);

impl Principal {
    /// The caller named `id` (a user id, a token's name: whatever the
    /// application's check says).
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(id.into())
    }

    /// The caller's id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Entry for Principal {
    const NAME: &'static str = "toolgraft.principal";
    type Travel = Serialized;
    type Key = Keyed;
}

/// How far a call has come: `progress` of `total` (when known), with a message
/// for people. `progress` should grow from one report to the next.
///
/// ```
/// use toolgraft::context::Progress;
/// let step = Progress::new(3.0).with_total(10.0).with_message("indexing");
/// assert_eq!((step.progress, step.total, step.message.as_deref()), (3.0, Some(10.0), Some("indexing")));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// How much is done.
    pub progress: f64,
    /// How much there is to do, when known.
    pub total: Option<f64>,
    /// What is going on, for people.
    pub message: Option<String>,
}

impl Progress {
    /// `progress` done, of a total not known.
    pub fn new(progress: f64) -> Self {
        Self {
            progress,
            total: None,
            message: None,
        }
    }

    /// Of `total`.
    pub fn with_total(mut self, total: f64) -> Self {
        self.total = Some(total);
        self
    }

    /// With a message for people.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// Where the current call's progress goes: set by whatever serves the call when
/// its caller asked for progress (toolgraft-mcp, for a request with a progress
/// token). [`report_progress`] sends through it.
///
/// It reaches worker threads (a body on a `pool` thread reports like one in the
/// caller's task). The sink itself stays behind at a process boundary: a backend
/// that runs the body in another process sets a sink of its own there and hands
/// the reports it gets back to this one ([`ProgressSink::send`]), as
/// toolgraft-jobs' `remote` does. The function is called on the reporting thread:
/// it must not block (queue the report, as toolgraft-mcp does).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use toolgraft::context::{self, Progress, ProgressSink};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let sink = ProgressSink::new({
///     let seen = seen.clone();
///     move |progress: Progress| seen.lock().unwrap().push(progress.progress)
/// });
/// context::with(sink, async {
///     assert!(context::report_progress(Progress::new(1.0)));
///     assert!(context::report_progress(Progress::new(2.0)));
/// })
/// .await;
/// assert_eq!(*seen.lock().unwrap(), [1.0, 2.0]);
/// # }
/// ```
#[derive(Clone)]
pub struct ProgressSink(Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressSink {
    /// A sink that hands each report to `send`.
    pub fn new(send: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        Self(Arc::new(send))
    }

    /// Hands `progress` to the sink: what [`report_progress`] does with the
    /// current call's, and what a backend does with the reports of a body that
    /// ran elsewhere.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use toolgraft::context::{Progress, ProgressSink};
    /// let seen = Arc::new(Mutex::new(None));
    /// let sink = ProgressSink::new({
    ///     let seen = seen.clone();
    ///     move |progress: Progress| *seen.lock().unwrap() = Some(progress.progress)
    /// });
    /// sink.send(Progress::new(7.0));
    /// assert_eq!(*seen.lock().unwrap(), Some(7.0));
    /// ```
    pub fn send(&self, progress: Progress) {
        (self.0)(progress);
    }
}

impl fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressSink")
    }
}

impl Entry for ProgressSink {
    const NAME: &'static str = "toolgraft.progress_sink";
    type Travel = InProcess;
    type Key = Unkeyed;
}

/// How often a call's progress goes to its caller at most, wherever its body
/// runs: the reports a body makes between two sends are folded into the newest
/// (a later report says more than an earlier one, and the last one is never
/// lost), so a body reporting in a tight loop costs its caller 20 messages a
/// second, not one per report. toolgraft-mcp sends a call's progress to the
/// client so, and toolgraft-jobs' `remote` sends a worker's back so.
///
/// ```
/// assert_eq!(toolgraft::context::PROGRESS_EVERY.as_millis(), 50);
/// ```
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// Reports progress of the current call to its caller. Whether anyone listens:
/// `false` when the caller did not ask for progress. It reaches the caller from a
/// worker thread (`pool`) and from a worker process whose backend carries progress
/// back (toolgraft-jobs' `remote` does, in order, at most one report every
/// [`PROGRESS_EVERY`]);
/// on a worker of a backend that does not, no sink is set and it answers `false`.
///
/// ```
/// use toolgraft::context::{self, Progress};
/// assert!(!context::report_progress(Progress::new(1.0)), "outside a call, nobody listens");
/// ```
pub fn report_progress(progress: Progress) -> bool {
    // Taken out first: the sink runs outside the context's borrow.
    let Some(sink) = super::get::<ProgressSink>() else {
        return false;
    };
    sink.send(progress);
    true
}
