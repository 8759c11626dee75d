//! Upstreams that misbehave (features `upstream-http` and `http`): an rmcp
//! handler of the test's own over Streamable HTTP, and a raw JSON-RPC child
//! process over stdio, each doing what a well-behaved server would not.

// Logging is deprecated in the newest protocol, and still what upstreams send.
#![allow(deprecated)]

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverRequestMethod,
    DiscoverResult, ErrorData, JsonObject, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, Tool as McpTool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::json;
use toolgraft::Registry;
use toolgraft::ext::Trace;
use toolgraft::prelude::*;
use toolgraft::runtime::manifest::Manifest;
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::http::{Guard, McpHttp, Serving};
use toolgraft_mcp::upstream::{Endpoint, Upstream, UpstreamConfig};

use crate::support::{connect, connect_newest, logged, request, within};

/// What the hostile handler does, shared by its sessions.
#[derive(Clone, Default)]
struct Hostile {
    /// `tools/list` requests seen.
    lists: Arc<AtomicUsize>,
    /// Once set, `tools/list` is never answered.
    hang_lists: Arc<AtomicBool>,
    /// Once set, `lookup` says it is not read-only (and may be destructive).
    lookup_writes: Arc<AtomicBool>,
    /// Answers `server/discover` (with its one protocol, 2025-11-25) rather
    /// than refusing it as a server written before it does.
    discovers: bool,
    /// Declares the tasks extension (and never makes a task).
    declares_tasks: bool,
    /// Set once a call of `hang` (which never answers) is cancelled.
    hang_cancelled: Arc<AtomicBool>,
    /// The levels sessions asked for with `logging/setLevel`, in order.
    levels_asked: Arc<Mutex<Vec<LoggingLevel>>>,
    /// This session's level: `chatty` logs nothing before one is set.
    level: Arc<Mutex<Option<LoggingLevel>>>,
}

fn tool(name: &'static str) -> McpTool {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    McpTool::new(name, "A hostile upstream's tool.", Arc::new(schema))
}

impl ServerHandler for Hostile {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .build();
        if self.declares_tasks {
            capabilities.extensions = Some(std::collections::BTreeMap::from([(
                rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                Default::default(),
            )]));
        }
        ServerConfig::new(capabilities)
    }

    // The older protocol: `notifications/tools/list_changed` and log
    // messages go without subscriptions.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(vec![ProtocolVersion::V_2025_11_25])
    }

    async fn discover(&self, _: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData> {
        if self.discovers {
            Ok(DiscoverResult::from_server_info(
                self.supported_protocol_versions().into_owned(),
                self.get_info(),
            ))
        } else {
            Err(ErrorData::method_not_found::<DiscoverRequestMethod>())
        }
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        if self.hang_lists.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let mut lookup = tool("lookup");
        lookup.annotations = Some(if self.lookup_writes.load(Ordering::SeqCst) {
            ToolAnnotations::new().read_only(false).destructive(true)
        } else {
            ToolAnnotations::new().read_only(true)
        });
        Ok(ListToolsResult::with_all_items(vec![
            tool("poke"),
            tool("slow"),
            tool("secret"),
            tool("hang"),
            tool("chatty"),
            lookup,
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match request.name.as_ref() {
            // Says the tool list changed.
            "poke" => {
                let _ = context.peer.notify_tool_list_changed().await;
            }
            "slow" => tokio::time::sleep(Duration::from_millis(1500)).await,
            "hang" => {
                context.ct.cancelled().await;
                self.hang_cancelled.store(true, Ordering::SeqCst);
            }
            // Logs a detail and a warning, as far as its session's level lets
            // them through, while it works.
            "chatty" => {
                let level = *self.level.lock().unwrap();
                for (at, said) in [
                    (LoggingLevel::Debug, "a detail"),
                    (LoggingLevel::Warning, "careful"),
                ] {
                    if level.is_some_and(|level| level as u8 <= at as u8) {
                        let message = LoggingMessageNotificationParam::new(at, json!(said));
                        let _ = context.peer.notify_logging_message(message).await;
                        // They go on the session's own stream, apart from the
                        // answer, and each is handled by a task of its own
                        // there: they are let arrive, in order, while the call
                        // is in flight, as a tool's log does while it works.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            // Logs what only its own caller may read.
            "secret" => {
                let _ = context
                    .peer
                    .notify_logging_message(LoggingMessageNotificationParam::new(
                        LoggingLevel::Info,
                        json!("the second caller's secret"),
                    ))
                    .await;
            }
            _ => {}
        }
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text("ok"),
        ])))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.levels_asked.lock().unwrap().push(request.level);
        *self.level.lock().unwrap() = Some(request.level);
        Ok(())
    }
}

async fn serve_hostile(hostile: &Hostile) -> Serving {
    let hostile = hostile.clone();
    // Each session has a level of its own.
    let mcp = McpHttp::for_handler(
        move || Hostile {
            level: Arc::default(),
            ..hostile.clone()
        },
        Guard::off(),
    );
    within("serve", mcp.serve(([127, 0, 0, 1], 0)))
        .await
        .expect("serves on a loopback port")
}

async fn connect_to(server: &Serving) -> Upstream {
    within(
        "connect",
        Upstream::connect(UpstreamConfig::new("up", Endpoint::http(server.url()))),
    )
    .await
    .unwrap()
}

/// An upstream that says its list changed and then never answers
/// `tools/list`: the mirror waits for it with no bound, holding the
/// upstream, so dropping the last `Upstream` neither ends the following
/// nor closes the connection (a stdio child would live on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_never_answered_does_not_keep_a_dropped_upstream_alive() {
    let hostile = Hostile::default();
    let server = serve_hostile(&hostile).await;
    let upstream = connect_to(&server).await;
    let gateway = Toolset::new();
    let mut mirror = upstream.mirror(&gateway, Registry::new(), Manifest::default());
    assert!(gateway.contains("up_poke"));

    hostile.hang_lists.store(true, Ordering::SeqCst);
    gateway.call("up_poke", json!({})).await.unwrap();
    let lists = hostile.lists.clone();
    within("the listing after list_changed", async {
        while lists.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;

    drop(upstream);
    drop(gateway);
    let ended = tokio::time::timeout(Duration::from_secs(5), mirror.next()).await;
    assert!(
        matches!(ended, Ok(None)),
        "the following of a dropped upstream ends (it hangs on a `tools/list` never answered)"
    );
    server.shutdown().await.unwrap();
}

/// An rmcp server that answers `server/discover` with protocol 2025-11-25
/// only: the link offers 2026-07-28 alone (`legacy_version: None`), so it
/// cannot connect to a server the same SDK serves at an older protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_discovers_only_an_older_protocol_is_reached() {
    let hostile = Hostile {
        discovers: true,
        ..Hostile::default()
    };
    let server = serve_hostile(&hostile).await;
    let connected =
        Upstream::connect(UpstreamConfig::new("up", Endpoint::http(server.url()))).await;
    assert!(connected.is_ok(), "{:?}", connected.err());
    server.shutdown().await.unwrap();
}

/// Two calls in flight upstream, one of an MCP client and one from code (no
/// client): the upstream's log message, sent within the call from code, is
/// relayed to the MCP client, who has nothing to do with it (`asker` counts
/// only the calls that have a client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_message_of_one_call_does_not_reach_the_client_of_another() {
    let hostile = Hostile::default();
    let server = serve_hostile(&hostile).await;
    let upstream = connect_to(&server).await;
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();
    let client = connect(ToolsetServer::new(gateway.clone())).await;

    let slow = tokio::spawn({
        let peer = client.peer().clone();
        async move { peer.call_tool(request("up_slow", json!({}))).await }
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    gateway.call("up_secret", json!({})).await.unwrap();
    within("the slow call", slow).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let logs = client.service().logs.lock().unwrap().clone();
    assert!(
        logs.iter()
            .all(|log| log.data != json!("the second caller's secret")),
        "another call's log message reached this client: {logs:?}"
    );
    client.cancel().await.unwrap();
    server.shutdown().await.unwrap();
}

/// An upstream of 2025-11-25 sends the log messages its session's level lets
/// through, and none before one is set (as a toolgraft server does): its
/// connection is asked for the least severe level a caller takes, once per
/// level, and each caller receives its own level's messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_upstream_is_asked_for_the_log_level_its_callers_take() {
    let hostile = Hostile::default();
    let server = serve_hostile(&hostile).await;
    let upstream = connect_to(&server).await;
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();
    let careful = connect(ToolsetServer::new(gateway.clone())).await;
    let curious = connect(ToolsetServer::new(gateway.clone())).await;
    for (client, level) in [
        (&careful, LoggingLevel::Warning),
        (&curious, LoggingLevel::Debug),
    ] {
        client
            .peer()
            .set_level(SetLevelRequestParams::new(level))
            .await
            .unwrap();
    }

    // rmcp's server sends log messages on the session's own stream, naming
    // no call: one is a call's while that call is the only one in flight on
    // the link, counting those that ended within 50 ms. So each call's
    // messages are in, and its grace over, before the next call goes.
    for (client, received) in [(&careful, 1), (&curious, 2), (&careful, 2)] {
        within(
            "a call",
            client.peer().call_tool(request("up_chatty", json!({}))),
        )
        .await
        .unwrap();
        logged(&[client], received).await;
        tokio::time::sleep(Duration::from_millis(60)).await;
    }

    let [careful_got, curious_got] = &logged(&[&careful, &curious], 2).await[..] else {
        unreachable!("one list per client")
    };
    assert_eq!(careful_got, &[json!("careful"), json!("careful")]);
    assert_eq!(curious_got, &[json!("a detail"), json!("careful")]);
    let asked = hostile.levels_asked.lock().unwrap().clone();
    assert_eq!(
        asked.iter().map(|level| *level as u8).collect::<Vec<_>>(),
        [LoggingLevel::Warning as u8, LoggingLevel::Debug as u8],
        "asked once per lower level: {asked:?}"
    );
    careful.cancel().await.unwrap();
    curious.cancel().await.unwrap();
    server.shutdown().await.unwrap();
}

/// A manifest's `"match"` puts `trace` on every tool that is not read-only.
/// `lookup` is read-only when first bound, so it takes none; when it says
/// upstream it now writes, the mirror rebases it, and the match entry that
/// now fits it is not applied (with `approve` in place of `trace`, a tool
/// that turned destructive upstream is called without approval).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_whose_hints_change_upstream_takes_the_combos_its_new_hints_match() {
    let hostile = Hostile::default();
    let server = serve_hostile(&hostile).await;
    let upstream = connect_to(&server).await;
    let mut registry = Registry::new();
    registry.register(Trace).unwrap();
    let manifest = Manifest::from_json(
        r#"{"match": [{"prefix": "up_lookup", "annotations": {"readOnlyHint": false}, "combos": [["trace"]]}]}"#,
    )
    .unwrap();
    let gateway = Toolset::new();
    let mut mirror = upstream.mirror(&gateway, registry, manifest);
    assert!(gateway.contains("up_lookup") && !gateway.contains("up_lookup_trace"));

    hostile.lookup_writes.store(true, Ordering::SeqCst);
    gateway.call("up_poke", json!({})).await.unwrap();
    let report = within("the next listing", mirror.next()).await.unwrap();
    assert!(
        report
            .outcomes
            .iter()
            .any(|(tool, outcome)| tool == "up_lookup" && outcome.is_ok()),
        "{report:?}"
    );
    assert_eq!(
        gateway
            .info("up_lookup")
            .unwrap()
            .presentation
            .annotations
            .destructive,
        Some(true),
        "rebased"
    );
    assert!(
        gateway.contains("up_lookup_trace"),
        "the match entry for tools that are not read-only applies to it now: {:?}",
        gateway.names()
    );
    server.shutdown().await.unwrap();
}

/// A raw MCP server over stdio (2025-06-18, no SDK): its first stderr line is
/// not UTF-8; `chatty` writes 100 KB to stderr (more than a pipe holds)
/// before answering; `huge` answers 17 MiB.
const STDIO_UPSTREAM: &str = r#"
import sys, json
sys.stderr.buffer.write(b"caf\xe9 latin-1\n"); sys.stderr.flush()
def send(message):
    sys.stdout.write(json.dumps(message) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    method, id = msg["method"], msg["id"]
    reply = lambda result: send({"jsonrpc": "2.0", "id": id, "result": result})
    if method == "initialize":
        reply({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
               "serverInfo": {"name": "hostile", "version": "0"}})
    elif method == "tools/list":
        reply({"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("chatty", "huge")]})
    elif method == "tools/call" and msg["params"]["name"] == "chatty":
        try:
            sys.stderr.write("x" * 100000 + "\n"); sys.stderr.flush()
            reply({"content": [{"type": "text", "text": "ok"}]})
        except BrokenPipeError:
            reply({"content": [{"type": "text", "text": "stderr closed"}], "isError": True})
    elif method == "tools/call":
        reply({"content": [{"type": "text", "text": "x" * (17 << 20)}]})
    elif method == "ping":
        reply({})
    else:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "unknown"}})
"#;

fn stdio_upstream(test: &str) -> UpstreamConfig {
    let path = std::env::temp_dir().join(format!(
        "toolgraft-hostile-{test}-{}.py",
        std::process::id()
    ));
    std::fs::write(&path, STDIO_UPSTREAM).unwrap();
    UpstreamConfig::new(
        "up",
        Endpoint::stdio("python3", [path.to_string_lossy().into_owned()]),
    )
}

/// One stderr line that is not UTF-8 ends the task that drains the child's
/// stderr: the pipe closes, and the child's next write to stderr fails
/// (EPIPE, or SIGPIPE kills it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stderr_line_that_is_not_utf8_does_not_stop_the_drain() {
    let upstream = within("connect", Upstream::connect(stdio_upstream("stderr")))
        .await
        .unwrap();
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answer = within("chatty", gateway.call("up_chatty", json!({}))).await;
    let answer = answer.unwrap().to_string();
    assert!(answer.contains("\"ok\""), "{answer}");
}

/// A result over the stdio transport's line bound (for the default 4 MiB
/// `max_result_bytes`, 13 MiB) is read through, not held, and fails its call at
/// once as too large: not after `call_timeout_ms` as transient (so that
/// `retry` would make it again), as when rmcp's transport dropped it unseen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_stdio_line_bound_fails_as_too_large() {
    let config = stdio_upstream("huge").with_call_timeout(Duration::from_secs(20));
    let upstream = within("connect", Upstream::connect(config)).await.unwrap();
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();
    let started = std::time::Instant::now();
    let error = within("huge", gateway.call("up_huge", json!({})))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("more than `max_result_bytes` (4194304)")
            && !error.is_transient(),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    // The connection reads on: the next call is answered.
    let answer = within("chatty", gateway.call("up_chatty", json!({}))).await;
    assert!(answer.unwrap().to_string().contains("\"ok\""));
}

/// A call that may become a task, forwarded to an upstream that declares
/// tasks and neither answers nor makes one: held from becoming a task (up to
/// 5 s). Its caller cancels it meanwhile: the upstream is told at once, and
/// no task is begun that nobody can see (it would go on, upstream too, until
/// `call_timeout_ms`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_while_held_from_becoming_a_task_is_cancelled_upstream() {
    use rmcp::model::{CallToolRequest, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    use toolgraft_mcp::task::Tasks;

    let hostile = Hostile {
        declares_tasks: true,
        ..Hostile::default()
    };
    let server = serve_hostile(&hostile).await;
    let upstream = connect_to(&server).await;
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();
    let tasks = Tasks::new().allow("up_hang");
    let client = connect_newest(ToolsetServer::new(gateway).with_tasks(tasks), true).await;
    let call = ClientRequest::CallToolRequest(CallToolRequest::new(request("up_hang", json!({}))));
    let handle = client
        .peer()
        .send_request_with_option(call, PeerRequestOptions::no_options())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    handle.cancel(None).await.unwrap();
    let cancelled = hostile.hang_cancelled.clone();
    let told = tokio::time::timeout(Duration::from_secs(3), async {
        while !cancelled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        told.is_ok(),
        "the upstream is not told the call is cancelled"
    );
    server.shutdown().await.unwrap();
}
