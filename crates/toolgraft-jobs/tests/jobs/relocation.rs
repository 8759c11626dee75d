//! Relocation: a call runs its body in a worker process and comes back as it
//! would in process (results, typed failures, progress, context, timeouts,
//! withdrawal), with the layers that stay in the caller staying there.

use crate::support::*;

on_every_tier!(
    proxy_inside_remote_runs_the_body_in_the_worker_with_the_route,
    a_cache_outside_remote_stays_in_the_caller,
    batch_inside_remote_is_one_job_and_outside_one_per_item,
    failures_come_back_typed_and_the_worker_survives,
    an_unknown_name_on_the_worker_is_an_error_not_a_hang,
    bad_arguments_are_refused_before_anything_is_enqueued,
    a_caller_timeout_names_the_job,
    a_manifest_relocates_with_the_same_workers,
    progress_from_the_worker_reaches_the_caller_in_order_before_the_reply,
    a_caller_that_stops_waiting_stops_the_body_on_the_worker,
    a_job_withdrawn_while_queued_never_runs,
    the_callers_context_reaches_the_worker_as_each_entry_says,
);

async fn a_caller_that_stops_waiting_stops_the_body_on_the_worker(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    // A call of ten seconds, dropped once it runs (what an MCP cancellation or a
    // closed HTTP stream does to the call's future).
    let mut call = Box::pin(toolset.call("slow_remote", json!({"ms": 10_000})));
    let started = worker.log_text().matches("job started").count();
    let running = async {
        while worker.log_text().matches("job started").count() == started {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::select! {
        outcome = &mut call => panic!("the call ended before it was cancelled: {outcome:?}"),
        () = running => {}
    }
    drop(call);
    let cancelled = Instant::now();
    let line = worker
        .wait_for_line(&[
            "job withdrawn (its caller stopped waiting, or it was cancelled)",
            "tool=slow ",
        ])
        .await;
    let stopped = cancelled.elapsed();
    eprintln!(
        "cancel to body stopped: {:.1} ms (seen in the log); the worker: {line}",
        stopped.as_secs_f64() * 1e3
    );
    assert!(line.contains("the body stopped, no reply"), "{line}");
    // Stopped, not finished: no reply was made, and the worker serves on.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let finished = |log: String| {
        log.lines()
            .filter(|line| line.contains("job finished") && line.contains("tool=slow "))
            .count()
    };
    assert_eq!(
        finished(worker.log_text()),
        0,
        "the body ran to its end:\n{}",
        worker.log_text()
    );
    let again = toolset.call("slow_remote", json!({"ms": 1})).await.unwrap();
    assert_eq!(again, json!(worker.pid()));
}

async fn a_job_withdrawn_while_queued_never_runs(env: Env) {
    // No worker yet: the job waits in the queue, and its caller gives up (not
    // before the job is enqueued: on a loaded machine a first connection took
    // more than 300 ms, and the job never reached the queue).
    let impatient = toolset(&env.remote().with_timeout(Duration::from_millis(1500)));
    let path = std::env::temp_dir().join(format!("{}.mark", unique("withdrawn")));
    let args = json!({"path": path.display().to_string()});
    let error = impatient.call("mark_remote", args).await.unwrap_err();
    assert!(matches!(error, ToolError::TimedOut { .. }), "{error}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let worker = WorkerProcess::start(&env);
    let line = worker
        .wait_for_line(&["job withdrawn before it ran", "tool=mark "])
        .await;
    eprintln!("{line}");
    // The worker serves the next job, and the withdrawn one never ran.
    let served = toolset(&env.remote())
        .call("slow_remote", json!({"ms": 1}))
        .await
        .unwrap();
    assert_eq!(served, json!(worker.pid()));
    assert!(!path.exists(), "the withdrawn job ran");
    assert_eq!(worker.jobs_started("mark"), 0, "{}", worker.log_text());
}

async fn progress_from_the_worker_reaches_the_caller_in_order_before_the_reply(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let started = Instant::now();
    let seen: Arc<Mutex<Vec<(Duration, context::Progress)>>> = Arc::default();
    let sink = context::ProgressSink::new({
        let seen = seen.clone();
        move |progress| seen.lock().unwrap().push((started.elapsed(), progress))
    });
    let call = toolset.call("steps_remote", json!({"steps": 5, "ms": 80}));
    let call = context::with(context::Principal::new("alice"), call);
    let answer = context::with(sink, call).await.unwrap();
    let answered = started.elapsed();
    let seen = seen.lock().unwrap().clone();
    for (at, progress) in &seen {
        eprintln!(
            "+{:>6.1} ms  {}/{:?}  {:?}",
            at.as_secs_f64() * 1e3,
            progress.progress,
            progress.total,
            progress.message
        );
    }
    eprintln!("+{:>6.1} ms  reply {answer}", answered.as_secs_f64() * 1e3);
    // The body ran in the worker, for the caller's principal.
    assert_eq!(answer["pid"], worker.pid());
    assert_eq!(answer["principal"], "alice");
    // Every report 80 ms apart is sent (the bound folds only faster ones), in
    // order, with the worker's message; the last one before the reply.
    let steps: Vec<f64> = seen.iter().map(|(_, progress)| progress.progress).collect();
    assert_eq!(steps, [1.0, 2.0, 3.0, 4.0, 5.0], "{seen:?}");
    assert!(seen.iter().all(|(_, progress)| progress.total == Some(5.0)));
    let last = &seen.last().unwrap().1;
    assert_eq!(
        last.message.as_deref(),
        Some(format!("step 5 in pid {}", worker.pid()).as_str())
    );

    // A body reporting faster than the bound: folded, in order, the newest kept.
    let seen: Arc<Mutex<Vec<f64>>> = Arc::default();
    let sink = context::ProgressSink::new({
        let seen = seen.clone();
        move |progress: context::Progress| seen.lock().unwrap().push(progress.progress)
    });
    let call = toolset.call("steps_remote", json!({"steps": 200, "ms": 1}));
    context::with(sink, call).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.windows(2).all(|pair| pair[0] < pair[1]),
        "in order: {seen:?}"
    );
    assert_eq!(
        seen.last(),
        Some(&200.0),
        "the last report is never folded away"
    );
    assert!(
        seen.len() < 200,
        "reports are folded at the bound: {} of 200 sent",
        seen.len()
    );

    // A caller that does not listen gets no reports sent.
    let quiet = toolset
        .call("steps_remote", json!({"steps": 3, "ms": 1}))
        .await
        .unwrap();
    assert_eq!(quiet["pid"], worker.pid());
}

async fn proxy_inside_remote_runs_the_body_in_the_worker_with_the_route(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let answer = toolset
        .call(
            "whereami_proxy_remote",
            json!({"city": "Lisbon", "proxies": ["egress-us"]}),
        )
        .await
        .unwrap();
    let answer = report(answer);
    eprintln!(
        "caller pid {}, body ran in pid {} with route {:?}",
        std::process::id(),
        answer.pid,
        answer.route
    );
    assert_eq!(answer.pid, worker.pid(), "the body ran in the worker");
    assert_ne!(answer.pid, std::process::id());
    assert_eq!(answer.route.as_deref(), Some("egress-us"));
    assert_eq!(worker.settled_jobs("whereami_proxy", 1).await, 1);
}

async fn the_callers_context_reaches_the_worker_as_each_entry_says(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let call = toolset.call(
        "whereami_proxy_remote",
        json!({"city": "Porto", "proxies": ["egress-eu"]}),
    );
    let call = context::with(Tenant("acme".into()), call);
    let call = context::with(ThreadsOnly(7), call);
    let answer = report(context::with(ChainDepth(3), call).await.unwrap());
    assert_eq!(answer.pid, worker.pid(), "the body ran in the worker");
    assert_eq!(
        answer.tenant.as_deref(),
        Some("acme"),
        "serialized: it arrives"
    );
    assert_eq!(answer.in_process, None, "in-process only: it stays behind");
    assert_eq!(answer.depth, 3, "the chain depth arrives");
    assert_eq!(answer.route.as_deref(), Some("egress-eu"));
}

async fn a_cache_outside_remote_stays_in_the_caller(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let args = json!({"city": "Oslo", "exp": 60});
    let first = toolset
        .call("whereami_remote_cache", args.clone())
        .await
        .unwrap();
    let second = toolset.call("whereami_remote_cache", args).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(report(first).pid, worker.pid());
    // Another key does reach the worker: the log shows it, so one job above is
    // really one job.
    toolset
        .call("whereami_remote_cache", json!({"city": "Rome", "exp": 60}))
        .await
        .unwrap();
    let jobs = worker.settled_jobs("whereami", 2).await;
    assert_eq!(jobs, 2, "{}", worker.log_text());
}

async fn batch_inside_remote_is_one_job_and_outside_one_per_item(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let items = json!({"items": [{"city": "Quito"}, {"city": "Hanoi"}, {"city": "Lima"}]});

    let inside = toolset
        .call("whereami_batch_remote", items.clone())
        .await
        .unwrap();
    assert_eq!(inside.as_array().unwrap().len(), 3);
    assert_eq!(
        worker.settled_jobs("whereami_batch", 1).await,
        1,
        "one job for the batch"
    );
    assert_eq!(worker.jobs_started("whereami"), 0);

    let outside = toolset.call("whereami_remote_batch", items).await.unwrap();
    let cities: Vec<_> = outside
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["city"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(cities, ["Quito", "Hanoi", "Lima"]);
    assert_eq!(
        worker.settled_jobs("whereami", 3).await,
        3,
        "one job per item"
    );
    assert_eq!(worker.jobs_started("whereami_batch"), 1);
}

async fn failures_come_back_typed_and_the_worker_survives(env: Env) {
    let mut worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());

    let failed = toolset.call("fail_remote", json!({})).await.unwrap_err();
    assert_failed_on_purpose(&failed, &worker);
    match toolset.call("boom_remote", json!({})).await.unwrap_err() {
        ToolError::Panicked { tool, message } => {
            assert_eq!(
                (tool.as_str(), message.as_str()),
                ("boom", "boom on purpose")
            );
        }
        other => panic!("expected a panic, got {other:?}"),
    }
    // The same worker answers the next call.
    let after = toolset
        .call("whereami_proxy_remote", json!({"city": "Bern"}))
        .await
        .unwrap();
    assert_eq!(report(after).pid, worker.pid());
    assert!(
        worker.child.try_wait().unwrap().is_none(),
        "the worker runs on"
    );
    // A tool's failure is a result: neither job ran twice.
    assert_eq!(worker.settled_jobs("fail", 1).await, 1);
    assert_eq!(worker.settled_jobs("boom", 1).await, 1);
}

async fn an_unknown_name_on_the_worker_is_an_error_not_a_hang(env: Env) {
    let _worker = WorkerProcess::start(&env);
    let remote = env.remote().with_timeout(Duration::from_secs(20));
    let toolset = toolset(&remote);
    with_unknown_tool(&toolset, &remote);
    let started = Instant::now();
    match toolset
        .call("extra_remote", json!({"city": "Nowhere"}))
        .await
        .unwrap_err()
    {
        ToolError::Relocation { tool, reason, .. } => {
            assert_eq!(tool.as_str(), "extra");
            assert!(reason.contains("has no tool `extra` bound"), "{reason}");
        }
        other => panic!("expected a relocation error, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "answered, not timed out"
    );
}

async fn bad_arguments_are_refused_before_anything_is_enqueued(env: Env) {
    let toolset = toolset(&env.remote());
    // No worker yet: a job enqueued now would run once one starts.
    for (name, args) in [
        ("whereami_proxy_remote", json!({"town": "Lisbon"})),
        (
            "whereami_proxy_remote",
            json!({"city": "Lisbon", "proxies": "egress-us"}),
        ),
        ("whereami_batch_remote", json!({"items": [{"city": 3}]})),
    ] {
        match toolset.call(name, args).await.unwrap_err() {
            ToolError::InvalidArguments { tool, .. } => assert_eq!(tool.as_str(), name),
            other => panic!("expected invalid arguments, got {other:?}"),
        }
    }
    let worker = WorkerProcess::start(&env);
    toolset
        .call("whereami_proxy_remote", json!({"city": "Lisbon"}))
        .await
        .unwrap();
    assert_eq!(
        worker.settled_jobs("whereami_proxy", 1).await,
        1,
        "{}",
        worker.log_text()
    );
    assert_eq!(worker.jobs_started("whereami_batch"), 0);
}

async fn a_caller_timeout_names_the_job(env: Env) {
    // No worker serves this queue.
    let remote = env.remote().with_timeout(Duration::from_millis(300));
    let toolset = toolset(&remote);
    let started = Instant::now();
    match toolset
        .call("slow_remote", json!({"ms": 1}))
        .await
        .unwrap_err()
    {
        error @ ToolError::TimedOut { .. } => {
            let ToolError::TimedOut {
                tool, job, after, ..
            } = &error
            else {
                unreachable!()
            };
            assert_eq!(tool.as_str(), "slow");
            let job = job.as_deref().unwrap_or_default();
            assert!(ulid::Ulid::from_string(job).is_ok(), "{job}");
            assert_eq!(*after, Duration::from_millis(300));
            assert!(error.to_string().contains(job), "{error}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// An operator's manifest binds the caller's combos; workers bound in Rust serve
/// them, since jobs name the layer input (`whereami_proxy`), not the branch.
async fn a_manifest_relocates_with_the_same_workers(env: Env) {
    let worker = WorkerProcess::start(&env);
    let whereami = whereami_tool();
    let mut bases = BaseTools::new();
    bases.add(&whereami);
    let mut registry = Registry::new();
    registry
        .register(Configured::new(Proxy::allow(["egress-eu", "egress-us"])))
        .unwrap()
        .register(Configured::<Remote>::named("remote"))
        .unwrap();
    let remote = json!({"name": "remote", "config": {"url": env.url, "queue": env.queue}});
    let manifest =
        Manifest::from_value(&json!({"tools": {"whereami": [["proxy", remote]]}})).unwrap();
    let toolset = Toolset::new();
    for (tool, outcome) in toolset.bind_manifest(&registry, &bases, &manifest) {
        outcome.unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    let answer = toolset
        .call(
            "whereami_proxy_remote",
            json!({"city": "Porto", "proxies": ["egress-eu"]}),
        )
        .await
        .unwrap();
    let answer = report(answer);
    assert_eq!(
        (answer.pid, answer.route.as_deref()),
        (worker.pid(), Some("egress-eu"))
    );

    // A config the backend cannot use refuses the tool when binding, naming the field.
    let broken = Manifest::from_value(&json!({"tools": {"whereami": [[
        {"name": "remote", "config": {"url": "amqp://broker", "queue": "weather"}}
    ]]}}))
    .unwrap();
    let outcome = Toolset::new().bind_manifest(&registry, &bases, &broken);
    match &outcome[0].1 {
        Err(BindError::InvalidConfig { field, problem, .. }) => {
            assert_eq!(field, "url");
            assert!(problem.contains("redis://"), "{problem}");
        }
        other => panic!("expected an invalid config, got {other:?}"),
    }
}
