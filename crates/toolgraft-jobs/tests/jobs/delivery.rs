//! Delivery: at least once across SIGTERM and killed workers, attempts and
//! redeliveries counted together, concurrency, retention and wake-ups, and the
//! connections backends of one URL share.

use crate::support::*;

on_every_tier!(
    sigterm_finishes_the_jobs_in_flight,
    a_job_of_a_killed_worker_runs_again_on_another,
    attempts_and_redeliveries_are_counted_together,
    two_workers_serve_many_concurrent_calls,
    finished_jobs_go_after_the_retention,
    an_idle_worker_is_woken_by_each_job,
    a_worker_killed_after_the_effect_and_before_its_reply_does_it_once,
    outcomes_are_claimed_once_and_read_back_in_the_engine,
);

async fn sigterm_finishes_the_jobs_in_flight(env: Env) {
    let mut worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let mut call = tokio::spawn({
        let toolset = toolset.clone();
        async move { toolset.call("slow_remote", json!({"ms": 1500})).await }
    });
    // The job starts (the worker logs it), or the call ends first: then it never
    // reached the worker (it could not be enqueued, say), and waiting for the
    // line until the deadline would only hide why.
    tokio::select! {
        _ = worker.wait_for_line(&["job started", "tool=slow "]) => {}
        ended = &mut call => panic!(
            "the call ended before its job started: {:?}\n{}",
            ended.unwrap(),
            worker.log_text()
        ),
    }
    worker.signal("-TERM");
    let answer = call.await.unwrap();
    let answer = answer.unwrap_or_else(|error| {
        panic!(
            "the job in flight did not answer: {error}\n{}",
            worker.log_text()
        )
    });
    assert_eq!(answer, json!(worker.pid()));
    let status = worker.exit_status(Duration::from_secs(15)).await;
    assert!(status.success(), "{status:?}\n{}", worker.log_text());
    worker.wait_for_line(&["exited cleanly"]).await;
}

async fn a_job_of_a_killed_worker_runs_again_on_another(env: Env) {
    let start = Instant::now();
    let at = || format!("{:>6.2} s", start.elapsed().as_secs_f64());
    let mut first = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let call = tokio::spawn({
        let toolset = toolset.clone();
        async move { toolset.call("slow_remote", json!({"ms": 1500})).await }
    });
    let line = first.wait_for_line(&["job started", "tool=slow "]).await;
    let job = line
        .split("job=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    eprintln!("{} job {job} started on worker pid {}", at(), first.pid());
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    eprintln!(
        "{} worker pid {} killed (SIGKILL) mid-job",
        at(),
        first.pid()
    );

    let second = WorkerProcess::start(&env);
    eprintln!("{} worker pid {} started", at(), second.pid());
    second
        .wait_for_line(&["job started", &format!("job={job}")])
        .await;
    eprintln!(
        "{} job {job} started again on worker pid {}",
        at(),
        second.pid()
    );
    let answer = call.await.unwrap().expect("the re-delivered job answers");
    eprintln!("{} the caller got one result: {answer}", at());
    assert_eq!(answer, json!(second.pid()), "the second worker answered");
    assert!(
        !first.log_text().contains("job finished"),
        "the first never finished"
    );
    assert_eq!(second.settled_jobs("slow", 1).await, 1);
}

/// `[remote, retry]`: the job engine's redeliveries count against the retry's
/// attempts. With 2 attempts, the job of a killed worker runs again on a second
/// (run 2 of 2); that one killed too, a third refuses the run, and the caller
/// gets the refusal, not a third run of the body.
async fn attempts_and_redeliveries_are_counted_together(env: Env) {
    use toolgraft::ext::Retry;
    let start = Instant::now();
    let at = || format!("{:>6.2} s", start.elapsed().as_secs_f64());
    let slow = Tool::builder()
        .name("slow")
        .description("Sleep, then report the process.")
        .read_only()
        .body(slow)
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((slow.combo().with(env.remote()).with(Retry::attempts(2)),))
        .unwrap();
    let mut worker = WorkerProcess::start(&env);
    let call = tokio::spawn({
        let toolset = toolset.clone();
        async move { toolset.call("slow_remote_retry", json!({"ms": 3000})).await }
    });
    for run in 1..=2 {
        let line = worker
            .wait_for_line(&["a retried call's run", &format!("run={run} ")])
            .await;
        eprintln!("{} worker pid {}: {line}", at(), worker.pid());
        assert!(
            line.contains("attempt=1 "),
            "one attempt, run again: {line}"
        );
        worker.child.kill().unwrap();
        worker.child.wait().unwrap();
        eprintln!(
            "{} worker pid {} killed (SIGKILL) mid-job",
            at(),
            worker.pid()
        );
        worker = WorkerProcess::start(&env);
    }
    let line = worker
        .wait_for_line(&["a retried call's run", "run=3 "])
        .await;
    eprintln!("{} worker pid {}: {line}", at(), worker.pid());
    let refused = call.await.unwrap().expect_err("a third run is refused");
    eprintln!("{} the caller: {refused}", at());
    match &refused {
        ToolError::Refused {
            extension, reason, ..
        } => {
            assert_eq!(extension.as_str(), "retry");
            assert!(reason.contains("has run 2 times already"), "{reason}");
        }
        other => panic!("expected the retry's refusal, got {other:?}"),
    }
    assert!(!refused.is_transient());
    let log = worker.log_text();
    assert!(
        !log.lines()
            .any(|line| line.contains("job finished") && line.contains("ok=true")),
        "the third worker did not run the body: {log}"
    );
}

async fn two_workers_serve_many_concurrent_calls(env: Env) {
    let workers = [WorkerProcess::start(&env), WorkerProcess::start(&env)];
    let toolset = toolset(&env.remote());
    // Warm: both workers connected, the caller's connection open.
    toolset
        .call("whereami_proxy_remote", json!({"city": "warm"}))
        .await
        .unwrap();

    let mut latencies = Vec::new();
    for at in 0..20 {
        let started = Instant::now();
        toolset
            .call("whereami_proxy_remote", json!({"city": format!("seq{at}")}))
            .await
            .unwrap();
        latencies.push(started.elapsed());
    }
    latencies.sort();

    const CALLS: usize = 200;
    let started = Instant::now();
    let calls = (0..CALLS).map(|at| {
        let toolset = toolset.clone();
        tokio::spawn(async move {
            let city = format!("city{at}");
            let answer = toolset
                .call("whereami_proxy_remote", json!({"city": city}))
                .await
                .unwrap();
            (city, report(answer))
        })
    });
    let answers = futures_util::future::join_all(calls).await;
    let elapsed = started.elapsed();
    let pids: BTreeSet<u32> = workers.iter().map(WorkerProcess::pid).collect();
    let mut served = BTreeSet::new();
    for answer in answers {
        let (city, report) = answer.unwrap();
        assert_eq!(report.city, city);
        assert!(pids.contains(&report.pid), "{} is not a worker", report.pid);
        served.insert(report.pid);
    }
    eprintln!(
        "round trip (trivial body, sequential): median {:.1} ms, max {:.1} ms; \
         {CALLS} concurrent calls through 2 workers in {:.2} s = {:.0} calls/s, served by {served:?}",
        latencies[latencies.len() / 2].as_secs_f64() * 1e3,
        latencies[latencies.len() - 1].as_secs_f64() * 1e3,
        elapsed.as_secs_f64(),
        CALLS as f64 / elapsed.as_secs_f64()
    );
}

/// What the job engine still holds of the queue's jobs: Redis keys (each job's
/// metadata, its data, the done set) or SQLite or PostgreSQL rows.
async fn stored_jobs(env: &Env) -> usize {
    if env.url.starts_with("redis://") {
        #[cfg(feature = "redis")]
        {
            let client = ::redis::Client::open(env.url.as_str()).unwrap();
            let mut redis = client.get_multiplexed_async_connection().await.unwrap();
            let meta: Vec<String> = ::redis::cmd("KEYS")
                .arg(format!("{}:meta:*", env.queue))
                .query_async(&mut redis)
                .await
                .unwrap();
            let (data, done, finished): (usize, usize, usize) = ::redis::pipe()
                .hlen(format!("{}:data", env.queue))
                .scard(format!("{}:done", env.queue))
                .zcard(format!("toolgraft:finished:{}", env.queue))
                .query_async(&mut redis)
                .await
                .unwrap();
            // A finished job must leave its worker's in-flight set, or it runs
            // again when that worker is taken for dead.
            let inflight: Vec<String> = ::redis::cmd("KEYS")
                .arg(format!("{}:inflight:*", env.queue))
                .query_async(&mut redis)
                .await
                .unwrap();
            let mut running = 0;
            for set in inflight {
                let members: usize = ::redis::cmd("SCARD")
                    .arg(set)
                    .query_async(&mut redis)
                    .await
                    .unwrap();
                running += members;
            }
            return meta.len() + data + done + finished + running;
        }
    }
    #[cfg(feature = "postgres")]
    if env.url.starts_with("postgres") {
        return postgres_jobs(&env.url, &env.queue).await;
    }
    #[cfg(feature = "sqlite")]
    {
        let pool = sqlx::SqlitePool::connect(&env.url).await.unwrap();
        let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM Jobs WHERE job_type = ?1")
            .bind(&env.queue)
            .fetch_one(&pool)
            .await
            .unwrap();
        pool.close().await;
        return rows as usize;
    }
    #[allow(unreachable_code)]
    0
}

/// With a 1 s retention, the engine forgets finished jobs (after 6 s: never
/// before a dead worker's jobs could come back): what 200 jobs left behind is
/// vacuumed by the worker, so storage stays flat.
async fn finished_jobs_go_after_the_retention(env: Env) {
    let worker = WorkerProcess::spawn(
        &env,
        "worker_process",
        &[(WORKER_ENGINE, r#"{"retention_s": 1}"#)],
    );
    let toolset = toolset(&env.remote());
    let started = Instant::now();
    let mut answered = Vec::with_capacity(200);
    for at in 0..200 {
        toolset
            .call("slow_remote", json!({"ms": 0}))
            .await
            .unwrap_or_else(|error| panic!("call {at}: {error}\n{}", worker.log_text()));
        answered.push(Instant::now());
    }
    // The jobs that ended less than 6 s ago are still stored. A loaded machine
    // can take longer than that for the 200 calls, and then the first ones have
    // rightly gone already: count only those answered in the last 3 s (the rest
    // of the 6 s covers the job's end before its answer, and the count).
    let now = Instant::now();
    let recent = answered
        .iter()
        .filter(|at| now - **at < Duration::from_secs(3))
        .count();
    let left = stored_jobs(&env).await;
    eprintln!(
        "after 200 jobs in {:?} the engine holds {left} keys or rows of them ({recent} answered in the last 3 s)",
        now - started
    );
    assert!(
        left >= recent.max(1),
        "the jobs were stored: {left}, {recent} answered in the last 3 s"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = stored_jobs(&env).await;
        if left == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{left} still stored after 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("vacuumed within the retention and a beat: nothing of them is left");
}

/// A worker that neither polls nor beats for a minute still takes each job at
/// once: the caller's wake-up fetches it (without one, every call here would wait
/// for a poll and time out).
async fn an_idle_worker_is_woken_by_each_job(env: Env) {
    let worker = WorkerProcess::spawn(
        &env,
        "worker_process",
        &[(
            WORKER_ENGINE,
            r#"{"poll_ms": 60000, "heartbeat_ms": 60000}"#,
        )],
    );
    let toolset = toolset(&env.remote().with_timeout(Duration::from_secs(10)));
    for at in 0..20 {
        let pid = toolset
            .call("slow_remote", json!({"ms": 0}))
            .await
            .unwrap_or_else(|error| panic!("call {at}: {error}\n{}", worker.log_text()));
        assert_eq!(pid, json!(worker.pid()));
        // Idle between calls: the worker parks on an empty queue each time.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Backends made apart (each element of a manifest's combos is one) share one
/// connection per URL and queue: calling through three more of them opens no
/// more connections to Redis than calling through one.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_of_one_url_share_their_connections() {
    let env = Env::redis_of_its_own("shared").await;
    let worker = WorkerProcess::start(&env);
    let connections = || async {
        let client = ::redis::Client::open(env.url.as_str()).unwrap();
        let mut redis = client.get_multiplexed_async_connection().await.unwrap();
        let list: String = ::redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut redis)
            .await
            .unwrap();
        // Not counting this connection itself.
        list.lines().count() - 1
    };
    let settings = serde_json::to_value(env.remote().settings()).unwrap();
    let remote = |_| json!({"name": "remote", "config": settings.clone()});
    let whereami = whereami_tool();
    let bases = BaseTools::new().with(&whereami);
    let one = Manifest::from_value(&json!({"tools": {"whereami": [[remote(0)]]}})).unwrap();
    let toolset = Toolset::new();
    for (tool, outcome) in toolset.bind_manifest(&registry(), &bases, &one) {
        outcome.unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    toolset
        .call("whereami_remote", json!({"city": "Oslo"}))
        .await
        .unwrap();
    let with_one = connections().await;

    let four = Manifest::from_value(&json!({"tools": {"whereami": [
        [remote(1)], ["proxy", remote(2)], [remote(3), "cache"]
    ]}}))
    .unwrap();
    let other = Toolset::new();
    for (tool, outcome) in other.bind_manifest(&registry(), &bases, &four) {
        outcome.unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    for name in [
        "whereami_remote",
        "whereami_proxy_remote",
        "whereami_remote_cache",
    ] {
        other
            .call(name, json!({"city": "Oslo"}))
            .await
            .unwrap_or_else(|error| panic!("{name}: {error}\n{}", worker.log_text()));
    }
    let with_four = connections().await;
    eprintln!("connections to Redis: {with_one} with one backend, {with_four} with four");
    assert_eq!(with_one, with_four);
}

/// Effects once: `[once, dies, remote]` on a tool that says nothing of side
/// effects. The worker does the effect, `once` records its outcome in the job
/// engine, and the worker is SIGKILLed before its reply; the job runs again
/// on a second worker, which answers the recorded outcome: one effect.
async fn a_worker_killed_after_the_effect_and_before_its_reply_does_it_once(env: Env) {
    let start = Instant::now();
    let at = || format!("{:>6.2} s", start.elapsed().as_secs_f64());
    let dir = std::env::temp_dir().join(crate::support::unique("toolgraft-once"));
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = dir.join("charges");
    let mut first = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let call = tokio::spawn({
        let (toolset, path) = (toolset.clone(), ledger.display().to_string());
        async move {
            toolset
                .call("charge_once_dies_remote", json!({"path": path}))
                .await
        }
    });
    first
        .wait_for_line(&["killing this worker before its reply"])
        .await;
    let status = first.child.wait().unwrap();
    eprintln!(
        "{} worker pid {} after the effect: {status}",
        at(),
        first.pid()
    );
    assert_eq!(
        std::fs::read_to_string(&ledger).unwrap().lines().count(),
        1,
        "the first run did the effect"
    );
    let second = WorkerProcess::start(&env);
    let answer = call.await.unwrap().expect("the job run again answers");
    eprintln!("{} the caller got: {answer}", at());
    let charges = std::fs::read_to_string(&ledger).unwrap();
    eprintln!(
        "{} the effect's lines: {:?}",
        at(),
        charges.lines().collect::<Vec<_>>()
    );
    assert_eq!(charges.lines().count(), 1, "the effect happened once");
    assert_eq!(
        answer,
        json!(first.pid()),
        "the answer is the first run's outcome, recorded before the kill"
    );
    // The second worker answered. Its log is read by another thread, which may
    // not have the line yet when the reply is here: wait for it, do not peek.
    second.wait_for_line(&["job finished"]).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// `once`'s store in the engine: one claim granted among many at once, an
/// answer read back, a claim released or lapsed.
async fn outcomes_are_claimed_once_and_read_back_in_the_engine(env: Env) {
    use toolgraft::ext::once::{Claim, OutcomeKey, OutcomeStore};
    let store = Arc::new(env.remote().outcomes());
    let key = |name: &str| {
        OutcomeKey::new(
            Some(toolgraft::context::Principal::new("alice")),
            toolgraft::Name::new("charge").unwrap(),
            format!("key:{}-{name}", env.queue),
        )
    };
    let (lease, keep) = (Duration::from_secs(30), Duration::from_secs(60));
    let contenders: Vec<_> = (0..16)
        .map(|_| {
            let (store, key) = (store.clone(), key("race"));
            tokio::spawn(async move { store.claim(&key, lease, keep).await.unwrap() })
        })
        .collect();
    let mut granted = 0;
    for contender in contenders {
        match contender.await.unwrap() {
            Claim::Granted => granted += 1,
            Claim::Running { left } => assert!(left <= lease, "{left:?}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(granted, 1, "one claim among 16 at once");
    store
        .record(&key("race"), r#"{"ok":7}"#, keep)
        .await
        .unwrap();
    store.release(&key("race")).await.unwrap();
    assert_eq!(
        store.claim(&key("race"), lease, keep).await.unwrap(),
        Claim::Answered(r#"{"ok":7}"#.into()),
        "an answer is not released"
    );
    // Bob's key of the same name is his own.
    let bobs = OutcomeKey::new(
        Some(toolgraft::context::Principal::new("bob")),
        toolgraft::Name::new("charge").unwrap(),
        format!("key:{}-race", env.queue),
    );
    assert_eq!(
        store.claim(&bobs, lease, keep).await.unwrap(),
        Claim::Granted
    );

    assert_eq!(
        store.claim(&key("released"), lease, keep).await.unwrap(),
        Claim::Granted
    );
    store.release(&key("released")).await.unwrap();
    assert_eq!(
        store.claim(&key("released"), lease, keep).await.unwrap(),
        Claim::Granted
    );

    let short = Duration::from_millis(200);
    assert_eq!(
        store.claim(&key("lapsed"), short, keep).await.unwrap(),
        Claim::Granted
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        store.claim(&key("lapsed"), short, keep).await.unwrap(),
        Claim::Lapsed
    );

    // Past its keep, a key is forgotten.
    assert_eq!(
        store.claim(&key("kept"), short, short).await.unwrap(),
        Claim::Granted
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        store.claim(&key("kept"), short, short).await.unwrap(),
        Claim::Granted
    );
}
