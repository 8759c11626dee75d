//! The job vocabulary: what a job is (its message, its reply, its ticket and
//! state, the record kept of a submitted one) and the keys that name them, shared
//! by the caller's side, the worker's and the tiers.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::wire::WireError;
use toolgraft::ToolError;
use toolgraft::relocation::WireContext;

/// One relocated call: run the bound name `tool` with `args`, answer on `reply_to`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Job {
    /// A ULID: the job engine's task id too.
    pub id: String,
    /// The backend's layer input, bound in the worker by the same binding code.
    pub tool: String,
    pub args: Value,
    /// The caller's reply channel.
    pub reply_to: String,
    /// The caller's call context, as far as it crosses processes (the chain
    /// depth, so that a cycle through a worker still ends; a user's entries).
    #[serde(default)]
    pub context: WireContext,
    /// The fleet's binding generation the caller was at (0: no fleet); a worker
    /// behind it catches up before running the job.
    #[serde(default)]
    pub generation: u64,
    /// Whether the caller listens for the body's progress (its call had a
    /// progress sink): the worker sends it on `reply_to`, before the reply.
    #[serde(default)]
    pub progress: bool,
    /// The least severe level of the body's log messages the caller takes (its
    /// call had a log sink): the worker sends them on `reply_to`, before the
    /// reply. `None`: it takes none (so a caller from before log messages
    /// travelled is sent none, and a worker from before ignores the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<toolgraft::context::LogLevel>,
    /// When the job became runnable, in microseconds since the Unix epoch by
    /// the caller's clock: when it was enqueued, or the time it was scheduled
    /// for. A worker's trace shows the queue wait from it (feature `otel`).
    /// 0: not known (a caller from before the field).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queued_at_us: u64,
    /// When the caller enqueued the job, in microseconds since the Unix epoch
    /// by its clock: a worker that has heard every withdrawal since before then
    /// (less a margin for the clocks) need not ask the engine whether it was
    /// withdrawn (`withdrawals.rs`). 0: not
    /// known (a caller from before the field): it asks.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sent_at_us: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// What arrives on a caller's reply channel: a job's reply, or a report of its
/// progress or a log message of its body (any number, in order, before the
/// reply). Told apart by their fields (`worker`, `progress`, `log`): a kind
/// added later is one more field, which a caller from before drops as a message
/// it cannot read, and is sent only to a caller whose job asks for it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Message {
    Reply(Reply),
    Progress(ProgressReport),
    Log(LogReport),
}

impl Message {
    /// The job the message is of.
    pub(crate) fn job(&self) -> &str {
        match self {
            Self::Reply(reply) => &reply.job,
            Self::Progress(report) => &report.job,
            Self::Log(report) => &report.job,
        }
    }
}

/// A job's progress, as its body reported it on the worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ProgressReport {
    pub job: String,
    pub progress: toolgraft::context::Progress,
}

/// A log message of a job's body, as it logged it on the worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct LogReport {
    pub job: String,
    pub log: toolgraft::context::LogMessage,
}

/// A worker's answer to one job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Reply {
    pub job: String,
    /// `<name>-<pid>` of the worker that ran it.
    pub worker: String,
    pub result: Result<Value, WireError>,
}

impl Reply {
    /// The end of `job` of `tool`, cancelled while it ran: what the worker that
    /// stopped it writes, or the cancel when no worker says.
    pub(crate) fn cancelled(job: &str, worker: String, tool: String) -> Self {
        Self {
            job: job.to_owned(),
            worker,
            result: Err(WireError::Cancelled { tool }),
        }
    }
}

/// Where a submitted job is.
///
/// ```
/// assert_eq!(serde_json::to_value(toolgraft_jobs::JobState::Scheduled)?, "scheduled");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for its time (`run_at`).
    Scheduled,
    /// Runnable, waiting for a worker (or taken back from a dead one, to run again).
    Queued,
    /// A worker has it.
    Running,
    /// Done: its result is kept for the retention.
    Finished,
    /// Done with an error: the error is kept for the retention. Also a job whose
    /// submit recorded it and then failed or timed out before enqueueing it: it
    /// never runs (its result says so).
    Failed,
    /// Taken out of the queue before any worker had it: it never runs.
    Cancelled,
}

impl JobState {
    /// Whether the job has ended (finished, failed or cancelled).
    ///
    /// ```
    /// use toolgraft_jobs::JobState;
    /// assert!(JobState::Cancelled.is_done() && !JobState::Running.is_done());
    /// ```
    pub fn is_done(self) -> bool {
        matches!(self, Self::Finished | Self::Failed | Self::Cancelled)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Scheduled => "scheduled",
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        })
    }
}

/// A submitted job, as `submit` answers and `job_status` reports it.
///
/// ```
/// use toolgraft_jobs::{JobState, JobTicket};
/// let ticket: JobTicket = serde_json::from_value(serde_json::json!({
///     "job_id": "01JZ", "queue": "weather", "tool": "forecast",
///     "state": "scheduled", "run_at": "2030-01-01T00:00:00Z"}))?;
/// assert_eq!(ticket.state, JobState::Scheduled);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobTicket {
    /// The job's id: what `job_status`, `job_result` and `job_cancel` take.
    pub job_id: String,
    /// The queue it is on.
    pub queue: String,
    /// The tool the worker runs (the layer inside `remote`).
    pub tool: String,
    /// Where it is now.
    pub state: JobState,
    /// When it becomes runnable, as an RFC 3339 time (UTC). Workers take it within
    /// about a second and a poll period after: the engines keep whole seconds.
    pub run_at: String,
}

/// A submitted job's result, as [`Jobs::result`](crate::Jobs::result) finds it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum JobResult {
    /// The tool's result.
    Finished(Value),
    /// The error the tool failed with, as the waiting `remote` branch would have
    /// returned it (the same [`ToolError`] variant).
    Failed(ToolError),
    /// Not finished (scheduled, queued, running) or cancelled: where it is.
    NotFinished(JobTicket),
}

/// Why a job could not be looked up or cancelled.
///
/// ```
/// let err = toolgraft_jobs::JobError::Unknown { job: "01JZ".into(), queue: "weather".into() };
/// assert!(err.to_string().contains("no job `01JZ` on queue `weather`"));
/// ```
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// No job of that id on the queue: never submitted there, or ended longer
    /// ago than the retention (`retention_s`).
    #[error(
        "no job `{job}` on queue `{queue}`: it was never submitted there, or it ended longer ago than the retention"
    )]
    Unknown {
        /// The id asked for.
        job: String,
        /// The queue asked.
        queue: String,
    },
    /// The job is running or has ended: it can no longer be cancelled.
    #[error(
        "job `{job}` is {state}: only a scheduled or queued job can be cancelled{}",
        if *.state == JobState::Running { "; a running job runs to its end, and its result is kept" } else { "" }
    )]
    NotCancellable {
        /// The job.
        job: String,
        /// Where it is.
        state: JobState,
    },
    /// The job engine could not be reached or answered with an error.
    #[error("the job engine failed: {0}")]
    Engine(String),
}

/// What a job's record holds beside the engine's own data.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The ticket as submitted.
    pub(crate) ticket: JobTicket,
    /// The backend's name (for the errors the job's reply turns into).
    pub(crate) backend: String,
    /// When (ms since the epoch) the submit had given up on enqueueing it: an
    /// engine with no job of it by then never got it.
    #[serde(default)]
    pub(crate) enqueue_by: u64,
    /// The principal the job was submitted for (who may follow it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) principal: Option<String>,
    /// Set on a job a server follows for its caller (a deferred call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) following: Option<Following>,
}

/// What makes a job one a server may follow: a secret its handle carries (the
/// job's id alone is no secret: tickets, logs and errors show it), and the
/// name the caller called.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Following {
    pub(crate) token: String,
    pub(crate) called: String,
}

impl Following {
    /// A job the caller of `called` follows, under a new secret: 160 random
    /// bits, hex (two ULIDs' random parts, from the operating system's
    /// generator).
    pub(crate) fn new(called: String) -> Self {
        let (one, two) = (
            ulid::Ulid::generate().random(),
            ulid::Ulid::generate().random(),
        );
        Self {
            token: format!("{one:020x}{two:020x}"),
            called,
        }
    }

    /// Whether `token` is this job's secret, in a time that depends on the
    /// lengths only (a follower's guesses learn nothing from the time taken).
    pub(crate) fn admits(&self, token: &str) -> bool {
        use subtle::ConstantTimeEq as _;
        self.token.len() == token.len() && bool::from(self.token.as_bytes().ct_eq(token.as_bytes()))
    }
}

/// `ms` since the Unix epoch as an RFC 3339 time in UTC.
pub(crate) fn rfc3339(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(|| ms.to_string(), |time| time.to_string())
}

/// Where a submitted job's record lives, and where its worker replies: the
/// worker stores the reply in the record instead of a caller's reply channel.
pub(crate) fn job_key(queue: &str, id: &str) -> String {
    format!("{JOB_KEY_PREFIX}{queue}:{id}")
}

const JOB_KEY_PREFIX: &str = "toolgraft:job:";

/// Whether a job's `reply_to` is a submitted job's record.
pub(crate) fn is_job_key(reply_to: &str) -> bool {
    reply_to.starts_with(JOB_KEY_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::{Job, Message, rfc3339};
    use serde_json::json;

    /// The reply channel's kinds are told apart by their fields, and a job from
    /// a caller that sends no log level asks for no log messages.
    #[test]
    fn log_messages_travel_beside_the_kinds_before_them() {
        let log: Message = serde_json::from_value(
            json!({"job": "j", "log": {"level": "notice", "data": {"n": 1}}}),
        )
        .unwrap();
        assert!(matches!(&log, Message::Log(report) if report.log.logger.is_none()));
        let progress: Message = serde_json::from_value(
            json!({"job": "j", "progress": {"progress": 1.0, "total": null, "message": null}}),
        )
        .unwrap();
        assert!(matches!(progress, Message::Progress(_)));
        let reply: Message =
            serde_json::from_value(json!({"job": "j", "worker": "w-1", "result": {"Ok": 1}}))
                .unwrap();
        assert!(matches!(reply, Message::Reply(_)));

        let before = json!({"id": "j", "tool": "t", "args": {}, "reply_to": "r", "progress": true});
        let job: Job = serde_json::from_value(before).unwrap();
        assert_eq!(job.log, None);
        assert!(serde_json::to_value(&job).unwrap().get("log").is_none());
    }

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(1_900_000_000_123), "2030-03-17T17:46:40.123Z");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }
}
