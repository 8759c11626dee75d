//! What a relocated call costs the engine: the commands a Redis server receives
//! for one call, from the caller and the worker together, as the server itself
//! reports them (MONITOR: every command a client sends, one line each; the
//! commands a script runs inside the server are marked `lua` and are not round
//! trips).

use crate::support::*;

/// The round trips, caller and worker together, of one relocated call on Redis,
/// at most (the crate docs, "What a call costs the engine"): the push (apalis's
/// script), the wake-up (apalis-redis 1.0's push publishes no event for a job
/// that passes through its schedule, and every job does), the fetch that takes
/// the job, the one apalis makes at once after it and, for most calls, a third,
/// the lease and the acknowledgement (apalis's scripts), the reply
/// (one transaction), and the caller's one read of its replies (`BLMPOP`).
/// Measured 8.6 (the third fetch comes for most calls, not all); it was 11.1
/// with a withdrawal lookup per job and a second read per reply.
const ROUND_TRIPS_PER_CALL: f64 = 9.5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relocated_call_costs_the_engine_under_ten_round_trips_on_redis() {
    use futures_util::StreamExt as _;

    // A server of its own: what it receives is this test's, and nothing else's.
    let env = Env::redis_of_its_own("traffic").await;
    // No idle poll and no beat inside the window counted (a minute, 20 s): what
    // is counted is the calls'.
    let engine = r#"{"poll_ms": 60000, "heartbeat_ms": 20000}"#;
    let worker = WorkerProcess::spawn(&env, "worker_process", &[(WORKER_ENGINE, engine)]);
    let toolset = toolset(&env.remote());
    // Scripts loaded and connections open before the count starts, and the
    // worker listening for withdrawals longer than the clocks' margin: the
    // calls counted are steady ones.
    for _ in 0..3 {
        toolset.call("slow_remote", json!({"ms": 0})).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;

    let client = ::redis::Client::open(env.url.as_str()).unwrap();
    // Monitoring from here on (the connection sends MONITOR as it opens).
    let monitor = client.get_async_monitor().await.unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let heard = lines.clone();
    let listening = tokio::spawn(async move {
        let mut messages = monitor.into_on_message::<String>();
        while let Some(line) = messages.next().await {
            heard.lock().unwrap().push(line);
        }
    });
    // The MONITOR reply comes before the stream: a command sent now is seen.
    tokio::time::sleep(Duration::from_millis(200)).await;
    lines.lock().unwrap().clear();

    const CALLS: usize = 40;
    for _ in 0..CALLS {
        toolset.call("slow_remote", json!({"ms": 0})).await.unwrap();
    }
    // The last call's acknowledgement follows its reply.
    tokio::time::sleep(Duration::from_millis(300)).await;
    listening.abort();
    let lines = std::mem::take(&mut *lines.lock().unwrap());

    // `<time> [<db> <client or lua>] "COMMAND" "arg" ...`. A transaction
    // (MULTI, its commands, EXEC) is one round trip, counted at its EXEC.
    let mut by_command = std::collections::BTreeMap::<String, usize>::new();
    let mut in_transaction = BTreeSet::<String>::new();
    let mut round_trips = 0;
    for line in &lines {
        let Some((source, command)) = line
            .split_once(" [")
            .and_then(|(_, rest)| rest.split_once("] "))
        else {
            panic!("not a MONITOR line: {line}");
        };
        if source.ends_with(" lua") {
            continue;
        }
        let mut words = command.split('"').skip(1).step_by(2);
        let name = words.next().unwrap_or_default().to_ascii_uppercase();
        match name.as_str() {
            "MULTI" => {
                in_transaction.insert(source.to_owned());
            }
            "EXEC" | "DISCARD" => {
                in_transaction.remove(source);
                round_trips += 1;
            }
            _ if in_transaction.contains(source) => {}
            _ => round_trips += 1,
        }
        // A script by the start of its digest: which script it was.
        let name = match name.as_str() {
            "EVALSHA" => format!("EVALSHA {:.8}", words.next().unwrap_or_default()),
            _ => name,
        };
        *by_command.entry(name).or_default() += 1;
    }
    let per_call = |count: usize| count as f64 / CALLS as f64;
    let commands: usize = by_command.values().sum();
    eprintln!(
        "{CALLS} calls: {round_trips} round trips ({:.2} per call), {commands} commands ({:.2} per call)",
        per_call(round_trips),
        per_call(commands)
    );
    for (command, count) in &by_command {
        eprintln!(
            "  {command:<18} {count:>4}  {:.2} per call",
            per_call(*count)
        );
    }
    // What this crate's own part costs, exactly: no withdrawal lookup (the
    // worker heard every announcement since before the calls were sent), and
    // one read of the replies per call.
    let count = |command: &str| by_command.get(command).copied().unwrap_or(0);
    assert_eq!(count("EXISTS"), 0, "{by_command:?}");
    assert_eq!(count("BLMPOP"), CALLS, "{by_command:?}");
    assert_eq!(count("PUBLISH"), CALLS, "{by_command:?}");
    assert!(
        per_call(round_trips) <= ROUND_TRIPS_PER_CALL,
        "{:.2} round trips per call, more than {ROUND_TRIPS_PER_CALL}: {by_command:?}\n\
         the worker: {}",
        per_call(round_trips),
        worker.log_text()
    );
}

/// A withdrawal announced while the worker's subscription is cut (its pub/sub
/// connection killed by the server) is not lost: the worker looks its running
/// jobs up when it subscribes again, and the body stops well before the 5 s
/// backstop look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawal_missed_while_resubscribing_still_stops_the_body() {
    // A server of its own: killing its pub/sub connections touches no other test.
    let env = Env::redis_of_its_own("missed_withdrawal").await;
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let mut call = Box::pin(toolset.call("slow_remote", json!({"ms": 20_000})));
    let started = async {
        while !worker.log_text().contains("job started") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::select! {
        outcome = &mut call => panic!("the call ended before it was withdrawn: {outcome:?}"),
        () = started => {}
    }
    // Every pub/sub connection of the server (the worker's among them): the
    // withdrawal below is published while the worker subscribes again.
    let mut admin = ::redis::Client::open(env.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let killed: i64 = ::redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(killed >= 1, "no pub/sub connection to kill");
    drop(call);
    let withdrawn = Instant::now();
    let line = worker
        .wait_for_line(&["job withdrawn", "the body stopped"])
        .await;
    let stopped = withdrawn.elapsed();
    eprintln!(
        "{killed} pub/sub connections killed; withdrawal to body stopped: {stopped:?}: {line}"
    );
    assert!(
        stopped < Duration::from_secs(4),
        "the body stopped after {stopped:?}: the backstop's look, not the re-check"
    );
}
