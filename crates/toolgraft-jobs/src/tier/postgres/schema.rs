//! The Postgres tier's tables beside apalis's (`apalis.jobs`): replies to
//! callers, submitted jobs' records, withdrawals, retried calls' runs and the
//! fleet's state, in a schema of their own (`toolgraft`), made ready under an
//! advisory lock so that processes starting together take turns.

use apalis_postgres::PostgresStorage;
use sqlx::{Connection as _, PgPool};

/// The advisory lock processes take while they make the tables: `CREATE ...
/// IF NOT EXISTS` run by two at once can still collide on the catalog.
const SETUP_LOCK: i64 = 0x746f_6f6c_6772_6166; // "toolgraf"

/// How long a process waits for another's set-up.
const LOCK_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// The tables, each keyed by queue (a database serves many queues).
const TABLES: [&str; 10] = [
    "CREATE SCHEMA IF NOT EXISTS toolgraft",
    "CREATE TABLE IF NOT EXISTS toolgraft.runs (
         queue TEXT NOT NULL,
         call TEXT NOT NULL,
         runs BIGINT NOT NULL,
         created TIMESTAMPTZ NOT NULL DEFAULT now(),
         PRIMARY KEY (queue, call)
     )",
    "CREATE TABLE IF NOT EXISTS toolgraft.outcomes (
         key TEXT PRIMARY KEY,
         outcome TEXT,
         lease_until BIGINT NOT NULL,
         expires BIGINT NOT NULL
     )",
    "CREATE INDEX IF NOT EXISTS outcomes_by_expiry ON toolgraft.outcomes (expires)",
    "CREATE TABLE IF NOT EXISTS toolgraft.withdrawn (
         queue TEXT NOT NULL,
         job TEXT NOT NULL,
         created TIMESTAMPTZ NOT NULL DEFAULT now(),
         PRIMARY KEY (queue, job)
     )",
    // `seq` orders a job's reports before its reply (they share a caller).
    "CREATE TABLE IF NOT EXISTS toolgraft.replies (
         reply_to TEXT NOT NULL,
         job TEXT NOT NULL,
         body TEXT NOT NULL,
         queue TEXT NOT NULL,
         seq BIGSERIAL NOT NULL,
         created TIMESTAMPTZ NOT NULL DEFAULT now(),
         PRIMARY KEY (reply_to, job)
     )",
    // The vacuum's look for replies nobody took.
    "CREATE INDEX IF NOT EXISTS replies_by_age ON toolgraft.replies (queue, created)",
    "CREATE TABLE IF NOT EXISTS toolgraft.jobs (
         queue TEXT NOT NULL,
         job TEXT NOT NULL,
         record TEXT NOT NULL,
         result TEXT,
         cancelled BIGINT,
         ended TIMESTAMPTZ,
         PRIMARY KEY (queue, job)
     )",
    "CREATE TABLE IF NOT EXISTS toolgraft.fleet (
         queue TEXT PRIMARY KEY,
         generation BIGINT NOT NULL,
         manifest TEXT NOT NULL
     )",
    "CREATE TABLE IF NOT EXISTS toolgraft.fleet_members (
         queue TEXT NOT NULL,
         process TEXT NOT NULL,
         member TEXT NOT NULL,
         PRIMARY KEY (queue, process)
     )",
];

/// Migrates apalis's tables and makes this tier's, one process at a time: under
/// a session's advisory lock, each statement a transaction of its own (a
/// transaction begun before another process made the tables would check `IF
/// NOT EXISTS` against the catalog it read then, and collide).
pub(super) async fn prepare(pool: &PgPool) -> Result<(), String> {
    let failed = |error: sqlx::Error| format!("cannot set up the job tables: {error}");
    let mut connection = pool.acquire().await.map_err(failed)?;
    // Notifications and replies are text: a database of another encoding
    // mangles them (or, in SQL_ASCII, hands the listener bytes that are not
    // UTF-8).
    let encoding: String = sqlx::query_scalar("SHOW server_encoding")
        .fetch_one(&mut *connection)
        .await
        .map_err(failed)?;
    if encoding != "UTF8" {
        return Err(format!(
            "the database's encoding is {encoding}; the job engine needs a UTF8 database \
             (CREATE DATABASE .. ENCODING 'UTF8')"
        ));
    }
    // Taken in turns, each try bounded: a lock another process holds for good
    // (it hung, or a transaction pooler kept it on another session) is an
    // error after a while, not a start that never ends.
    let deadline = std::time::Instant::now() + LOCK_WITHIN;
    loop {
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(SETUP_LOCK)
            .fetch_one(&mut *connection)
            .await
            .map_err(failed)?;
        if locked {
            break;
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "another process has held the set-up lock for {LOCK_WITHIN:?} (behind a \
                 transaction pooler? the job engine needs session pooling: it LISTENs)"
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let made = async {
        PostgresStorage::setup(pool)
            .await
            .map_err(|error| format!("cannot set up apalis's job tables: {error}"))?;
        for table in TABLES {
            sqlx::query(table)
                .execute(&mut *connection)
                .await
                .map_err(|error| format!("cannot set up the `toolgraft` tables: {error}"))?;
        }
        Ok(())
    }
    .await;
    let unlocked: Result<bool, _> = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
        .bind(SETUP_LOCK)
        .fetch_one(&mut *connection)
        .await;
    if !matches!(unlocked, Ok(true)) {
        // The lock goes with the session.
        let _ = connection.detach().close().await;
    }
    made
}
