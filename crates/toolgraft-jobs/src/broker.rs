//! The two tiers: a Redis server, or an SQLite file the processes share. Each
//! carries jobs through apalis and replies through a channel of its own (apalis
//! stores results, but its waiting polls at 100 to 500 ms and reports retries as
//! failures).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::{TaskBuilder, TaskId, TaskSink};
use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;

use super::job::{Job, Reply};

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

/// Where jobs go, parsed from a URL: `redis://host:port[/db]` or
/// `sqlite://path/to/jobs.db`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tier {
    Redis(String),
    Sqlite(String),
}

impl Tier {
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        if url.starts_with("rediss://") {
            return Err(format!(
                "`{url}`: TLS to Redis is not built in; use `redis://` (a local server or a tunnel)"
            ));
        }
        if url.starts_with("redis://") {
            if cfg!(feature = "redis") {
                return Ok(Self::Redis(url.to_owned()));
            }
            return Err(format!(
                "`{url}` needs the `redis` feature of toolgraft-jobs, which this build lacks"
            ));
        }
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err("an sqlite URL needs a file path: `sqlite://path/to/jobs.db`".into());
            }
            if cfg!(feature = "sqlite") {
                return Ok(Self::Sqlite(url.to_owned()));
            }
            return Err(format!(
                "`{url}` needs the `sqlite` feature of toolgraft-jobs, which this build lacks"
            ));
        }
        Err(format!(
            "`{url}` is not a job-engine URL; use `redis://host:port` or `sqlite://path/to/jobs.db`"
        ))
    }
}

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

/// A connection to a tier: enqueues jobs, collects and sends replies.
#[derive(Clone)]
pub(crate) enum Broker {
    #[cfg(feature = "redis")]
    Redis(Box<redis_tier::Broker>),
    #[cfg(feature = "sqlite")]
    Sqlite(Box<sqlite_tier::Broker>),
}

impl Broker {
    pub(crate) async fn connect(tier: &Tier, queue: &str, engine: Engine) -> Result<Self, String> {
        match tier {
            #[cfg(feature = "redis")]
            Tier::Redis(url) => Ok(Self::Redis(Box::new(
                redis_tier::Broker::connect(url, queue, engine).await?,
            ))),
            #[cfg(feature = "sqlite")]
            Tier::Sqlite(url) => Ok(Self::Sqlite(Box::new(
                sqlite_tier::Broker::connect(url, queue, engine).await?,
            ))),
            #[allow(unreachable_patterns)]
            _ => {
                let _ = (queue, engine);
                Err("this build has no job-engine tier for that URL".into())
            }
        }
    }

    pub(crate) async fn push(&self, job: Job) -> Result<(), String> {
        self.push_at(job, None).await
    }

    /// Enqueues `job`, runnable from `run_at` (whole seconds since the Unix epoch;
    /// `None`: now). Both engines keep time in whole seconds.
    async fn push_at(&self, job: Job, run_at: Option<u64>) -> Result<(), String> {
        let mut task = TaskBuilder::new(job.clone()).task_id(TaskId::from_string(job.id.clone()));
        if let Some(run_at) = run_at {
            task = task.run_at_timestamp(run_at);
        }
        let task = task.build();
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(broker) => {
                broker
                    .storage
                    .clone()
                    .push_task(task)
                    .await
                    .map_err(|error| error.to_string())?;
                broker.wake_workers().await;
                Ok(())
            }
            #[cfg(feature = "sqlite")]
            Self::Sqlite(broker) => {
                broker
                    .storage
                    .clone()
                    .push_task(task)
                    .await
                    .map_err(|error| error.to_string())?;
                broker.wake_workers().await;
                Ok(())
            }
        }
    }

    /// Records a submitted job (`record`, the caller's JSON about it), then
    /// enqueues it, runnable from `run_at` (seconds; `None`: now). Its reply goes
    /// to [`job_key`], which the worker's [`Broker::send_reply`] stores in the
    /// record.
    pub(crate) async fn submit(
        &self,
        job: Job,
        record: &str,
        run_at: Option<u64>,
    ) -> Result<(), String> {
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(broker) => broker.record(&job.id, record).await?,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(broker) => broker.record(&job.id, record).await?,
        }
        let id = job.id.clone();
        let pushed = self.push_at(job, run_at).await;
        if pushed.is_err() {
            self.abandon(&id).await;
        }
        pushed
    }

    /// Marks the record of a job whose submit failed to go after the retention,
    /// as an ended job's does (were it enqueued after all, its reply keeps it
    /// again). Best effort: a failure is logged.
    pub(crate) async fn abandon(&self, id: &str) {
        let outcome = match self {
            #[cfg(feature = "redis")]
            Self::Redis(broker) => broker.abandon(id).await,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(broker) => broker.abandon(id).await,
        };
        if let Err(error) = outcome {
            tracing::warn!(job = %id, %error, "cannot mark an unsubmitted job's record to expire");
        }
    }

    /// What the engine knows of the submitted job `id`; `None` if it has no
    /// record of it (never submitted on this queue, or past the retention).
    pub(crate) async fn stored(&self, id: &str) -> Result<Option<Stored>, String> {
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(broker) => broker.stored(id).await,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(broker) => broker.stored(id).await,
        }
    }

    /// Takes the submitted job `id` out of the queue if no worker has taken it
    /// yet (scheduled or queued): then it never runs.
    pub(crate) async fn cancel(&self, id: &str) -> Result<Cancel, String> {
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(broker) => broker.cancel(id).await,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(broker) => broker.cancel(id).await,
        }
    }

    /// Starts listening for callers' wake-ups: each one notifies `wake` (and so
    /// does every reconnection, for the jobs enqueued meanwhile). The task runs
    /// until aborted.
    pub(crate) fn listen(&self, wake: Arc<Notify>) -> tokio::task::JoinHandle<()> {
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(broker) => broker.listen(wake),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(broker) => broker.listen(wake),
        }
    }

    /// The replies waiting on `reply_to`, waiting up to `wait` for the first.
    pub(crate) async fn take_replies(
        &self,
        reply_to: &str,
        wait: Duration,
    ) -> Result<Vec<Reply>, String> {
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(broker) => broker.take_replies(reply_to, wait).await,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(broker) => broker.take_replies(reply_to, wait).await,
        }
    }

    /// Removes finished jobs (and their data) older than the retention, a batch
    /// at a time; returns how many went.
    pub(crate) async fn vacuum(&self) -> Result<u64, String> {
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(broker) => broker.vacuum().await,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(broker) => broker.vacuum().await,
        }
    }

    pub(crate) async fn send_reply(&self, reply_to: &str, reply: &Reply) -> Result<(), String> {
        let body = serde_json::to_string(reply).map_err(|error| error.to_string())?;
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(broker) => broker.send_reply(reply_to, &reply.job, &body).await,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(broker) => broker.send_reply(reply_to, &reply.job, &body).await,
        }
    }
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

fn decode_replies(bodies: Vec<String>) -> Vec<Reply> {
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

/// Polls on a `tokio` interval, and at once when a caller's wake-up arrives
/// (`wake`, fed by the tier's listener): an idle worker costs next to nothing and
/// still picks a job up within a round trip of its enqueueing.
///
/// apalis-core 1.0.0's `IntervalStrategy` can leave no timer armed after a fetch
/// that completes in the same wake-up, so an idle worker would wait for its next
/// heartbeat; this one drains the interval until it is pending, which always
/// leaves the next tick registered.
///
/// A wake-up that arrives while a fetch is in flight can be spent on that fetch,
/// which may have run before the job was enqueued; so each wake-up also arms a
/// follow-up poll [`FOLLOW_UP`] later, and a missed job waits that long, not a
/// whole tick.
pub(crate) struct Ticks {
    period: Duration,
    interval: tokio::time::Interval,
    wake: Arc<Notify>,
    woken: Pin<Box<OwnedNotified>>,
    follow_up: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// How long after a wake-up a worker fetches once more (see [`Ticks`]).
pub(crate) const FOLLOW_UP: Duration = Duration::from_millis(3);

impl Ticks {
    pub(crate) fn every(period: Duration, wake: Arc<Notify>) -> Self {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            period,
            interval,
            woken: Box::pin(wake.clone().notified_owned()),
            wake,
            follow_up: None,
        }
    }
}

impl Clone for Ticks {
    fn clone(&self) -> Self {
        Self::every(self.period, self.wake.clone())
    }
}

impl apalis::prelude::PollStrategy for Ticks {
    fn poll_drive(
        &mut self,
        cx: &mut std::task::Context<'_>,
        _: &apalis::prelude::PollSnapshot,
    ) -> std::task::Poll<Option<()>> {
        let mut fired = false;
        while self.interval.poll_tick(cx).is_ready() {
            fired = true;
        }
        if let Some(follow_up) = &mut self.follow_up
            && follow_up.as_mut().poll(cx).is_ready()
        {
            self.follow_up = None;
            fired = true;
        }
        while self.woken.as_mut().poll(cx).is_ready() {
            self.woken = Box::pin(self.wake.clone().notified_owned());
            fired = true;
            if self.follow_up.is_none() {
                let mut follow_up = Box::pin(tokio::time::sleep(FOLLOW_UP));
                // Registers the timer with this task.
                let _ = follow_up.as_mut().poll(cx);
                self.follow_up = Some(follow_up);
            }
        }
        if fired {
            std::task::Poll::Ready(Some(()))
        } else {
            std::task::Poll::Pending
        }
    }
}

#[cfg(feature = "redis")]
pub(crate) mod redis_tier {
    use std::sync::Arc;
    use std::time::Duration;

    use apalis_redis::{Config, RedisStorage};
    use futures_util::StreamExt;
    use redis::AsyncCommands;
    use redis::aio::{ConnectionManager, MultiplexedConnection};
    use tokio::sync::Mutex;
    use tokio::sync::Notify;

    use super::super::job::{Job, Reply, is_job_key, job_key};
    use super::Engine;

    pub(crate) type Storage = RedisStorage<Job>;

    #[derive(Clone)]
    pub(crate) struct Broker {
        pub(crate) storage: Storage,
        /// The pub/sub channel that wakes the queue's idle workers.
        wake_channel: String,
        /// Jobs answered, by when (ms): what the vacuum removes once old.
        finished: String,
        queue: String,
        engine: Engine,
        commands: ConnectionManager,
        client: redis::Client,
        /// `BLPOP` blocks its connection: collecting replies gets one of its own,
        /// without the client's default 500 ms response timeout. Only the reply
        /// listener takes it, so the lock is never contended.
        blocking: Arc<Mutex<Option<MultiplexedConnection>>>,
    }

    pub(crate) fn config(queue: &str, engine: Engine) -> Config {
        engine_config!(Config, queue, engine)
    }

    /// Removes finished jobs answered before a cutoff: the engine's keys of each
    /// (apalis-redis 1.0's layout: `<queue>:data`, `<queue>:meta:<id>`, the done
    /// and dead sets) and its entry in ours.
    const VACUUM: &str = r"
        local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
        for _, id in ipairs(ids) do
            redis.call('DEL', ARGV[2] .. id)
            redis.call('HDEL', KEYS[2], id)
            redis.call('SREM', KEYS[3], id)
            redis.call('SREM', KEYS[4], id)
            redis.call('ZREM', KEYS[1], id)
        end
        return #ids
    ";

    /// A submitted job's record, reply and cancellation, and where the engine
    /// has it (apalis-redis 1.0's layout: every job passes through the scheduled
    /// set, scored by its run time in seconds, then the active list, then a
    /// worker's in-flight set).
    const STORED: &str = r"
        local found = redis.call('HMGET', KEYS[1], 'record', 'result', 'cancelled')
        if not found[1] then return false end
        local state = 'queued'
        if not found[2] and not found[3] then
            local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
            if score then
                if tonumber(score) > tonumber(ARGV[2]) then state = 'scheduled' end
            elseif redis.call('LPOS', KEYS[3], ARGV[1]) then
                state = 'queued'
            elseif redis.call('EXISTS', KEYS[4]) == 1 then
                state = 'running'
            else
                state = 'not_enqueued'
            end
        end
        return {found[1], found[2] or '', found[3] or '', state}
    ";

    /// Takes a submitted job out of the scheduled set or the active list, where
    /// no worker has it: atomically with a worker's fetch, so it either runs or
    /// is cancelled. The record is kept for the retention; the engine's keys go
    /// with the vacuum, as a finished job's.
    const CANCEL: &str = r"
        if redis.call('HEXISTS', KEYS[1], 'record') == 0 then return 'unknown' end
        if redis.call('HEXISTS', KEYS[1], 'cancelled') == 1 then return 'cancelled' end
        if redis.call('HEXISTS', KEYS[1], 'result') == 1 then return 'late' end
        local removed = redis.call('ZREM', KEYS[2], ARGV[1]) + redis.call('LREM', KEYS[3], 0, ARGV[1])
        if removed == 0 then return 'late' end
        redis.call('HSET', KEYS[1], 'cancelled', ARGV[2])
        redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
        redis.call('HSET', KEYS[4], 'status', 'Killed')
        redis.call('ZADD', KEYS[5], ARGV[2], ARGV[1])
        return 'cancelled'
    ";

    use super::super::now_ms;

    fn now_s() -> u64 {
        now_ms() / 1000
    }

    impl Broker {
        pub(crate) async fn connect(
            url: &str,
            queue: &str,
            engine: Engine,
        ) -> Result<Self, String> {
            let failed = |error: redis::RedisError| format!("cannot connect to `{url}`: {error}");
            let commands = apalis_redis::connect(url).await.map_err(failed)?;
            let client = redis::Client::open(url).map_err(failed)?;
            let storage = RedisStorage::new(commands.clone()).with_config(config(queue, engine));
            Ok(Self {
                storage,
                wake_channel: format!("toolgraft:wake:{queue}"),
                finished: format!("toolgraft:finished:{queue}"),
                queue: queue.to_owned(),
                engine,
                commands,
                client,
                blocking: Arc::default(),
            })
        }

        pub(crate) async fn vacuum(&self) -> Result<u64, String> {
            let now = now_ms();
            let cutoff = now.saturating_sub(self.engine.keep_finished().as_millis() as u64);
            redis::Script::new(VACUUM)
                .key(&self.finished)
                .key(format!("{}:data", self.queue))
                .key(format!("{}:done", self.queue))
                .key(format!("{}:dead", self.queue))
                .arg(cutoff)
                .arg(format!("{}:meta:", self.queue))
                .arg(super::VACUUM_BATCH)
                .invoke_async(&mut self.commands.clone())
                .await
                .map_err(|error| error.to_string())
        }

        /// Wakes the queue's idle workers. A lost wake-up only delays the job to
        /// the workers' next poll, so a failure is logged, not returned.
        pub(crate) async fn wake_workers(&self) {
            let mut commands = self.commands.clone();
            if let Err(error) = commands.publish::<_, _, ()>(&self.wake_channel, "").await {
                tracing::warn!(%error, "could not wake the workers; they find the job at their next poll");
            }
        }

        pub(crate) fn listen(&self, wake: Arc<Notify>) -> tokio::task::JoinHandle<()> {
            let client = self.client.clone();
            let channel = self.wake_channel.clone();
            tokio::spawn(async move {
                let mut backoff = super::RECONNECT_FIRST;
                loop {
                    match client.get_async_pubsub().await {
                        Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                            Ok(()) => {
                                backoff = super::RECONNECT_FIRST;
                                // Jobs may have come while nobody listened.
                                wake.notify_one();
                                let mut messages = pubsub.on_message();
                                while messages.next().await.is_some() {
                                    wake.notify_one();
                                }
                                tracing::warn!("the wake-up channel closed; listening again");
                            }
                            Err(error) => {
                                tracing::warn!(%error, "cannot subscribe to wake-ups; retrying")
                            }
                        },
                        Err(error) => {
                            tracing::warn!(%error, "cannot connect for wake-ups; retrying")
                        }
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(super::RECONNECT_LAST);
                }
            })
        }

        pub(crate) async fn take_replies(
            &self,
            reply_to: &str,
            wait: Duration,
        ) -> Result<Vec<Reply>, String> {
            let mut slot = self.blocking.lock().await;
            let connection = match &mut *slot {
                Some(connection) => connection,
                None => {
                    // Longer than the longest BLPOP, so a connection that died
                    // silently fails instead of hanging the router.
                    let config = redis::AsyncConnectionConfig::new()
                        .set_response_timeout(Some(wait + Duration::from_secs(5)));
                    let connection = self
                        .client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                        .map_err(|error| error.to_string())?;
                    slot.insert(connection)
                }
            };
            let first: Option<(String, String)> =
                match connection.blpop(reply_to, wait.as_secs_f64()).await {
                    Ok(first) => first,
                    Err(error) => {
                        // A multiplexed connection does not come back: open a new one
                        // next time.
                        *slot = None;
                        return Err(error.to_string());
                    }
                };
            let Some((_, first)) = first else {
                return Ok(Vec::new());
            };
            let mut bodies = vec![first];
            match connection
                .lpop::<_, Option<Vec<String>>>(reply_to, std::num::NonZeroUsize::new(256))
                .await
            {
                Ok(more) => bodies.extend(more.unwrap_or_default()),
                // The popped reply is kept; the rest wait for the next round.
                Err(_) => *slot = None,
            }
            Ok(super::decode_replies(bodies))
        }

        pub(crate) async fn record(&self, id: &str, record: &str) -> Result<(), String> {
            let mut commands = self.commands.clone();
            commands
                .hset::<_, _, _, ()>(job_key(&self.queue, id), "record", record)
                .await
                .map_err(|error| error.to_string())
        }

        pub(crate) async fn abandon(&self, id: &str) -> Result<(), String> {
            let retention = i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX);
            let mut commands = self.commands.clone();
            commands
                .expire::<_, ()>(job_key(&self.queue, id), retention)
                .await
                .map_err(|error| error.to_string())
        }

        pub(crate) async fn stored(&self, id: &str) -> Result<Option<super::Stored>, String> {
            let found: Option<(String, String, String, String)> = redis::Script::new(STORED)
                .key(job_key(&self.queue, id))
                .key(format!("{}:scheduled", self.queue))
                .key(format!("{}:active", self.queue))
                .key(format!("{}:meta:{id}", self.queue))
                .arg(id)
                .arg(now_s())
                .invoke_async(&mut self.commands.clone())
                .await
                .map_err(|error| error.to_string())?;
            Ok(
                found.map(|(record, reply, cancelled, engine)| super::Stored {
                    record,
                    reply: Some(reply)
                        .filter(|reply| !reply.is_empty())
                        .and_then(|reply| super::decode_reply(&reply)),
                    cancelled: !cancelled.is_empty(),
                    engine: match engine.as_str() {
                        "scheduled" => super::Waiting::Scheduled,
                        "running" => super::Waiting::Running,
                        "not_enqueued" => super::Waiting::NotEnqueued,
                        _ => super::Waiting::Queued,
                    },
                }),
            )
        }

        pub(crate) async fn cancel(&self, id: &str) -> Result<super::Cancel, String> {
            let outcome: String = redis::Script::new(CANCEL)
                .key(job_key(&self.queue, id))
                .key(format!("{}:scheduled", self.queue))
                .key(format!("{}:active", self.queue))
                .key(format!("{}:meta:{id}", self.queue))
                .key(&self.finished)
                .arg(id)
                .arg(now_ms())
                .arg(self.engine.retention.as_secs())
                .invoke_async(&mut self.commands.clone())
                .await
                .map_err(|error| error.to_string())?;
            Ok(match outcome.as_str() {
                "unknown" => super::Cancel::Unknown,
                "cancelled" => super::Cancel::Cancelled,
                _ => super::Cancel::TooLate,
            })
        }

        pub(crate) async fn send_reply(
            &self,
            reply_to: &str,
            job: &str,
            body: &str,
        ) -> Result<(), String> {
            let mut commands = self.commands.clone();
            let now = now_ms();
            let retention = i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX);
            if is_job_key(reply_to) {
                // A submitted job: the first reply stays in its record, which is
                // kept for the retention from now.
                return redis::pipe()
                    .atomic()
                    .zadd(&self.finished, job, now)
                    .ignore()
                    .hset_nx(reply_to, "result", body)
                    .ignore()
                    .expire(reply_to, retention)
                    .ignore()
                    .query_async::<()>(&mut commands)
                    .await
                    .map_err(|error| error.to_string());
            }
            redis::pipe()
                .atomic()
                .zadd(&self.finished, job, now)
                .ignore()
                .rpush(reply_to, body)
                .ignore()
                .expire(
                    reply_to,
                    i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX),
                )
                .ignore()
                .query_async::<()>(&mut commands)
                .await
                .map_err(|error| error.to_string())
        }
    }
}

#[cfg(feature = "sqlite")]
pub(crate) mod sqlite_tier {
    use std::str::FromStr;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use tokio::sync::Notify;

    use super::super::doorbell::Doorbells;

    use apalis_sqlite::{Config, SqliteStorage};
    use sqlx::SqlitePool;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

    use super::super::job::{Job, Reply, is_job_key};
    use super::Engine;

    pub(crate) type Storage = SqliteStorage<Job>;

    /// How often a waiting caller looks for replies when no doorbell rings (a
    /// file has no blocking read).
    const REPLY_POLL: Duration = Duration::from_millis(50);

    #[derive(Clone)]
    pub(crate) struct Broker {
        pub(crate) storage: Storage,
        /// Where the processes sharing the file wake each other (see [`Doorbells`]).
        doorbells: Arc<Doorbells>,
        engine: Engine,
        jobs: SqlitePool,
        queue: String,
        /// Replies live in a file of their own (`<jobs file>.replies`): SQLite locks
        /// a whole file, and apalis holds the jobs file's write lock at times (while
        /// a worker stops, for one), which must not hold up a reply.
        replies: SqlitePool,
    }

    /// An exclusive lock on `<jobs file>.lock`, held until dropped.
    async fn lock_file(url: &str) -> Result<std::fs::File, String> {
        let path = url.trim_start_matches("sqlite://");
        let path = format!(
            "{}.lock",
            path.split_once('?').map_or(path, |(path, _)| path)
        );
        let shown = toolgraft::error::shorten(&path).into_owned();
        tokio::task::spawn_blocking(move || {
            let file = std::fs::File::create(&path)?;
            file.lock()?;
            Ok::<_, std::io::Error>(file)
        })
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| format!("cannot lock the job file with `{shown}`: {error}"))
    }

    /// The replies file's URL beside the jobs file's.
    fn replies_url(url: &str) -> String {
        match url.split_once('?') {
            Some((path, query)) => format!("{path}.replies?{query}"),
            None => format!("{url}.replies"),
        }
    }

    fn options(url: &str) -> Result<SqliteConnectOptions, String> {
        Ok(SqliteConnectOptions::from_str(url)
            .map_err(|error| format!("cannot open `{url}`: {error}"))?
            .create_if_missing(true)
            // Many processes share the file: readers do not block the writer.
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(5)))
    }

    /// A pool on a file [`prepare`] has made ready: every connection it opens
    /// reads the whole schema.
    async fn open(url: &str) -> Result<SqlitePool, String> {
        SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options(url)?)
            .await
            .map_err(|error| format!("cannot open `{url}`: {error}"))
    }

    /// One connection, for [`prepare`]: closed before the lock is let go.
    async fn open_one(url: &str) -> Result<SqlitePool, String> {
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options(url)?)
            .await
            .map_err(|error| format!("cannot open `{url}`: {error}"))
    }

    /// The side file's tables: replies to callers, submitted jobs (the caller's
    /// record, the first reply, the end) and the fleet's state.
    const SIDE_TABLES: [&str; 4] = [
        "CREATE TABLE IF NOT EXISTS toolgraft_replies (
             reply_to TEXT NOT NULL,
             job TEXT NOT NULL,
             body TEXT NOT NULL,
             created INTEGER NOT NULL DEFAULT (unixepoch()),
             PRIMARY KEY (reply_to, job)
         )",
        "CREATE TABLE IF NOT EXISTS toolgraft_jobs (
             queue TEXT NOT NULL,
             job TEXT NOT NULL,
             record TEXT NOT NULL,
             result TEXT,
             cancelled INTEGER,
             ended INTEGER,
             PRIMARY KEY (queue, job)
         )",
        "CREATE TABLE IF NOT EXISTS toolgraft_fleet (
             queue TEXT PRIMARY KEY,
             generation INTEGER NOT NULL,
             manifest TEXT NOT NULL
         )",
        "CREATE TABLE IF NOT EXISTS toolgraft_fleet_members (
             queue TEXT NOT NULL,
             process TEXT NOT NULL,
             member TEXT NOT NULL,
             PRIMARY KEY (queue, process)
         )",
    ];

    /// Makes the jobs file and its side file ready (both in WAL mode, apalis's
    /// tables migrated, the side file's tables made) before this process opens
    /// its pools on them. Processes starting together on a new file take turns,
    /// under a lock on `<jobs file>.lock`, each on one connection per file of its
    /// own, closed before the lock is let go:
    ///
    /// * turning a new file to WAL takes an exclusive lock that SQLite does not
    ///   wait for (the busy timeout does not apply): a process opening the file
    ///   meanwhile would get "database is locked";
    /// * apalis migrates in steps, a transaction each, and an SQLite connection
    ///   compiles statements against the schema it read last: one that read the
    ///   file half-migrated (opened while another process was migrating) keeps
    ///   that schema until a statement of its own checks it, and apalis's
    ///   `INSERT INTO Jobs VALUES (..)` fails with "table Jobs has 12 columns but
    ///   14 values were supplied" (a column count that does not match is not a
    ///   reason for SQLite to read the schema again). Pools opened after this
    ///   returns read the whole schema.
    async fn prepare(url: &str) -> Result<(), String> {
        let lock = lock_file(url).await?;
        let jobs = open_one(url).await?;
        // Busy workers write all the time, and a transaction that reads before
        // it writes gets "database is locked" at once (no busy wait) when
        // another write slips in between: a few tries.
        let mut setup = SqliteStorage::<()>::setup(&jobs).await;
        for attempt in 1..10u32 {
            if setup.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20) * attempt).await;
            setup = SqliteStorage::<()>::setup(&jobs).await;
        }
        jobs.close().await;
        setup.map_err(|error| format!("cannot set up the job tables in `{url}`: {error}"))?;
        let replies_url = replies_url(url);
        let replies = open_one(&replies_url).await?;
        let mut made = Ok(());
        for table in SIDE_TABLES {
            made = sqlx::query(table).execute(&replies).await.map(drop);
            if made.is_err() {
                break;
            }
        }
        replies.close().await;
        drop(lock);
        made.map_err(|error| format!("cannot set up `{replies_url}`: {error}"))
    }

    pub(crate) fn config(queue: &str, engine: Engine) -> Config {
        engine_config!(Config, queue, engine)
    }

    /// The side file beside the jobs file (`<jobs file>.replies`), where replies
    /// and the fleet's state live.
    pub(crate) async fn side_file(url: &str) -> Result<SqlitePool, String> {
        prepare(url).await?;
        open(&replies_url(url)).await
    }

    impl Broker {
        pub(crate) async fn connect(
            url: &str,
            queue: &str,
            engine: Engine,
        ) -> Result<Self, String> {
            prepare(url).await?;
            let pool = open(url).await?;
            let replies = open(&replies_url(url)).await?;
            let storage = SqliteStorage::new(&pool).with_config(config(queue, engine));
            Ok(Self {
                storage,
                doorbells: Arc::new(Doorbells::beside(url, queue)),
                engine,
                jobs: pool.clone(),
                queue: queue.to_owned(),
                replies,
            })
        }

        pub(crate) async fn wake_workers(&self) {
            self.doorbells.ring_workers().await;
        }

        pub(crate) async fn record(&self, id: &str, record: &str) -> Result<(), String> {
            sqlx::query("INSERT INTO toolgraft_jobs (queue, job, record) VALUES (?1, ?2, ?3)")
                .bind(&self.queue)
                .bind(id)
                .bind(record)
                .execute(&self.replies)
                .await
                .map(drop)
                .map_err(|error| error.to_string())
        }

        pub(crate) async fn abandon(&self, id: &str) -> Result<(), String> {
            sqlx::query(
                "UPDATE toolgraft_jobs SET ended = unixepoch()
                 WHERE queue = ?1 AND job = ?2 AND ended IS NULL",
            )
            .bind(&self.queue)
            .bind(id)
            .execute(&self.replies)
            .await
            .map(drop)
            .map_err(|error| error.to_string())
        }

        pub(crate) async fn stored(&self, id: &str) -> Result<Option<super::Stored>, String> {
            let retention = i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX);
            let row: Option<(String, Option<String>, Option<i64>)> = sqlx::query_as(
                "SELECT record, result, cancelled FROM toolgraft_jobs WHERE queue = ?1 AND job = ?2
                 AND (ended IS NULL OR ended >= unixepoch() - ?3)",
            )
            .bind(&self.queue)
            .bind(id)
            .bind(retention)
            .fetch_optional(&self.replies)
            .await
            .map_err(|error| error.to_string())?;
            let Some((record, result, cancelled)) = row else {
                return Ok(None);
            };
            let mut engine = super::Waiting::Queued;
            let mut cancelled = cancelled.is_some();
            if result.is_none() && !cancelled {
                let job: Option<(String, Option<i64>)> = sqlx::query_as(
                    "SELECT status, run_at FROM Jobs WHERE id = ?1 AND job_type = ?2",
                )
                .bind(id)
                .bind(&self.queue)
                .fetch_optional(&self.jobs)
                .await
                .map_err(|error| error.to_string())?;
                let now = i64::try_from(super::super::now_ms() / 1000).unwrap_or(i64::MAX);
                engine = match job {
                    Some((status, run_at)) if status == "Pending" => {
                        if run_at.is_some_and(|run_at| run_at > now) {
                            super::Waiting::Scheduled
                        } else {
                            super::Waiting::Queued
                        }
                    }
                    // To run again: its reply could not be sent.
                    Some((status, _)) if status == "Failed" => super::Waiting::Queued,
                    // A cancel took it; its record is being marked.
                    Some((status, _)) if status == "Killed" => {
                        cancelled = true;
                        super::Waiting::Queued
                    }
                    Some(_) => super::Waiting::Running,
                    None => super::Waiting::NotEnqueued,
                };
            }
            Ok(Some(super::Stored {
                record,
                reply: result.as_deref().and_then(super::decode_reply),
                cancelled,
                engine,
            }))
        }

        pub(crate) async fn cancel(&self, id: &str) -> Result<super::Cancel, String> {
            let row: Option<(Option<String>, Option<i64>)> = sqlx::query_as(
                "SELECT result, cancelled FROM toolgraft_jobs WHERE queue = ?1 AND job = ?2",
            )
            .bind(&self.queue)
            .bind(id)
            .fetch_optional(&self.replies)
            .await
            .map_err(|error| error.to_string())?;
            match row {
                None => return Ok(super::Cancel::Unknown),
                Some((_, Some(_))) => return Ok(super::Cancel::Cancelled),
                Some((Some(_), None)) => return Ok(super::Cancel::TooLate),
                Some((None, None)) => {}
            }
            // One statement: a worker's fetch takes `Pending` rows with no lock,
            // so the job either runs or is cancelled, never both.
            let taken = sqlx::query(
                "UPDATE Jobs SET status = 'Killed', done_at = strftime('%s', 'now')
                 WHERE id = ?1 AND job_type = ?2 AND status = 'Pending' AND lock_by IS NULL",
            )
            .bind(id)
            .bind(&self.queue)
            .execute(&self.jobs)
            .await
            .map_err(|error| error.to_string())?
            .rows_affected();
            if taken == 0 {
                // Another cancel may have taken it first: then it is cancelled
                // for this one too (the record is marked below, by both).
                let status: Option<(String,)> =
                    sqlx::query_as("SELECT status FROM Jobs WHERE id = ?1 AND job_type = ?2")
                        .bind(id)
                        .bind(&self.queue)
                        .fetch_optional(&self.jobs)
                        .await
                        .map_err(|error| error.to_string())?;
                if status.is_none_or(|(status,)| status != "Killed") {
                    return Ok(super::Cancel::TooLate);
                }
            }
            let now = i64::try_from(super::super::now_ms()).unwrap_or(i64::MAX);
            sqlx::query(
                "UPDATE toolgraft_jobs SET cancelled = COALESCE(cancelled, ?3),
                 ended = COALESCE(ended, unixepoch())
                 WHERE queue = ?1 AND job = ?2",
            )
            .bind(&self.queue)
            .bind(id)
            .bind(now)
            .execute(&self.replies)
            .await
            .map_err(|error| error.to_string())?;
            Ok(super::Cancel::Cancelled)
        }

        pub(crate) async fn vacuum(&self) -> Result<u64, String> {
            let keep = i64::try_from(self.engine.keep_finished().as_secs()).unwrap_or(i64::MAX);
            let removed = sqlx::query(
                "DELETE FROM Jobs WHERE rowid IN (
                     SELECT rowid FROM Jobs WHERE job_type = ?1 AND status IN ('Done', 'Killed')
                     AND done_at IS NOT NULL AND done_at < unixepoch() - ?2 LIMIT ?3)",
            )
            .bind(&self.queue)
            .bind(keep)
            .bind(super::VACUUM_BATCH as i64)
            .execute(&self.jobs)
            .await
            .map(|done| done.rows_affected())
            .map_err(|error| error.to_string())?;
            // Submitted jobs' records, past the retention since they ended.
            sqlx::query(
                "DELETE FROM toolgraft_jobs WHERE queue = ?1 AND ended IS NOT NULL
                 AND ended < unixepoch() - ?2",
            )
            .bind(&self.queue)
            .bind(i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX))
            .execute(&self.replies)
            .await
            .map_err(|error| error.to_string())?;
            Ok(removed)
        }

        pub(crate) fn listen(&self, wake: Arc<Notify>) -> tokio::task::JoinHandle<()> {
            let doorbells = self.doorbells.clone();
            tokio::spawn(async move { doorbells.listen_as_worker(wake).await })
        }

        pub(crate) async fn take_replies(
            &self,
            reply_to: &str,
            wait: Duration,
        ) -> Result<Vec<Reply>, String> {
            let deadline = Instant::now() + wait;
            loop {
                // Read first: polling must not take the write lock the workers'
                // replies need; only rows found are deleted.
                let rows: Vec<(String, String)> =
                    sqlx::query_as("SELECT job, body FROM toolgraft_replies WHERE reply_to = ?1")
                        .bind(reply_to)
                        .fetch_all(&self.replies)
                        .await
                        .map_err(|error| error.to_string())?;
                if !rows.is_empty() {
                    let mut delete = sqlx::QueryBuilder::new(
                        "DELETE FROM toolgraft_replies WHERE (created < unixepoch() - ",
                    );
                    delete
                        .push_bind(
                            i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX),
                        )
                        .push(") OR (reply_to = ")
                        .push_bind(reply_to)
                        .push(" AND job IN (");
                    let mut jobs = delete.separated(", ");
                    for (job, _) in &rows {
                        jobs.push_bind(job);
                    }
                    delete.push("))");
                    delete
                        .build()
                        .execute(&self.replies)
                        .await
                        .map_err(|error| error.to_string())?;
                    let bodies = rows.into_iter().map(|(_, body)| body).collect();
                    return Ok(super::decode_replies(bodies));
                }
                let now = Instant::now();
                if now >= deadline {
                    return Ok(Vec::new());
                }
                // The worker rings after writing the reply; the poll stays as a
                // safety net (a doorbell that could not be made or rung).
                self.doorbells
                    .wait_for_reply(reply_to, REPLY_POLL.min(deadline - now))
                    .await;
            }
        }

        pub(crate) async fn send_reply(
            &self,
            reply_to: &str,
            job: &str,
            body: &str,
        ) -> Result<(), String> {
            if is_job_key(reply_to) {
                // A submitted job: the first reply stays in its record.
                return sqlx::query(
                    "UPDATE toolgraft_jobs SET result = ?3, ended = unixepoch()
                     WHERE queue = ?1 AND job = ?2 AND result IS NULL",
                )
                .bind(&self.queue)
                .bind(job)
                .bind(body)
                .execute(&self.replies)
                .await
                .map(drop)
                .map_err(|error| error.to_string());
            }
            // A job run twice (at least once) answers once: the first reply stays.
            sqlx::query(
                "INSERT OR IGNORE INTO toolgraft_replies (reply_to, job, body) VALUES (?1, ?2, ?3)",
            )
            .bind(reply_to)
            .bind(job)
            .bind(body)
            .execute(&self.replies)
            .await
            .map_err(|error| error.to_string())?;
            self.doorbells.ring_reply(reply_to).await;
            Ok(())
        }
    }

    #[cfg(test)]
    mod tests {
        use std::time::Duration;

        use apalis::prelude::{TaskBuilder, TaskId, TaskSink};
        use apalis_sqlite::SqliteStorage;
        use tokio::task::JoinSet;

        use super::super::super::job::Job;
        use super::super::super::scratch::NewFile;
        use super::super::Engine;
        use super::{Broker, lock_file, open};

        const ENGINE: Engine = Engine {
            poll: Duration::from_millis(500),
            heartbeat: Duration::from_secs(1),
            missed_heartbeats: 3,
            retention: Duration::from_secs(60),
        };

        /// Enqueues `jobs` jobs at once through `broker` (so on several of its
        /// connections).
        async fn push_many(broker: &Broker, jobs: usize) -> Result<(), String> {
            let mut pushes = JoinSet::new();
            for _ in 0..jobs {
                let id = ulid::Ulid::new().to_string();
                let job = Job {
                    id: id.clone(),
                    tool: "t".to_owned(),
                    args: serde_json::Value::Null,
                    reply_to: "r".to_owned(),
                    depth: 0,
                    generation: 0,
                };
                let task = TaskBuilder::new(job)
                    .task_id(TaskId::from_string(id))
                    .build();
                let mut storage = broker.storage.clone();
                pushes.spawn(async move { storage.push_task(task).await });
            }
            while let Some(pushed) = pushes.join_next().await {
                pushed
                    .map_err(|error| error.to_string())?
                    .map_err(|error| error.to_string())?;
            }
            Ok(())
        }

        /// Processes that start together on a new file (each connects with pools
        /// of its own, as these do) all connect and enqueue: none is refused with
        /// "database is locked" while another turns the new file to WAL, and none
        /// keeps a schema read half-way through another's migration.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn processes_starting_together_on_a_new_file_all_connect() {
            for _ in 0..5 {
                let file = NewFile::new("starting-together");
                let mut connecting = JoinSet::new();
                for _ in 0..6 {
                    let url = file.0.clone();
                    connecting.spawn(async move { Broker::connect(&url, "q", ENGINE).await });
                }
                while let Some(broker) = connecting.join_next().await {
                    let broker = broker.unwrap().unwrap_or_else(|error| panic!("{error}"));
                    push_many(&broker, 4).await.unwrap();
                }
            }
        }

        /// A process that starts while another is half-way through migrating the
        /// file (apalis migrates in steps, each a transaction of its own) can
        /// enqueue on every connection once it has connected: none of them keeps
        /// the schema of a step in between (SQLite compiles a statement against
        /// the schema its connection read last, and a column count that does not
        /// match is not a reason for it to read the schema again).
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_process_starting_during_a_migration_sees_the_whole_schema() {
            let file = NewFile::new("during-a-migration");
            // The other process: it holds the lock and has made the first step.
            let lock = lock_file(&file.0).await.unwrap();
            let other = open(&file.0).await.unwrap();
            let migrator = SqliteStorage::<()>::migrations();
            let first = migrator.iter().next().unwrap().version;
            migrator.run_to(first, &other).await.unwrap();
            let mut connecting = JoinSet::new();
            for _ in 0..4 {
                let url = file.0.clone();
                connecting.spawn(async move { Broker::connect(&url, "q", ENGINE).await });
            }
            // Time for them to reach the lock (the test passes without it too:
            // it only gives them the chance to look at the half-made file).
            tokio::time::sleep(Duration::from_millis(300)).await;
            migrator.run(&other).await.unwrap();
            other.close().await;
            drop(lock);
            while let Some(broker) = connecting.join_next().await {
                let broker = broker.unwrap().unwrap_or_else(|error| panic!("{error}"));
                push_many(&broker, 8)
                    .await
                    .unwrap_or_else(|error| panic!("{error}"));
            }
        }
    }
}

#[cfg(all(test, feature = "redis", feature = "sqlite"))]
mod tests {
    use super::Tier;

    #[test]
    fn the_url_picks_the_tier() {
        assert!(matches!(
            Tier::parse("redis://127.0.0.1:6379"),
            Ok(Tier::Redis(_))
        ));
        assert!(matches!(
            Tier::parse("sqlite:///tmp/jobs.db"),
            Ok(Tier::Sqlite(_))
        ));
        let unknown = Tier::parse("amqp://broker").unwrap_err();
        assert!(
            unknown.contains("use `redis://host:port` or `sqlite://"),
            "{unknown}"
        );
        assert!(
            Tier::parse("sqlite://")
                .unwrap_err()
                .contains("needs a file path")
        );
    }
}
