//! Outages: a Redis that restarts or drops its connections mid-call, and what
//! callers, workers, retries and fleet permits do about it.

use crate::support::*;

/// Redis goes away mid-call and comes back empty (no persistence): the worker
/// process stays up and reconnects, the call in flight gets its result or
/// `TimedOut`, and calls succeed again within 5 s of the server's return.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_and_callers_survive_a_redis_restart() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = redis_on(port).await;
    let env = Env {
        url: format!("redis://127.0.0.1:{port}"),
        queue: unique("restart"),
        _guard: Guard::None,
    };
    let start = Instant::now();
    let at = || format!("{:>6.0} ms", start.elapsed().as_secs_f64() * 1e3);
    let mut worker = WorkerProcess::start(&env);
    let remote = env.remote().with_timeout(Duration::from_secs(3));
    let toolset = Arc::new(toolset(&remote));
    let first = toolset.call("slow_remote", json!({"ms": 1})).await.unwrap();
    eprintln!("{}: a call answered by worker {first}", at());

    let in_flight = {
        let toolset = toolset.clone();
        tokio::spawn(async move { toolset.call("slow_remote", json!({"ms": 1500})).await })
    };
    worker.wait_for_line(&["job started", "tool=slow"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill().unwrap();
    server.wait().unwrap();
    eprintln!("{}: redis-server killed, a 1.5 s job in flight", at());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let server = redis_on(port).await;
    let _server = Guard::Server(server);
    let back = Instant::now();
    eprintln!("{}: redis-server back, empty", at());

    match in_flight.await.unwrap() {
        Ok(pid) => eprintln!("{}: the call in flight got its result (worker {pid})", at()),
        Err(ToolError::TimedOut { job, .. }) => {
            eprintln!("{}: the call in flight timed out (job {job:?})", at())
        }
        Err(other) => panic!("the call in flight: {other}"),
    }
    let mut attempts = 0;
    loop {
        attempts += 1;
        match toolset.call("slow_remote", json!({"ms": 1})).await {
            Ok(pid) => {
                eprintln!(
                    "{}: calls succeed again, {:.2} s after the server came back ({attempts} attempts, worker {pid})",
                    at(),
                    back.elapsed().as_secs_f64()
                );
                assert_eq!(pid, json!(worker.pid()));
                break;
            }
            Err(error) => {
                assert!(
                    back.elapsed() < Duration::from_secs(5),
                    "no call succeeded within 5 s of Redis being back: {error}\n{}",
                    worker.log_text()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    assert!(
        worker.child.try_wait().unwrap().is_none(),
        "the worker process exited"
    );
    let restarted = worker.wait_for_line(&["starting it again"]).await;
    eprintln!("worker log: {restarted}");
}

/// Counts the calls that go through it and keeps each failure's message: here,
/// between `remote` and `retry`, one per attempt.
#[cfg(feature = "redis")]
#[derive(Clone, Default)]
struct Attempts(Arc<Mutex<Vec<Result<(), String>>>>);

#[cfg(feature = "redis")]
impl toolgraft::Extension for Attempts {
    type Kind = toolgraft::extension::Wrapper;
    type Locality = toolgraft::extension::Anywhere;

    fn name(&self) -> &str {
        "attempts"
    }
}

#[cfg(feature = "redis")]
impl<S: Stack> toolgraft::Wrap<S> for Attempts {
    type Params = ();

    async fn around(
        &self,
        next: toolgraft::extension::Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let outcome = next.call(input).await;
        let seen = outcome.as_ref().map(|_| ()).map_err(ToString::to_string);
        self.0.lock().unwrap().push(seen);
        outcome
    }
}

/// A fleet-wide `concurrency` permit taken for a caller that gave up while the
/// script taking it was in flight (Redis busy for 300 ms, the caller's timeout
/// 100 ms) is given back: the next call gets it at once, not after the 30 s lease.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_gives_back_the_fleet_permit_its_script_took() {
    use toolgraft::ext::Concurrency;
    use toolgraft_jobs::RedisLimits;
    const BUSY: &str = "local t = redis.call('TIME') local s = t[1] * 1e6 + t[2] \
        while true do local n = redis.call('TIME') if n[1] * 1e6 + n[2] - s > 300000 then break end end \
        return 1";
    let env = Env::redis("cancelled_permit").await;
    let store = RedisLimits::new(&env.url)
        .unwrap()
        .with_prefix(env.queue.clone());
    let ping = ping();
    let toolset = Toolset::new();
    toolset
        .bind((ping.combo().with(Concurrency::at_most(1).with_store(store)),))
        .unwrap();
    toolset.call("ping_concurrency", json!({})).await.unwrap();

    let mut other = ::redis::Client::open(env.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let busy = tokio::spawn(async move {
        ::redis::cmd("EVAL")
            .arg(BUSY)
            .arg(0)
            .query_async::<i64>(&mut other)
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let gave_up = tokio::time::timeout(
        Duration::from_millis(100),
        toolset.call("ping_concurrency", json!({})),
    )
    .await;
    assert!(gave_up.is_err(), "the caller gave up while Redis was busy");
    busy.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let next = toolset.call("ping_concurrency", json!({})).await;
    assert_eq!(
        next.map_err(|error| error.to_string()).unwrap(),
        json!("pong"),
        "the permit of the call that gave up is free again"
    );
}

/// `[remote, retry]` on a read-only tool: the caller's Redis connections are
/// killed (and refused for 600 ms); with `retry` the call is answered after
/// attempts that met the dead connection, and killed again, the same call
/// without `retry` fails with that transient relocation error.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_recovers_from_a_killed_redis_connection() {
    use toolgraft::ext::Retry;
    use toolgraft::ext::retry::RetryConfig;
    let env = Env::redis("retry_killed_connection").await;
    let _worker = WorkerProcess::start(&env);
    let link = FlakyLink::to(&env.url).await;
    let remote = Remote::new(link.url())
        .unwrap()
        .with_queue(&env.queue)
        .unwrap()
        .with_timeout(Duration::from_secs(5));
    let slow = Tool::builder()
        .name("slow")
        .description("Sleep, then report the process.")
        .read_only()
        .body(slow)
        .build()
        .unwrap();
    let attempts = Attempts::default();
    let retry = Retry::new(RetryConfig {
        attempts: 8,
        backoff_ms: 100,
        max_backoff_ms: 800,
        deadline_ms: 20_000,
    });
    let toolset = Toolset::new();
    toolset
        .bind((slow
            .combo()
            .with(remote.clone())
            .with(attempts.clone())
            .with(retry),))
        .unwrap();
    let started = Instant::now();
    let at = || format!("{:>6.0} ms", started.elapsed().as_secs_f64() * 1e3);
    let call = || toolset.call("slow_remote_attempts_retry", json!({"ms": 1}));
    call().await.expect("a first call, on live connections");
    attempts.0.lock().unwrap().clear();

    link.cut(Duration::from_millis(600));
    eprintln!("{}: the caller's Redis connections killed", at());
    let answered = call().await.expect("retry recovers");
    let seen = attempts.0.lock().unwrap().clone();
    eprintln!(
        "{}: with retry: answered by worker {answered} after {} attempts",
        at(),
        seen.len()
    );
    for (number, outcome) in seen.iter().enumerate() {
        eprintln!("  attempt {}: {outcome:?}", number + 1);
    }
    assert!(
        seen.len() >= 2,
        "the first attempt met the killed connection: {seen:?}"
    );
    assert!(seen.last().unwrap().is_ok());
    assert!(
        seen[..seen.len() - 1].iter().all(Result::is_err),
        "{seen:?}"
    );

    link.cut(Duration::from_millis(600));
    eprintln!("{}: killed again", at());
    let without = toolset
        .call("slow_remote", json!({"ms": 1}))
        .await
        .expect_err("a call without retry meets the killed connection");
    eprintln!("{}: without retry: {without}", at());
    assert!(without.is_transient(), "{without:?}");
}

/// While Redis is down, a fleet-wide `rate_limit` refuses each call promptly
/// (transient `Overloaded`, within `RedisLimits::REFUSED_WITHIN`), not after
/// the connection manager's whole reconnect backoff (about 9.5 s, past most
/// callers' deadlines); once Redis is back, calls are admitted again.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_rate_limit_refuses_promptly_while_redis_is_down() {
    use toolgraft::ext::RateLimit;
    use toolgraft_jobs::RedisLimits;
    let port = free_port();
    let mut server = redis_on(port).await;
    let store = RedisLimits::new(&format!("redis://127.0.0.1:{port}")).unwrap();
    let ping = ping();
    let toolset = Toolset::new();
    toolset
        .bind((ping
            .combo()
            .with(RateLimit::per_second(1_000).with_store(store)),))
        .unwrap();
    toolset.call("ping_rate_limit", json!({})).await.unwrap();

    server.kill().unwrap();
    server.wait().unwrap();
    for attempt in 1..=3 {
        let asked = Instant::now();
        let refused = toolset.call("ping_rate_limit", json!({})).await;
        let took = asked.elapsed();
        eprintln!("call {attempt} while Redis is down: {took:?}, {refused:?}");
        assert!(
            matches!(refused, Err(ToolError::Overloaded { .. })),
            "{refused:?}"
        );
        assert!(
            took <= RedisLimits::REFUSED_WITHIN,
            "refused after {took:?}, the bound is {:?}",
            RedisLimits::REFUSED_WITHIN
        );
    }

    let mut server = redis_on(port).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match toolset.call("ping_rate_limit", json!({})).await {
            Ok(pong) => break assert_eq!(pong, json!("pong")),
            Err(error) => assert!(
                Instant::now() < deadline,
                "still refused 10 s after Redis came back: {error}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A read-only tool that answers `"pong"` in process: what a limit counts.
#[cfg(feature = "redis")]
fn ping() -> impl BaseTool<Input = Nothing, Output = &'static str> {
    Tool::builder()
        .name("ping")
        .description("Answer pong.")
        .read_only()
        .body(|_: Nothing| async { Ok("pong") })
        .build()
        .unwrap()
}
