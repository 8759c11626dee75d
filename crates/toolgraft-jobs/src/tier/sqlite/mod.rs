//! The SQLite tier (`sqlite://path/to/jobs.db`): a file the processes of one
//! machine share, no server. apalis-sqlite carries the jobs in it; a side file
//! beside it holds the replies, the submitted jobs' records and the fleet's
//! state; doorbells (Unix datagram sockets) wake workers and callers.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use apalis::prelude::{Monitor, Task, TaskSink};
use apalis_sqlite::{Config, SqliteStorage};
use sqlx::SqlitePool;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::super::job::{Job, Message, is_job_key};
use super::super::withdrawals::Withdrawals;
use super::{
    Answer, Cancel, Engine, RunJob, Stored, Ticks, Tier, TierError, VACUUM_BATCH, decode_replies,
    held_claim, millis,
};
use crate::clock::now_ms;
use doorbell::Doorbells;
use file::{open, prepare, replies_url};
use toolgraft::ext::once::Claim;

mod doorbell;
mod file;

/// Whether this build has the tier.
pub(super) const BUILT: bool = true;

/// How often a waiting caller looks for replies when no doorbell rings (a
/// file has no blocking read).
const REPLY_POLL: Duration = Duration::from_millis(50);

pub(super) async fn connect(
    url: &str,
    queue: &str,
    engine: Engine,
) -> Result<Arc<dyn Tier>, String> {
    Ok(Arc::new(Sqlite::connect(url, queue, engine).await?))
}

struct Sqlite {
    storage: SqliteStorage<Job>,
    /// Where the processes sharing the file wake each other (see [`Doorbells`]).
    doorbells: Arc<Doorbells>,
    engine: Engine,
    jobs: SqlitePool,
    queue: String,
    /// Replies live in a file of their own (`<jobs file>.replies`): SQLite locks
    /// a whole file, and apalis holds the jobs file's write lock at times (while
    /// a worker stops, for one), which must not hold up a reply. The fleet's
    /// state lives there too.
    replies: SqlitePool,
}

fn config(queue: &str, engine: Engine) -> Config {
    engine_config!(Config, queue, engine)
}

fn text(error: impl Into<TierError>) -> TierError {
    error.into()
}

impl Sqlite {
    async fn connect(url: &str, queue: &str, engine: Engine) -> Result<Self, String> {
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

    /// Puts `body` on the caller's channel `reply_to` under `key` (once: a key
    /// sent again is ignored), and rings the caller.
    async fn send_on(&self, reply_to: &str, key: &str, body: &str) -> Result<(), TierError> {
        sqlx::query(
            "INSERT OR IGNORE INTO toolgraft_replies (reply_to, job, body) VALUES (?1, ?2, ?3)",
        )
        .bind(reply_to)
        .bind(key)
        .bind(body)
        .execute(&self.replies)
        .await
        .map_err(text)?;
        self.doorbells.ring_reply(reply_to).await;
        Ok(())
    }
}

impl Tier for Sqlite {
    fn enqueue(&self, task: Task<Job>) -> Answer<'_, ()> {
        Box::pin(async move {
            self.storage
                .clone()
                .push_task(task)
                .await
                .map_err(TierError::engine)?;
            self.doorbells.ring_workers().await;
            Ok(())
        })
    }

    fn serve(&self, worker: &str, ticks: Ticks, concurrency: usize, run: RunJob) -> Monitor {
        serve!(self.storage.clone(), worker, ticks, concurrency, run)
    }

    /// Withdrawals are not announced: the workers ask (one machine, one file).
    fn listen(&self, wake: Arc<Notify>, _: Arc<Withdrawals>) -> JoinHandle<()> {
        let doorbells = self.doorbells.clone();
        tokio::spawn(async move { doorbells.listen_as_worker(wake).await })
    }

    fn vacuum(&self) -> Answer<'_, u64> {
        Box::pin(async move {
            let keep = i64::try_from(self.engine.keep_finished().as_secs()).unwrap_or(i64::MAX);
            let removed = sqlx::query(
                "DELETE FROM Jobs WHERE rowid IN (
                     SELECT rowid FROM Jobs WHERE job_type = ?1 AND status IN ('Done', 'Killed')
                     AND done_at IS NOT NULL AND done_at < unixepoch() - ?2 LIMIT ?3)",
            )
            .bind(&self.queue)
            .bind(keep)
            .bind(VACUUM_BATCH as i64)
            .execute(&self.jobs)
            .await
            .map(|done| done.rows_affected())
            .map_err(text)?;
            // Submitted jobs' records, past the retention since they ended.
            sqlx::query(
                "DELETE FROM toolgraft_jobs WHERE queue = ?1 AND ended IS NOT NULL
                 AND ended < unixepoch() - ?2",
            )
            .bind(&self.queue)
            .bind(i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX))
            .execute(&self.replies)
            .await
            .map_err(text)?;
            sqlx::query(
                "DELETE FROM toolgraft_outcomes WHERE expires <= ?1 AND rowid IN (
                     SELECT rowid FROM toolgraft_outcomes WHERE expires <= ?1 LIMIT ?2)",
            )
            .bind(i64::try_from(now_ms()).unwrap_or(i64::MAX))
            .bind(VACUUM_BATCH as i64)
            .execute(&self.replies)
            .await
            .map_err(text)?;
            sqlx::query(
                "DELETE FROM toolgraft_withdrawn WHERE queue = ?1 AND created < unixepoch() - ?2",
            )
            .bind(&self.queue)
            .bind(i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX))
            .execute(&self.replies)
            .await
            .map_err(text)?;
            sqlx::query(
                "DELETE FROM toolgraft_runs WHERE queue = ?1 AND created < unixepoch() - ?2",
            )
            .bind(&self.queue)
            .bind(i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX))
            .execute(&self.replies)
            .await
            .map_err(text)?;
            Ok(removed)
        })
    }

    fn take_replies<'a>(&'a self, reply_to: &'a str, wait: Duration) -> Answer<'a, Vec<Message>> {
        Box::pin(async move {
            let deadline = Instant::now() + wait;
            loop {
                // Read first: polling must not take the write lock the workers'
                // replies need; only rows found are deleted.
                let rows: Vec<(String, String)> = sqlx::query_as(
                    "SELECT job, body FROM toolgraft_replies WHERE reply_to = ?1 ORDER BY rowid",
                )
                .bind(reply_to)
                .fetch_all(&self.replies)
                .await
                .map_err(text)?;
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
                    delete.build().execute(&self.replies).await.map_err(text)?;
                    let bodies = rows.into_iter().map(|(_, body)| body).collect();
                    return Ok(decode_replies(bodies));
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
        })
    }

    fn put_reply<'a>(&'a self, reply_to: &'a str, job: &'a str, body: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
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
                .map_err(text);
            }
            // A job run twice (at least once) answers once: the first reply stays.
            self.send_on(reply_to, job, body).await
        })
    }

    fn withdraw<'a>(&'a self, job: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query("INSERT OR IGNORE INTO toolgraft_withdrawn (queue, job) VALUES (?1, ?2)")
                .bind(&self.queue)
                .bind(job)
                .execute(&self.replies)
                .await
                .map(drop)
                .map_err(text)
        })
    }

    fn is_withdrawn<'a>(&'a self, job: &'a str) -> Answer<'a, bool> {
        Box::pin(async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM toolgraft_withdrawn WHERE queue = ?1 AND job = ?2",
            )
            .bind(&self.queue)
            .bind(job)
            .fetch_one(&self.replies)
            .await
            .map(|found| found > 0)
            .map_err(text)
        })
    }

    fn count_run<'a>(&'a self, call: &'a str) -> Answer<'a, u64> {
        Box::pin(async move {
            sqlx::query_scalar::<_, i64>(
                "INSERT INTO toolgraft_runs (queue, call, runs) VALUES (?1, ?2, 1)
                 ON CONFLICT (queue, call) DO UPDATE SET runs = runs + 1, created = unixepoch()
                 RETURNING runs",
            )
            .bind(&self.queue)
            .bind(call)
            .fetch_one(&self.replies)
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
            // One file, one machine: this process's clock is the engine's.
            let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
            let granted = sqlx::query(
                "INSERT INTO toolgraft_outcomes (key, outcome, lease_until, expires)
                 VALUES (?1, NULL, ?2 + ?3, ?2 + ?4)
                 ON CONFLICT (key) DO UPDATE SET outcome = NULL,
                     lease_until = excluded.lease_until, expires = excluded.expires
                 WHERE toolgraft_outcomes.expires <= ?2",
            )
            .bind(key)
            .bind(now)
            .bind(millis(lease))
            .bind(millis(keep.max(lease)))
            .execute(&self.replies)
            .await
            .map_err(text)?
            .rows_affected()
                == 1;
            if granted {
                return Ok(Claim::Granted);
            }
            let held: Option<(Option<String>, i64, i64)> = sqlx::query_as(
                "SELECT outcome, lease_until, expires FROM toolgraft_outcomes WHERE key = ?1",
            )
            .bind(key)
            .fetch_optional(&self.replies)
            .await
            .map_err(text)?;
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
            let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
            sqlx::query(
                "INSERT INTO toolgraft_outcomes (key, outcome, lease_until, expires)
                 VALUES (?1, ?2, 0, ?3 + ?4)
                 ON CONFLICT (key) DO UPDATE SET outcome = excluded.outcome,
                     expires = excluded.expires",
            )
            .bind(key)
            .bind(outcome)
            .bind(now)
            .bind(millis(keep))
            .execute(&self.replies)
            .await
            .map(drop)
            .map_err(text)
        })
    }

    fn release_outcome<'a>(&'a self, key: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query("DELETE FROM toolgraft_outcomes WHERE key = ?1 AND outcome IS NULL")
                .bind(key)
                .execute(&self.replies)
                .await
                .map(drop)
                .map_err(text)
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
            // A row of its own per report (the reply's row is the job's), in
            // rowid order with the reply after them. Progress and log messages
            // share one sequence (the key kept from when only progress went).
            self.send_on(reply_to, &format!("{job}:progress:{seq}"), body)
                .await
        })
    }

    fn record<'a>(&'a self, id: &'a str, record: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query("INSERT INTO toolgraft_jobs (queue, job, record) VALUES (?1, ?2, ?3)")
                .bind(&self.queue)
                .bind(id)
                .bind(record)
                .execute(&self.replies)
                .await
                .map(drop)
                .map_err(text)
        })
    }

    fn expire_record<'a>(&'a self, id: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query(
                "UPDATE toolgraft_jobs SET ended = unixepoch()
                 WHERE queue = ?1 AND job = ?2 AND ended IS NULL",
            )
            .bind(&self.queue)
            .bind(id)
            .execute(&self.replies)
            .await
            .map(drop)
            .map_err(text)
        })
    }

    fn stored<'a>(&'a self, id: &'a str) -> Answer<'a, Option<Stored>> {
        Box::pin(async move {
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
            .map_err(text)?;
            let Some((record, result, cancelled)) = row else {
                return Ok(None);
            };
            let mut job: Option<(String, Option<i64>)> = None;
            if result.is_none() && cancelled.is_none() {
                job = sqlx::query_as(
                    "SELECT status, run_at FROM Jobs WHERE id = ?1 AND job_type = ?2",
                )
                .bind(id)
                .bind(&self.queue)
                .fetch_optional(&self.jobs)
                .await
                .map_err(text)?;
            }
            let now = i64::try_from(now_ms() / 1000).unwrap_or(i64::MAX);
            let later = job
                .as_ref()
                .is_some_and(|(_, run_at)| run_at.is_some_and(|run_at| run_at > now));
            let status = job.as_ref().map(|(status, _)| status.as_str());
            Ok(Some(Stored::of_sql(
                record,
                result,
                cancelled.is_some(),
                status,
                later,
            )))
        })
    }

    fn cancel<'a>(&'a self, id: &'a str) -> Answer<'a, Cancel> {
        Box::pin(async move {
            let row: Option<(Option<String>, Option<i64>)> = sqlx::query_as(
                "SELECT result, cancelled FROM toolgraft_jobs WHERE queue = ?1 AND job = ?2",
            )
            .bind(&self.queue)
            .bind(id)
            .fetch_optional(&self.replies)
            .await
            .map_err(text)?;
            if let Some(settled) = Cancel::by_record(row) {
                return Ok(settled);
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
            .map_err(text)?
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
                        .map_err(text)?;
                if status.is_none_or(|(status,)| status != "Killed") {
                    return Ok(Cancel::TooLate);
                }
            }
            let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
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
            .map_err(text)?;
            Ok(Cancel::Cancelled)
        })
    }

    fn publish<'a>(&'a self, manifest: &'a str) -> Answer<'a, u64> {
        Box::pin(async move {
            let (generation,): (i64,) = sqlx::query_as(
                "INSERT INTO toolgraft_fleet (queue, generation, manifest) VALUES (?1, 1, ?2)
                 ON CONFLICT (queue) DO UPDATE SET generation = generation + 1, manifest = excluded.manifest
                 RETURNING generation",
            )
            .bind(&self.queue)
            .bind(manifest)
            .fetch_one(&self.replies)
            .await
            .map_err(text)?;
            Ok(u64::try_from(generation).unwrap_or(0))
        })
    }

    fn current(&self) -> Answer<'_, Option<(u64, String)>> {
        Box::pin(async move {
            let row: Option<(i64, String)> =
                sqlx::query_as("SELECT generation, manifest FROM toolgraft_fleet WHERE queue = ?1")
                    .bind(&self.queue)
                    .fetch_optional(&self.replies)
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
                "INSERT OR REPLACE INTO toolgraft_fleet_members (queue, process, member) VALUES (?1, ?2, ?3)",
            )
            .bind(&self.queue)
            .bind(process)
            .bind(member)
            .execute(&self.replies)
            .await
            .map(drop)
            .map_err(text)
        })
    }

    fn members(&self) -> Answer<'_, Vec<String>> {
        Box::pin(async move {
            let rows: Vec<(String,)> =
                sqlx::query_as("SELECT member FROM toolgraft_fleet_members WHERE queue = ?1")
                    .bind(&self.queue)
                    .fetch_all(&self.replies)
                    .await
                    .map_err(text)?;
            Ok(rows.into_iter().map(|(member,)| member).collect())
        })
    }

    fn leave<'a>(&'a self, process: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            sqlx::query("DELETE FROM toolgraft_fleet_members WHERE queue = ?1 AND process = ?2")
                .bind(&self.queue)
                .bind(process)
                .execute(&self.replies)
                .await
                .map(drop)
                .map_err(text)
        })
    }

    /// A file announces nothing: the fleet's members look every heartbeat, and
    /// a job from a newer generation kicks its worker's.
    fn announcements(&self, kick: Weak<Notify>) -> JoinHandle<()> {
        drop(kick);
        tokio::spawn(async {})
    }
}

#[cfg(test)]
mod tests;
