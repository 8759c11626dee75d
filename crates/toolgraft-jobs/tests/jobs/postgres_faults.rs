//! PostgreSQL's faults under load: the server restarted, the network cut for a
//! second. What was committed (jobs, replies) survives both, so the work in
//! flight resumes and no call is lost; a call that cannot be enqueued meanwhile
//! fails with a transient error.

use crate::support::*;

/// What became of the calls made in one period of the test.
#[derive(Default, Debug)]
struct Outcomes {
    answered: usize,
    /// Failed with a transient error (a job that could not be enqueued during
    /// the fault): `retry` acts on these.
    transient: Vec<String>,
    /// Timed out: the job of each (lost, or never answered).
    lost: Vec<String>,
    /// The longest a call took.
    longest: Duration,
}

/// Calls of a 50 ms body from `CALLERS` callers, one after another, for
/// `LOAD_FOR`, while `fault` runs (it starts `FAULT_AT` in, for a second); then
/// the outcomes before, during and after it, each call judged by when it was
/// sent. Every call is answered or fails transiently, and only one whose job
/// could not be enqueued fails; none times out, and every job the engine took
/// ends.
async fn under_load<F: std::future::Future<Output = ()>>(
    env: &Env,
    url: &str,
    fault: impl FnOnce() -> F,
) {
    const CALLERS: usize = 16;
    const LOAD_FOR: Duration = Duration::from_secs(6);
    const FAULT_AT: Duration = Duration::from_secs(2);
    let through = Env {
        url: url.to_owned(),
        queue: env.queue.clone(),
        _guard: Guard::None,
    };
    let workers = [
        WorkerProcess::start(&through),
        WorkerProcess::start(&through),
    ];
    let remote = through.remote().with_timeout(Duration::from_secs(20));
    let toolset = Arc::new(toolset(&remote));
    toolset.call("slow_remote", json!({"ms": 1})).await.unwrap();

    let start = Instant::now();
    let (down_at, up_at) = (FAULT_AT, FAULT_AT + Duration::from_secs(1));
    let period = move |at: Duration| match at {
        at if at < down_at => 0,
        at if at < up_at => 1,
        _ => 2,
    };
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let toolset = toolset.clone();
            tokio::spawn(async move {
                let mut outcomes: [Outcomes; 3] = Default::default();
                while start.elapsed() < LOAD_FOR {
                    let sent = start.elapsed();
                    let answer = toolset.call("slow_remote", json!({"ms": 50})).await;
                    let outcome = &mut outcomes[period(sent)];
                    outcome.longest = outcome.longest.max(start.elapsed() - sent);
                    match answer {
                        Ok(_) => outcome.answered += 1,
                        Err(ToolError::TimedOut { job, .. }) => {
                            outcome.lost.push(job.unwrap_or_default())
                        }
                        Err(error) if error.is_transient() => {
                            outcome.transient.push(error.to_string());
                            // As a `retry` would: not at once.
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Err(error) => panic!("a call sent at {sent:?} failed for good: {error}"),
                    }
                }
                outcomes
            })
        })
        .collect();

    tokio::time::sleep_until((start + down_at).into()).await;
    eprintln!("{:>5} ms: the fault begins", start.elapsed().as_millis());
    fault().await;
    eprintln!("{:>5} ms: the fault is over", start.elapsed().as_millis());

    let mut totals: [Outcomes; 3] = Default::default();
    for caller in callers {
        for (total, outcome) in totals.iter_mut().zip(caller.await.unwrap()) {
            total.answered += outcome.answered;
            total.transient.extend(outcome.transient);
            total.lost.extend(outcome.lost);
            total.longest = total.longest.max(outcome.longest);
        }
    }
    for (name, total) in ["before", "during", "after"].iter().zip(&totals) {
        eprintln!(
            "calls sent {name} the fault: {} answered, {} failed transiently {:?}; \
             the longest took {} ms",
            total.answered,
            total.transient.len(),
            total.transient.iter().take(2).collect::<Vec<_>>(),
            total.longest.as_millis()
        );
    }
    let pool = sqlx::PgPool::connect(&env.url).await.unwrap();
    let lost: Vec<&String> = totals.iter().flat_map(|total| &total.lost).collect();
    if !lost.is_empty() {
        let rows: Vec<(String, String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT id, status, lock_by, last_result::text FROM apalis.jobs WHERE id = ANY($1)",
        )
        .bind(lost.iter().map(|job| job.as_str()).collect::<Vec<_>>())
        .fetch_all(&pool)
        .await
        .unwrap();
        let logs: Vec<String> = workers.iter().map(|worker| worker.log_text()).collect();
        panic!(
            "{} calls timed out; their jobs as the engine has them: {rows:#?}\nworkers' logs:\n{}",
            lost.len(),
            logs.join("\n----\n")
        );
    }
    assert!(
        totals[0].answered > 0 && totals[2].answered > 0,
        "{totals:?}"
    );
    // A call fails only before its job is in the engine (its push met the
    // fault): a job the engine took is answered, whenever.
    for failure in totals.iter().flat_map(|total| &total.transient) {
        assert!(
            failure.contains("cannot enqueue"),
            "a call failed after its job was enqueued: {failure}"
        );
    }
    // Every job the engine took ends (one whose end could not be recorded
    // during the fault runs again, as a dead worker's, at least once): none is
    // left pending or running.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let unfinished: Vec<(String, String, Option<String>)> = sqlx::query_as(
            "SELECT id, status, lock_by FROM apalis.jobs WHERE job_type = $1 AND status <> 'Done'",
        )
        .bind(&env.queue)
        .fetch_all(&pool)
        .await
        .unwrap();
        if unfinished.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "jobs left unfinished after the fault: {unfinished:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for mut worker in workers {
        assert!(
            worker.child.try_wait().unwrap().is_none(),
            "a worker process exited: {}",
            worker.log_text()
        );
    }
}

/// 16 callers, two workers; 2 s in, the server stops at once (no shutdown
/// checkpoint) and is back a second later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_under_load_loses_no_call() {
    let env = Env::postgres_of_its_own("restart_under_load").await;
    let Guard::Postgres(dir) = &env._guard else {
        unreachable!()
    };
    let dir = dir.clone();
    under_load(&env, &env.url, || async move {
        let stopped = postgres_script("stop", &dir).status().unwrap();
        assert!(stopped.success());
        tokio::time::sleep(Duration::from_secs(1)).await;
        let restarted = postgres_script("restart", &dir).status().unwrap();
        assert!(restarted.success());
    })
    .await;
}

/// 16 callers, two workers, connected through a link that drops every
/// connection 2 s in and refuses new ones for a second (the server stays up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_cut_of_a_second_loses_no_postgres_call() {
    let env = Env::postgres("network_cut").await;
    let link = FlakyLink::to(&env.url).await;
    let url = link.url();
    under_load(&env, &url, || async {
        link.cut(Duration::from_secs(1));
        tokio::time::sleep(Duration::from_secs(1)).await;
    })
    .await;
}

/// Anyone who may connect may `NOTIFY`: a withdrawal announced without its row
/// (a forged one, for a job the forger saw in apalis's insert notification)
/// does not stop the job; the body runs to its end and the caller gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_withdrawal_announcement_stops_nothing() {
    let env = Env::postgres("forged_withdrawal").await;
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let call = tokio::spawn({
        let toolset = toolset.clone();
        async move { toolset.call("slow_remote", json!({"ms": 1500})).await }
    });
    let started = worker.wait_for_line(&["job started", "tool=slow "]).await;
    let job = started
        .split_whitespace()
        .find_map(|field| field.strip_prefix("job="))
        .expect("the job's id in the log line")
        .to_owned();
    // The tier's channel for the queue's withdrawals: `toolgraft_withdrawn_`
    // and the queue's 64-bit FNV-1a hash.
    let hash = env
        .queue
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    let pool = sqlx::PgPool::connect(&env.url).await.unwrap();
    // Announced until the worker says it ignored one: its listener may still
    // be connecting when the job starts (seen on a loaded machine), and a
    // notification sent before it listens reaches nobody.
    let forging = tokio::spawn({
        let channel = format!("toolgraft_withdrawn_{hash:016x}");
        let job = job.clone();
        async move {
            loop {
                sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(&channel)
                    .bind(&job)
                    .execute(&pool)
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    let ignored = worker
        .wait_for_line(&["an announced withdrawal has no row"])
        .await;
    eprintln!("{ignored}");
    let answer = call.await.unwrap();
    forging.abort();
    assert_eq!(
        answer.unwrap_or_else(|error| panic!("{error}\n{}", worker.log_text())),
        json!(worker.pid())
    );
    // Ignored while the job ran, not only after it.
    let log = worker.log_text();
    let ignored_at = log.find("an announced withdrawal has no row").unwrap();
    let finished_at = log.find("job finished").unwrap();
    assert!(ignored_at < finished_at, "{log}");
}

/// A database whose encoding is not UTF8 (notifications and replies are text)
/// is refused when the tier connects, saying what it needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_is_not_utf8_is_refused_at_connect() {
    let env = Env::postgres("not_utf8").await;
    let database = env.queue.replace('-', "_");
    let admin = sqlx::PgPool::connect(&env.url).await.unwrap();
    // The name is the test's own queue name (letters, digits, `_`).
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE {database} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
    )))
    .execute(&admin)
    .await
    .unwrap();
    let (server, _) = env.url.rsplit_once('/').unwrap();
    let ascii = Env {
        url: format!("{server}/{database}"),
        queue: env.queue.clone(),
        _guard: Guard::None,
    };
    let error = toolset(&ascii.remote())
        .call("slow_remote", json!({"ms": 1}))
        .await
        .unwrap_err();
    eprintln!("{error}");
    assert!(
        error.to_string().contains("needs a UTF8 database"),
        "{error}"
    );
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {database}")))
        .execute(&admin)
        .await
        .unwrap();
}
