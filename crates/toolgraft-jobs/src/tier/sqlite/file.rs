//! The SQLite tier's files: the jobs file (apalis's tables) and its side file
//! (`<jobs file>.replies`: replies, submitted jobs' records, the fleet's state),
//! made ready under a lock so that processes starting together take turns.

use std::str::FromStr;
use std::time::Duration;

use apalis_sqlite::SqliteStorage;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

/// An exclusive lock on `<jobs file>.lock`, held until dropped.
pub(super) async fn lock_file(url: &str) -> Result<std::fs::File, String> {
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
pub(super) fn replies_url(url: &str) -> String {
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
pub(super) async fn open(url: &str) -> Result<SqlitePool, String> {
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

/// The side file's tables: the runs of retried calls, replies to callers,
/// submitted jobs (the caller's record, the first reply, the end), the jobs
/// their callers withdrew, and the fleet's state.
const SIDE_TABLES: [&str; 8] = [
    "CREATE TABLE IF NOT EXISTS toolgraft_runs (
         queue TEXT NOT NULL,
         call TEXT NOT NULL,
         runs INTEGER NOT NULL,
         created INTEGER NOT NULL DEFAULT (unixepoch()),
         PRIMARY KEY (queue, call)
     )",
    "CREATE TABLE IF NOT EXISTS toolgraft_outcomes (
         key TEXT PRIMARY KEY,
         outcome TEXT,
         lease_until INTEGER NOT NULL,
         expires INTEGER NOT NULL
     )",
    "CREATE INDEX IF NOT EXISTS toolgraft_outcomes_by_expiry ON toolgraft_outcomes (expires)",
    "CREATE TABLE IF NOT EXISTS toolgraft_withdrawn (
         queue TEXT NOT NULL,
         job TEXT NOT NULL,
         created INTEGER NOT NULL DEFAULT (unixepoch()),
         PRIMARY KEY (queue, job)
     )",
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
pub(super) async fn prepare(url: &str) -> Result<(), String> {
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
