//! What every module's tests share: a deadline on whatever they await, the
//! arguments of a call, an rmcp client connected in process that records
//! what the server sends it, and one of protocol `2026-07-28` that follows
//! tasks.

// Logging is deprecated in the newest protocol, and still what clients show.
#![allow(deprecated)]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams,
    Implementation, JsonObject, LoggingMessageNotificationParam, ProgressNotificationParam,
    ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServerHandler, ServiceExt,
};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// `future`, or a panic naming `what` after 30 s.
pub async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// A call's arguments from a JSON object.
pub fn args(value: Value) -> JsonObject {
    value.as_object().cloned().expect("arguments are an object")
}

/// A `tools/call` of `name` with `arguments`.
pub fn request(name: &'static str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name).with_arguments(args(arguments))
}

/// A client that keeps the progress and log messages it is sent, and wakes on
/// `notifications/tools/list_changed`.
#[derive(Clone, Default)]
pub struct Client {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    pub logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    pub list_changed: Arc<Notify>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params);
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed.notify_one();
    }
}

pub type Connection = RunningService<RoleClient, Client>;

/// The data of the log messages each of `clients` received, once each has at
/// least `count`, and 50 ms later (any more would be there by then): a client
/// hands each notification to a task of its own, so the last may be recorded
/// after the answer.
#[cfg(all(feature = "upstream-http", feature = "http"))]
pub async fn logged(clients: &[&Connection], count: usize) -> Vec<Vec<Value>> {
    let said = || -> Vec<Vec<Value>> {
        clients
            .iter()
            .map(|client| {
                let logs = client.service().logs.lock().unwrap();
                logs.iter().map(|log| log.data.clone()).collect()
            })
            .collect()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while said().iter().any(|logs| logs.len() < count) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "fewer than {count} log messages each: {:?}",
            said()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    said()
}

/// `server` served in process over a duplex pipe, and a [`Client`] connected to
/// it with `initialize`.
pub async fn connect<S: ServerHandler>(server: S) -> Connection {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    within(
        "connecting",
        Client::default().serve_with_lifecycle(client_io, ClientLifecycleMode::Initialize),
    )
    .await
    .expect("the client connects")
}

/// `subscriber` as this thread's default, for one test among others running in
/// parallel in this binary.
///
/// While at most one dispatcher is alive, `tracing` caches a call site's
/// interest from the default of whichever thread reaches it first: a test with
/// no subscriber that reaches the server's span first would disable it for the
/// test that has one. A second dispatcher kept alive for the whole process makes
/// the cache ask every live dispatcher instead.
#[cfg(feature = "otel")]
pub fn subscribe(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
) -> tracing::subscriber::DefaultGuard {
    static ALWAYS_ALIVE: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    ALWAYS_ALIVE.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::new()));
    tracing::subscriber::set_default(subscriber)
}

/// A client of protocol `2026-07-28` that records nothing.
pub type NewestConnection = RunningService<RoleClient, ClientConfig>;

fn capabilities(tasks: bool) -> ClientCapabilities {
    let mut declared = json!({"elicitation": {}, "roots": {}});
    if tasks {
        declared["extensions"] = json!({"io.modelcontextprotocol/tasks": {}});
    }
    serde_json::from_value(declared).unwrap()
}

/// A `2026-07-28` session with `server`, declaring the tasks extension or not.
pub async fn connect_newest<S: ServerHandler>(server: S, tasks: bool) -> NewestConnection {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = rmcp::ServiceExt::serve(server, server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ClientConfig::new(capabilities(tasks), Implementation::new("tasks-test", "0"));
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    within(
        "connecting",
        client.serve_with_lifecycle(client_io, lifecycle),
    )
    .await
    .expect("the client connects")
}

pub async fn task_of(client: &NewestConnection, params: CallToolRequestParams) -> String {
    match within("calling", client.call_tool_once(params))
        .await
        .unwrap()
    {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            created.task.task_id
        }
        other => panic!("expected a task, got {other:?}"),
    }
}

pub async fn get(client: &NewestConnection, id: &str) -> rmcp::model::DetailedTask {
    within("tasks/get", client.get_task(GetTaskParams::new(id)))
        .await
        .unwrap()
        .task
}

/// Polls `tasks/get` until the task leaves `working`.
pub async fn settled(client: &NewestConnection, id: &str) -> rmcp::model::DetailedTask {
    within("the task to settle", async {
        loop {
            let task = get(client, id).await;
            if task.status() != TaskStatus::Working {
                return task;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// The result the task settles with; it must complete.
pub async fn completed(client: &NewestConnection, id: &str) -> rmcp::model::JsonObject {
    let done = settled(client, id).await;
    let TaskPayload::Completed { result } = done.payload else {
        panic!("completed, not {:?}", done.task.status);
    };
    result
}
