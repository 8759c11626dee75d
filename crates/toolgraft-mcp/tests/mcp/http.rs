//! MCP over Streamable HTTP (feature `http`): rmcp's HTTP client talks to
//! `McpHttp` servers on loopback ports, and raw requests check what a client that is
//! not rmcp's (or a hostile one) gets: sessions, Host and Origin allow-lists, the
//! bearer token, bad bodies.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Notify;
use toolgraft::Registry;
use toolgraft::error::BoxError;
use toolgraft::ext::{Cache, Trace};
use toolgraft::prelude::*;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::ElementSpec;
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::http::{Guard, GuardError, HttpError, McpHttp, Serving};

use crate::support::{args, within};

// ---------------------------------------------------------------- fixtures

#[derive(Deserialize, Serialize, JsonSchema)]
struct Shout {
    /// What to shout.
    text: String,
}

/// `shout` with `[trace]`, and a registry (trace, cache) for live changes.
fn toolset() -> (Toolset, Registry) {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text, loud.")
        .read_only()
        .body(|input: Shout| async move {
            if input.text.is_empty() {
                return Err::<String, BoxError>("nothing to shout".into());
            }
            Ok(input.text.to_uppercase())
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((shout.combo().with(Trace),)).unwrap();
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap();
    (toolset, registry)
}

async fn serve<S: rmcp::ServerHandler + Send + 'static>(mcp: McpHttp<S>) -> Serving {
    within("serve", mcp.serve(([127, 0, 0, 1], 0)))
        .await
        .expect("serves on a loopback port")
}

fn mcp(toolset: &Toolset, guard: Guard) -> McpHttp {
    McpHttp::new(ToolsetServer::new(toolset.clone()), guard)
}

/// A client that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct Client {
    list_changed: Arc<Notify>,
    notifications: Arc<AtomicUsize>,
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notifications.fetch_add(1, Ordering::SeqCst);
        self.list_changed.notify_one();
    }
}

type Connection = RunningService<RoleClient, Client>;

async fn connect_with(config: StreamableHttpClientTransportConfig) -> Connection {
    let transport = StreamableHttpClientTransport::from_config(config);
    within("connecting", Client::default().serve(transport))
        .await
        .expect("the client connects")
}

async fn connect(url: &str) -> Connection {
    connect_with(StreamableHttpClientTransportConfig::with_uri(
        url.to_owned(),
    ))
    .await
}

async fn call(
    client: &Connection,
    name: &str,
    arguments: Value,
) -> Result<CallToolResult, rmcp::ServiceError> {
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args(arguments));
    within(name, client.call_tool(params)).await
}

async fn names(client: &Connection) -> Vec<String> {
    within("tools/list", client.list_all_tools())
        .await
        .expect("tools/list")
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

fn text(result: &CallToolResult) -> &str {
    &result.content[0].as_text().expect("a text block").text
}

const ACCEPT: &str = "application/json, text/event-stream";

fn initialize_body() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "1.0.0"}
        }
    })
}

/// A raw `initialize` POST with `headers`, as a client that is not rmcp's sends it.
async fn raw_initialize(url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    // One client for every call: a client is built with its TLS roots (when a
    // feature of the workspace gives reqwest TLS), which the session-cap test's
    // 2,000 opens would otherwise read 2,000 times. It keeps no connection: a
    // kept one would belong to the runtime of the test that made it.
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    let client = CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .expect("a client")
    });
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .json(&initialize_body());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    within("raw initialize", request.send())
        .await
        .expect("the server answers")
}

/// The first JSON-RPC message of an answer (an event stream or a JSON body).
async fn first_message(response: reqwest::Response) -> Value {
    let is_stream = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if !is_stream {
        return within("json body", response.json()).await.expect("json");
    }
    let mut response = response;
    let mut seen = String::new();
    loop {
        let chunk = within("an event", response.chunk())
            .await
            .expect("the stream goes on")
            .expect("a message before the stream ends");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        let found = seen
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
            .filter(|data| !data.is_empty())
            .find_map(|data| serde_json::from_str::<Value>(data).ok());
        if let Some(message) = found {
            return message;
        }
    }
}

// ---------------------------------------------------------------- rmcp's client

#[tokio::test]
async fn an_http_client_lists_and_calls_every_bound_name() {
    let (toolset, _) = toolset();
    let server = serve(mcp(&toolset, Guard::off())).await;
    let client = connect(&server.url()).await;

    assert_eq!(names(&client).await, ["shout", "shout_trace"]);
    let loud = call(&client, "shout_trace", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&loud), "HI");
    let failed = call(&client, "shout", json!({"text": ""})).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text(&failed), "tool `shout` failed: nothing to shout");

    for (name, arguments) in [("shout", json!({"txt": "hi"})), ("no_such_tool", json!({}))] {
        match call(&client, name, arguments).await {
            Err(rmcp::ServiceError::McpError(error)) => {
                assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{name}: {error:?}");
            }
            other => panic!("{name}: expected invalid params, got {other:?}"),
        }
    }
    client.cancel().await.unwrap();
    within("shutdown", server.shutdown()).await.unwrap();
}

#[tokio::test]
async fn calls_over_http_do_not_wait_for_delayed_acknowledgements() {
    // An answer written in pieces (an event stream without TCP_NODELAY, as before
    // replies went back whole) waits for the client's delayed ACK (20 to 40 ms on
    // Linux loopback): every call one after another takes 20 ms or more. As they
    // are, under a millisecond each even in a debug build. A busy machine (other
    // tests, a build beside them) slows some calls, not all: the fastest tenth of
    // 100 calls is what tells a stall from a busy machine.
    let (toolset, _) = toolset();
    let server = serve(mcp(&toolset, Guard::off())).await;
    let url = server.url();
    let http = reqwest::Client::new();
    let initialized = raw_initialize(&url, &[]).await;
    let session = initialized
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    first_message(initialized).await;
    let post = |body: Value| {
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body);
        if let Some(session) = &session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    within(
        "initialized",
        post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
    )
    .await
    .unwrap();
    let mut took = Vec::with_capacity(100);
    for id in 0..100 {
        let call = json!({
            "jsonrpc": "2.0", "id": id + 2, "method": "tools/call",
            "params": {"name": "shout", "arguments": {"text": "hi"}}
        });
        let started = std::time::Instant::now();
        let answer = first_message(within("tools/call", post(call)).await.unwrap()).await;
        took.push(started.elapsed());
        assert_eq!(answer["result"]["content"][0]["text"], "HI", "{answer}");
    }
    took.sort_unstable();
    let fast_tenth = took[9];
    assert!(
        fast_tenth < Duration::from_millis(12),
        "the fastest tenth of 100 calls took up to {fast_tenth:?} each: each answer stalls"
    );
    within("shutdown", server.shutdown()).await.unwrap();
}

#[tokio::test]
async fn no_delay_sets_tcp_nodelay_on_every_connection_it_accepts() {
    // Replies go back whole, one write each, which Nagle's algorithm does not hold
    // back; an event stream (progress, a reply later than the hold, the GET
    // stream) is written an event at a time, and without TCP_NODELAY an event
    // written while the one before is unacknowledged waits for the client's
    // delayed ACK. `McpHttp::serve` listens through `no_delay`.
    use axum::serve::Listener;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut listener = toolgraft_mcp::http::no_delay(listener);
    for _ in 0..2 {
        let client = tokio::spawn(tokio::net::TcpStream::connect(addr));
        let (accepted, _) = within("accept", listener.accept()).await;
        assert!(accepted.nodelay().unwrap());
        client.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn an_answer_without_a_stream_is_one_json_body_in_a_session_and_without() {
    // A reply that is all there is to send goes back as one `application/json`
    // body: in a session (`2025-11-25`, `initialize` first) and without one
    // (`2026-07-28`, each request on its own). The session's `GET` stream, which
    // carries what is not a reply, stays an event stream.
    let (toolset, _) = toolset();
    let server = serve(mcp(&toolset, Guard::off())).await;
    let url = server.url();
    let http = reqwest::Client::new();
    let content_type = |response: &reqwest::Response| {
        response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };

    let initialized = raw_initialize(&url, &[]).await;
    assert!(content_type(&initialized).starts_with("application/json"));
    let session = initialized
        .headers()
        .get("mcp-session-id")
        .expect("the session's id survives the JSON answer")
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = within("json body", initialized.json()).await.unwrap();
    assert_eq!(body["id"], 1, "{body}");
    assert!(body["result"]["serverInfo"].is_object(), "{body}");
    let in_session = |body: Value| {
        http.post(&url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", &session)
            .json(&body)
            .send()
    };
    let accepted = within(
        "initialized",
        in_session(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
    )
    .await
    .unwrap();
    assert_eq!(accepted.status(), 202);
    for (id, arguments, is_error) in [
        (2, json!({"text": "hi"}), false),
        (3, json!({"text": ""}), true),
    ] {
        let call = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "shout_trace", "arguments": arguments}
        });
        let answer = within("tools/call", in_session(call)).await.unwrap();
        assert!(content_type(&answer).starts_with("application/json"));
        let body: Value = within("json body", answer.json()).await.unwrap();
        assert_eq!(body["id"], id, "{body}");
        assert_eq!(body["result"]["isError"], is_error, "{body}");
    }
    let invalid = json!({
        "jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "no_such_tool", "arguments": {}}
    });
    let answer = within("tools/call", in_session(invalid)).await.unwrap();
    assert!(content_type(&answer).starts_with("application/json"));
    let body: Value = within("json body", answer.json()).await.unwrap();
    assert_eq!(body["error"]["code"], -32602, "{body}");

    let events = within(
        "GET stream",
        http.get(&url)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", &session)
            .send(),
    )
    .await
    .unwrap();
    assert!(content_type(&events).starts_with("text/event-stream"));
    drop(events);

    let call = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {
            "name": "shout", "arguments": {"text": "hi"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    });
    let answer = within(
        "stateless tools/call",
        http.post(&url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "shout")
            .json(&call)
            .send(),
    )
    .await
    .unwrap();
    assert!(content_type(&answer).starts_with("application/json"));
    let body: Value = within("json body", answer.json()).await.unwrap();
    assert_eq!(body["result"]["structuredContent"], "HI", "{body}");
    within("shutdown", server.shutdown()).await.unwrap();
}

#[tokio::test]
async fn list_changed_reaches_every_http_session() {
    let (toolset, registry) = toolset();
    let server = serve(mcp(&toolset, Guard::off())).await;
    let first = connect(&server.url()).await;
    let second = connect(&server.url()).await;
    assert_eq!(names(&first).await, ["shout", "shout_trace"]);

    toolset
        .edit()
        .attach(&registry, "shout", &[ElementSpec::named("cache")])
        .commit()
        .unwrap();
    for client in [&first, &second] {
        within("list_changed", client.service().list_changed.notified()).await;
        assert_eq!(names(client).await, ["shout", "shout_cache", "shout_trace"]);
    }
    let cached = call(&second, "shout_cache", json!({"text": "hey", "exp": 60}))
        .await
        .unwrap();
    assert_eq!(text(&cached), "HEY");

    // One session ending leaves the others told of later changes.
    first.cancel().await.unwrap();
    toolset
        .edit()
        .detach("shout", &[ElementSpec::named("cache")])
        .commit()
        .unwrap();
    within("list_changed", second.service().list_changed.notified()).await;
    assert_eq!(names(&second).await, ["shout", "shout_trace"]);

    // A refused change changes nothing and announces nothing.
    let before = second.service().notifications.load(Ordering::SeqCst);
    assert!(
        toolset
            .edit()
            .attach(&registry, "shout_trace", &[ElementSpec::named("cache")])
            .commit()
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        second.service().notifications.load(Ordering::SeqCst),
        before
    );
    second.cancel().await.unwrap();
    within("shutdown", server.shutdown()).await.unwrap();
}

#[tokio::test]
async fn the_router_mounts_beside_an_applications_routes() {
    use axum::routing::get;
    let (toolset, _) = toolset();
    let app = axum::Router::new()
        .route("/health", get(|| async { "ok" }))
        .merge(mcp(&toolset, Guard::off()).router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served =
        tokio::spawn(
            async move { axum::serve(toolgraft_mcp::http::no_delay(listener), app).await },
        );

    let health = reqwest::get(format!("http://{addr}/health")).await.unwrap();
    assert_eq!(health.text().await.unwrap(), "ok");
    let client = connect(&format!("http://{addr}/mcp")).await;
    assert_eq!(names(&client).await, ["shout", "shout_trace"]);
    client.cancel().await.unwrap();
    served.abort();
}

// ---------------------------------------------------------------- sessions

#[tokio::test]
async fn sessions_have_ids_are_separate_and_end_with_delete() {
    let (toolset, _) = toolset();
    let server = serve(mcp(&toolset, Guard::off())).await;
    let url = server.url();
    let http = reqwest::Client::new();

    let opened = raw_initialize(&url, &[]).await;
    assert_eq!(opened.status(), 200);
    let session = opened
        .headers()
        .get("mcp-session-id")
        .expect("initialize opens a session")
        .to_str()
        .unwrap()
        .to_owned();
    let answer = first_message(opened).await;
    assert_eq!(answer["result"]["serverInfo"]["name"], "toolgraft");
    assert_eq!(
        answer["result"]["capabilities"]["tools"]["listChanged"],
        true
    );

    let other = raw_initialize(&url, &[]).await;
    let other_session = other.headers().get("mcp-session-id").unwrap().clone();
    assert_ne!(
        other_session.to_str().unwrap(),
        session,
        "one id per session"
    );

    let list = |session: Option<&str>| {
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialized = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(initialized.status(), 202);

    let listed = list(Some(&session)).await.unwrap();
    assert_eq!(listed.status(), 200);
    let tools = first_message(listed).await;
    assert_eq!(tools["result"]["tools"][1]["name"], "shout_trace");

    // A session id the server never gave: 404 (the client must initialize again).
    assert_eq!(list(Some("not-a-session")).await.unwrap().status(), 404);

    let deleted = http
        .delete(&url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    // 204: the session has ended (rmcp's 202 reads as a failure to the official
    // Python SDK).
    assert_eq!(deleted.status(), 204);
    assert_eq!(list(Some(&session)).await.unwrap().status(), 404);
    within("shutdown", server.shutdown()).await.unwrap();
}

/// An rmcp handler of the application's own: prompts, no toolgraft.
#[derive(Clone)]
struct Notes;

impl rmcp::ServerHandler for Notes {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_prompts()
                .build(),
        )
    }

    async fn list_prompts(
        &self,
        _: Option<rmcp::model::PaginatedRequestParams>,
        _: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, rmcp::ErrorData> {
        let prompt = rmcp::model::Prompt::new("summarize", Some("Summarize the notes."), None);
        Ok(rmcp::model::ListPromptsResult::with_all_items(vec![prompt]))
    }
}

#[tokio::test]
async fn a_handler_of_ones_own_is_served_behind_the_same_guard() {
    let guard = Guard::bearer("0123456789abcdef").unwrap();
    let server = serve(McpHttp::for_handler(|| Notes, guard)).await;
    let url = server.url();
    let bearer = [("authorization", "Bearer 0123456789abcdef")];

    assert_eq!(raw_initialize(&url, &[]).await.status(), 401, "the token");
    let foreign = [bearer[0], ("host", "evil.example")];
    assert_eq!(
        raw_initialize(&url, &foreign).await.status(),
        403,
        "the Host"
    );

    let initialized = raw_initialize(&url, &bearer).await;
    assert_eq!(initialized.status(), 200);
    let session = initialized.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let http = reqwest::Client::new();
    let post = |body: Value| {
        http.post(&url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .header("authorization", bearer[0].1)
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", &session)
            .json(&body)
            .send()
    };
    let notified = post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(within("initialized", notified).await.unwrap().status(), 202);
    let listed = within(
        "prompts/list",
        post(json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/list"})),
    )
    .await
    .unwrap();
    assert!(
        listed.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body: Value = within("json body", listed.json()).await.unwrap();
    assert_eq!(body["result"]["prompts"][0]["name"], "summarize", "{body}");
    within("shutdown", server.shutdown()).await.unwrap();
}

// ---------------------------------------------------------------- DNS rebinding

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused_loopback_ones_accepted() {
    let (toolset, _) = toolset();
    let server = serve(mcp(&toolset, Guard::off())).await;
    let url = server.url();
    let own = server.local_addr().to_string();
    let loopback_origin = format!("http://{own}");
    let localhost_origin = format!("http://localhost:{}", server.local_addr().port());

    // DNS rebinding: a page on evil.example resolves its name to 127.0.0.1.
    let attack = raw_initialize(
        &url,
        &[("host", "evil.example"), ("origin", "http://evil.example")],
    )
    .await;
    assert_eq!(attack.status(), 403);
    let foreign_origin = raw_initialize(&url, &[("origin", "http://evil.example")]).await;
    assert_eq!(foreign_origin.status(), 403);
    let foreign_host = raw_initialize(&url, &[("host", "evil.example")]).await;
    assert_eq!(foreign_host.status(), 403);
    let bad_origin = raw_initialize(&url, &[("origin", "not an origin")]).await;
    assert_eq!(bad_origin.status(), 403);

    for headers in [
        vec![],
        vec![("origin", loopback_origin.as_str())],
        vec![
            ("host", own.as_str()),
            ("origin", localhost_origin.as_str()),
        ],
    ] {
        let accepted = raw_initialize(&url, &headers).await;
        assert_eq!(accepted.status(), 200, "{headers:?}");
        assert!(first_message(accepted).await["result"].is_object());
    }
    within("shutdown", server.shutdown()).await.unwrap();
}

#[tokio::test]
async fn the_allow_lists_are_the_operators_to_set() {
    let (toolset, _) = toolset();
    let server = serve(mcp(
        &toolset,
        Guard::off()
            .allow_hosts(["mcp.example.com"])
            .unwrap()
            .allow_origins(["https://app.example.com"])
            .unwrap(),
    ))
    .await;
    let url = server.url();
    let app = [
        ("host", "mcp.example.com"),
        ("origin", "https://app.example.com"),
    ];
    assert_eq!(raw_initialize(&url, &app).await.status(), 200);
    // The loopback names are no longer on the lists.
    assert_eq!(raw_initialize(&url, &[]).await.status(), 403);
    let local_page = [
        ("host", "mcp.example.com"),
        ("origin", "http://localhost:3000"),
    ];
    assert_eq!(raw_initialize(&url, &local_page).await.status(), 403);
    within("shutdown", server.shutdown()).await.unwrap();

    // Entries that could never match are refused when configuring.
    for refused in [
        Guard::off().allow_hosts(["https://mcp.example.com"]),
        Guard::off().allow_hosts([""]),
        Guard::off().allow_origins(["app.example.com"]),
        Guard::off().allow_origins(["https://app.example.com/path"]),
    ] {
        let error = refused.unwrap_err();
        assert!(
            matches!(error, GuardError::BadAllowListEntry { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("allow-list entry"), "{error}");
    }
}

#[tokio::test]
async fn serve_stays_on_loopback_unless_told_otherwise() {
    let (toolset, _) = toolset();
    for addr in [[0, 0, 0, 0], [192, 0, 2, 1]] {
        let refused = mcp(&toolset, Guard::off()).serve((addr, 0)).await;
        match refused {
            Err(HttpError::NotLoopback { addr: refused }) => {
                assert_eq!(
                    refused.ip().to_string(),
                    std::net::Ipv4Addr::from(addr).to_string()
                );
            }
            other => panic!("expected NotLoopback, got {other:?}"),
        }
    }
    // Every loopback address is fine.
    let server = mcp(&toolset, Guard::off())
        .serve(([127, 0, 0, 2], 0))
        .await
        .unwrap();
    assert_eq!(server.local_addr().ip().to_string(), "127.0.0.2");
    server.shutdown().await.unwrap();

    // A port in use is a typed error naming the address.
    let taken = serve(mcp(&toolset, Guard::off())).await;
    let again = mcp(&toolset, Guard::off()).serve(taken.local_addr()).await;
    assert!(
        matches!(&again, Err(HttpError::Bind { addr, .. }) if *addr == taken.local_addr()),
        "{again:?}"
    );
    taken.shutdown().await.unwrap();
}

// ---------------------------------------------------------------- bearer token

#[tokio::test]
async fn a_bearer_token_is_required_when_configured() {
    let (toolset, _) = toolset();
    let server = serve(mcp(
        &toolset,
        Guard::bearer("s3cret-t0ken-0123456789a").unwrap(),
    ))
    .await;
    let url = server.url();

    for headers in [
        vec![],
        vec![("authorization", "Bearer wrong")],
        vec![("authorization", "Bearer s3cret-t0ken-0123456789")],
        vec![("authorization", "Basic czNjcmV0LXQwa2Vu")],
        vec![("authorization", "s3cret-t0ken-0123456789a")],
    ] {
        let refused = raw_initialize(&url, &headers).await;
        assert_eq!(refused.status(), 401, "{headers:?}");
        let challenge = refused
            .headers()
            .get("www-authenticate")
            .expect("a challenge")
            .to_str()
            .unwrap();
        assert!(challenge.starts_with("Bearer "), "{challenge}");
    }
    // The scheme's case does not matter (RFC 9110).
    let ok = raw_initialize(
        &url,
        &[("authorization", "bearer s3cret-t0ken-0123456789a")],
    )
    .await;
    assert_eq!(ok.status(), 200);

    // rmcp's client with the token lists and calls.
    let config = StreamableHttpClientTransportConfig::with_uri(url.clone())
        .auth_header("s3cret-t0ken-0123456789a");
    let client = connect_with(config).await;
    assert_eq!(names(&client).await, ["shout", "shout_trace"]);
    client.cancel().await.unwrap();

    // The DNS-rebinding check still holds for a client with the token.
    let attack = raw_initialize(
        &url,
        &[
            ("authorization", "Bearer s3cret-t0ken-0123456789a"),
            ("origin", "http://evil.example"),
        ],
    )
    .await;
    assert_eq!(attack.status(), 403);
    within("shutdown", server.shutdown()).await.unwrap();

    for bad in [
        "",
        "two words",
        "quote\"",
        "\u{e9}t\u{e9}",
        "=",
        &"x".repeat(4097),
    ] {
        let error = Guard::bearer(bad).unwrap_err();
        assert!(matches!(error, GuardError::BadToken { .. }), "{error}");
    }
    // The token is never quoted.
    let error = Guard::bearer("my secret").unwrap_err().to_string();
    assert!(!error.contains("secret"), "{error}");
}

// ---------------------------------------------------------------- hostile input

#[tokio::test]
async fn hostile_bodies_get_http_errors_and_the_server_goes_on() {
    let (toolset, _) = toolset();
    let server = serve(mcp(&toolset, Guard::off())).await;
    let url = server.url();
    let http = reqwest::Client::new();
    let post = |body: Vec<u8>| {
        http.post(&url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .body(body)
            .send()
    };

    // Bad JSON, or JSON that is no JSON-RPC message: 400 with a parse error,
    // as the docs say (rmcp alone says 415, as if the media type were wrong).
    for body in [
        &b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\":"[..],
        b"[1, 2, 3]",
        b"{not json",
    ] {
        let refused = post(body.to_vec()).await.unwrap();
        assert_eq!(refused.status(), 400, "{}", String::from_utf8_lossy(body));
        let error: Value = refused.json().await.unwrap();
        assert_eq!(error["error"]["code"], -32700, "{error}");
        assert_eq!(error["id"], Value::Null);
    }
    // A body that is not said to be JSON keeps its 415.
    let wrong_type = http
        .post(&url)
        .header("content-type", "text/plain")
        .header("accept", ACCEPT)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_type.status(), 415);

    // Past the 4 MiB limit: refused while reading, never buffered whole.
    let mut huge = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":""#.to_vec();
    huge.resize(5 * 1024 * 1024, b'a');
    huge.extend_from_slice(b"\"}}");
    let too_big = post(huge).await.unwrap();
    assert_eq!(too_big.status(), 413);

    // A call with arguments nested past the toolset's limit is the tool's
    // invalid-params error, not a crash.
    let client = connect(&url).await;
    let mut deep = json!("bottom");
    // (100 levels: within serde_json's own limit, past the toolset's 64)
    for _ in 0..100 {
        deep = json!({"text": deep});
    }
    match call(&client, "shout", deep).await {
        Err(rmcp::ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        }
        other => panic!("expected invalid params, got {other:?}"),
    }
    assert_eq!(names(&client).await, ["shout", "shout_trace"]);
    client.cancel().await.unwrap();
    within("shutdown", server.shutdown()).await.unwrap();
}

#[tokio::test]
async fn hostile_headers_get_400_401_403_or_431_and_the_server_goes_on() {
    use reqwest::header::HeaderValue;
    let (toolset, _) = toolset();
    let token = "s3cret-t0ken-0123456789a";
    let server = serve(mcp(&toolset, Guard::bearer(token).unwrap())).await;
    let url = server.url();
    let bearer = format!("Bearer {token}");
    let send = |headers: Vec<(&'static str, HeaderValue)>| {
        let mut request = reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .json(&initialize_body());
        for (name, value) in headers {
            // `header` appends: a name given twice is sent twice.
            request = request.header(name, value);
        }
        async move { within("a hostile request", request.send()).await }
    };
    let value = |text: &str| HeaderValue::from_str(text).unwrap();
    let huge = "a".repeat(1 << 20);
    for (headers, expected) in [
        (
            vec![("host", HeaderValue::from_bytes(b"local\xffhost").unwrap())],
            400,
        ),
        (vec![("host", value("local host"))], 400),
        (
            vec![
                ("authorization", value(&bearer)),
                ("authorization", value(&bearer)),
            ],
            400,
        ),
        (
            vec![("authorization", value(&bearer)), ("origin", value("null"))],
            403,
        ),
        (
            vec![(
                "authorization",
                HeaderValue::from_bytes(b"Bearer \xff").unwrap(),
            )],
            401,
        ),
        // Past hyper's header limit: refused before the guard reads it.
        (
            vec![("authorization", value(&format!("Bearer {huge}")))],
            431,
        ),
    ] {
        let names: Vec<_> = headers.iter().map(|(name, _)| *name).collect();
        let answer = send(headers).await.expect("the server answers");
        assert_eq!(answer.status(), expected, "{names:?}");
    }
    let fine = send(vec![("authorization", value(&bearer))]).await.unwrap();
    assert_eq!(fine.status(), 200);
    within("shutdown", server.shutdown()).await.unwrap();
}

#[tokio::test]
async fn shutdown_ends_open_sessions_and_streams() {
    let (toolset, _) = toolset();
    let server = serve(mcp(&toolset, Guard::off())).await;
    let addr = server.local_addr();
    // rmcp's client keeps a GET stream open for server messages.
    let client = connect(&server.url()).await;
    assert_eq!(names(&client).await.len(), 2);
    within("shutdown with a stream open", server.shutdown())
        .await
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    let _ = client.cancel().await;
}

#[tokio::test]
async fn the_embedders_token_stops_the_server_and_shutdown_leaves_it_alone() {
    use tokio_util::sync::CancellationToken;
    let (toolset, _) = toolset();
    let token = CancellationToken::new();
    let first = serve(mcp(&toolset, Guard::off()).with_cancellation(token.clone())).await;
    within("shutdown", first.shutdown()).await.unwrap();
    assert!(!token.is_cancelled(), "shutdown stops its own server only");

    let second = serve(mcp(&toolset, Guard::off()).with_cancellation(token.clone())).await;
    let addr = second.local_addr();
    let client = connect(&second.url()).await;
    assert_eq!(names(&client).await.len(), 2);
    token.cancel();
    within("stopping on the embedder's token", second.wait())
        .await
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    let _ = client.cancel().await;
}

/// The resident set of this process, in KiB (Linux), for the record.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_past_the_cap_are_refused_with_503_and_retry_after_until_one_ends() {
    opens_against_a_cap(2_000, 200).await;
}

/// The issue's measure, for the record (`cargo test -p toolgraft-mcp --features http
/// --test http -- --ignored --nocapture ten_thousand`): it holds a thousand live
/// sessions, too much for every run of the suite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "10 000 opens and 1 000 live sessions: run by hand for the record"]
async fn ten_thousand_opens_against_a_cap_of_a_thousand() {
    opens_against_a_cap(10_000, 1_000).await;
}

/// `opens` session opens against a cap of `cap`: `cap` opened, the rest refused
/// with 503 and `Retry-After`, and room again once a session ends.
async fn opens_against_a_cap(opens: usize, cap: usize) {
    let (toolset, _) = toolset();
    let server = serve(mcp(&toolset, Guard::off()).with_max_sessions(cap)).await;
    let url = server.url();
    let before = rss_kib();
    let (mut opened, mut refused, mut full) = (Vec::new(), 0, None);
    let started = std::time::Instant::now();
    for _ in 0..opens {
        if opened.len() == cap && full.is_none() {
            full = rss_kib();
        }
        let answer = raw_initialize(&url, &[]).await;
        match answer.status().as_u16() {
            200 => opened.push(
                answer.headers()["mcp-session-id"]
                    .to_str()
                    .unwrap()
                    .to_owned(),
            ),
            503 => {
                assert_eq!(answer.headers()["retry-after"], "30");
                let error: Value = answer.json().await.unwrap();
                assert!(
                    error["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("as many sessions are open"),
                    "{error}"
                );
                refused += 1;
            }
            other => panic!("{other}"),
        }
    }
    eprintln!(
        "{opens} session opens against a cap of {cap} in {:?}: {} opened, {refused} refused; \
         RSS {before:?} KiB before, {full:?} KiB at the cap, {:?} KiB after the refusals",
        started.elapsed(),
        opened.len(),
        rss_kib()
    );
    assert_eq!((opened.len(), refused), (cap, opens - cap));
    // A session that ends makes room for one more.
    let ended = reqwest::Client::new()
        .delete(&url)
        .header("mcp-session-id", &opened[0])
        .header("accept", ACCEPT)
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    assert_eq!(raw_initialize(&url, &[]).await.status(), 200);
    assert_eq!(raw_initialize(&url, &[]).await.status(), 503);
    within("shutdown", server.shutdown()).await.unwrap();
}

#[tokio::test]
async fn one_principal_cannot_take_every_session() {
    let (toolset, _) = toolset();
    let mcp = mcp(&toolset, Guard::off())
        .with_principal(|request| {
            let user = request.headers.get("x-user")?.to_str().ok()?;
            Some(toolgraft::context::Principal::new(user))
        })
        .with_max_sessions(100)
        .with_max_sessions_per_principal(2);
    let server = serve(mcp).await;
    let url = server.url();
    let open = |user: &'static str| {
        let url = url.clone();
        async move { raw_initialize(&url, &[("x-user", user)]).await }
    };
    let first = open("alice").await;
    assert_eq!(first.status(), 200);
    let first = first.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(open("alice").await.status(), 200);
    let third = open("alice").await;
    assert_eq!(third.status(), 503, "alice has two open");
    assert_eq!(third.headers()["retry-after"], "30");
    assert_eq!(open("bob").await.status(), 200, "bob has his own share");
    // No principal: only the cap in all.
    assert_eq!(raw_initialize(&url, &[]).await.status(), 200);
    let ended = reqwest::Client::new()
        .delete(&url)
        .header("mcp-session-id", &first)
        .header("accept", ACCEPT)
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success());
    assert_eq!(
        open("alice").await.status(),
        200,
        "room again once one ended"
    );
    within("shutdown", server.shutdown()).await.unwrap();
}

/// An `initialize` that says protocol 2026-07-28 (which serves calls without a
/// session) still opens a session in rmcp: it counts against both caps, and past
/// them it is refused with 503 and `Retry-After`, not 500.
#[tokio::test]
async fn an_initialize_of_the_sessionless_protocol_counts_against_the_caps() {
    let (toolset, _) = toolset();
    let mcp = mcp(&toolset, Guard::off())
        .with_principal(|request| {
            let user = request.headers.get("x-user")?.to_str().ok()?;
            Some(toolgraft::context::Principal::new(user))
        })
        .with_max_sessions(3)
        .with_max_sessions_per_principal(2);
    let server = serve(mcp).await;
    let url = server.url();
    let open = |user: &'static str| {
        let url = url.clone();
        async move {
            let mut body = initialize_body();
            body["params"]["protocolVersion"] = json!("2026-07-28");
            let request = reqwest::Client::new()
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", ACCEPT)
                .header("x-user", user)
                .header("mcp-protocol-version", "2026-07-28")
                .json(&body);
            within("initialize", request.send()).await.unwrap()
        }
    };
    let first = open("alice").await;
    assert_eq!(first.status(), 200, "{:?}", first.text().await);
    assert_eq!(open("alice").await.status(), 200);
    let third = open("alice").await;
    assert_eq!(third.status(), 503, "alice has two open, whatever she says");
    assert_eq!(third.headers()["retry-after"], "30");
    assert_eq!(open("bob").await.status(), 200, "bob has his own share");
    let full = open("carol").await;
    assert_eq!(full.status(), 503, "the server keeps three");
    assert_eq!(full.headers()["retry-after"], "30");
    within("shutdown", server.shutdown()).await.unwrap();
}

/// Issue 36, item 8: MCP says a cancelled request gets no response. A call
/// the client cancels (`notifications/cancelled`) is stopped, and its stream
/// ends with the progress it had, and no result or error for its id.
#[tokio::test]
async fn a_cancelled_call_gets_no_response() {
    #[derive(Deserialize, JsonSchema)]
    struct Nothing {}
    static STARTED: Notify = Notify::const_new();
    let slow = Tool::builder()
        .name("slow")
        .description("Take ten seconds.")
        .read_only()
        .body(|_: Nothing| async move {
            toolgraft::context::report_progress(toolgraft::context::Progress::new(1.0));
            STARTED.notify_one();
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok("finished")
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((slow.combo(),)).unwrap();
    let serving = serve(mcp(&toolset, Guard::off())).await;
    let url = serving.url();
    let opened = raw_initialize(&url, &[]).await;
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let post = |body: Value| {
        reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body)
            .send()
    };
    within(
        "initialized",
        post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
    )
    .await
    .unwrap();
    let started = STARTED.notified();
    // Whatever came before the cancellation (progress, perhaps) is all there is.
    let call = tokio::spawn(post(json!({
        "jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "slow", "arguments": {}, "_meta": {"progressToken": 9}}
    })));
    within("the body starts", started).await;
    let cancelled = post(json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "changed my mind"}
    }));
    assert_eq!(within("cancel", cancelled).await.unwrap().status(), 202);
    let answer = within("the call's stream", call).await.unwrap().unwrap();
    let body = within("the stream ends", answer.text()).await.unwrap();
    let messages: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect();
    assert!(
        messages.iter().all(|message| message.get("id").is_none()),
        "no response for the cancelled call: {messages:?}"
    );
    assert!(
        messages
            .iter()
            .all(|message| message["method"] == "notifications/progress"),
        "{body}"
    );
}
