//! The Postgres tier's tables beside apalis's (`apalis.jobs`): replies to
//! callers, submitted jobs' records, withdrawals, retried calls' runs and the
//! fleet's state, in a schema of their own (`toolgraft`), made ready under an
//! advisory lock so that processes starting together take turns.

use apalis_postgres::PostgresStorage;
use sqlx::{Connection as _, PgPool};

/// The advisory lock processes take while they make the tables: `CREATE ...
/// IF NOT EXISTS` run by two at once can still collide on the catalog.
const SETUP_LOCK: i64 = 0x746f_6f6c_6772_6166; // "toolgraf"

/// The tables, each keyed by queue (a database serves many queues).
const TABLES: [&str; 7] = [
    "CREATE SCHEMA IF NOT EXISTS toolgraft",
    "CREATE TABLE IF NOT EXISTS toolgraft.runs (
         queue TEXT NOT NULL,
         call TEXT NOT NULL,
         runs BIGINT NOT NULL,
         created TIMESTAMPTZ NOT NULL DEFAULT now(),
         PRIMARY KEY (queue, call)
     )",
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
         seq BIGSERIAL NOT NULL,
         created TIMESTAMPTZ NOT NULL DEFAULT now(),
         PRIMARY KEY (reply_to, job)
     )",
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
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(SETUP_LOCK)
        .execute(&mut *connection)
        .await
        .map_err(failed)?;
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
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(SETUP_LOCK)
        .execute(&mut *connection)
        .await;
    if unlocked.is_err() {
        // The lock goes with the session.
        let _ = connection.detach().close().await;
    }
    made
}
