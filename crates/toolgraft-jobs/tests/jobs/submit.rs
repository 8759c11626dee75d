//! Submit and schedule: tickets, the job store read back (`Remote::jobs`), the
//! job tools, cancellation, and a submit that never enqueued.

use crate::support::*;

on_every_tier!(
    submit_then_result,
    schedule_then_cancel,
    a_submitted_failure_comes_back_typed_and_unknown_ids_are_errors,
    a_running_job_is_cancelled_and_its_body_stopped,
    a_manifest_submits_only_right_outside_remote,
    two_queues_have_job_tools_under_names_of_their_own,
    concurrent_cancels_of_a_queued_job_all_cancel_it,
    the_job_tools_show_a_caller_its_own_jobs_only,
    a_cancel_near_the_end_answers_what_the_body_did,
);

/// The caller's toolset with the job tools bound beside it.
fn toolset_with_job_tools(remote: &Remote) -> Toolset {
    let toolset = toolset(remote);
    for tool in remote.jobs().tools() {
        toolset.bind((tool.combo(),)).unwrap();
    }
    toolset
}

/// Calls `name` and prints the exchange as a transcript line pair.
async fn transcript(toolset: &Toolset, name: &str, args: Value) -> Result<Value, ToolError> {
    let outcome = toolset.call(name, args.clone()).await;
    eprintln!("> {name} {args}");
    match &outcome {
        Ok(value) => eprintln!("< {value}"),
        Err(error) => eprintln!("< error: {error}"),
    }
    outcome
}

/// The source of a job tool's failure, as the type it is.
fn job_tool_source<T: std::error::Error + 'static>(error: &ToolError) -> &T {
    match error {
        ToolError::Body { source, .. } => source
            .downcast_ref::<T>()
            .unwrap_or_else(|| panic!("another source: {source:?}")),
        other => panic!("expected a body error, got {other:?}"),
    }
}

/// `slow_remote_submit` answers with a ticket at once; `job_status` follows it
/// from queued to finished, and `job_result` gives what `slow_remote` gives.
async fn submit_then_result(env: Env) {
    let _worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let toolset = toolset_with_job_tools(&remote);
    let waited = toolset
        .call("slow_remote", json!({"ms": 400}))
        .await
        .unwrap();
    eprintln!("--- submit then result ({})", env.url);
    let started = Instant::now();
    let ticket = transcript(&toolset, "slow_remote_submit", json!({"ms": 400}))
        .await
        .unwrap();
    let took = started.elapsed();
    eprintln!("  (the ticket came back in {took:?}; the body sleeps 400 ms)");
    assert!(took < Duration::from_millis(400), "{took:?}");
    assert_eq!(ticket["state"], "queued");
    assert_eq!(ticket["tool"], "slow");
    assert_eq!(ticket["queue"], env.queue.as_str());
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let mut states = vec![JobState::Queued];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = toolset
            .call("job_status", json!({"job_id": id}))
            .await
            .unwrap();
        let state: JobState = serde_json::from_value(status["state"].clone()).unwrap();
        if states.last() != Some(&state) {
            eprintln!("> job_status {}\n< {status}", json!({"job_id": id}));
            states.push(state);
        }
        if state.is_done() {
            break;
        }
        assert!(Instant::now() < deadline, "states so far: {states:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(states.last(), Some(&JobState::Finished), "{states:?}");
    let result = transcript(&toolset, "job_result", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(result["state"], "finished");
    assert_eq!(result["result"], waited, "what the waiting branch returns");
    match remote.jobs().result(&id).await.unwrap() {
        JobResult::Finished(value) => assert_eq!(value, waited),
        other => panic!("expected the result, got {other:?}"),
    }
    // Arguments are checked before anything is enqueued, the schedule too.
    match toolset
        .call(
            "slow_remote_submit",
            json!({"ms": 1, "delay_ms": 10, "at": "2030-01-01T00:00:00Z"}),
        )
        .await
        .unwrap_err()
    {
        ToolError::InvalidArguments { tool, field, .. } => {
            assert_eq!(
                (tool.as_str(), field.as_deref()),
                ("slow_remote_submit", Some("at"))
            );
        }
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

/// A job scheduled 2 s ahead and cancelled never runs: its file is never made,
/// while the same job scheduled 1 s ahead and left alone makes its file.
async fn schedule_then_cancel(env: Env) {
    let worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let toolset = toolset_with_job_tools(&remote);
    let cancelled = std::env::temp_dir().join(format!("{}.mark", unique("cancelled")));
    let control = std::env::temp_dir().join(format!("{}.mark", unique("control")));
    eprintln!("--- schedule then cancel ({})", env.url);
    let ticket = transcript(
        &toolset,
        "mark_remote_submit",
        json!({"path": cancelled.display().to_string(), "delay_ms": 2000}),
    )
    .await
    .unwrap();
    assert_eq!(ticket["state"], "scheduled");
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let status = transcript(&toolset, "job_status", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(status["state"], "scheduled");
    let outcome = transcript(&toolset, "job_cancel", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(outcome["state"], "cancelled");
    // The control job, left alone, runs at its time.
    let kept = toolset
        .call(
            "mark_remote_submit",
            json!({"path": control.display().to_string(), "delay_ms": 1000}),
        )
        .await
        .unwrap();
    eprintln!("  (waiting 4 s: past the cancelled job's time and a poll)");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let status = transcript(&toolset, "job_status", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(status["state"], "cancelled");
    let result = transcript(&toolset, "job_result", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(result, json!({"job_id": id, "state": "cancelled"}));
    eprintln!(
        "  {} exists: {}; the control job's file exists: {}",
        cancelled.display(),
        cancelled.exists(),
        control.exists()
    );
    assert!(!cancelled.exists(), "the cancelled job ran");
    let control_id = kept["job_id"].as_str().unwrap();
    let control_state = remote.jobs().status(control_id).await.unwrap().state;
    assert_eq!(control_state, JobState::Finished, "{}", worker.log_text());
    assert!(control.exists(), "the control job did not run");
    assert_eq!(worker.jobs_started("mark"), 1, "{}", worker.log_text());
    // Cancelling again answers the same.
    assert_eq!(
        remote.jobs().cancel(&id).await.unwrap().state,
        JobState::Cancelled
    );
    let _ = std::fs::remove_file(&control);
}

/// A failing body's error comes back through `job_result` as the same variant;
/// an id nobody submitted is a typed error, from Rust and from the tools.
async fn a_submitted_failure_comes_back_typed_and_unknown_ids_are_errors(env: Env) {
    let worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let toolset = toolset_with_job_tools(&remote);
    eprintln!("--- a failing body, an unknown id ({})", env.url);
    let ticket = transcript(&toolset, "fail_remote_submit", json!({}))
        .await
        .unwrap();
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !remote.jobs().status(&id).await.unwrap().state.is_done() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        remote.jobs().status(&id).await.unwrap().state,
        JobState::Failed
    );
    let check = |error: &ToolError| assert_failed_on_purpose(error, &worker);
    match remote.jobs().result(&id).await.unwrap() {
        JobResult::Failed(error) => check(&error),
        other => panic!("expected the failure, got {other:?}"),
    }
    let error = transcript(&toolset, "job_result", json!({"job_id": id}))
        .await
        .unwrap_err();
    check(job_tool_source::<ToolError>(&error));

    let nobody = ulid::Ulid::generate().to_string();
    for id in [nobody.as_str(), "not-a-job-id"] {
        let error = transcript(&toolset, "job_status", json!({"job_id": id}))
            .await
            .unwrap_err();
        assert!(matches!(
            job_tool_source::<JobError>(&error),
            JobError::Unknown { .. }
        ));
        for outcome in [
            remote.jobs().status(id).await.map(drop),
            remote.jobs().result(id).await.map(drop),
            remote.jobs().cancel(id).await.map(drop),
        ] {
            assert!(
                matches!(outcome, Err(JobError::Unknown { ref job, .. }) if job == id),
                "{outcome:?}"
            );
        }
    }
}

/// Two queues' job tools in one toolset, under names of their own: each follows
/// its own queue's jobs. Under the default names they collide, and binding the
/// second set says so.
async fn two_queues_have_job_tools_under_names_of_their_own(env: Env) {
    let weather = env.remote();
    let other = env
        .remote()
        .with_queue(format!("{}-other", env.queue))
        .unwrap();
    let toolset = toolset(&weather);
    let tools = [
        weather.jobs().tools_named("weather_job").unwrap(),
        other.jobs().tools_named("other_job").unwrap(),
    ];
    for tool in tools.iter().flatten() {
        toolset.bind((tool.combo(),)).unwrap();
    }
    // No worker: the job stays queued.
    let ticket = toolset
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap();
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let status = toolset
        .call("weather_job_status", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(status["state"], "queued", "{status}");
    assert_eq!(status["queue"], weather.queue_name(), "{status}");
    // A ULID reads the same in lower case.
    let lower = toolset
        .call("weather_job_status", json!({"job_id": id.to_lowercase()}))
        .await
        .unwrap();
    assert_eq!(lower, status);
    // Arguments of the wrong type are refused as arguments, not as a failure.
    for args in [json!({"job_id": 5}), json!({})] {
        let refused = toolset
            .call("weather_job_status", args.clone())
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, ToolError::InvalidArguments { field, .. } if field.as_deref() == Some("job_id")),
            "{args}: {refused:?}"
        );
    }
    let error = toolset
        .call("other_job_status", json!({"job_id": id}))
        .await
        .unwrap_err();
    assert!(matches!(
        job_tool_source::<JobError>(&error),
        JobError::Unknown { .. }
    ));
    assert!(
        error
            .to_string()
            .contains(&format!("on queue `{}`", other.queue_name())),
        "{error}"
    );
    let cancelled = toolset
        .call("weather_job_cancel", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");

    let clash = Toolset::new();
    for tool in weather.jobs().tools() {
        clash.bind((tool.combo(),)).unwrap();
    }
    let refused = clash.bind((other.jobs().tools()[0].combo(),)).unwrap_err();
    assert!(refused.to_string().contains("`job_status`"), "{refused}");
    assert!(weather.jobs().tools_named("weather job").is_err());
}

/// Cancels racing each other over the same queued jobs all answer that the job
/// is cancelled ("cancelling it again answers the same"), and none of them runs.
async fn concurrent_cancels_of_a_queued_job_all_cancel_it(env: Env) {
    let remote = env.remote();
    let toolset = toolset(&remote);
    for _ in 0..5 {
        let ticket = toolset
            .call("slow_remote_submit", json!({"ms": 1}))
            .await
            .unwrap();
        let id = ticket["job_id"].as_str().unwrap().to_owned();
        let mut cancels = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let (remote, id) = (remote.clone(), id.clone());
            cancels.spawn(async move { remote.jobs().cancel(&id).await });
        }
        while let Some(outcome) = cancels.join_next().await {
            let ticket = outcome
                .unwrap()
                .unwrap_or_else(|error| panic!("{id}: {error}"));
            assert_eq!(ticket.state, JobState::Cancelled);
        }
        assert_eq!(
            remote.jobs().status(&id).await.unwrap().state,
            JobState::Cancelled
        );
    }
}

/// A job a worker runs is cancelled by withdrawing it: the worker stops the body
/// and sends no result, and the job reads cancelled; one that ended stays ended.
async fn a_running_job_is_cancelled_and_its_body_stopped(env: Env) {
    let worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let toolset = toolset_with_job_tools(&remote);
    let ticket = toolset
        .call("slow_remote_submit", json!({"ms": 20_000}))
        .await
        .unwrap();
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    // Running by the worker's word, not the engine's: a job leased reads
    // running before the worker has looked at it, and one withdrawn then is
    // skipped, its body never started (CI saw that race).
    worker
        .wait_for_line(&["job started", &format!("job={id}")])
        .await;
    assert_eq!(
        remote.jobs().status(&id).await.unwrap().state,
        JobState::Running
    );
    let asked = Instant::now();
    let cancelled = transcript(&toolset, "job_cancel", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    while !worker.log_text().contains("the body stopped") {
        assert!(Instant::now() < deadline, "{}", worker.log_text());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!(
        "cancel to the body stopped on the worker: {:?}",
        asked.elapsed()
    );
    assert!(matches!(
        remote.jobs().result(&id).await.unwrap(),
        JobResult::NotFinished(JobTicket {
            state: JobState::Cancelled,
            ..
        })
    ));
    // An ended job is not cancelled: its result stays.
    let done = toolset
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap();
    let done = done["job_id"].as_str().unwrap().to_owned();
    while !remote.jobs().status(&done).await.unwrap().state.is_done() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(matches!(
        remote.jobs().cancel(&done).await,
        Err(JobError::NotCancellable {
            state: JobState::Finished,
            ..
        })
    ));
}

/// A manifest binds `[remote, submit]` with the registry's run-time `submit`,
/// and refuses `submit` over anything else, naming the tool and the fix.
async fn a_manifest_submits_only_right_outside_remote(env: Env) {
    let worker = WorkerProcess::start(&env);
    let whereami = whereami_tool();
    let mut bases = BaseTools::new();
    bases.add(&whereami);
    let registry = registry();
    let remote = json!({"name": "remote", "config": {"url": env.url, "queue": env.queue}});
    let manifest =
        Manifest::from_value(&json!({"tools": {"whereami": [["proxy", remote, "submit"]]}}))
            .unwrap();
    let toolset = Toolset::new();
    for (tool, outcome) in toolset.bind_manifest(&registry, &bases, &manifest) {
        outcome.unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    let caller = env.remote();
    for tool in caller.jobs().tools() {
        toolset.bind((tool.combo(),)).unwrap();
    }
    let ticket = toolset
        .call(
            "whereami_proxy_remote_submit",
            json!({"city": "Porto", "proxies": ["egress-eu"]}),
        )
        .await
        .unwrap();
    assert_eq!(ticket["tool"], "whereami_proxy");
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        if let JobResult::Finished(value) = caller.jobs().result(&id).await.unwrap() {
            break report(value);
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (answer.pid, answer.route.as_deref()),
        (worker.pid(), Some("egress-eu"))
    );

    for combo in [json!(["trace", "submit"]), json!(["submit"])] {
        let manifest = Manifest::from_value(&json!({"tools": {"whereami": [combo]}})).unwrap();
        let outcome = Toolset::new().bind_manifest(&registry, &bases, &manifest);
        match &outcome[0].1 {
            Err(
                error @ BindError::ExtensionFailed {
                    tool,
                    extension,
                    problem,
                },
            ) => {
                eprintln!("{combo}: {error}");
                assert_eq!((tool.as_str(), extension.as_str()), ("whereami", "submit"));
                assert!(problem.contains("not a `remote` branch"), "{problem}");
                assert!(problem.contains("[.., remote, submit]"), "{problem}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

/// A submit that recorded its job but could not enqueue it (the jobs file locked
/// by another process past the timeout): the caller gets a relocation error
/// naming the job; the job reads `queued` while that submit could still land,
/// then `failed` with the reason, and is no more cancellable than a failed job.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_that_never_enqueued_reads_failed_not_queued_forever() {
    let env = Env::sqlite("never_enqueued").await;
    let remote = env.remote().with_timeout(Duration::from_millis(1500));
    let toolset = toolset(&remote);
    // Connects, and makes the files.
    toolset
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap();
    let path = env.url.trim_start_matches("sqlite://").to_owned();
    let mut lock = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys, time\n\
             db = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             db.execute('BEGIN EXCLUSIVE')\n\
             print('locked', flush=True)\n\
             time.sleep(30)",
            &path,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 holds the lock");
    let mut line = String::new();
    BufReader::new(lock.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");
    let refused = toolset
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap_err();
    let _ = lock.kill();
    let _ = lock.wait();
    let ToolError::Relocation { reason, .. } = &refused else {
        panic!("expected a relocation error, got {refused:?}");
    };
    eprintln!("the submit: {refused}");
    let id = reason
        .split('`')
        .nth(1)
        .expect("the reason names the job")
        .to_owned();
    assert!(reason.contains("did not answer within 1.5s"), "{reason}");

    // Until the submit's deadline and its slack, it may still land.
    let early = remote.jobs().status(&id).await.unwrap();
    assert_eq!(early.state, JobState::Queued);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let late = remote.jobs().status(&id).await.unwrap();
    assert_eq!(late.state, JobState::Failed);
    match remote.jobs().result(&id).await.unwrap() {
        JobResult::Failed(ToolError::Relocation { reason, .. }) => {
            eprintln!("its result: {reason}");
            assert!(reason.contains("was never enqueued"), "{reason}");
        }
        other => panic!("expected a relocation failure, got {other:?}"),
    }
    match remote.jobs().cancel(&id).await {
        Err(JobError::NotCancellable { state, .. }) => assert_eq!(state, JobState::Failed),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// An engine that accepts connections and never answers: a submit and the job
/// queries each give up at the backend's timeout, naming it.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_engine_costs_the_timeout_not_more() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    // Accepts (the kernel's backlog does), never reads or writes.
    let remote = Remote::new(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .with_queue("silent")
        .unwrap()
        .with_timeout(Duration::from_millis(400));
    let toolset = toolset(&remote);
    let started = Instant::now();
    let refused = toolset
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("did not answer within 400ms"),
        "{refused}"
    );
    let id = ulid::Ulid::generate().to_string();
    for outcome in [
        remote.jobs().status(&id).await.map(drop),
        remote.jobs().result(&id).await.map(drop),
        remote.jobs().cancel(&id).await.map(drop),
    ] {
        match outcome {
            Err(JobError::Engine(message)) => {
                assert!(message.contains("did not answer within 400ms"), "{message}")
            }
            other => panic!("expected the engine's timeout, got {other:?}"),
        }
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?} for four calls");
    drop(silent);
}

/// A job id is no secret (tickets, logs and errors show it): through the job
/// tools, a job submitted for a principal is that principal's. Another caller,
/// or one without a principal, is told it is unknown, and cannot read or
/// cancel it; a job submitted without a principal is anyone's. The Rust API is
/// the operator's and sees every job.
async fn the_job_tools_show_a_caller_its_own_jobs_only(env: Env) {
    use toolgraft::context::{self, Principal};
    let remote = env.remote();
    let toolset = toolset_with_job_tools(&remote);
    // Scheduled far ahead: no worker needed, and it never runs.
    let submit = |principal: Option<&'static str>| {
        let toolset = toolset.clone();
        async move {
            let path = std::env::temp_dir().join(format!("{}.mark", unique("owned")));
            let call = toolset.call(
                "mark_remote_submit",
                json!({"path": path.display().to_string(), "delay_ms": 600_000}),
            );
            let ticket = match principal {
                Some(principal) => context::with(Principal::new(principal), call).await,
                None => call.await,
            };
            ticket.unwrap()["job_id"].as_str().unwrap().to_owned()
        }
    };
    let as_caller = |principal: Option<&'static str>, tool: &'static str, id: String| {
        let toolset = toolset.clone();
        async move {
            let call = transcript(&toolset, tool, json!({"job_id": id}));
            match principal {
                Some(principal) => context::with(Principal::new(principal), call).await,
                None => call.await,
            }
        }
    };
    let alices = submit(Some("alice")).await;
    for stranger in [Some("bob"), None] {
        for tool in ["job_status", "job_result", "job_cancel"] {
            let error = as_caller(stranger, tool, alices.clone())
                .await
                .expect_err("another's job");
            assert!(
                matches!(job_tool_source::<JobError>(&error), JobError::Unknown { job, .. } if *job == alices),
                "{stranger:?} {tool}: {error}"
            );
        }
    }
    let status = as_caller(Some("alice"), "job_status", alices.clone())
        .await
        .unwrap();
    assert_eq!(status["state"], "scheduled", "bob's cancel changed nothing");
    assert_eq!(
        remote.jobs().status(&alices).await.unwrap().state,
        JobState::Scheduled,
        "the operator sees it"
    );
    let anyones = submit(None).await;
    let status = as_caller(Some("bob"), "job_status", anyones.clone())
        .await
        .unwrap();
    assert_eq!(status["state"], "scheduled");
    for (principal, id) in [(Some("alice"), alices), (Some("bob"), anyones)] {
        let cancelled = as_caller(principal, "job_cancel", id).await.unwrap();
        assert_eq!(cancelled["state"], "cancelled");
    }
}

/// Cancels of running jobs near their bodies' ends (from 40 ms before to 10 ms
/// after): each answers what the body did, as the worker logged it: `cancelled`
/// only when the body was stopped, and "not cancellable, finished" when it ran
/// to its end (it used to answer `cancelled` for a body that ended in the last
/// ~100 ms before the worker's look).
async fn a_cancel_near_the_end_answers_what_the_body_did(env: Env) {
    let worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let toolset = toolset(&remote);
    const BODY_MS: u64 = 150;
    let mut outcomes = Vec::new();
    for (trial, before_end) in [40_i64, 25, 15, 10, 5, 2, 0, -5, -10]
        .into_iter()
        .enumerate()
    {
        let ticket = toolset
            .call("slow_remote_submit", json!({"ms": BODY_MS}))
            .await
            .unwrap();
        let id = ticket["job_id"].as_str().unwrap().to_owned();
        let deadline = Instant::now() + Duration::from_secs(20);
        let started = |log: &str| {
            log.lines()
                .any(|line| line.contains("job started") && line.contains(&id))
        };
        while !started(&worker.log_text()) {
            assert!(Instant::now() < deadline, "{}", worker.log_text());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let wait = (BODY_MS as i64 - before_end).max(0) as u64;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let answer = remote.jobs().cancel(&id).await;
        let body = loop {
            let log = worker.log_text();
            let line = log.lines().find(|line| {
                line.contains(&id)
                    && (line.contains("job finished") || line.contains("job withdrawn"))
            });
            if let Some(line) = line {
                break if line.contains("job finished") {
                    "ran to its end"
                } else {
                    "was stopped"
                };
            }
            assert!(Instant::now() < deadline, "{log}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let answered = match &answer {
            Ok(ticket) if ticket.state == JobState::Cancelled => "cancelled",
            Err(JobError::NotCancellable {
                state: JobState::Finished,
                ..
            }) => "not cancellable, finished",
            other => panic!("trial {trial}: the cancel answered {other:?}"),
        };
        eprintln!("cancel {before_end:>3} ms before the end: {answered}; the body {body}");
        outcomes.push((answered, body));
    }
    for (answered, body) in &outcomes {
        assert_eq!(
            *answered == "cancelled",
            *body == "was stopped",
            "every answer must say what the body did: {outcomes:?}"
        );
    }
}
