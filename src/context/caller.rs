//! What the caller's side puts in a call's context: who the caller is, and where
//! the call's progress and log messages go. The server in front sets them (toolgraft-mcp from an
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

    /// A sink whose reports are folded for their caller ([`PROGRESS_EVERY`]),
    /// and the [`ProgressFold`] they are taken from: what a server (for its
    /// client) and a worker (for its caller) send a call's progress by. The sink
    /// holds the fold weakly: one a body kept past its call reports to no one.
    ///
    /// ```
    /// use toolgraft::context::{Progress, ProgressSink};
    /// let (sink, mut fold) = ProgressSink::folded();
    /// for step in 1..=100 {
    ///     sink.send(Progress::new(f64::from(step)));
    /// }
    /// assert_eq!(fold.try_next().map(|p| p.progress), Some(100.0), "the newest");
    /// assert!(fold.try_next().is_none());
    /// ```
    pub fn folded() -> (Self, ProgressFold) {
        let newest = Arc::new(Newest::default());
        let sink = Self::new({
            let newest = Arc::downgrade(&newest);
            move |progress: Progress| {
                if let Some(newest) = newest.upgrade() {
                    newest.put(progress);
                }
            }
        });
        (sink, ProgressFold { newest, due: None })
    }
}

/// The reports of a [folded](ProgressSink::folded) sink, on their way to the
/// caller: the newest report not taken yet, no sooner than [`PROGRESS_EVERY`]
/// after the one taken before it; the reports made in between are folded into
/// it (a later report says more than an earlier one).
#[derive(Debug)]
pub struct ProgressFold {
    newest: Arc<Newest>,
    /// When the next report may go, after one went.
    due: Option<tokio::time::Instant>,
}

#[derive(Debug, Default)]
struct Newest {
    progress: std::sync::Mutex<Option<Progress>>,
    arrived: tokio::sync::Notify,
}

impl Newest {
    fn put(&self, progress: Progress) {
        *self.lock() = Some(progress);
        self.arrived.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Progress>> {
        self.progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ProgressFold {
    /// The report waiting now, if any, at once: the last one, before the reply.
    pub fn try_next(&mut self) -> Option<Progress> {
        self.newest.lock().take()
    }

    /// Waits for the next report to go: the newest, once there is one and
    /// [`PROGRESS_EVERY`] has passed since the one before. Cancel-safe (in a
    /// `select!`): a report is taken only when it is returned.
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolgraft::context::{PROGRESS_EVERY, Progress, ProgressSink};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let (sink, mut fold) = ProgressSink::folded();
    /// sink.send(Progress::new(1.0));
    /// assert_eq!(fold.next().await.progress, 1.0, "the first goes at once");
    /// let taken = tokio::time::Instant::now();
    /// sink.send(Progress::new(2.0));
    /// sink.send(Progress::new(3.0));
    /// assert_eq!(fold.next().await.progress, 3.0, "folded into the newest");
    /// assert!(taken.elapsed() >= PROGRESS_EVERY);
    /// # }
    /// ```
    pub async fn next(&mut self) -> Progress {
        loop {
            if let Some(due) = self.due {
                tokio::time::sleep_until(due).await;
            }
            let arrived = self.newest.arrived.notified();
            if let Some(progress) = self.newest.lock().take() {
                self.due = Some(tokio::time::Instant::now() + PROGRESS_EVERY);
                return progress;
            }
            arrived.await;
        }
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

/// How severe a [`LogMessage`] is: MCP's levels (syslog's, RFC 5424), from the
/// least severe to the most; a level compares above the ones before it.
///
/// ```
/// use toolgraft::context::LogLevel;
/// assert!(LogLevel::Debug < LogLevel::Warning && LogLevel::Warning < LogLevel::Emergency);
/// assert_eq!(serde_json::to_value(LogLevel::Notice)?, "notice");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Detail for debugging.
    Debug,
    /// Something happened.
    Info,
    /// Something worth noticing happened.
    Notice,
    /// Something may be wrong.
    Warning,
    /// Something failed.
    Error,
    /// A part failed.
    Critical,
    /// Someone must act now.
    Alert,
    /// Nothing works.
    Emergency,
}

/// A log message of the current call for its caller: its level, the logger
/// that wrote it (when named) and its data, any JSON (a string, or an object
/// with the details).
///
/// ```
/// use toolgraft::context::{LogLevel, LogMessage};
/// let message = LogMessage::new(LogLevel::Info, "indexed 3 files").with_logger("indexer");
/// assert_eq!((message.level, message.logger.as_deref()), (LogLevel::Info, Some("indexer")));
/// assert_eq!(message.data, "indexed 3 files");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogMessage {
    /// How severe it is.
    pub level: LogLevel,
    /// The logger that wrote it, when named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// What it says.
    pub data: serde_json::Value,
}

impl LogMessage {
    /// A message at `level` saying `data`, of no named logger.
    pub fn new(level: LogLevel, data: impl Into<serde_json::Value>) -> Self {
        Self {
            level,
            logger: None,
            data: data.into(),
        }
    }

    /// Written by the logger `logger`.
    pub fn with_logger(mut self, logger: impl Into<String>) -> Self {
        self.logger = Some(logger.into());
        self
    }
}

/// Where the current call's log messages go: set by whatever serves the call
/// when its caller can receive them (toolgraft-mcp, as `notifications/message`
/// to the client). [`log`] sends through it.
///
/// It travels like a [`ProgressSink`]: it reaches worker threads, stays behind
/// at a process boundary, and a backend that runs the body in another process
/// sets one of its own there and hands the messages it gets back to this one
/// ([`LogSink::send`]), as toolgraft-jobs' `remote` does. A sink takes messages
/// at its [`level`](LogSink::level) and above (the caller's choice, which the
/// backend carries to the worker too). The function is called on the logging
/// thread: it must not block (queue the message: [`LogSink::queue`] makes a
/// sink and its bounded queue).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use toolgraft::context::{self, LogLevel, LogMessage, LogSink};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let sink = LogSink::new({
///     let seen = seen.clone();
///     move |message: LogMessage| seen.lock().unwrap().push(message.data)
/// })
/// .with_level(LogLevel::Info);
/// context::with(sink, async {
///     assert!(!context::log(LogMessage::new(LogLevel::Debug, "below the caller's level")));
///     assert!(context::log(LogMessage::new(LogLevel::Info, "started")));
/// })
/// .await;
/// assert_eq!(*seen.lock().unwrap(), ["started"]);
/// # }
/// ```
#[derive(Clone)]
pub struct LogSink {
    send: Arc<dyn Fn(LogMessage) + Send + Sync>,
    level: LogLevel,
}

impl LogSink {
    /// A sink that hands each message to `send`, at every level.
    pub fn new(send: impl Fn(LogMessage) + Send + Sync + 'static) -> Self {
        Self {
            send: Arc::new(send),
            level: LogLevel::Debug,
        }
    }

    /// Taking messages at `level` and above only.
    ///
    /// ```
    /// use toolgraft::context::{LogLevel, LogSink};
    /// let sink = LogSink::new(|_| ()).with_level(LogLevel::Warning);
    /// assert_eq!(sink.level(), LogLevel::Warning);
    /// ```
    pub fn with_level(mut self, level: LogLevel) -> Self {
        self.level = level;
        self
    }

    /// The least severe level the sink takes.
    pub fn level(&self) -> LogLevel {
        self.level
    }

    /// Hands `message` to the sink if it is at the sink's level or above
    /// (`false`: it was below): what [`log`] does with the current call's, and
    /// what a backend does with the messages of a body that ran elsewhere.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use toolgraft::context::{LogLevel, LogMessage, LogSink};
    /// let seen = Arc::new(Mutex::new(0));
    /// let sink = LogSink::new({
    ///     let seen = seen.clone();
    ///     move |_: LogMessage| *seen.lock().unwrap() += 1
    /// })
    /// .with_level(LogLevel::Error);
    /// assert!(!sink.send(LogMessage::new(LogLevel::Info, "fine")));
    /// assert!(sink.send(LogMessage::new(LogLevel::Critical, "the disk is full")));
    /// assert_eq!(*seen.lock().unwrap(), 1);
    /// ```
    pub fn send(&self, message: LogMessage) -> bool {
        if message.level < self.level {
            return false;
        }
        (self.send)(message);
        true
    }

    /// A sink at `level` whose messages wait in a queue, and the queue, which
    /// whoever carries them to the caller empties: the queue keeps the newest
    /// [`LOG_BACKLOG`] messages, and when more wait it drops the oldest and
    /// counts them (see [`LogQueue::next`]). The sink holds the queue weakly: a
    /// sink a body kept past its call (in a task of its own) logs to no one once
    /// the queue is dropped.
    ///
    /// ```
    /// use toolgraft::context::{LogLevel, LogMessage, LogSink};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let (sink, queue) = LogSink::queue(LogLevel::Debug);
    /// sink.send(LogMessage::new(LogLevel::Info, "one"));
    /// sink.send(LogMessage::new(LogLevel::Info, "two"));
    /// assert_eq!(queue.next().await.data, "one");
    /// assert_eq!(queue.try_next().unwrap().data, "two");
    /// assert!(queue.try_next().is_none());
    /// # }
    /// ```
    pub fn queue(level: LogLevel) -> (Self, LogQueue) {
        let shared = Arc::new(Backlog::default());
        let sink = Self::new({
            let shared = Arc::downgrade(&shared);
            move |message: LogMessage| {
                if let Some(shared) = shared.upgrade() {
                    shared.put(message);
                }
            }
        })
        .with_level(level);
        (sink, LogQueue(shared))
    }
}

impl fmt::Debug for LogSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogSink")
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

impl Entry for LogSink {
    const NAME: &'static str = "toolgraft.log_sink";
    type Travel = InProcess;
    type Key = Unkeyed;
}

/// How many of a call's log messages wait for its caller at most, wherever its
/// body runs: past them the oldest are dropped, and the caller is told how many
/// (see [`LogQueue::next`]). Log messages cannot be folded as progress is (each
/// says something of its own), and a body logging in a tight loop must not
/// flood its caller nor hold memory without bound; the newest are kept, because
/// they tell what happened last, next to the call's outcome. toolgraft-mcp
/// sends a call's messages to the client so, and toolgraft-jobs' `remote` sends
/// a worker's back so.
///
/// ```
/// assert_eq!(toolgraft::context::LOG_BACKLOG, 64);
/// ```
pub const LOG_BACKLOG: usize = 64;

/// The messages of a [`LogSink::queue`] waiting to go to the caller, in order:
/// whoever carries them empties it while the call runs ([`next`](Self::next)),
/// and once more after it ([`try_next`](Self::try_next)), so that all of them go
/// before the reply.
///
/// ```
/// use toolgraft::context::{self, LogLevel, LogMessage, LogSink};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let (sink, queue) = LogSink::queue(LogLevel::Info);
/// context::with(sink, async {
///     context::log(LogMessage::new(LogLevel::Warning, "slow disk"));
/// })
/// .await;
/// let mut sent = Vec::new();
/// while let Some(message) = queue.try_next() {
///     sent.push(message.data);
/// }
/// assert_eq!(sent, ["slow disk"]);
/// # }
/// ```
#[derive(Debug)]
pub struct LogQueue(Arc<Backlog>);

#[derive(Debug, Default)]
struct Backlog {
    waiting: std::sync::Mutex<Waiting>,
    arrived: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Waiting {
    messages: std::collections::VecDeque<LogMessage>,
    dropped: u64,
}

impl Backlog {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn put(&self, message: LogMessage) {
        {
            let mut waiting = self.lock();
            if waiting.messages.len() >= LOG_BACKLOG {
                waiting.messages.pop_front();
                waiting.dropped += 1;
            }
            waiting.messages.push_back(message);
        }
        self.arrived.notify_one();
    }
}

impl LogQueue {
    /// The oldest message waiting, when one is; when some were dropped before
    /// it, first a warning that says how many (`{"dropped": n, "message": ..}`,
    /// logger `toolgraft`), in their place.
    ///
    /// ```
    /// use toolgraft::context::{LOG_BACKLOG, LogLevel, LogMessage, LogSink};
    /// let (sink, queue) = LogSink::queue(LogLevel::Debug);
    /// for n in 0..LOG_BACKLOG + 2 {
    ///     sink.send(LogMessage::new(LogLevel::Info, n));
    /// }
    /// let notice = queue.try_next().unwrap();
    /// assert_eq!((notice.level, notice.data["dropped"].as_u64()), (LogLevel::Warning, Some(2)));
    /// assert_eq!(queue.try_next().unwrap().data, 2, "the oldest went");
    /// ```
    pub fn try_next(&self) -> Option<LogMessage> {
        let mut waiting = self.0.lock();
        if waiting.dropped > 0 && !waiting.messages.is_empty() {
            let dropped = std::mem::take(&mut waiting.dropped);
            return Some(
                LogMessage::new(
                    LogLevel::Warning,
                    serde_json::json!({
                        "dropped": dropped,
                        "message": format!(
                            "{dropped} log messages of this call were dropped: more than {LOG_BACKLOG} waited"
                        ),
                    }),
                )
                .with_logger("toolgraft"),
            );
        }
        waiting.messages.pop_front()
    }

    /// Waits for the next message ([`try_next`](Self::try_next)'s).
    pub async fn next(&self) -> LogMessage {
        loop {
            let arrived = self.0.arrived.notified();
            if let Some(message) = self.try_next() {
                return message;
            }
            arrived.await;
        }
    }
}

/// Logs `message` for the current call's caller. Whether anyone takes it:
/// `false` when the caller cannot receive log messages, or not at this level.
/// It reaches the caller from a worker thread (`pool`) and from a worker process
/// whose backend carries log messages back (toolgraft-jobs' `remote` does, in
/// order, at most [`LOG_BACKLOG`] waiting); on a worker of a backend that does
/// not, no sink is set and it answers `false`.
///
/// ```
/// use toolgraft::context::{self, LogLevel, LogMessage};
/// assert!(!context::log(LogMessage::new(LogLevel::Info, "hello")), "outside a call, nobody listens");
/// ```
pub fn log(message: LogMessage) -> bool {
    // Taken out first: the sink runs outside the context's borrow.
    let Some(sink) = super::get::<LogSink>() else {
        return false;
    };
    sink.send(message)
}
