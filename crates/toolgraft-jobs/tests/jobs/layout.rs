//! The storage layout this crate writes into, as apalis lays it out: a job
//! pushed through apalis's own API lands where the tiers' scripts and SQL look
//! for it (`src/tier/redis/scripts.rs`: `VACUUM`, `STORED`, `CANCEL`;
//! `src/tier/sqlite/mod.rs` and `src/tier/postgres/mod.rs`: `stored`, `cancel`,
//! `vacuum`). apalis is pinned to the minor of this layout (Cargo.toml); when a
//! release moves it, these fail before cancel, status and vacuum would at run
//! time.

use crate::support::*;

use apalis::prelude::{Status, Task, TaskBuilder, TaskId, TaskSink as _};

/// The statuses the scripts and SQL read and write: a cancel writes `Killed`,
/// the vacuum takes `Done` and `Killed`, status reads `Pending` and `Failed`.
const STATUSES: [&str; 4] = ["Pending", "Failed", "Done", "Killed"];

/// A job's id and the task that carries it.
type Pushed = (String, Task<Value>);

/// A job runnable now and one an hour from now (whole seconds, as both engines
/// keep time), with ids of our own, as `tier::task` makes them.
fn two_tasks() -> (Pushed, (String, u64, Task<Value>)) {
    let now_id = ulid::Ulid::generate().to_string();
    let later_id = ulid::Ulid::generate().to_string();
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let run_at = now_s + 3600;
    let now = TaskBuilder::new(json!({"at": "now"}))
        .task_id(TaskId::from_string(now_id.clone()))
        .build();
    let later = TaskBuilder::new(json!({"at": "later"}))
        .task_id(TaskId::from_string(later_id.clone()))
        .run_at_timestamp(run_at)
        .build();
    ((now_id, now), (later_id, run_at, later))
}

#[test]
fn the_statuses_the_tiers_write_are_apaliss() {
    for status in STATUSES {
        let parsed: Status = status.parse().unwrap();
        assert_eq!(parsed.to_string(), status);
    }
}

/// apalis-redis 1.0: `<queue>:data` (a hash of the jobs' data), `<queue>:meta:<id>`
/// (a hash with the job's `status`), `<queue>:scheduled` (a sorted set scored
/// by the run time in seconds, which every job passes through), `<queue>:active`
/// (the runnable list), and the `<queue>:done` and `<queue>:dead` sets.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_layout_is_where_the_scripts_look() {
    use ::redis::AsyncCommands as _;

    let env = Env::redis("redis_layout").await;
    let queue = env.queue.as_str();
    let config = apalis_redis::Config::default().queue(queue);
    assert_eq!(config.job_data_hash(), format!("{queue}:data"));
    assert_eq!(config.job_meta_hash(), format!("{queue}:meta"));
    assert_eq!(config.scheduled_jobs_set(), format!("{queue}:scheduled"));
    assert_eq!(config.active_jobs_list(), format!("{queue}:active"));
    assert_eq!(config.done_jobs_set(), format!("{queue}:done"));
    assert_eq!(config.dead_jobs_set(), format!("{queue}:dead"));

    let connection = apalis_redis::connect(env.url.as_str()).await.unwrap();
    let mut storage =
        apalis_redis::RedisStorage::<Value>::new(connection.clone()).with_config(config);
    let ((now_id, now), (later_id, run_at, later)) = two_tasks();
    storage.push_task(now).await.unwrap();
    storage.push_task(later).await.unwrap();

    let mut redis = connection;
    for id in [&now_id, &later_id] {
        let data: bool = redis.hexists(format!("{queue}:data"), id).await.unwrap();
        assert!(data, "`{queue}:data` has no field `{id}`");
        let status: Option<String> = redis
            .hget(format!("{queue}:meta:{id}"), "status")
            .await
            .unwrap();
        assert_eq!(status.as_deref(), Some("Pending"), "`{queue}:meta:{id}`");
    }
    // Every job passes through the scheduled set, scored by its run time in
    // seconds (one runnable now, by now), before the active list.
    let score = |id: String| {
        let (mut redis, key) = (redis.clone(), format!("{queue}:scheduled"));
        async move {
            let score: Option<f64> = redis.zscore(key, &id).await.unwrap();
            score.unwrap_or_else(|| panic!("`{id}` is not in `{queue}:scheduled`"))
        }
    };
    assert!(score(now_id).await <= (run_at - 3600 + 1) as f64);
    assert_eq!(score(later_id).await, run_at as f64);
}

/// apalis-sqlite 1.0: the `Jobs` table, a row per job with its `id`, its queue
/// in `job_type`, `status`, `run_at` (seconds), `lock_by` (the worker that took
/// it) and `done_at`.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_layout_is_where_the_sql_looks() {
    use apalis_sqlite::{SqlitePool, SqliteStorage};

    let path = std::env::temp_dir().join(format!("{}.db", unique("sqlite_layout")));
    let _guard = Guard::File(path.clone());
    let pool = SqlitePool::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .unwrap();
    SqliteStorage::<()>::setup(&pool).await.unwrap();
    let columns: Vec<(String,)> = sqlx::query_as("SELECT name FROM pragma_table_info('Jobs')")
        .fetch_all(&pool)
        .await
        .unwrap();
    let columns: Vec<&str> = columns.iter().map(|(name,)| name.as_str()).collect();
    for column in ["id", "job_type", "status", "run_at", "lock_by", "done_at"] {
        assert!(
            columns.contains(&column),
            "`Jobs` has no `{column}`: {columns:?}"
        );
    }

    let queue = "layout";
    let mut storage = SqliteStorage::<Value>::new(&pool)
        .with_config(apalis_sqlite::Config::default().queue(queue));
    let ((now_id, now), (later_id, run_at, later)) = two_tasks();
    storage.push_task(now).await.unwrap();
    storage.push_task(later).await.unwrap();

    type Row = (String, String, Option<i64>, Option<String>, Option<i64>);
    let row = |id: String| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, Row>(
                "SELECT job_type, status, run_at, lock_by, done_at FROM Jobs WHERE id = ?1",
            )
            .bind(&id)
            .fetch_optional(&pool)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no row of `Jobs` has the id `{id}`"))
        }
    };
    let (job_type, status, now_at, lock_by, done_at) = row(now_id).await;
    assert_eq!((job_type.as_str(), status.as_str()), (queue, "Pending"));
    assert!(
        now_at.is_some_and(|at| at <= run_at as i64 - 3600 + 5),
        "{now_at:?}"
    );
    assert_eq!((lock_by, done_at), (None, None));
    let (_, status, later_at, _, _) = row(later_id).await;
    assert_eq!(
        (status.as_str(), later_at),
        ("Pending", Some(run_at as i64))
    );
}

/// apalis-postgres 1.0: `apalis.jobs` with the columns the tier's SQL reads and
/// writes (`src/tier/postgres/mod.rs`: `stored` joins it, `cancel` moves a
/// `Pending` job to `Killed`, `vacuum` removes old `Done` and `Killed` ones);
/// its insert trigger notifies `apalis::job::insert` with the queue's name (the
/// workers' wake-up).
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_layout_is_where_the_sql_looks() {
    use apalis_postgres::PostgresStorage;
    use sqlx::postgres::PgListener;

    let pool = sqlx::PgPool::connect(&postgres_url()).await.unwrap();
    PostgresStorage::setup(&pool).await.unwrap();
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns
         WHERE table_schema = 'apalis' AND table_name = 'jobs'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for column in ["id", "job_type", "status", "run_at", "lock_by", "done_at"] {
        assert!(
            columns.iter().any(|name| name == column),
            "`apalis.jobs` has no `{column}`: {columns:?}"
        );
    }

    let queue = unique("postgres_layout");
    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen("apalis::job::insert").await.unwrap();
    let mut storage = PostgresStorage::<Value>::new(&pool)
        .with_config(apalis_postgres::Config::default().queue(&queue));
    let ((now_id, now), (later_id, run_at, later)) = two_tasks();
    storage.push_task(now).await.unwrap();
    storage.push_task(later).await.unwrap();

    // The job runnable now is announced, with its queue; the later one is not.
    let heard = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("apalis's insert trigger notifies")
        .unwrap();
    let payload: Value = serde_json::from_str(heard.payload()).unwrap();
    assert_eq!(payload["job_type"], json!(queue));
    assert_eq!(payload["id"], json!(now_id));

    type Row = (String, String, i64, Option<String>, bool);
    let row = |id: String| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, Row>(
                "SELECT job_type, status, extract(epoch FROM run_at)::bigint, lock_by,
                        done_at IS NOT NULL
                 FROM apalis.jobs WHERE id = $1",
            )
            .bind(&id)
            .fetch_optional(&pool)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no row of `apalis.jobs` has the id `{id}`"))
        }
    };
    let (job_type, status, now_at, lock_by, done) = row(now_id).await;
    assert_eq!(
        (job_type.as_str(), status.as_str()),
        (queue.as_str(), "Pending")
    );
    assert!(now_at <= run_at as i64 - 3600 + 5, "{now_at}");
    assert_eq!((lock_by, done), (None, false));
    let (_, status, later_at, _, _) = row(later_id).await;
    assert_eq!((status.as_str(), later_at), ("Pending", run_at as i64));
}
