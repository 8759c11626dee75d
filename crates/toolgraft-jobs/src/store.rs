//! The job store as a caller reads it: a [`Jobs`] handle on a [`Remote`]'s
//! queue that follows submitted jobs by id (their state, their result) and
//! cancels them, from any process; the job tools are made from it
//! (`tools.rs`).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::clock::now_ms;
use super::job::{JobError, JobResult, JobState, JobTicket, Record, Reply, job_key};
use super::remote::Remote;
use super::tier::{Cancel, Stored, TierError, Waiting};
use super::wire::WireError;
use toolgraft::{Name, ToolError};

/// How long a cancel of a running job waits for its worker to say how the job
/// ended: a worker hears a withdrawal within a round trip on Redis, and within
/// its 100 ms look on SQLite.
const CANCEL_SETTLES_WITHIN: Duration = Duration::from_secs(1);

/// How soon the cancel first looks meanwhile (then twice as long each time).
const CANCEL_SETTLE_LOOK: Duration = Duration::from_millis(10);

/// The jobs submitted on a [`Remote`]'s queue, read and cancelled by id: what
/// [`Remote::jobs`] hands out. The backend runs calls; this handle follows the
/// jobs a `submit` branch enqueued (their [`JobTicket`] and result, kept for
/// the retention, `retention_s`), in this process or any other on the same
/// queue, and makes the job tools an agent follows them with
/// ([`Jobs::tools`]). Cheap to clone; it shares the backend's connection and
/// waits at most its timeout.
///
/// ```no_run
/// use toolgraft_jobs::{JobResult, Remote};
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let jobs = Remote::new("redis://127.0.0.1:6379")?.with_queue("shouts")?.jobs();
/// let id = "01JZ6M3Q0000000000000000AA"; // a ticket's `job_id`
/// println!("{} is {}", id, jobs.status(id).await?.state);
/// if let JobResult::Finished(answer) = jobs.result(id).await? {
///     println!("{answer}");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Jobs {
    remote: Remote,
}

impl Remote {
    /// The jobs submitted on this backend's queue (see [`Jobs`]).
    ///
    /// ```
    /// let jobs = toolgraft_jobs::Remote::new("sqlite://jobs.db")?.with_queue("weather")?.jobs();
    /// assert_eq!(jobs.queue(), "weather");
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn jobs(&self) -> Jobs {
        Jobs {
            remote: self.clone(),
        }
    }
}

/// Who reads a job. The operator (the Rust API) reads every job; a caller (the
/// job tools) reads the jobs submitted for it and those submitted without a
/// principal, and any other is unknown to it, not even there: a job id is no
/// secret (tickets, logs and errors show it).
#[derive(Clone, Debug)]
pub(crate) enum Reader {
    Operator,
    /// A caller, with its principal if it has one.
    Caller(Option<toolgraft::context::Principal>),
}

impl Jobs {
    /// The queue whose jobs this handle reads.
    pub fn queue(&self) -> &str {
        self.remote.queue_name()
    }

    /// The job `id` as `reader` may read it: unknown to a caller it is not for.
    async fn stored(&self, id: &str, reader: &Reader) -> Result<(Stored, Record), JobError> {
        let unknown = || JobError::Unknown {
            job: toolgraft::error::shorten(id).into_owned(),
            queue: self.remote.queue_name().to_owned(),
        };
        // Not an id this crate makes: no need to ask (and no odd key to build).
        let Ok(ulid) = ulid::Ulid::from_string(id) else {
            return Err(unknown());
        };
        // Ids are written in upper case; a ULID reads the same in either.
        let id = &ulid.to_string();
        let stored = self
            .within_timeout(async { self.remote.broker().await?.stored(id).await })
            .await?
            .ok_or_else(unknown)?;
        let record: Record = serde_json::from_str(&stored.record)
            .map_err(|error| JobError::Engine(format!("job `{id}`'s record: {error}")))?;
        match (reader, record.principal.as_deref()) {
            (Reader::Caller(caller), Some(owner))
                if caller.as_ref().map(|caller| caller.as_str()) != Some(owner) =>
            {
                Err(unknown())
            }
            _ => Ok((stored, record)),
        }
    }

    /// The job `id` as a follower reads it (its result, the principal it was
    /// submitted for, when it was to run, the name called), when `token` is the
    /// one it was submitted with; unknown otherwise.
    pub(crate) async fn followed(
        &self,
        id: &str,
        token: &str,
    ) -> Result<(JobResult, Option<String>, String, String), JobError> {
        let (stored, record) = self.stored(id, &Reader::Operator).await?;
        let Some(following) = record
            .following
            .as_ref()
            .filter(|following| following.admits(token))
        else {
            return Err(JobError::Unknown {
                job: toolgraft::error::shorten(id).into_owned(),
                queue: self.remote.queue_name().to_owned(),
            });
        };
        let called = following.called.clone();
        let result = self.result_of(&stored, &record);
        Ok((result, record.principal, record.ticket.run_at, called))
    }

    /// Where the job `id`, submitted on this queue, is now.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let jobs = toolgraft_jobs::Remote::new("redis://127.0.0.1:6379")?.jobs();
    /// let ticket = jobs.status("01JZ6M3Q0000000000000000AA").await?;
    /// println!("{} is {}", ticket.job_id, ticket.state);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self, id: &str) -> Result<JobTicket, JobError> {
        self.status_as(id, &Reader::Operator).await
    }

    /// [`status`](Self::status), as `reader` may read it.
    pub(crate) async fn status_as(&self, id: &str, reader: &Reader) -> Result<JobTicket, JobError> {
        let (stored, record) = self.stored(id, reader).await?;
        Ok(ticket_of(&stored, record))
    }

    /// The job engine's answer within the backend's timeout.
    async fn within_timeout<T>(
        &self,
        ask: impl Future<Output = Result<T, TierError>>,
    ) -> Result<T, JobError> {
        let after = self.remote.timeout_after();
        match tokio::time::timeout(after, ask).await {
            Ok(answer) => answer.map_err(|error| JobError::Engine(error.to_string())),
            Err(_) => Err(JobError::Engine(format!(
                "`{}` did not answer within {after:?}",
                crate::address::server_of(&self.remote.settings().url)
            ))),
        }
    }

    /// The job `id`'s result once it finished (kept for the retention,
    /// `retention_s`), the [`ToolError`] it failed with, or where it is until then.
    ///
    /// ```no_run
    /// use toolgraft_jobs::JobResult;
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let jobs = toolgraft_jobs::Remote::new("redis://127.0.0.1:6379")?.jobs();
    /// match jobs.result("01JZ6M3Q0000000000000000AA").await? {
    ///     JobResult::Finished(value) => println!("{value}"),
    ///     JobResult::Failed(error) => println!("failed: {error}"),
    ///     JobResult::NotFinished(ticket) => println!("still {}", ticket.state),
    ///     _ => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn result(&self, id: &str) -> Result<JobResult, JobError> {
        self.result_as(id, &Reader::Operator).await
    }

    /// [`result`](Self::result), as `reader` may read it.
    pub(crate) async fn result_as(&self, id: &str, reader: &Reader) -> Result<JobResult, JobError> {
        let (stored, record) = self.stored(id, reader).await?;
        Ok(self.result_of(&stored, &record))
    }

    /// What a stored job's result is.
    fn result_of(&self, stored: &Stored, record: &Record) -> JobResult {
        let record = record.clone();
        let name = Name::lossy;
        let Some(reply) = &stored.reply else {
            if never_enqueued(stored, &record) {
                return JobResult::Failed(ToolError::Relocation {
                    tool: name(&record.ticket.tool),
                    backend: name(&record.backend),
                    reason: format!(
                        "job `{}` was never enqueued: its submit failed or timed out after \
                         recording it; submit it again",
                        record.ticket.job_id
                    ),
                });
            }
            return JobResult::NotFinished(ticket_of(stored, record));
        };
        match reply.result.clone() {
            Ok(value) => JobResult::Finished(value),
            Err(WireError::Cancelled { .. }) => JobResult::NotFinished(ticket_of(stored, record)),
            Err(error) => JobResult::Failed(error.into_tool_error(
                &name(&record.ticket.tool),
                &name(&record.backend),
                &reply.worker,
            )),
        }
    }

    /// Cancels the job `id`: one no worker has taken yet (scheduled or queued)
    /// never runs, and its ticket says `cancelled`. One a worker runs is
    /// withdrawn: its worker stops the body (its future is dropped; within a
    /// round trip on Redis, its 100 ms look on SQLite; a body that blocks its
    /// thread runs on) and writes the job's end, `cancelled`; a body that ran
    /// to its end first keeps its result, and the cancel answers
    /// [`JobError::NotCancellable`]. The cancel waits up to a second for the
    /// worker's word; a worker that says nothing (dead, cut off) has the
    /// cancel's `cancelled` for its end (the first end stays). Cancelling a
    /// cancelled job again answers the same.
    ///
    /// A job that ended first cannot be cancelled ([`JobError::NotCancellable`]):
    /// its result is kept as any other's.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let jobs = toolgraft_jobs::Remote::new("redis://127.0.0.1:6379")?.jobs();
    /// match jobs.cancel("01JZ6M3Q0000000000000000AA").await {
    ///     Ok(ticket) => println!("{} will not run", ticket.job_id),
    ///     Err(toolgraft_jobs::JobError::NotCancellable { state, .. }) => println!("too late: {state}"),
    ///     Err(error) => return Err(error.into()),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, id: &str) -> Result<JobTicket, JobError> {
        self.cancel_as(id, &Reader::Operator).await
    }

    /// [`cancel`](Self::cancel), when `reader` may read the job.
    pub(crate) async fn cancel_as(&self, id: &str, reader: &Reader) -> Result<JobTicket, JobError> {
        // Known first: an unknown id is that, not a refusal.
        let (_, record) = self.stored(id, reader).await?;
        let id = record.ticket.job_id.as_str();
        let outcome = self
            .within_timeout(async { self.remote.broker().await?.cancel(id).await })
            .await?;
        let ticket = self.status(id).await?;
        match outcome {
            Cancel::Cancelled => Ok(ticket),
            Cancel::Unknown => Err(JobError::Unknown {
                job: id.to_owned(),
                queue: self.remote.queue_name().to_owned(),
            }),
            // Taken by a worker and not ended: the worker is told to stop, and
            // says how the job ended (cancelled, or answered: the body ran to
            // its end first). A worker that says nothing within
            // `CANCEL_SETTLES_WITHIN` (dead, or cut off) has the cancel for its
            // end, unless its reply gets there first.
            Cancel::TooLate if !ticket.state.is_done() => {
                self.within_timeout(async { self.remote.broker().await?.withdraw(id).await })
                    .await?;
                let settled = Instant::now() + CANCEL_SETTLES_WITHIN;
                let mut ticket = self.status(id).await?;
                let mut look = CANCEL_SETTLE_LOOK;
                while !ticket.state.is_done() && Instant::now() < settled {
                    tokio::time::sleep(look).await;
                    // Each look is a status script: fewer as the wait goes on.
                    look = (look * 2).min(CANCEL_SETTLES_WITHIN / 4);
                    ticket = self.status(id).await?;
                }
                if !ticket.state.is_done() {
                    let reply = Reply::cancelled(
                        id,
                        "cancelled by a caller".to_owned(),
                        record.ticket.tool.clone(),
                    );
                    let reply_to = job_key(self.remote.queue_name(), id);
                    self.within_timeout(async {
                        self.remote
                            .broker()
                            .await?
                            .send_reply(&reply_to, &reply)
                            .await
                    })
                    .await?;
                    ticket = self.status(id).await?;
                }
                tracing::info!(job = %id, state = ?ticket.state, "job cancelled while running: withdrawn");
                match ticket.state {
                    JobState::Cancelled => Ok(ticket),
                    state => Err(JobError::NotCancellable {
                        job: id.to_owned(),
                        state,
                    }),
                }
            }
            Cancel::TooLate => Err(JobError::NotCancellable {
                job: id.to_owned(),
                state: ticket.state,
            }),
        }
    }
}

/// The ticket as stored, at the state the engine reports.
fn ticket_of(stored: &Stored, record: Record) -> JobTicket {
    let never_enqueued = never_enqueued(stored, &record);
    let mut ticket = record.ticket;
    ticket.state = match (&stored.reply, stored.cancelled, stored.engine) {
        (Some(reply), _, _) if reply.result.is_ok() => JobState::Finished,
        (Some(reply), _, _) if matches!(reply.result, Err(WireError::Cancelled { .. })) => {
            JobState::Cancelled
        }
        (Some(_), _, _) => JobState::Failed,
        (None, true, _) => JobState::Cancelled,
        (None, false, Waiting::Scheduled) => JobState::Scheduled,
        (None, false, Waiting::Queued) => JobState::Queued,
        (None, false, Waiting::Running) => JobState::Running,
        (None, false, Waiting::NotEnqueued) if never_enqueued => JobState::Failed,
        // Its submit is still enqueueing it.
        (None, false, Waiting::NotEnqueued) => JobState::Queued,
    };
    ticket
}

/// Whether the job was recorded and never enqueued: its submit failed or timed
/// out in between (past the time that submit could have taken).
fn never_enqueued(stored: &Stored, record: &Record) -> bool {
    stored.reply.is_none()
        && !stored.cancelled
        && stored.engine == Waiting::NotEnqueued
        && now_ms() > record.enqueue_by
}
