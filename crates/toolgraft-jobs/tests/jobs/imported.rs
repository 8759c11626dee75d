//! rmcp tools, imported with `toolgraft_mcp::import`, run on a worker process as
//! written: progress, logging and cancellation reach their `RequestContext` there, a
//! request to the client fails naming the rule, and their failures reach an MCP
//! client in the same form as in process.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, tool, tool_router};
use toolgraft_mcp::import;

use crate::support::*;

on_every_tier!(
    an_rmcp_tool_reports_progress_from_a_worker_as_written,
    an_rmcp_tools_log_messages_reach_the_client_from_a_worker,
    an_rmcp_tool_asking_the_client_on_a_worker_fails_naming_the_rule,
    an_rmcp_tools_answers_and_failures_read_the_same_in_process_and_from_a_worker,
    an_rmcp_tools_transient_error_is_retried_in_process_and_on_a_worker,
    a_withdrawn_job_cancels_the_rmcp_tools_request,
);

/// rmcp tools as their authors write them (`long_task` as rmcp's `counter`
/// example does).
#[derive(Clone, Default)]
pub(crate) struct Authored;

#[derive(Deserialize, JsonSchema)]
pub(crate) struct LongTask {
    steps: u32,
    /// Between two steps.
    ms: u64,
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct Chatter {
    /// How many info messages, after a debug one.
    lines: u32,
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct FailAs {
    /// `result`, `protocol`, `params`, or anything else to succeed.
    how: String,
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct Flaky {
    /// The call's own counter.
    key: String,
    /// How many calls fail (transiently) before one succeeds.
    fails: u32,
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct Watch {
    /// Created when the request is cancelled.
    path: String,
}

fn internal(error: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(error.to_string(), None)
}

#[tool_router]
impl Authored {
    #[tool(
        description = "Work in steps, reporting progress.",
        annotations(read_only_hint = true)
    )]
    async fn long_task(
        &self,
        Parameters(task): Parameters<LongTask>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let token = context
            .meta
            .get_progress_token()
            .ok_or_else(|| ErrorData::invalid_params("No progress token", None))?;
        for step in 1..=task.steps {
            tokio::time::sleep(Duration::from_millis(task.ms)).await;
            let progress = ProgressNotificationParam::new(token.clone(), step.into())
                .with_total(task.steps.into())
                .with_message(format!(
                    "step {step} in pid {} for token {}",
                    std::process::id(),
                    json!(token)
                ));
            context
                .peer
                .notify_progress(progress)
                .await
                .map_err(internal)?;
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "{} steps in pid {}",
            task.steps,
            std::process::id()
        ))]))
    }

    #[tool(
        description = "Log as it works, through its peer.",
        annotations(read_only_hint = true)
    )]
    async fn chatter(
        &self,
        Parameters(chatter): Parameters<Chatter>,
        context: RequestContext<RoleServer>,
    ) -> Result<String, ErrorData> {
        // Logging, deprecated by SEP-2577, as tools written for earlier
        // protocols still do it.
        #[allow(deprecated)]
        {
            use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
            let debug = LoggingMessageNotificationParam::new(LoggingLevel::Debug, json!("detail"));
            context
                .peer
                .notify_logging_message(debug)
                .await
                .map_err(internal)?;
            for line in 1..=chatter.lines {
                let data = json!({"line": line, "pid": std::process::id()});
                let info = LoggingMessageNotificationParam::new(LoggingLevel::Info, data)
                    .with_logger("chatter");
                context
                    .peer
                    .notify_logging_message(info)
                    .await
                    .map_err(internal)?;
            }
        }
        Ok(format!(
            "{} lines in pid {}",
            chatter.lines,
            std::process::id()
        ))
    }

    #[tool(description = "Ask the user.")]
    async fn ask(&self, peer: Peer<RoleServer>) -> Result<String, ErrorData> {
        let question = serde_json::from_value(json!({
            "mode": "form",
            "message": "Go on?",
            "requestedSchema": {"type": "object", "properties": {"go": {"type": "boolean"}}},
        }))
        .map_err(internal)?;
        let answer = peer.create_elicitation(question).await.map_err(internal)?;
        Ok(format!("{:?}", answer.action))
    }

    #[tool(description = "Fail as asked.", annotations(read_only_hint = true))]
    async fn fail_as(
        &self,
        Parameters(fail): Parameters<FailAs>,
    ) -> Result<CallToolResult, ErrorData> {
        match fail.how.as_str() {
            "result" => Ok(CallToolResult::error(vec![ContentBlock::text(
                "the tool failed in its result",
            )])),
            "protocol" => Err(ErrorData::internal_error(
                "the tool failed with a protocol error",
                Some(json!({"why": "on purpose"})),
            )),
            "params" => Err(ErrorData::invalid_params("`how` says params", None)),
            _ => Ok(CallToolResult::success(vec![ContentBlock::text("fine")])),
        }
    }

    #[tool(
        description = "Fail transiently, then succeed.",
        annotations(read_only_hint = true)
    )]
    async fn flaky(&self, Parameters(flaky): Parameters<Flaky>) -> Result<String, ErrorData> {
        static CALLS: Mutex<BTreeSet<(String, u32)>> = Mutex::new(BTreeSet::new());
        let call = {
            let mut calls = CALLS.lock().unwrap();
            let call = calls.iter().filter(|(key, _)| *key == flaky.key).count() as u32;
            calls.insert((flaky.key.clone(), call));
            call
        };
        if call < flaky.fails {
            return Err(import::transient(ErrorData::internal_error(
                format!("busy at call {call}"),
                None,
            )));
        }
        Ok(format!(
            "call {call} answered in pid {}",
            std::process::id()
        ))
    }

    #[tool(
        description = "Wait until the request is cancelled.",
        annotations(read_only_hint = true)
    )]
    async fn watch(
        &self,
        Parameters(watch): Parameters<Watch>,
        context: RequestContext<RoleServer>,
    ) -> Result<String, ErrorData> {
        let ct = context.ct.clone();
        tokio::spawn(async move {
            ct.cancelled().await;
            let _ = std::fs::write(&watch.path, std::process::id().to_string());
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok("never cancelled".to_owned())
    }
}

/// What callers and workers bind of them: each behind `remote`, and in process.
pub(crate) fn bind(toolset: &Toolset, remote: &Remote) {
    let tools = import::tools(Authored::tool_router(), Authored).unwrap();
    let (ask, chatter, fail_as, flaky, long_task, watch) = (
        &tools["ask"],
        &tools["chatter"],
        &tools["fail_as"],
        &tools["flaky"],
        &tools["long_task"],
        &tools["watch"],
    );
    toolset
        .bind((
            long_task.combo().with(remote.clone()),
            ask.combo().with(remote.clone()),
            fail_as.combo().with(remote.clone()),
            chatter.combo().with(remote.clone()),
        ))
        .unwrap();
    toolset
        .bind((
            flaky.combo().with(Retry::attempts(3)),
            flaky.combo().with(remote.clone()).with(Retry::attempts(3)),
        ))
        .unwrap();
    toolset
        .bind((watch
            .combo()
            .with(remote.clone())
            // Long enough for a loaded machine to start the body first (at
            // 300 ms the job was at times withdrawn before it ran).
            .with(Timeout::new(Duration::from_secs(1))),))
        .unwrap();
}

/// An MCP client that keeps the progress notifications and log messages it gets.
#[derive(Clone, Default)]
struct Client {
    seen: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    #[allow(deprecated)] // Logging, which clients still show.
    logs: Arc<Mutex<Vec<rmcp::model::LoggingMessageNotificationParam>>>,
}

impl rmcp::ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.seen.lock().unwrap().push(params);
    }

    #[allow(deprecated)] // Logging, which clients still show.
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params);
    }
}

type Running = rmcp::service::RunningService<rmcp::RoleClient, Client>;

/// A `ToolsetServer` of the callers' toolset, and a client of it.
async fn connect(env: &Env) -> (Client, Running) {
    use rmcp::ServiceExt;
    let server = toolgraft_mcp::ToolsetServer::new(toolset(&env.remote()));
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = Client::default();
    let running = client.clone().serve(client_io).await.unwrap();
    (client, running)
}

fn call(name: &str, arguments: Value) -> rmcp::model::CallToolRequestParams {
    rmcp::model::CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments.as_object().unwrap().clone())
}

/// The client's answer as JSON: the result, or the JSON-RPC error.
async fn answer_of(client: &Running, name: &str, arguments: Value) -> Value {
    match client.call_tool(call(name, arguments)).await {
        Ok(result) => json!({"result": result}),
        Err(rmcp::ServiceError::McpError(error)) => json!({"error": error}),
        Err(other) => panic!("`{name}`: {other}"),
    }
}

/// rmcp's `counter` example's `long_task`, unchanged, behind `remote`: its
/// progress token is the client's, its `notify_progress` reaches the client,
/// in order, before the reply.
async fn an_rmcp_tool_reports_progress_from_a_worker_as_written(env: Env) {
    let worker = WorkerProcess::start(&env);
    let (client, running) = connect(&env).await;
    // rmcp's client sends a progress token of its own with every request.
    let result = running
        .call_tool(call("long_task_remote", json!({"steps": 4, "ms": 80})))
        .await
        .unwrap();
    let seen = client.seen.lock().unwrap().clone();
    eprintln!("{} progress notifications: {seen:?}", seen.len());
    assert_eq!(
        result.content[0].as_text().unwrap().text,
        format!("4 steps in pid {}", worker.pid())
    );
    // Steps 80 ms apart, folded every 50 ms: each one, unless a busy machine
    // folds two into the newer (the last one never). rmcp's client handles each
    // notification in a task of its own, so its handler may see two swapped.
    let mut steps: Vec<f64> = seen.iter().map(|progress| progress.progress).collect();
    steps.sort_by(f64::total_cmp);
    assert!(steps.len() >= 2, "{seen:?}");
    assert_eq!(steps.last(), Some(&4.0), "{seen:?}");
    steps.dedup();
    assert_eq!(steps.len(), seen.len(), "each step once: {seen:?}");
    // The tool read the client's token from its request's `_meta`.
    let token = &seen[0].progress_token;
    assert!(
        seen.iter()
            .all(|progress| progress.progress_token == *token)
    );
    let last = seen
        .iter()
        .find(|progress| progress.progress == 4.0)
        .unwrap();
    assert_eq!(
        last.message.as_deref(),
        Some(format!("step 4 in pid {} for token {}", worker.pid(), json!(token)).as_str())
    );
    assert_eq!(last.total, Some(4.0));
    running.cancel().await.unwrap();
}

/// An rmcp tool's `notify_logging_message` on a worker reaches the MCP client
/// as `notifications/message`, in order, before the reply, at the level the
/// request asks for and above (the debug message stays behind).
#[allow(deprecated)] // Logging, which clients still show.
async fn an_rmcp_tools_log_messages_reach_the_client_from_a_worker(env: Env) {
    let worker = WorkerProcess::start(&env);
    let (client, running) = connect(&env).await;
    let mut request = call("chatter_remote", json!({"lines": 4}));
    let mut meta = rmcp::model::RequestMetaObject::new();
    meta.set_log_level(rmcp::model::LoggingLevel::Info);
    request.meta = Some(meta);
    let result = running.call_tool(request).await.unwrap();
    assert_eq!(
        result.content[0].as_text().unwrap().text,
        format!("4 lines in pid {}", worker.pid())
    );
    // Notifications before the reply are handled before it; a moment for the
    // client's handler to have run them all.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let logs = client.logs.lock().unwrap().clone();
    eprintln!("{} log messages: {logs:?}", logs.len());
    // rmcp's client handles each notification in a task of its own: on this
    // multi-thread runtime its handler may see two in another order than the
    // wire's (the server sends them in order; `embed::` checks that on one thread).
    let mut seen: Vec<Value> = logs.iter().map(|log| log.data.clone()).collect();
    seen.sort_by_key(|data| data["line"].as_u64());
    let expected: Vec<Value> = (1..=4)
        .map(|line| json!({"line": line, "pid": worker.pid()}))
        .collect();
    assert_eq!(seen, expected);
    assert!(
        logs.iter()
            .all(|log| log.logger.as_deref() == Some("chatter"))
    );
    running.cancel().await.unwrap();
}

/// A request to the client cannot travel back from a worker: the tool's
/// `create_elicitation` fails, naming the rule and the fix.
async fn an_rmcp_tool_asking_the_client_on_a_worker_fails_naming_the_rule(env: Env) {
    let _worker = WorkerProcess::start(&env);
    let (_, running) = connect(&env).await;
    let answer = answer_of(&running, "ask_remote", json!({})).await;
    let message = answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    eprintln!("{message}");
    assert!(
        message.contains("`elicitation/create` asks the MCP client"),
        "{message}"
    );
    assert!(
        message.contains("rule `caller-outside-relocation` in `toolgraft::rulebook`"),
        "{message}"
    );
    assert!(message.contains("`[remote, approve]`"), "{message}");
    running.cancel().await.unwrap();
}

/// The same rmcp tool called in process and through `remote`: the client sees
/// the same answer, success and every kind of failure.
async fn an_rmcp_tools_answers_and_failures_read_the_same_in_process_and_from_a_worker(env: Env) {
    let _worker = WorkerProcess::start(&env);
    let (_, running) = connect(&env).await;
    for how in ["result", "protocol", "params", "none"] {
        let mut here = answer_of(&running, "fail_as", json!({"how": how})).await;
        let mut there = answer_of(&running, "fail_as_remote", json!({"how": how})).await;
        // Bad arguments' data names the name called, which differs.
        for (answer, called) in [(&mut here, "fail_as"), (&mut there, "fail_as_remote")] {
            if let Some(tool) = answer.pointer_mut("/error/data/tool") {
                assert_eq!(*tool, called);
                *tool = json!("(called)");
            }
        }
        eprintln!("{how}: {here}");
        assert_eq!(here, there, "{how}");
    }
    let failed = answer_of(&running, "fail_as_remote", json!({"how": "protocol"})).await;
    assert_eq!(
        failed["error"],
        json!({"code": -32603, "message": "the tool failed with a protocol error", "data": {"why": "on purpose"}})
    );
    let failed = answer_of(&running, "fail_as_remote", json!({"how": "result"})).await;
    assert_eq!(failed["result"]["isError"], true);
    assert_eq!(
        failed["result"]["content"][0]["text"],
        "tool `fail_as` failed: the tool failed in its result"
    );
    running.cancel().await.unwrap();
}

/// `import::transient` marks an rmcp tool's error transient: `retry` makes the
/// call again, around the tool in process and around `remote`.
async fn an_rmcp_tools_transient_error_is_retried_in_process_and_on_a_worker(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let key = unique("flaky");
    let here = toolset
        .call("flaky_retry", json!({"key": key, "fails": 2}))
        .await
        .unwrap();
    assert_eq!(
        here["content"][0]["text"],
        format!("call 2 answered in pid {}", std::process::id())
    );
    let there = toolset
        .call("flaky_remote_retry", json!({"key": key, "fails": 2}))
        .await
        .unwrap();
    assert_eq!(
        there["content"][0]["text"],
        format!("call 2 answered in pid {}", worker.pid())
    );
    let once = toolset
        .call("flaky_remote", json!({"key": unique("flaky"), "fails": 1}))
        .await
        .unwrap_err();
    assert!(once.is_transient(), "{once:?}");
    assert_eq!(once.to_string(), "tool `flaky` failed: busy at call 0");
}

/// A caller that stops waiting (here its timeout) withdraws the job, and the
/// worker's drop of the body cancels the rmcp tool's `context.ct`.
async fn a_withdrawn_job_cancels_the_rmcp_tools_request(env: Env) {
    let worker = WorkerProcess::start(&env);
    // Serving before the call: its second must be spent running the body, not
    // waiting for a worker process to start (a loaded machine took longer, and
    // the job was withdrawn before it ran).
    worker
        .wait_for_line(&["apalis_core::worker", "started"])
        .await;
    let toolset = toolset(&env.remote());
    let path = std::env::temp_dir().join(unique("watch"));
    let path_text = path.display().to_string();
    let late = toolset
        .call("watch_remote_timeout", json!({"path": path_text}))
        .await
        .unwrap_err();
    assert!(matches!(late, ToolError::TimedOut { .. }), "{late:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "ct never cancelled:\n{}",
            worker.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        worker.pid().to_string()
    );
    let _ = std::fs::remove_file(path);
}
