//! A PostgreSQL server restarted under load: what was committed (jobs, replies)
//! survives it, so the work in flight resumes and no call is lost.

use crate::support::*;

/// What became of the calls made in one period of the test.
#[derive(Default, Debug)]
struct Outcomes {
    answered: usize,
    /// Failed with a transient error (a job that could not be enqueued while
    /// the server was down): `retry` acts on these.
    transient: Vec<String>,
    /// Timed out: the job of each (lost, or never answered).
    lost: Vec<String>,
    /// The longest a call took.
    longest: Duration,
}

/// 16 callers, two workers, calls of a 50 ms body one after another for 6 s;
/// 2 s in, the server stops at once (no shutdown checkpoint) and is back a
/// second later. Every call is answered or fails with a transient error, none
/// times out: no job committed before the stop is lost, the ones in flight
/// finish after it, and calls succeed again once the server is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_under_load_loses_no_call() {
    const CALLERS: usize = 16;
    let env = Env::postgres_of_its_own("restart_under_load").await;
    let dir = match &env._guard {
        Guard::Postgres(dir) => dir.clone(),
        _ => unreachable!(),
    };
    let workers = [WorkerProcess::start(&env), WorkerProcess::start(&env)];
    let remote = env.remote().with_timeout(Duration::from_secs(20));
    let toolset = Arc::new(toolset(&remote));
    toolset.call("slow_remote", json!({"ms": 1})).await.unwrap();

    let start = Instant::now();
    let (down_at, up_at) = (Duration::from_secs(2), Duration::from_secs(3));
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
                while start.elapsed() < Duration::from_secs(6) {
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
    let stopped = postgres_script("stop", &dir).status().unwrap();
    assert!(stopped.success());
    eprintln!(
        "{:>5} ms: the server stopped (immediate)",
        start.elapsed().as_millis()
    );
    tokio::time::sleep_until((start + up_at).into()).await;
    let restarted = postgres_script("restart", &dir).status().unwrap();
    assert!(restarted.success());
    eprintln!("{:>5} ms: the server is back", start.elapsed().as_millis());

    let mut totals: [Outcomes; 3] = Default::default();
    for caller in callers {
        for (total, outcome) in totals.iter_mut().zip(caller.await.unwrap()) {
            total.answered += outcome.answered;
            total.transient.extend(outcome.transient);
            total.lost.extend(outcome.lost);
            total.longest = total.longest.max(outcome.longest);
        }
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
    for (name, total) in ["before", "during", "after"].iter().zip(&totals) {
        eprintln!(
            "calls sent {name} the restart: {} answered, {} failed transiently {:?}; \
             the longest took {} ms",
            total.answered,
            total.transient.len(),
            total.transient.iter().take(2).collect::<Vec<_>>(),
            total.longest.as_millis()
        );
    }
    assert!(
        totals[0].answered > 0 && totals[2].answered > 0,
        "{totals:?}"
    );
    assert!(
        totals[0].transient.is_empty(),
        "calls sent before the stop all end well, whenever they end: {:?}",
        totals[0].transient
    );
    // Every job the engine took ends (one whose end could not be recorded
    // while the server was down runs again, as a dead worker's, at least once):
    // none is left pending or running.
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
            "jobs left unfinished after the restart: {unfinished:?}"
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
