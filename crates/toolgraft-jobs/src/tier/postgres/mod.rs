//! The Postgres tier (`postgres://user@host:port/database`, PostgreSQL 13 or
//! later): apalis-postgres carries the jobs (`apalis.jobs`), tables of this
//! tier's own (schema `toolgraft`) the replies, the submitted jobs' records,
//! the withdrawals and the fleet's state, and `LISTEN`/`NOTIFY` the wake-ups:
//! apalis's own insert event wakes the workers, a channel per caller its
//! replies, a channel per queue its withdrawals and its fleet's announcements.
//!
//! Every row is written by one statement that also notifies, so a job, a reply
//! or a withdrawal is as durable as the database: a restart loses nothing that
//! was committed, and the listeners, reconnected, look again.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use apalis::prelude::{Monitor, Task, TaskSink};
use apalis_postgres::{Config, PostgresStorage};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::{Mutex, Notify};
use tokio::task::JoinHandle;

use super::super::job::{Job, Message, is_job_key};
use super::super::withdrawals::Withdrawals;
use super::{
    Answer, Cancel, Engine, RECONNECT_FIRST, RECONNECT_LAST, RunJob, STEADY_SUBSCRIPTION, Stored,
    Ticks, Tier, TierError, VACUUM_BATCH, decode_replies, fnv, held_claim, millis,
};
use crate::address::server_of;
use toolgraft::ext::once::Claim;

mod schema;

/// Whether this build has the tier.
pub(super) const BUILT: bool = true;

/// apalis-postgres's notification of a job inserted runnable now (its
/// trigger's payload names the queue: `{"job_type": .., "id": ..}`).
const INSERTED: &str = "apalis::job::insert";

/// How many connections a connection to a queue holds at most: the callers'
/// statements, the workers' fetches, acknowledgements and beats, and the
/// listeners (each holds one for as long as it listens).
const POOL_SIZE: u32 = 16;

/// The most jobs a worker fetches at once (see [`Tier::serve`]).
const FETCH_AT_MOST: usize = 8;

/// How long an operation waits for a connection (a new one, while the database
/// is down or unreachable) before it fails: a caller's call gets a transient
/// error in about this long, not after its own deadline.
pub(crate) const CONNECT_WITHIN: Duration = Duration::from_secs(2);

pub(super) async fn connect(
    url: &str,
    queue: &str,
    engine: Engine,
) -> Result<Arc<dyn Tier>, String> {
    let shown = server_of(url);
    let options = PgConnectOptions::from_str(url)
        .map_err(|error| format!("`{shown}` is not a PostgreSQL URL: {error}"))?
        .application_name("toolgraft");
    // No ping before each statement (sqlx's default): it doubled the round
    // trips of a call. A connection the server closed (a restart) fails its
    // next statement, a transient error, and is not used again.
    let pool = PgPoolOptions::new()
        .max_connections(POOL_SIZE)
        .acquire_timeout(CONNECT_WITHIN)
        .test_before_acquire(false)
        .connect_with(options)
        .await
        .map_err(|error| format!("cannot connect to `{shown}`: {error}"))?;
    schema::prepare(&pool)
        .await
        .map_err(|error| format!("`{shown}`: {error}"))?;
    let storage = PostgresStorage::new(&pool).with_config(config(queue, engine));
    Ok(Arc::new(Postgres {
        storage,
        withdrawn_channel: channel("withdrawn", queue),
        fleet_channel: channel("fleet", queue),
        queue: queue.to_owned(),
        engine,
        pool,
        replies: Mutex::default(),
        delivered: Mutex::default(),
    }))
}

struct Postgres {
    storage: PostgresStorage<Job>,
    /// The channel that announces the queue's withdrawn jobs.
    withdrawn_channel: String,
    /// The channel that announces the queue's binding generations.
    fleet_channel: String,
    queue: String,
    engine: Engine,
    pool: PgPool,
    /// The caller's reply listener, made at its first wait, and the channels it
    /// listens on. Only the reply router takes it, so it is never contended.
    replies: Mutex<Option<(PgListener, HashSet<String>)>>,
    /// Per reply channel, the replies the last take delivered (deleted at the
    /// next: see [`Postgres::take_waiting`]).
    delivered: Mutex<HashMap<String, Vec<i64>>>,
}

/// The engine's settings. Results travel on this tier's reply rows; apalis's
/// lock step (`lock_tasks`) marks a fetched job `Running` in a statement of its
/// own, which its fetch's `Queued` already says: one round trip less per job.
fn config(queue: &str, engine: Engine) -> Config {
    engine_config!(Config, queue, engine).lock_tasks(false)
}

/// A `NOTIFY` channel of `what` for `name`: a hash, since a channel is an
/// identifier of at most 63 bytes and names (queues, reply channels) may be
/// longer.
fn channel(what: &str, name: &str) -> String {
    format!("toolgraft_{what}_{:016x}", fnv(name))
}

fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

fn text(error: impl Into<TierError>) -> TierError {
    error.into()
}

/// How long a listener waits for a notification before it asks its server
/// whether the connection still stands (one dropped silently, by a NAT or a
/// load balancer, would wait for good).
const IDLE_CHECK: Duration = Duration::from_secs(30);

/// The next notification on `listening`; `None` when its connection is lost,
/// or found dead after [`IDLE_CHECK`] of silence.
async fn next(listening: &mut PgListener) -> Option<sqlx::postgres::PgNotification> {
    loop {
        match tokio::time::timeout(IDLE_CHECK, listening.try_recv()).await {
            Ok(received) => return received.ok().flatten(),
            Err(_) => {
                let alive = tokio::time::timeout(
                    CONNECT_WITHIN,
                    sqlx::query("SELECT 1").execute(&mut *listening),
                )
                .await;
                if !matches!(alive, Ok(Ok(_))) {
                    return None;
                }
            }
        }
    }
}

/// [`next`], for a listener whose notifications say only that something came.
async fn next_of(listening: &mut PgListener) -> Option<()> {
    next(listening).await.map(drop)
}

/// Whether `job` of `queue` has a withdrawal row.
async fn withdrawn(pool: &PgPool, queue: &str, job: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM toolgraft.withdrawn WHERE queue = $1 AND job = $2)",
    )
    .bind(queue)
    .bind(job)
    .fetch_one(pool)
    .await
}

/// A listener on `channels`, connected through `pool`'s settings.
async fn listener(pool: &PgPool, channels: &[&str]) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen_all(channels.iter().copied()).await?;
    Ok(listener)
}

impl Postgres {
    /// Puts `body` on the caller's channel `reply_to` under `key` (once: a key
    /// sent again is ignored) and notifies the caller, in one statement.
    async fn send_on(&self, reply_to: &str, key: &str, body: &str) -> Result<(), TierError> {
        sqlx::query(
            "WITH sent AS (
                 INSERT INTO toolgraft.replies (reply_to, job, body, queue) VALUES ($1, $2, $3, $5)
                 ON CONFLICT DO NOTHING RETURNING 1)
             SELECT pg_notify($4, '') FROM sent",
        )
        .bind(reply_to)
        .bind(key)
        .bind(body)
        .bind(channel("reply", reply_to))
        .bind(&self.queue)
        .execute(&self.pool)
        .await
        .map(drop)
        .map_err(text)
    }

    /// The replies waiting on `reply_to`, in the order they were sent, up to
    /// 256; the ones `delivered` (the last call's, which reached this process)
    /// go in the same statement. A reply is deleted only once it arrived: a
    /// `DELETE .. RETURNING` commits whether or not its rows reach the client,
    /// and a connection cut between the two would lose them. (Not "every seq up
    /// to the last one seen": a sequence's numbers do not commit in order, and
    /// a reply committed late with a lower number would go unread.)
    async fn take_waiting(
        &self,
        reply_to: &str,
        delivered: &mut Vec<i64>,
    ) -> Result<Vec<String>, TierError> {
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "WITH delivered AS (
                 DELETE FROM toolgraft.replies WHERE reply_to = $1 AND seq = ANY($2))
             SELECT seq, body FROM toolgraft.replies
             WHERE reply_to = $1 AND NOT (seq = ANY($2)) ORDER BY seq LIMIT 256",
        )
        .bind(reply_to)
        .bind(&*delivered)
        .fetch_all(&self.pool)
        .await
        .map_err(text)?;
        *delivered = rows.iter().map(|(seq, _)| *seq).collect();
        Ok(rows.into_iter().map(|(_, body)| body).collect())
    }
}

impl Tier for Postgres {
    fn enqueue(&self, task: Task<Job>) -> Answer<'_, ()> {
        // apalis's insert trigger notifies the queue's workers: no wake-up of
        // this tier's own.
        Box::pin(async move {
            self.storage
                .clone()
                .push_task(task)
                .await
                .map_err(TierError::engine)
        })
    }

    /// Each start of a worker takes a name of its own for the engine (the
    /// worker's, and a ULID): apalis-postgres's registering takes back a dead
    /// worker's jobs, not the ones a live worker of the same name had fetched,
    /// so a worker started again (its connection lost, or its process
    /// restarted within `dead_after` under a fixed name) would keep the lost
    /// instance's jobs for good. Under a new name, the old one stops beating,
    /// and its jobs come back as a dead worker's at the next beat after
    /// `dead_after`.
    ///
    /// A worker fetches up to [`FETCH_AT_MOST`] jobs at once, never more than
    /// it runs at once: each fetch is a transaction of three round trips, and
    /// apalis-postgres's acknowledgements wait in a channel four fetches deep,
    /// so one job per fetch held 64 callers to about 420 calls/s where eight
    /// reach about 1,200 (`benches/relocated.rs`). A worker that runs one job
    /// at a time still takes one, and leaves the rest to the others.
    fn serve(&self, worker: &str, ticks: Ticks, concurrency: usize, run: RunJob) -> Monitor {
        let worker = format!("{worker}~{}", ulid::Ulid::generate());
        let config = self
            .storage
            .config()
            .clone()
            .batch_size(concurrency.clamp(1, FETCH_AT_MOST));
        let storage = self.storage.clone().with_config(config);
        serve!(storage, worker.as_str(), ticks, concurrency, run)
    }

    fn listen(&self, wake: Arc<Notify>, withdrawals: Arc<Withdrawals>) -> JoinHandle<()> {
        let pool = self.pool.clone();
        let withdrawn_channel = self.withdrawn_channel.clone();
        let queue = self.queue.clone();
        tokio::spawn(async move {
            let mut backoff = RECONNECT_FIRST;
            loop {
                match listener(&pool, &[INSERTED, withdrawn_channel.as_str()]).await {
                    Ok(mut listening) => {
                        let since = Instant::now();
                        // Jobs may have come while nobody listened, and running
                        // jobs may have been withdrawn.
                        wake.notify_one();
                        let running = withdrawals.listening();
                        let looked: Result<Vec<(String,)>, _> = if running.is_empty() {
                            Ok(Vec::new())
                        } else {
                            sqlx::query_as(
                                "SELECT job FROM toolgraft.withdrawn
                                 WHERE queue = $1 AND job = ANY($2)",
                            )
                            .bind(&queue)
                            .bind(&running)
                            .fetch_all(&pool)
                            .await
                        };
                        match looked {
                            Ok(rows) => {
                                for (job,) in rows {
                                    withdrawals.heard(&job);
                                }
                                // `try_recv` answers `None` when the connection
                                // is lost (`recv` would reconnect unseen, and
                                // the withdrawals announced meanwhile be lost).
                                while let Some(notification) = next(&mut listening).await {
                                    if notification.channel() != withdrawn_channel {
                                        if inserted_on(notification.payload(), &queue) {
                                            wake.notify_one();
                                        }
                                        continue;
                                    }
                                    // Any role that may connect may NOTIFY: the
                                    // withdrawal is taken from its row, which
                                    // only a writer of the table makes.
                                    let job = notification.payload();
                                    match withdrawn(&pool, &queue, job).await {
                                        Ok(true) => withdrawals.heard(job),
                                        Ok(false) => tracing::warn!(
                                            job = %toolgraft::error::shorten(job),
                                            "an announced withdrawal has no row: ignored"
                                        ),
                                        // The job looks itself up at its next look.
                                        Err(error) => {
                                            tracing::warn!(%error, "cannot confirm an announced withdrawal")
                                        }
                                    }
                                }
                                tracing::warn!(
                                    "the wake-up listener's connection closed; listening again"
                                );
                            }
                            Err(error) => tracing::warn!(
                                %error,
                                "cannot look up the running jobs' withdrawals; listening again"
                            ),
                        }
                        withdrawals.deaf();
                        if since.elapsed() >= STEADY_SUBSCRIPTION {
                            backoff = RECONNECT_FIRST;
                        }
                    }
                    Err(error) => tracing::warn!(%error, "cannot listen for wake-ups; retrying"),
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RECONNECT_LAST);
            }
        })
    }

    fn vacuum(&self) -> Answer<'_, u64> {
        Box::pin(async move {
            let keep = seconds(self.engine.keep_finished());
            let removed = sqlx::query(
                "DELETE FROM apalis.jobs WHERE id IN (
                     SELECT id FROM apalis.jobs WHERE job_type = $1
                     AND status IN ('Done', 'Killed') AND done_at IS NOT NULL
                     AND done_at < now() - make_interval(secs => $2) LIMIT $3)",
            )
            .bind(&self.queue)
            .bind(keep)
            .bind(VACUUM_BATCH as i64)
            .execute(&self.pool)
            .await
            .map_err(text)?
            .rows_affected();
            let retention = seconds(self.engine.retention);
            // Submitted jobs' records past the retention since they ended,
            // withdrawals and run counts past it since they were made.
            for statement in [
                "DELETE FROM toolgraft.jobs WHERE queue = $1 AND ended IS NOT NULL
                 AND ended < now() - make_interval(secs => $2)",
                "DELETE FROM toolgraft.withdrawn WHERE queue = $1
                 AND created < now() - make_interval(secs => $2)",
                "DELETE FROM toolgraft.runs WHERE queue = $1
                 AND created < now() - make_interval(secs => $2)",
            ] {
                sqlx::query(statement)
                    .bind(&self.queue)
                    .bind(retention)
                    .execute(&self.pool)
                    .await
                    .map_err(text)?;
            }
            // `once`'s keys past their keep, whichever queue's calls made them.
            sqlx::query(
                // The outer test again: a row re-claimed while this waited on
                // its lock is not the expired row the subquery chose.
                "WITH clock AS (
                     SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now
                 )
                 DELETE FROM toolgraft.outcomes
                 WHERE expires <= (SELECT now FROM clock) AND key IN (
                     SELECT key FROM toolgraft.outcomes
                     WHERE expires <= (SELECT now FROM clock) LIMIT $1)",
            )
            .bind(VACUUM_BATCH as i64)
            .execute(&self.pool)
            .await
            .map_err(text)?;
            // Replies nobody took (their caller went away), of this queue (whose
            // retention this is).
            sqlx::query(
                "DELETE FROM toolgraft.replies WHERE queue = $1
                 AND created < now() - make_interval(secs => $2)",
            )
            .bind(&self.queue)
            .bind(retention)
            .execute(&self.pool)
            .await
            .map_err(text)?;
            Ok(removed)
        })
    }

    fn take_replies<'a>(&'a self, reply_to: &'a str, wait: Duration) -> Answer<'a, Vec<Message>> {
        Box::pin(async move {
            let deadline = Instant::now() + wait;
            let name = channel("reply", reply_to);
            let mut slot = self.replies.lock().await;
            loop {
                // Listen before looking, so a reply written between the look
                // and the wait is a notification waiting, not a wait in vain.
                let (listening, channels) = match &mut *slot {
                    Some(listening) => listening,
                    None => slot.insert((
                        listener(&self.pool, &[]).await.map_err(text)?,
                        HashSet::new(),
                    )),
                };
                if !channels.contains(&name) {
                    listening.listen(&name).await.map_err(text)?;
                    channels.insert(name.clone());
                }
                let bodies = {
                    let mut delivered = self.delivered.lock().await;
                    let delivered = delivered.entry(reply_to.to_owned()).or_default();
                    self.take_waiting(reply_to, delivered).await?
                };
                if !bodies.is_empty() {
                    return Ok(decode_replies(bodies));
                }
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    return Ok(Vec::new());
                };
                match tokio::time::timeout(left, listening.try_recv()).await {
                    Err(_) => return Ok(Vec::new()),
                    Ok(Ok(Some(_))) => {}
                    // The connection was lost: a new listener next round, which
                    // looks again before it waits.
                    Ok(Ok(None)) => *slot = None,
                    Ok(Err(error)) => {
                        *slot = None;
                        return Err(text(error));
                    }
                }
            }
        })
    }

    fn put_reply<'a>(&'a self, reply_to: &'a str, job: &'a str, body: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            if is_job_key(reply_to) {
                // A submitted job: the first reply stays in its record.
                return sqlx::query(
                    "UPDATE toolgraft.jobs SET result = $3, ended = now()
                     WHERE queue = $1 AND job = $2 AND result IS NULL",
                )
                .bind(&self.queue)
                .bind(job)
                .bind(body)
                .execute(&self.pool)
                .await
                .map(drop)
                .map_err(text);
            }
            // A job run twice (at least once) answers once: the first reply stays.
            self.send_on(reply_to, job, body).await
        })
    }

    fn put_report<'a>(
        &'a self,
        reply_to: &'a str,
        job: &'a str,
        seq: u64,
        body: &'a str,
    ) -> Answer<'a, ()> {
        Box::pin(async move {
            self.send_on(reply_to, &format!("{job}:progress:{seq}"), body)
                .await
        })
    }

    fn withdraw<'a>(&'a self, job: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            // Remembered for the workers that look it up (a job sent while they
            // were not listening), announced to the ones listening.
            sqlx::query(
                "WITH kept AS (
                     INSERT INTO toolgraft.withdrawn (queue, job) VALUES ($1, $2)
                     ON CONFLICT DO NOTHING)
                 SELECT pg_notify($3, $2)",
            )
            .bind(&self.queue)
            .bind(job)
            .bind(&self.withdrawn_channel)
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(text)
        })
    }

    fn is_withdrawn<'a>(&'a self, job: &'a str) -> Answer<'a, bool> {
        Box::pin(async move { withdrawn(&self.pool, &self.queue, job).await.map_err(text) })
    }

    fn count_run<'a>(&'a self, call: &'a str) -> Answer<'a, u64> {
        Box::pin(async move {
            sqlx::query_scalar::<_, i64>(
                "INSERT INTO toolgraft.runs AS counted (queue, call, runs) VALUES ($1, $2, 1)
                 ON CONFLICT (queue, call) DO UPDATE SET runs = counted.runs + 1, created = now()
                 RETURNING runs",
            )
            .bind(&self.queue)
            .bind(call)
            .fetch_one(&self.pool)
            .await
            .map(|runs| u64::try_from(runs).unwrap_or(0))
            .map_err(text)
        })
    }

    fn claim_outcome<'a>(
        &'a self,
        key: &'a str,
        lease: Duration,
        keep: Duration,
    ) -> Answer<'a, Claim> {
        Box::pin(async move {
            // One statement, by the server's clock (workers' clocks may differ):
            // the claim if the key is free or expired; otherwise the row as the
            // statement found it.
            #[allow(clippy::type_complexity)] // One row, read once.
            let (granted, outcome, until, expires, now): (
                bool,
                Option<String>,
                Option<i64>,
                Option<i64>,
                i64,
            ) = sqlx::query_as(
                "WITH clock AS (
                         SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now
                     ), claimed AS (
                         INSERT INTO toolgraft.outcomes AS held (key, outcome, lease_until, expires)
                         SELECT $1, NULL, now + $2, now + $3 FROM clock
                         ON CONFLICT (key) DO UPDATE SET outcome = NULL,
                             lease_until = excluded.lease_until, expires = excluded.expires
                         WHERE held.expires <= excluded.lease_until - $2
                         RETURNING 1
                     )
                     SELECT EXISTS (SELECT 1 FROM claimed), found.outcome, found.lease_until,
                            found.expires, clock.now
                     FROM clock LEFT JOIN toolgraft.outcomes AS found ON found.key = $1",
            )
            .bind(key)
            .bind(millis(lease))
            .bind(millis(keep.max(lease)))
            .fetch_one(&self.pool)
            .await
            .map_err(text)?;
            if granted {
                return Ok(Claim::Granted);
            }
            let held = until
                .zip(expires)
                .map(|(until, expires)| (outcome, until, expires));
            Ok(held_claim(held, now))
        })
    }

    fn record_outcome<'a>(
        &'a self,
        key: &'a str,
        outcome: &'a str,
        keep: Duration,
    ) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO toolgraft.outcomes (key, outcome, lease_until, expires)
                 VALUES ($1, $2, 0, (extract(epoch FROM clock_timestamp()) * 1000)::bigint + $3)
                 ON CONFLICT (key) DO UPDATE SET outcome = excluded.outcome,
                     expires = excluded.expires",
            )
            .bind(key)
            .bind(outcome)
            .bind(millis(keep))
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(text)
        })
    }

    fn release_outcome<'a>(&'a self, key: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query("DELETE FROM toolgraft.outcomes WHERE key = $1 AND outcome IS NULL")
                .bind(key)
                .execute(&self.pool)
                .await
                .map(drop)
                .map_err(text)
        })
    }

    fn record<'a>(&'a self, id: &'a str, record: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query("INSERT INTO toolgraft.jobs (queue, job, record) VALUES ($1, $2, $3)")
                .bind(&self.queue)
                .bind(id)
                .bind(record)
                .execute(&self.pool)
                .await
                .map(drop)
                .map_err(text)
        })
    }

    fn expire_record<'a>(&'a self, id: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query(
                "UPDATE toolgraft.jobs SET ended = now()
                 WHERE queue = $1 AND job = $2 AND ended IS NULL",
            )
            .bind(&self.queue)
            .bind(id)
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(text)
        })
    }

    fn stored<'a>(&'a self, id: &'a str) -> Answer<'a, Option<Stored>> {
        Box::pin(async move {
            // The record and, while it has no end, where apalis has the job: one
            // statement.
            let row: Option<StoredRow> =
                sqlx::query_as(
                    "SELECT record.record, record.result, record.cancelled, job.status,
                            job.run_at > now()
                     FROM toolgraft.jobs AS record
                     LEFT JOIN apalis.jobs AS job ON job.id = record.job AND job.job_type = $1
                     WHERE record.queue = $1 AND record.job = $2
                     AND (record.ended IS NULL OR record.ended >= now() - make_interval(secs => $3))",
                )
                .bind(&self.queue)
                .bind(id)
                .bind(seconds(self.engine.retention))
                .fetch_optional(&self.pool)
                .await
                .map_err(text)?;
            let Some((record, result, cancelled, status, later)) = row else {
                return Ok(None);
            };
            Ok(Some(Stored::of_sql(
                record,
                result,
                cancelled.is_some(),
                status.as_deref(),
                later == Some(true),
            )))
        })
    }

    fn cancel<'a>(&'a self, id: &'a str) -> Answer<'a, Cancel> {
        Box::pin(async move {
            let row: Option<(Option<String>, Option<i64>)> = sqlx::query_as(
                "SELECT result, cancelled FROM toolgraft.jobs WHERE queue = $1 AND job = $2",
            )
            .bind(&self.queue)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(text)?;
            if let Some(settled) = Cancel::by_record(row) {
                return Ok(settled);
            }
            // One transaction: the job leaves the queue only if no worker took
            // it (a fetch holds the row locked until it marks it `Queued`, and
            // this update then finds it so), and its record says so with it.
            let mut transaction = self.pool.begin().await.map_err(text)?;
            let taken = sqlx::query(
                "UPDATE apalis.jobs SET status = 'Killed', done_at = now()
                 WHERE id = $1 AND job_type = $2
                 AND (status = 'Pending' OR (status = 'Failed' AND attempts < max_attempts))",
            )
            .bind(id)
            .bind(&self.queue)
            .execute(&mut *transaction)
            .await
            .map_err(text)?
            .rows_affected();
            if taken == 0 {
                // Another cancel may have taken it first (this update waited
                // for it): then it is cancelled for this one too.
                let status: Option<String> = sqlx::query_scalar(
                    "SELECT status FROM apalis.jobs WHERE id = $1 AND job_type = $2",
                )
                .bind(id)
                .bind(&self.queue)
                .fetch_optional(&mut *transaction)
                .await
                .map_err(text)?;
                if status.as_deref() != Some("Killed") {
                    return Ok(Cancel::TooLate);
                }
            }
            sqlx::query(
                "UPDATE toolgraft.jobs SET cancelled = COALESCE(cancelled, $3),
                 ended = COALESCE(ended, now())
                 WHERE queue = $1 AND job = $2",
            )
            .bind(&self.queue)
            .bind(id)
            .bind(i64::try_from(crate::clock::now_ms()).unwrap_or(i64::MAX))
            .execute(&mut *transaction)
            .await
            .map_err(text)?;
            transaction.commit().await.map_err(text)?;
            Ok(Cancel::Cancelled)
        })
    }

    fn publish<'a>(&'a self, manifest: &'a str) -> Answer<'a, u64> {
        Box::pin(async move {
            let generation: i64 = sqlx::query_scalar(
                "WITH next AS (
                     INSERT INTO toolgraft.fleet AS fleet (queue, generation, manifest)
                     VALUES ($1, 1, $2)
                     ON CONFLICT (queue) DO UPDATE
                     SET generation = fleet.generation + 1, manifest = excluded.manifest
                     RETURNING generation)
                 SELECT next.generation FROM next, pg_notify($3, next.generation::text)",
            )
            .bind(&self.queue)
            .bind(manifest)
            .bind(&self.fleet_channel)
            .fetch_one(&self.pool)
            .await
            .map_err(text)?;
            Ok(u64::try_from(generation).unwrap_or(0))
        })
    }

    fn current(&self) -> Answer<'_, Option<(u64, String)>> {
        Box::pin(async move {
            let row: Option<(i64, String)> =
                sqlx::query_as("SELECT generation, manifest FROM toolgraft.fleet WHERE queue = $1")
                    .bind(&self.queue)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(text)?;
            Ok(
                row.map(|(generation, manifest)| {
                    (u64::try_from(generation).unwrap_or(0), manifest)
                }),
            )
        })
    }

    fn report<'a>(&'a self, process: &'a str, member: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO toolgraft.fleet_members (queue, process, member) VALUES ($1, $2, $3)
                 ON CONFLICT (queue, process) DO UPDATE SET member = excluded.member",
            )
            .bind(&self.queue)
            .bind(process)
            .bind(member)
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(text)
        })
    }

    fn members(&self) -> Answer<'_, Vec<String>> {
        Box::pin(async move {
            sqlx::query_scalar("SELECT member FROM toolgraft.fleet_members WHERE queue = $1")
                .bind(&self.queue)
                .fetch_all(&self.pool)
                .await
                .map_err(text)
        })
    }

    fn leave<'a>(&'a self, process: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query("DELETE FROM toolgraft.fleet_members WHERE queue = $1 AND process = $2")
                .bind(&self.queue)
                .bind(process)
                .execute(&self.pool)
                .await
                .map(drop)
                .map_err(text)
        })
    }

    fn announcements(&self, kick: Weak<Notify>) -> JoinHandle<()> {
        let pool = self.pool.clone();
        let channel = self.fleet_channel.clone();
        tokio::spawn(async move {
            let mut backoff = RECONNECT_FIRST;
            loop {
                if let Ok(mut listening) = listener(&pool, &[&channel]).await {
                    backoff = RECONNECT_FIRST;
                    // Announcements may have come while nobody listened.
                    let mut next = Some(());
                    while next.is_some() {
                        let Some(kick) = kick.upgrade() else { return };
                        kick.notify_one();
                        drop(kick);
                        next = next_of(&mut listening).await.map(drop);
                    }
                }
                if kick.strong_count() == 0 {
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RECONNECT_LAST);
            }
        })
    }
}

/// A submitted job's record as `stored` reads it: the caller's record, the
/// reply, when it was cancelled, and apalis's status and whether its run time
/// is still ahead.
type StoredRow = (
    String,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<bool>,
);

/// Whether apalis's insert notification `payload` is of a job of `queue`.
fn inserted_on(payload: &str, queue: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Inserted<'a> {
        #[serde(borrow)]
        job_type: std::borrow::Cow<'a, str>,
    }
    serde_json::from_str::<Inserted<'_>>(payload).is_ok_and(|inserted| inserted.job_type == queue)
}

#[cfg(test)]
mod tests {
    #[test]
    fn apalis_insert_events_wake_only_their_queue() {
        let payload =
            r#"{"job_type" : "forecasts", "id" : "01J", "run_at" : "2026-12-06T23:00:00+00:00"}"#;
        assert!(super::inserted_on(payload, "forecasts"));
        assert!(!super::inserted_on(payload, "notes"));
        assert!(!super::inserted_on("insert", "forecasts"));
    }

    #[test]
    fn channels_are_identifiers_of_at_most_63_bytes() {
        let long = "q".repeat(500);
        for name in [
            super::channel("reply", &long),
            super::channel("withdrawn", "a"),
        ] {
            assert!(name.len() <= 63, "{name}");
            assert!(
                name.bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
            );
        }
        assert_ne!(super::channel("fleet", "a"), super::channel("fleet", "b"));
    }
}
