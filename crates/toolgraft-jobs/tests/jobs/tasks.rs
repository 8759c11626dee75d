//! MCP tasks and progress over MCP: a deferred call is a job any replica
//! follows, and a worker's progress reaches an MCP client.

use crate::support::*;

on_every_tier!(mcp_tasks_are_jobs_any_replica_follows,);

/// MCP tasks for `remote` branches are their jobs: a call on one replica (a
/// caller process of a fleet, here a second server with its own toolset) is
/// followed, answered and cancelled from another, by the task id alone.
async fn mcp_tasks_are_jobs_any_replica_follows(env: Env) {
    use rmcp::model::{CallToolResponse, CancelTaskParams, GetTaskParams, TaskPayload, TaskStatus};
    let worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let replica = |remote: &Remote| {
        let tasks = toolgraft_mcp::task::Tasks::new().with_follower(remote.clone());
        toolgraft_mcp::ToolsetServer::new(toolset(remote)).with_tasks(tasks)
    };
    let (one, two) = (
        tasks_client(replica(&remote)).await,
        tasks_client(replica(&env.remote())).await,
    );
    let created = one
        .call_tool_once(
            rmcp::model::CallToolRequestParams::new("slow_remote")
                .with_arguments(json!({"ms": 200}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("a task, not {created:?}");
    };
    let id = created.task.task_id;
    assert!(id.starts_with("job."), "{id}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let ended = loop {
        let task = two.get_task(GetTaskParams::new(&id)).await.unwrap().task;
        if task.status() != TaskStatus::Working {
            break task;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let TaskPayload::Completed { result } = ended.payload else {
        panic!("completed, not {:?}", ended.task.status);
    };
    assert_eq!(
        result["structuredContent"],
        json!(worker.pid()),
        "run by the worker"
    );

    // A long one, cancelled from the other replica while it runs.
    let created = one
        .call_tool_once(
            rmcp::model::CallToolRequestParams::new("slow_remote")
                .with_arguments(json!({"ms": 20_000}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("a task, not {created:?}");
    };
    let id = created.task.task_id;
    let started = worker.log_text().matches("job started").count();
    while worker.log_text().matches("job started").count() < started.max(2) {
        assert!(Instant::now() < deadline, "{}", worker.log_text());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let asked = Instant::now();
    two.cancel_task(CancelTaskParams::new(&id)).await.unwrap();
    while !worker.log_text().contains("the body stopped") {
        assert!(Instant::now() < deadline, "{}", worker.log_text());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!(
        "tasks/cancel on another replica to the body stopped: {:?}",
        asked.elapsed()
    );
    for client in [&one, &two] {
        let task = client.get_task(GetTaskParams::new(&id)).await.unwrap().task;
        assert_eq!(task.status(), TaskStatus::Cancelled);
    }
    // Ids nobody made are unknown on every replica: a real job's id with a
    // made-up secret (a job id is no secret: tickets and logs show it), a job
    // no server followed, one of another follower, and ones that name nothing.
    let follower = format!("remote:{}", env.queue);
    let hex = |parts: Value| -> String {
        parts
            .to_string()
            .bytes()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    };
    let unhex = |id: &str| -> Value {
        let bytes: Vec<u8> = (4..id.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&id[at..at + 2], 16).unwrap())
            .collect();
        serde_json::from_slice(&bytes).unwrap()
    };
    let handle = unhex(&id)[1].as_str().unwrap().to_owned();
    let (job_id, _) = handle.split_once('.').unwrap();
    let submitted = toolset(&remote)
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap();
    let submitted = submitted["job_id"].as_str().unwrap();
    let forged_secret = format!("{job_id}.{}", "0".repeat(40));
    for forged in [
        format!("job.{}", hex(json!([follower, forged_secret]))),
        format!("job.{}", hex(json!([follower, format!("{submitted}.x")]))),
        format!(
            "job.{}",
            hex(json!([follower, "01M8TJTYMW2H8NQBKJZ4RHQT79.1"]))
        ),
        format!("job.{}", hex(json!(["remote:elsewhere", handle]))),
        "job.7b7d".to_owned(),
        "job.zz".to_owned(),
    ] {
        let unknown = two.get_task(GetTaskParams::new(&forged)).await.unwrap_err();
        assert!(
            unknown.to_string().contains("-32602"),
            "{forged}: {unknown}"
        );
        assert!(
            two.cancel_task(CancelTaskParams::new(&forged))
                .await
                .is_err(),
            "{forged}"
        );
    }
}

type TasksClient = rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig>;

/// A `2026-07-28` client of `server` that declared the tasks extension.
async fn tasks_client<H: rmcp::ServerHandler>(server: H) -> TasksClient {
    use rmcp::{ClientServiceExt, ServiceExt};
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let capabilities = serde_json::from_value(json!({
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }))
    .unwrap();
    let client = rmcp::model::ClientConfig::new(
        capabilities,
        rmcp::model::Implementation::new("jobs-test", "0"),
    );
    let lifecycle = rmcp::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    client
        .serve_with_lifecycle(client_io, lifecycle)
        .await
        .unwrap()
}

/// An MCP client that keeps the progress notifications it gets, with when.
#[derive(Clone, Default)]
struct ProgressClient {
    seen: Arc<Mutex<Vec<(Instant, rmcp::model::ProgressNotificationParam)>>>,
}

impl rmcp::ClientHandler for ProgressClient {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.seen.lock().unwrap().push((Instant::now(), params));
    }
}

/// The whole way: an MCP client calls a `remote` branch through toolgraft-mcp,
/// the body runs in a worker process and reports progress, and the client gets
/// each notification, in order, before the reply.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_from_a_worker_process_reaches_an_mcp_client() {
    use rmcp::ServiceExt;
    let env = Env::sqlite("progress_to_mcp").await;
    let worker = WorkerProcess::start(&env);
    let server = toolgraft_mcp::ToolsetServer::new(toolset(&env.remote()));
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ProgressClient::default();
    let running = client.clone().serve(client_io).await.unwrap();
    let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(1));
    let mut params = rmcp::model::CallToolRequestParams::new("steps_remote")
        .with_arguments(json!({"steps": 4, "ms": 80}).as_object().unwrap().clone());
    params.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(token));
    let started = Instant::now();
    let answer = running.call_tool(params).await.unwrap();
    let answered = started.elapsed();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let seen = client.seen.lock().unwrap().clone();
    for (at, progress) in &seen {
        eprintln!(
            "+{:>6.1} ms  notifications/progress {}/{:?} {:?}",
            at.duration_since(started).as_secs_f64() * 1e3,
            progress.progress,
            progress.total,
            progress.message
        );
    }
    eprintln!(
        "+{:>6.1} ms  reply {:?}",
        answered.as_secs_f64() * 1e3,
        answer.content[0].as_text().map(|text| &text.text)
    );
    let steps: Vec<f64> = seen.iter().map(|(_, progress)| progress.progress).collect();
    assert_eq!(steps, [1.0, 2.0, 3.0, 4.0], "{seen:?}");
    let worker_step = format!("step 4 in pid {}", worker.pid());
    assert_eq!(seen[3].1.message.as_deref(), Some(worker_step.as_str()));
    assert!(
        seen.iter()
            .all(|(at, _)| at.duration_since(started) <= answered),
        "every notification before the reply"
    );
    running.cancel().await.unwrap();
}
