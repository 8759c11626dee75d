//! The SQLite tier with several processes on one new file.

use std::time::Duration;

use apalis::prelude::{TaskBuilder, TaskId, TaskSink};
use apalis_sqlite::SqliteStorage;
use tokio::task::JoinSet;

use super::super::super::job::Job;
use super::super::super::scratch::NewFile;
use super::super::Engine;
use super::Sqlite;
use super::file::{lock_file, open};

const ENGINE: Engine = Engine {
    poll: Duration::from_millis(500),
    heartbeat: Duration::from_secs(1),
    missed_heartbeats: 3,
    retention: Duration::from_secs(60),
};

/// Enqueues `jobs` jobs at once through `broker` (so on several of its
/// connections).
async fn push_many(broker: &Sqlite, jobs: usize) -> Result<(), String> {
    let mut pushes = JoinSet::new();
    for _ in 0..jobs {
        let id = ulid::Ulid::generate().to_string();
        let job = Job {
            id: id.clone(),
            tool: "t".to_owned(),
            args: serde_json::Value::Null,
            reply_to: "r".to_owned(),
            context: Default::default(),
            generation: 0,
            progress: false,
            log: None,
            queued_at_us: 0,
            sent_at_us: 0,
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
            connecting.spawn(async move { Sqlite::connect(&url, "q", ENGINE).await });
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
        connecting.spawn(async move { Sqlite::connect(&url, "q", ENGINE).await });
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
