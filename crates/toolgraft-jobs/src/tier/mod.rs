//! The tiers: what a job engine does for one queue (one [`Tier`] trait), each
//! tier in a module of its own (a Redis server, or an SQLite file the processes
//! share), and the [`Broker`] the rest of the crate holds, whichever it is. Each
//! tier carries jobs through apalis and replies through a channel of its own
//! (apalis stores results, but its waiting polls at 100 to 500 ms and reports
//! retries as failures).

use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use apalis::prelude::{BoxDynError, Monitor, Task, TaskBuilder, TaskId};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use toolgraft::ext::once::Claim;

use super::job::{Job, Message, Reply};
use super::withdrawals::Withdrawals;

/// The engine settings both tiers share, on their two `Config` types: one job per
/// fetch (idle workers share the load) and the liveness beat. Results travel on
/// the reply channel, but the engine must still record each job's end: without
/// it (`persist_results(false)` skips the acknowledgement altogether) a finished
/// job stays in its worker's in-flight set for good, and runs again when that
/// worker is taken for dead. The recorded result is `null`; the vacuum removes it
/// after the retention.
macro_rules! engine_config {
    ($config:ty, $queue:expr, $engine:expr) => {
        <$config>::default()
            .queue($queue)
            .batch_size(1)
            .heartbeat_interval($engine.heartbeat)
            .missed_heartbeats($engine.missed_heartbeats as usize)
            .persist_results(true)
    };
}

/// A worker on a tier's storage: the two tiers' storages are different types with
/// the same builder calls.
macro_rules! serve {
    ($storage:expr, $worker:expr, $ticks:expr, $concurrency:expr, $run:expr) => {{
        use apalis::prelude::{BackendExt as _, WorkerBuilder, WorkerBuilderExt as _};
        let backend = $storage.poll_with_strategy($ticks);
        let (name, run, concurrency) = ($worker.to_owned(), $run, $concurrency);
        apalis::prelude::Monitor::new().register(move |_| {
            let run = run.clone();
            WorkerBuilder::new(name.clone())
                .backend(backend.clone())
                .concurrency(concurrency)
                .build(move |job: Job| run(job))
        })
    }};
}

// The only place the features choose: a tier this build lacks is the stub in
// `absent.rs`, which refuses its URLs (as `std` stubs a platform it lacks).
#[cfg(feature = "redis")]
mod redis;
#[cfg(not(feature = "redis"))]
#[path = "absent.rs"]
mod redis;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(not(feature = "postgres"))]
#[path = "absent.rs"]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(not(feature = "sqlite"))]
#[path = "absent.rs"]
mod sqlite;
mod error;
mod ticks;
mod tls;

pub(crate) use error::TierError;
pub(crate) use ticks::Ticks;

/// The engine settings of a `RemoteConfig`, checked, as durations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Engine {
    pub(crate) poll: Duration,
    pub(crate) heartbeat: Duration,
    pub(crate) missed_heartbeats: u32,
    pub(crate) retention: Duration,
}

impl Engine {
    /// How long a silent worker (or fleet member) is taken for alive.
    pub(crate) fn dead_after(&self) -> Duration {
        self.heartbeat * self.missed_heartbeats
    }

    /// How old a finished job must be to go: the retention, and never before a
    /// dead worker's jobs could have come back (they need their data).
    pub(crate) fn keep_finished(&self) -> Duration {
        self.retention.max(self.dead_after() * 2)
    }
}

/// How many finished jobs one vacuum round removes at most.
pub(crate) const VACUUM_BATCH: u64 = 1_000;

/// A lost connection is tried again after this, then twice as long each time, up
/// to `RECONNECT_LAST`.
pub(crate) const RECONNECT_FIRST: Duration = Duration::from_millis(50);
pub(crate) const RECONNECT_LAST: Duration = Duration::from_secs(1);

/// How long a subscription must have lasted for its loss to be retried at
/// once (the backoff's first step) rather than after a longer wait.
#[cfg(any(feature = "redis", feature = "postgres"))]
pub(crate) const STEADY_SUBSCRIPTION: Duration = Duration::from_secs(5);

/// A 64-bit FNV-1a hash: stable across builds and processes, so every process
/// names the same doorbell or channel the same.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Where jobs go, parsed from a URL: `redis://host:port[/db]`,
/// `postgres://user@host:port/database` or `sqlite://path/to/jobs.db`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TierUrl {
    Redis(String),
    Postgres(String),
    Sqlite(String),
}

impl TierUrl {
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        if url.starts_with("rediss://") && !cfg!(feature = "tls") {
            return Err(format!(
                "`{}`: TLS to Redis needs the `tls` feature of toolgraft-jobs, which this build \
                 lacks (or use `redis://`: a local server, or a tunnel)",
                crate::address::server_of(url)
            ));
        }
        if url.starts_with("redis://") || url.starts_with("rediss://") {
            if redis::BUILT {
                return Ok(Self::Redis(url.to_owned()));
            }
            return Err(format!(
                "`{}` needs the `redis` feature of toolgraft-jobs, which this build lacks",
                crate::address::server_of(url)
            ));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            if postgres::BUILT {
                return Ok(Self::Postgres(url.to_owned()));
            }
            return Err(format!(
                "`{}` needs the `postgres` feature of toolgraft-jobs, which this build lacks",
                crate::address::server_of(url)
            ));
        }
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err("an sqlite URL needs a file path: `sqlite://path/to/jobs.db`".into());
            }
            if sqlite::BUILT {
                return Ok(Self::Sqlite(url.to_owned()));
            }
            return Err(format!(
                "`{url}` needs the `sqlite` feature of toolgraft-jobs, which this build lacks"
            ));
        }
        Err(format!(
            "`{}` is not a job-engine URL; use `redis://host:port`, \
             `postgres://user@host:port/database` or `sqlite://path/to/jobs.db`",
            crate::address::server_of(url)
        ))
    }
}

/// A duration in whole milliseconds, at least 1 (an expiry of 0 is none, or
/// refused), as the engines take numbers.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis())
        .unwrap_or(i64::MAX)
        .max(1)
}

/// What a SQL tier's outcome row (`outcome`, `lease_until`, `expires`) says to
/// a claim that was not granted, at `now` (ms): its answer, its claim's time
/// left, or that it lapsed. No row, or an expired one: the row as it was before
/// a claim made at this very moment by another worker (PostgreSQL reads the
/// statement's snapshot), so running.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn held_claim(held: Option<(Option<String>, i64, i64)>, now: i64) -> Claim {
    let just_claimed = Claim::Running {
        left: Duration::from_secs(1),
    };
    match held {
        None => just_claimed,
        Some((_, _, expires)) if expires <= now => just_claimed,
        Some((Some(outcome), _, _)) => Claim::Answered(outcome),
        Some((None, until, _)) if until <= now => Claim::Lapsed,
        Some((None, until, _)) => Claim::Running {
            left: Duration::from_millis(u64::try_from(until - now).unwrap_or(1)),
        },
    }
}

/// What a tier's operation answers: boxed, so that every tier fits behind one
/// `dyn Tier`; an error is the engine's, typed ([`TierError`]).
pub(crate) type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, TierError>> + Send + 'a>>;

/// How a worker runs one job, its reply sent; an error fails the job, which the
/// engine runs again (at least once).
pub(crate) type RunJob =
    Arc<dyn Fn(Job) -> Pin<Box<dyn Future<Output = Result<(), BoxDynError>> + Send>> + Send + Sync>;

/// What a job engine does for one queue, connected: the jobs (apalis's), the
/// replies to callers, the records of submitted jobs and the fleet's state.
pub(crate) trait Tier: Send + Sync {
    // ------------------------------------------------------------------ jobs

    /// Enqueues `task`, then wakes the queue's idle workers (a lost wake-up only
    /// delays the job to their next poll: logged, not returned).
    fn enqueue(&self, task: Task<Job>) -> Answer<'_, ()>;

    /// A worker named `worker` that takes the queue's jobs when `ticks` fire and
    /// runs up to `concurrency` of them at once with `run`.
    fn serve(&self, worker: &str, ticks: Ticks, concurrency: usize, run: RunJob) -> Monitor;

    /// Starts listening for callers' wake-ups: each one notifies `wake` (and so
    /// does every reconnection, for the jobs enqueued meanwhile). A tier that
    /// announces withdrawals tells `withdrawals` what it hears (and when it
    /// (re)subscribes, the running jobs withdrawn meanwhile); one that does not
    /// leaves it alone, and its workers ask [`Tier::is_withdrawn`]. The task runs
    /// until aborted.
    fn listen(&self, wake: Arc<Notify>, withdrawals: Arc<Withdrawals>) -> JoinHandle<()>;

    /// Removes finished jobs (and their data) older than the retention, a batch
    /// at a time; returns how many went.
    fn vacuum(&self) -> Answer<'_, u64>;

    // --------------------------------------------------------------- replies

    /// The messages waiting on `reply_to` (replies, progress reports, log
    /// messages), in the
    /// order they were sent, waiting up to `wait` for the first.
    fn take_replies<'a>(&'a self, reply_to: &'a str, wait: Duration) -> Answer<'a, Vec<Message>>;

    /// Stores the reply `body` to `job` on `reply_to` (a caller's channel, or a
    /// submitted job's record: see [`job_key`](super::job::job_key)); a job run
    /// twice answers once.
    fn put_reply<'a>(&'a self, reply_to: &'a str, job: &'a str, body: &'a str) -> Answer<'a, ()>;

    /// Sends `body`, the `seq`-th report of `job` (of its progress, or a log
    /// message), on the caller's channel `reply_to`, after the ones before it
    /// and before the reply.
    fn put_report<'a>(
        &'a self,
        reply_to: &'a str,
        job: &'a str,
        seq: u64,
        body: &'a str,
    ) -> Answer<'a, ()>;

    /// Marks `job` withdrawn by its caller (it stopped waiting: cancelled, timed
    /// out), and announces it where the tier can: a worker that has not started
    /// it skips it, one running it stops it. Remembered for the retention.
    fn withdraw<'a>(&'a self, job: &'a str) -> Answer<'a, ()>;

    /// Whether the caller withdrew `job`.
    fn is_withdrawn<'a>(&'a self, job: &'a str) -> Answer<'a, bool>;

    /// Counts one more run of `call`, a call a `retry` makes (each attempt's
    /// job, each redelivery of one), and returns the runs so far, this one in;
    /// atomic across workers, remembered for the retention.
    fn count_run<'a>(&'a self, call: &'a str) -> Answer<'a, u64>;

    // -------------------------------------------------------------- outcomes

    /// Claims the call `key` (an [`OutcomeKey`](toolgraft::ext::once::OutcomeKey)'s
    /// digest) for `lease`, by the engine's clock, keeping it for `keep`: what
    /// [`OutcomeStore::claim`](toolgraft::ext::once::OutcomeStore::claim) answers;
    /// atomic across workers. Keys are the engine's, not a queue's.
    fn claim_outcome<'a>(
        &'a self,
        key: &'a str,
        lease: Duration,
        keep: Duration,
    ) -> Answer<'a, Claim>;

    /// Records `outcome` as the answer of the call `key`, kept for `keep`.
    fn record_outcome<'a>(
        &'a self,
        key: &'a str,
        outcome: &'a str,
        keep: Duration,
    ) -> Answer<'a, ()>;

    /// Forgets the claim of `key` (not a recorded answer).
    fn release_outcome<'a>(&'a self, key: &'a str) -> Answer<'a, ()>;

    // ------------------------------------------------------- submitted jobs

    /// Records the submitted job `id` (`record`, the caller's JSON about it).
    fn record<'a>(&'a self, id: &'a str, record: &'a str) -> Answer<'a, ()>;

    /// Marks the record of `id`, whose submit failed, to go after the retention.
    fn expire_record<'a>(&'a self, id: &'a str) -> Answer<'a, ()>;

    /// What the engine knows of the submitted job `id`; `None` if it has no
    /// record of it (never submitted on this queue, or past the retention).
    fn stored<'a>(&'a self, id: &'a str) -> Answer<'a, Option<Stored>>;

    /// Takes the submitted job `id` out of the queue if no worker has taken it
    /// yet (scheduled or queued): then it never runs.
    fn cancel<'a>(&'a self, id: &'a str) -> Answer<'a, Cancel>;

    // ----------------------------------------------------------------- fleet

    /// Stores `manifest` as the queue's next binding generation, announces it,
    /// and returns its number.
    fn publish<'a>(&'a self, manifest: &'a str) -> Answer<'a, u64>;

    /// The queue's binding generation and its manifest, if one was published.
    fn current(&self) -> Answer<'_, Option<(u64, String)>>;

    /// Stores `member`, the report of `process`.
    fn report<'a>(&'a self, process: &'a str, member: &'a str) -> Answer<'a, ()>;

    /// Every member's last report.
    fn members(&self) -> Answer<'_, Vec<String>>;

    /// Removes `process`'s report.
    fn leave<'a>(&'a self, process: &'a str) -> Answer<'a, ()>;

    /// Notifies `kick` at each announcement (and at each reconnection), until
    /// it is gone or the task is aborted; a tier that announces nothing returns
    /// a finished task (its members look every heartbeat).
    fn announcements(&self, kick: Weak<Notify>) -> JoinHandle<()>;
}

/// A connection to a queue's tier, whichever it is: the [`Tier`]'s operations
/// (through `Deref`), and the few made of several.
#[derive(Clone)]
pub(crate) struct Broker(Arc<dyn Tier>);

impl Deref for Broker {
    type Target = dyn Tier;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl Broker {
    pub(crate) async fn connect(
        url: &TierUrl,
        queue: &str,
        engine: Engine,
    ) -> Result<Self, TierError> {
        if matches!(url, TierUrl::Redis(url) if url.starts_with("rediss://")) {
            tls::provide();
        }
        Ok(Self(
            match url {
                TierUrl::Redis(url) => redis::connect(url, queue, engine).await,
                TierUrl::Postgres(url) => postgres::connect(url, queue, engine).await,
                TierUrl::Sqlite(url) => sqlite::connect(url, queue, engine).await,
            }
            .map_err(TierError::Connect)?,
        ))
    }

    pub(crate) async fn push(&self, job: Job) -> Result<(), TierError> {
        self.0.enqueue(task(job, None)).await
    }

    /// Records a submitted job (`record`, the caller's JSON about it), then
    /// enqueues it, runnable from `run_at` (seconds; `None`: now). Its reply goes
    /// to [`job_key`](super::job::job_key), which the worker's
    /// [`Broker::send_reply`] stores in the record.
    pub(crate) async fn submit(
        &self,
        job: Job,
        record: &str,
        run_at: Option<u64>,
    ) -> Result<(), TierError> {
        self.0.record(&job.id, record).await?;
        let id = job.id.clone();
        let pushed = self.0.enqueue(task(job, run_at)).await;
        if pushed.is_err() {
            self.abandon(&id).await;
        }
        pushed
    }

    /// Marks the record of a job whose submit failed to go after the retention,
    /// as an ended job's does (were it enqueued after all, its reply keeps it
    /// again). Best effort: a failure is logged.
    pub(crate) async fn abandon(&self, id: &str) {
        if let Err(error) = self.0.expire_record(id).await {
            tracing::warn!(job = %id, %error, "cannot mark an unsubmitted job's record to expire");
        }
    }

    pub(crate) async fn send_reply(&self, reply_to: &str, reply: &Reply) -> Result<(), TierError> {
        let body = serde_json::to_string(reply)?;
        self.0.put_reply(reply_to, &reply.job, &body).await
    }

    /// Sends `report` (a progress report or a log message; a reply goes by
    /// [`Broker::send_reply`]), the `seq`-th of its job, on `reply_to`.
    pub(crate) async fn send_report(
        &self,
        reply_to: &str,
        seq: u64,
        report: &Message,
    ) -> Result<(), TierError> {
        let body = serde_json::to_string(report)?;
        self.0.put_report(reply_to, report.job(), seq, &body).await
    }
}

/// `job` as the engine's task, runnable from `run_at` (whole seconds since the
/// Unix epoch; `None`: now). Both engines keep time in whole seconds.
fn task(job: Job, run_at: Option<u64>) -> Task<Job> {
    let mut task = TaskBuilder::new(job.clone()).task_id(TaskId::from_string(job.id.clone()));
    if let Some(run_at) = run_at {
        task = task.run_at_timestamp(run_at);
    }
    task.build()
}

/// A submitted job as stored: the caller's record, the worker's reply once there
/// is one, whether it was cancelled, and where the engine has it otherwise.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    pub(crate) record: String,
    pub(crate) reply: Option<Reply>,
    pub(crate) cancelled: bool,
    pub(crate) engine: Waiting,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl Stored {
    /// A submitted job's record (`record`, its `reply` if any, whether it was
    /// `cancelled`) with what apalis's SQL storages say of its job: its
    /// `status` (`None`: no job) and whether its run time is still ahead. A
    /// record with a reply or a cancel has no need of them.
    fn of_sql(
        record: String,
        reply: Option<String>,
        cancelled: bool,
        status: Option<&str>,
        later: bool,
    ) -> Self {
        let mut cancelled = cancelled;
        let mut engine = Waiting::Queued;
        if reply.is_none() && !cancelled {
            engine = match status {
                Some("Pending") if later => Waiting::Scheduled,
                Some("Pending") => Waiting::Queued,
                // To run again: its reply could not be sent.
                Some("Failed") => Waiting::Queued,
                // A cancel took it; its record is being marked.
                Some("Killed") => {
                    cancelled = true;
                    Waiting::Queued
                }
                Some(_) => Waiting::Running,
                None => Waiting::NotEnqueued,
            };
        }
        Self {
            record,
            reply: reply.as_deref().and_then(decode_reply),
            cancelled,
            engine,
        }
    }
}

/// Where an unfinished job is in the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// Runnable later.
    Scheduled,
    /// Runnable, not taken by a worker yet (or taken back, to run again).
    Queued,
    /// Taken by a worker.
    Running,
    /// Recorded, but the engine has no job: its submit is still enqueueing it, or
    /// failed or timed out between the record and the enqueueing.
    NotEnqueued,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl Cancel {
    /// What a submitted job's record alone says of cancelling it (`None`: no
    /// record; else its reply and when it was cancelled): unknown, cancelled
    /// already, too late (it has a reply), or `None`: the engine decides.
    fn by_record(record: Option<(Option<String>, Option<i64>)>) -> Option<Self> {
        match record {
            None => Some(Self::Unknown),
            Some((_, Some(_))) => Some(Self::Cancelled),
            Some((Some(_), None)) => Some(Self::TooLate),
            Some((None, None)) => None,
        }
    }
}

/// What a cancellation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cancel {
    /// No record of the job.
    Unknown,
    /// Taken out of the queue now, or earlier: it never runs.
    Cancelled,
    /// A worker has it, or had it: too late.
    TooLate,
}

fn decode_reply(body: &str) -> Option<Reply> {
    serde_json::from_str(body)
        .inspect_err(|error| tracing::warn!(%error, "a stored reply is not a toolgraft reply"))
        .ok()
}

fn decode_replies(bodies: Vec<String>) -> Vec<Message> {
    bodies
        .into_iter()
        .filter_map(|body| match serde_json::from_str(&body) {
            Ok(reply) => Some(reply),
            Err(error) => {
                tracing::warn!(%error, "dropped a reply that is not a toolgraft reply");
                None
            }
        })
        .collect()
}

#[cfg(all(test, feature = "redis", feature = "sqlite"))]
mod tests {
    use super::TierUrl;

    #[test]
    fn the_url_picks_the_tier() {
        assert!(matches!(
            TierUrl::parse("redis://127.0.0.1:6379"),
            Ok(TierUrl::Redis(_))
        ));
        assert!(matches!(
            TierUrl::parse("sqlite:///tmp/jobs.db"),
            Ok(TierUrl::Sqlite(_))
        ));
        #[cfg(feature = "postgres")]
        for url in ["postgres://jobs@db:5432/jobs", "postgresql://db/jobs"] {
            assert!(matches!(TierUrl::parse(url), Ok(TierUrl::Postgres(_))));
        }
        #[cfg(not(feature = "postgres"))]
        assert!(
            TierUrl::parse("postgres://jobs:hunter2@db/jobs")
                .unwrap_err()
                .starts_with("`postgres://db/jobs` needs the `postgres` feature")
        );
        let unknown = TierUrl::parse("amqp://broker").unwrap_err();
        assert!(
            unknown.contains("use `redis://host:port`, `postgres://"),
            "{unknown}"
        );
        assert!(
            TierUrl::parse("sqlite://")
                .unwrap_err()
                .contains("needs a file path")
        );
    }
}
