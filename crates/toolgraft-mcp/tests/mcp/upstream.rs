//! Tools of another MCP server as base tools (features `upstream-http` and
//! `http`): a toolgraft server on a loopback port is the upstream, reached
//! over Streamable HTTP as any other server would be, and a second toolset
//! (the gateway) binds its tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ProgressToken};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgraft::Registry;
use toolgraft::context::{self, Progress};
use toolgraft::ext::{Cache, Retry};
use toolgraft::prelude::*;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::tool::BaseTool;
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::http::{Guard, McpHttp, Serving};
use toolgraft_mcp::upstream::{Endpoint, Upstream, UpstreamConfig, UpstreamError};

use crate::support::{args, completed, connect, connect_newest, task_of, within};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Key {
    key: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Found {
    value: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Count {
    n: u32,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Millis {
    ms: u64,
}

/// What the upstream's bodies did, counted.
#[derive(Clone, Default)]
struct Counters {
    lookups: Arc<AtomicUsize>,
    /// Calls of `sleep` that were dropped before they ended.
    dropped: Arc<AtomicUsize>,
}

struct DropCounter(Option<Arc<AtomicUsize>>);

impl DropCounter {
    /// The body ended: nothing to count.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for DropCounter {
    fn drop(&mut self) {
        if let Some(dropped) = self.0.take() {
            dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The upstream's toolset: `lookup` (read-only, idempotent, structured),
/// `erase` (says nothing: may be destructive), `count_to` (progress), `sleep`
/// (counts drops), `big` (an answer of `n` bytes).
fn upstream_toolset(counters: &Counters) -> Toolset {
    let lookups = counters.lookups.clone();
    let lookup = Tool::builder()
        .name("lookup")
        .title("Look up")
        .description("Look a key up.")
        .read_only()
        .body(move |key: Key| {
            let lookups = lookups.clone();
            async move {
                lookups.fetch_add(1, Ordering::SeqCst);
                Ok(Found {
                    value: format!("value of {}", key.key),
                })
            }
        })
        .build()
        .unwrap();
    let erase = Tool::builder()
        .name("erase")
        .description("Erase a key.")
        .body(|key: Key| async move { Ok(format!("erased {}", key.key)) })
        .build()
        .unwrap();
    let count_to = Tool::builder()
        .name("count_to")
        .description("Count, reporting progress.")
        .read_only()
        .body(|count: Count| async move {
            for step in 1..=count.n {
                context::report_progress(Progress::new(step.into()).with_total(count.n.into()));
                tokio::time::sleep(Duration::from_millis(60)).await;
            }
            Ok(count.n)
        })
        .build()
        .unwrap();
    let dropped = counters.dropped.clone();
    let sleep = Tool::builder()
        .name("sleep")
        .description("Sleep.")
        .read_only()
        .body(move |millis: Millis| {
            let guard = DropCounter(Some(dropped.clone()));
            async move {
                tokio::time::sleep(Duration::from_millis(millis.ms)).await;
                guard.disarm();
                Ok(millis.ms)
            }
        })
        .build()
        .unwrap();
    let big = Tool::builder()
        .name("big")
        .description("Answer n bytes.")
        .read_only()
        .body(|count: Count| async move { Ok("x".repeat(count.n as usize)) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((
            lookup.combo(),
            erase.combo(),
            count_to.combo(),
            sleep.combo(),
            big.combo(),
        ))
        .unwrap();
    toolset
}

async fn serve_on(toolset: &Toolset, port: u16, guard: Guard) -> Serving {
    let mcp = McpHttp::new(ToolsetServer::new(toolset.clone()), guard);
    within("serve", mcp.serve(([127, 0, 0, 1], port)))
        .await
        .expect("serves on a loopback port")
}

fn config(server: &Serving) -> UpstreamConfig {
    UpstreamConfig::new("up", Endpoint::http(server.url()))
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_tools_are_bases_that_keep_what_they_say_of_themselves() {
    let counters = Counters::default();
    let served = upstream_toolset(&counters);
    let server = serve_on(&served, 0, Guard::off()).await;
    let upstream = within("connect", Upstream::connect(config(&server)))
        .await
        .unwrap();
    let tools = upstream.tools();
    let names: Vec<_> = tools
        .iter()
        .map(|tool| tool.spec().name.to_string())
        .collect();
    assert_eq!(
        names,
        ["up_big", "up_count_to", "up_erase", "up_lookup", "up_sleep"]
    );
    assert!(upstream.refused().is_empty(), "{:?}", upstream.refused());

    let lookup = &tools[3];
    let own = served.info("lookup").unwrap();
    assert_eq!(lookup.spec().description, "Look a key up.");
    assert_eq!(lookup.spec().presentation.title.as_deref(), Some("Look up"));
    let hints = &lookup.spec().presentation.annotations;
    assert_eq!((hints.read_only, hints.destructive), (Some(true), None));
    assert_eq!(*lookup.spec().input_schema, *own.input_schema);
    assert_eq!(
        lookup.spec().output_schema.as_deref(),
        own.output_schema.as_deref()
    );
    // `erase` says nothing of itself upstream, and nothing here.
    assert_eq!(tools[2].spec().presentation.annotations, Default::default());

    // The rules decide from what the upstream said: a cache on the read-only
    // tool binds and answers a repeat without the upstream; on `erase`, no.
    let gateway = Toolset::new();
    gateway
        .bind((tools[3].combo().with(Cache::default()),))
        .unwrap();
    let refused = gateway.bind((tools[2].combo().with(Cache::default()),));
    let refused = refused.unwrap_err().to_string();
    assert!(
        refused.contains("`up_erase` is not annotated read-only"),
        "{refused}"
    );
    for _ in 0..3 {
        let found = gateway
            .call("up_lookup_cache", json!({"key": "k"}))
            .await
            .unwrap();
        assert_eq!(found, json!({"value": "value of k"}));
    }
    assert_eq!(
        counters.lookups.load(Ordering::SeqCst),
        1,
        "answered from the cache"
    );

    // Bad arguments are the upstream's to refuse, and read as bad arguments.
    let error = gateway
        .call("up_lookup", json!({"key": 5}))
        .await
        .unwrap_err();
    assert!(!error.is_transient(), "{error}");
    drop(upstream);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_client_and_a_dropped_call_is_cancelled_upstream() {
    let counters = Counters::default();
    let server = serve_on(&upstream_toolset(&counters), 0, Guard::off()).await;
    let upstream = Upstream::connect(config(&server)).await.unwrap();
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();

    // A client of the gateway asks for progress, and gets the upstream's.
    let client = connect(ToolsetServer::new(gateway.clone())).await;
    let request = CallToolRequestParams::new("up_count_to").with_arguments(args(json!({"n": 4})));
    let result = within("count_to", client.call_tool(request)).await.unwrap();
    assert_eq!(result.structured_content, None);
    let progress = client.service().progress.lock().unwrap().clone();
    assert!(
        !progress.is_empty(),
        "the upstream's progress reached the client"
    );
    let last = progress.last().unwrap();
    assert_eq!((last.progress, last.total), (4.0, Some(4.0)));
    // The client's own token (rmcp's client sets one on every request).
    let token: &ProgressToken = &progress[0].progress_token;
    assert!(
        progress
            .iter()
            .all(|report| report.progress_token == *token)
    );

    // A call dropped here is cancelled upstream: its body stops.
    let call = gateway.call("up_sleep", json!({"ms": 30_000}));
    assert!(
        tokio::time::timeout(Duration::from_millis(500), call)
            .await
            .is_err()
    );
    until("the upstream body dropped", || {
        counters.dropped.load(Ordering::SeqCst) == 1
    })
    .await;
    client.cancel().await.unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_upstream_call_is_bounded_and_a_huge_answer_refused() {
    let counters = Counters::default();
    let server = serve_on(&upstream_toolset(&counters), 0, Guard::off()).await;
    let mut config = config(&server).with_call_timeout(Duration::from_millis(300));
    config.max_result_bytes = 64 << 10;
    let upstream = Upstream::connect(config).await.unwrap();
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();

    let started = Instant::now();
    let error = gateway
        .call("up_sleep", json!({"ms": 30_000}))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(error.is_transient(), "{error}");
    assert!(error.to_string().contains("call_timeout_ms"), "{error}");
    until("the upstream body dropped", || {
        counters.dropped.load(Ordering::SeqCst) == 1
    })
    .await;

    let small = gateway.call("up_big", json!({"n": 1000})).await.unwrap();
    // A string answer is structured (its output schema, `{"type": "string"}`,
    // is declared on protocol 2026-07-28, which the link speaks).
    assert_eq!(small.as_str().unwrap().len(), 1000);
    let error = gateway
        .call("up_big", json!({"n": 200_000}))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("max_result_bytes"), "{error}");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_upstream_fails_calls_transiently_and_is_reconnected() {
    let counters = Counters::default();
    let served = upstream_toolset(&counters);
    let server = serve_on(&served, 0, Guard::off()).await;
    let port = server.local_addr().port();
    let upstream = Upstream::connect(config(&server)).await.unwrap();
    let gateway = Toolset::new();
    let tools = upstream.tools();
    gateway
        .bind((tools[3].combo(), tools[3].combo().with(Retry::attempts(20))))
        .unwrap();
    assert_eq!(
        gateway
            .call("up_lookup", json!({"key": "a"}))
            .await
            .unwrap(),
        json!({"value": "value of a"})
    );

    server.shutdown().await.unwrap();
    let error = gateway
        .call("up_lookup", json!({"key": "a"}))
        .await
        .unwrap_err();
    assert!(error.is_transient(), "{error}");

    // The retried call waits out the restart: it fails transiently until the
    // upstream is back, and is answered then.
    let retried = tokio::spawn({
        let gateway = gateway.clone();
        async move { gateway.call("up_lookup_retry", json!({"key": "b"})).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = serve_on(&served, port, Guard::off()).await;
    until("reconnected", || upstream.is_connected()).await;
    assert_eq!(
        within("the retried call", retried).await.unwrap().unwrap(),
        json!({"value": "value of b"})
    );
    again.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_is_sent_and_a_wrong_one_fails_connecting() {
    let counters = Counters::default();
    let server = serve_on(
        &upstream_toolset(&counters),
        0,
        Guard::bearer("an-upstream-token-of-32-characters").unwrap(),
    )
    .await;
    let without = Upstream::connect(config(&server)).await.unwrap_err();
    assert!(
        matches!(without, UpstreamError::Connect { .. }),
        "{without}"
    );
    let wrong = UpstreamConfig::new("up", Endpoint::http(server.url()).with_bearer("nope"));
    assert!(Upstream::connect(wrong).await.is_err());
    let right = UpstreamConfig::new(
        "up",
        Endpoint::http(server.url()).with_bearer("an-upstream-token-of-32-characters"),
    );
    assert!(
        !format!("{right:?}").contains("an-upstream-token"),
        "a token is never printed"
    );
    let upstream = Upstream::connect(right).await.unwrap();
    assert_eq!(upstream.tools().len(), 5);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_upstream_that_cannot_be_started_or_reached_is_a_typed_error() {
    let missing = UpstreamConfig::new(
        "up",
        Endpoint::stdio("/nonexistent/toolgraft-upstream", Vec::<String>::new()),
    );
    let error = Upstream::connect(missing).await.unwrap_err();
    assert!(error.to_string().contains("cannot start"), "{error}");
    let mut nobody = UpstreamConfig::new("up", Endpoint::http("http://127.0.0.1:9/mcp"));
    nobody.connect_timeout_ms = 2000;
    let error = Upstream::connect(nobody).await.unwrap_err();
    assert!(matches!(error, UpstreamError::Connect { .. }), "{error}");
    let bad: Result<UpstreamConfig, _> = serde_json::from_value(json!({
        "namespace": "up", "endpoint": {"http": {"url": "x", "token": "t"}}
    }));
    assert!(bad.is_err(), "unknown fields are refused");
    // A credential in a URL is never printed.
    let secret = Endpoint::http("https://user:pass@example.com:8443/mcp?key=s3cret#frag");
    assert_eq!(format!("{secret:?}"), "http https://example.com:8443/mcp");
    // Nor in an error, whose cause names the URL it failed on.
    let mut refused = UpstreamConfig::new(
        "up",
        Endpoint::http("http://user:pass@127.0.0.1:1/mcp?key=s3cret"),
    );
    refused.connect_timeout_ms = 2000;
    let error = Upstream::connect(refused).await.unwrap_err().to_string();
    assert!(error.contains("127.0.0.1:1/mcp"), "{error}");
    assert!(
        !error.contains("pass") && !error.contains("s3cret"),
        "{error}"
    );
    // Over stdio, as over HTTP, up to 1 GiB: the transport reads a larger
    // answer through without holding it.
    let mut large = UpstreamConfig::new("up", Endpoint::stdio("node", ["s.js"]));
    large.max_result_bytes = 1 << 30;
    large.check().unwrap();
    large.max_result_bytes += 1;
    let refused = large.check().unwrap_err().to_string();
    assert!(refused.contains("`max_result_bytes`"), "{refused}");
    let value: Value = json!({"namespace": "up", "endpoint": {"http": {"url": "ftp://x"}}});
    let config: UpstreamConfig = serde_json::from_value(value).unwrap();
    assert!(
        config
            .check()
            .unwrap_err()
            .to_string()
            .contains("`endpoint`")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_follows_the_upstreams_list_tool_by_tool() {
    let counters = Counters::default();
    let served = upstream_toolset(&counters);
    let server = serve_on(&served, 0, Guard::off()).await;
    let upstream = Upstream::connect(config(&server)).await.unwrap();
    let mut registry = Registry::new();
    registry
        .register(Configured::new(Cache::default()))
        .unwrap();
    let manifest = Manifest::from_json(
        r#"{"tools": {"up_lookup": ["cache"], "up_grown": ["cache"], "up_missing": ["cache"]}}"#,
    )
    .unwrap();
    let gateway = Toolset::new();
    let mut mirror = upstream.mirror(&gateway, registry, manifest);
    let first = mirror.latest();
    assert_eq!(first.listing, 0);
    let unknown: Vec<_> = first
        .outcomes
        .iter()
        .filter(|(_, outcome)| outcome.is_err())
        .map(|(tool, _)| tool.as_str())
        .collect();
    assert_eq!(
        unknown,
        ["up_grown", "up_missing"],
        "keys of the namespace that name no tool"
    );
    assert!(gateway.contains("up_lookup_cache"));

    // A new tool upstream: bound here with the manifest's combos.
    let grown = Tool::builder()
        .name("grown")
        .description("Grown at run time.")
        .read_only()
        .body(|key: Key| async move { Ok(key.key) })
        .build()
        .unwrap();
    served.bind((grown.combo(),)).unwrap();
    let report = within("the next listing", mirror.next()).await.unwrap();
    assert_eq!(report.listing, 1);
    assert!(
        report
            .outcomes
            .iter()
            .any(|(tool, outcome)| tool == "up_grown" && outcome.is_ok())
    );
    assert!(gateway.contains("up_grown_cache"));
    assert_eq!(
        gateway
            .call("up_grown_cache", json!({"key": "g"}))
            .await
            .unwrap(),
        "g"
    );

    // `lookup` upstream is no longer read-only: the cache here no longer fits,
    // so it keeps its binding, and the refusal is reported.
    let unsure = Tool::builder()
        .name("lookup")
        .description("Look a key up, maybe writing.")
        .body(|key: Key| async move { Ok(key.key) })
        .build()
        .unwrap();
    served
        .edit()
        .rebase(&Registry::new(), &unsure)
        .commit()
        .unwrap();
    let report = within("the next listing", mirror.next()).await.unwrap();
    let (_, outcome) = report
        .outcomes
        .iter()
        .find(|(tool, _)| tool == "up_lookup")
        .expect("up_lookup's change reported");
    let refusal = outcome.as_ref().unwrap_err().to_string();
    assert!(refusal.contains("not annotated read-only"), "{refusal}");
    assert!(gateway.contains("up_lookup_cache"), "kept as it was bound");
    assert_eq!(
        gateway
            .info("up_lookup")
            .unwrap()
            .presentation
            .annotations
            .read_only,
        Some(true)
    );

    // A tool gone upstream goes here, its branches with it.
    served.edit().unbind("grown").commit().unwrap();
    let report = within("the next listing", mirror.next()).await.unwrap();
    assert!(
        report
            .outcomes
            .iter()
            .any(|(tool, outcome)| tool == "up_grown" && outcome.is_ok())
    );
    assert!(!gateway.contains("up_grown") && !gateway.contains("up_grown_cache"));
    server.shutdown().await.unwrap();
}

/// Two sessions of a client of the older protocol over HTTP, each with a call
/// in flight to an upstream of 2026-07-28 whose tool logs what it was given:
/// each session gets its own log messages and never the other's (each goes by
/// a link of its own, so what the upstream sends on it is that session's), at
/// the level it set (`logging/setLevel`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)]
async fn log_messages_reach_their_own_session_only() {
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;
    let whisper = Tool::builder()
        .name("whisper")
        .description("Log the key to the client, twice, then answer.")
        .body(|key: Key| async move {
            let call = toolgraft_mcp::call::McpCall::current().ok_or("no client")?;
            for _ in 0..2 {
                let message =
                    LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(key.key));
                call.peer().notify_logging_message(message).await?;
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            Ok(key.key)
        })
        .build()
        .unwrap();
    let served = Toolset::new();
    served.bind((whisper.combo(),)).unwrap();
    let upstream_server = serve_on(&served, 0, Guard::off()).await;
    let upstream = Upstream::connect(config(&upstream_server)).await.unwrap();
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();
    let gateway_server = serve_on(&gateway, 0, Guard::off()).await;

    let session = || async {
        let transport = StreamableHttpClientTransport::from_uri(gateway_server.url());
        crate::support::Client::default()
            .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
            .await
            .unwrap()
    };
    let (alice, bob, carol) = (session().await, session().await, session().await);
    // Each at the level it chose: carol takes errors only.
    for (client, level) in [
        (&alice, LoggingLevel::Info),
        (&bob, LoggingLevel::Info),
        (&carol, LoggingLevel::Error),
    ] {
        client
            .peer()
            .set_level(rmcp::model::SetLevelRequestParams::new(level))
            .await
            .unwrap();
    }
    let call = |client: &crate::support::Connection, key: &str| {
        let peer = client.peer().clone();
        let request =
            CallToolRequestParams::new("up_whisper").with_arguments(args(json!({"key": key})));
        async move { peer.call_tool(request).await }
    };
    let (a, b, c) = tokio::join!(
        call(&alice, "alice's"),
        call(&bob, "bob's"),
        call(&carol, "carol's")
    );
    // A string answer, which the older protocol's link answers as text, reads
    // the same as on the newest.
    for (answer, own) in [
        (a.unwrap(), "alice's"),
        (b.unwrap(), "bob's"),
        (c.unwrap(), "carol's"),
    ] {
        assert_ne!(answer.is_error, Some(true), "{answer:?}");
        assert_eq!(answer.content[0].as_text().unwrap().text, own, "{answer:?}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let logs_of = |client: &crate::support::Connection| -> Vec<Value> {
        let logs = client.service().logs.lock().unwrap();
        logs.iter().map(|log| log.data.clone()).collect()
    };
    for (client, own) in [(&alice, "alice's"), (&bob, "bob's")] {
        let logs = logs_of(client);
        assert!(!logs.is_empty(), "{own}: no log reached its session");
        assert!(logs.iter().all(|log| log == own), "{own} got {logs:?}");
    }
    assert_eq!(logs_of(&carol), Vec::<Value>::new(), "below carol's level");
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
    carol.cancel().await.unwrap();
}

/// An upstream that stops taking the credentials a connection was made with
/// (a token expired, or rotated): its `401` has the link made again, and a
/// `retry` around the tool gets its answer on the new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_refused_upstream_have_the_connection_made_again() {
    use std::sync::atomic::AtomicBool;

    // Once set, every request is refused until a connection is made again
    // (its first request: `server/discover`, or `initialize`).
    let expired = Arc::new(AtomicBool::new(false));
    let handshakes = Arc::new(AtomicUsize::new(0));
    let counters = Counters::default();
    let served = upstream_toolset(&counters);
    let router = McpHttp::new(ToolsetServer::new(served), Guard::off())
        .router()
        .layer(axum::middleware::from_fn({
            let (expired, handshakes) = (expired.clone(), handshakes.clone());
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let (expired, handshakes) = (expired.clone(), handshakes.clone());
                async move {
                    let (parts, body) = request.into_parts();
                    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                    let method = serde_json::from_slice::<Value>(&body)
                        .ok()
                        .and_then(|message| message["method"].as_str().map(str::to_owned));
                    let handshake =
                        matches!(method.as_deref(), Some("server/discover" | "initialize"));
                    if handshake {
                        handshakes.fetch_add(1, Ordering::SeqCst);
                        expired.store(false, Ordering::SeqCst);
                    } else if expired.load(Ordering::SeqCst) {
                        return axum::response::Response::builder()
                            .status(401)
                            .header("www-authenticate", r#"Bearer error="invalid_token""#)
                            .body(axum::body::Body::empty())
                            .unwrap();
                    }
                    let request =
                        axum::extract::Request::from_parts(parts, axum::body::Body::from(body));
                    next.run(request).await
                }
            }
        }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let serving = tokio::spawn(async move { axum::serve(listener, router).await });

    let upstream = Upstream::connect(UpstreamConfig::new("up", Endpoint::http(&url)))
        .await
        .unwrap();
    let before = handshakes.load(Ordering::SeqCst);
    let gateway = Toolset::new();
    let tools = upstream.tools();
    gateway
        .bind((tools[3].combo().with(Retry::attempts(20)),))
        .unwrap();
    assert_eq!(
        gateway
            .call("up_lookup", json!({"key": "a"}))
            .await
            .unwrap(),
        json!({"value": "value of a"})
    );

    expired.store(true, Ordering::SeqCst);
    let refused = gateway
        .call("up_lookup", json!({"key": "b"}))
        .await
        .unwrap_err();
    assert!(refused.is_transient(), "{refused}");
    let answer = within(
        "the retried call",
        gateway.call("up_lookup_retry", json!({"key": "c"})),
    )
    .await
    .unwrap();
    assert_eq!(answer, json!({"value": "value of c"}));
    assert!(
        handshakes.load(Ordering::SeqCst) > before,
        "the connection was made again"
    );
    serving.abort();
}

/// An upstream tool that takes a task (the upstream makes one, its client
/// here saying it takes tasks): followed to its end, its answer the call's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_task_is_followed_to_its_answer() {
    let counters = Counters::default();
    let served = upstream_toolset(&counters);
    let tasks = toolgraft_mcp::task::Tasks::new()
        .with_poll_interval(Duration::from_millis(50))
        .unwrap()
        .require("sleep");
    let mcp = McpHttp::new(ToolsetServer::new(served).with_tasks(tasks), Guard::off());
    let server = within("serve", mcp.serve(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let upstream = Upstream::connect(config(&server)).await.unwrap();
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();
    let answer = within("the task", gateway.call("up_sleep", json!({"ms": 300})))
        .await
        .unwrap();
    assert_eq!(answer, json!(300));

    // A call that stops waiting cancels the upstream's task: its body stops.
    let call = gateway.call("up_sleep", json!({"ms": 30_000}));
    assert!(
        tokio::time::timeout(Duration::from_millis(500), call)
            .await
            .is_err()
    );
    until("the upstream task's body dropped", || {
        counters.dropped.load(Ordering::SeqCst) == 1
    })
    .await;
    server.shutdown().await.unwrap();
}

/// A call that may be a task at the gateway is one when its upstream makes it
/// one: what the upstream answers synchronously the gateway does too. An
/// upstream that makes no tasks leaves it to the gateway: a task once it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_call_is_a_task_when_its_upstream_makes_it_one() {
    use rmcp::model::CallToolResponse;
    use toolgraft_mcp::task::Tasks;

    let counters = Counters::default();
    let upstream_tasks = Tasks::new()
        .with_poll_interval(Duration::from_millis(50))
        .unwrap()
        .allow("lookup")
        .allow("sleep");
    let makes_tasks = McpHttp::new(
        ToolsetServer::new(upstream_toolset(&counters)).with_tasks(upstream_tasks),
        Guard::off(),
    );
    let makes_tasks = within("serve", makes_tasks.serve(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let makes_none = serve_on(&upstream_toolset(&counters), 0, Guard::off()).await;
    let gateway = Toolset::new();
    let mut upstreams = Vec::new();
    for (namespace, server) in [("tasks", &makes_tasks), ("plain", &makes_none)] {
        let upstream =
            Upstream::connect(UpstreamConfig::new(namespace, Endpoint::http(server.url())))
                .await
                .unwrap();
        let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
        gateway.bind(combos).unwrap();
        upstreams.push(upstream);
    }
    let tasks = Tasks::new()
        .with_poll_interval(Duration::from_millis(50))
        .unwrap()
        .allow("tasks_lookup")
        .allow("tasks_sleep")
        .allow("plain_sleep");
    let client = connect_newest(ToolsetServer::new(gateway).with_tasks(tasks), true).await;
    let call = |name: &str, arguments: Value| {
        CallToolRequestParams::new(name.to_owned()).with_arguments(args(arguments))
    };

    // Answered upstream without a task: answered here without one.
    let answer = within(
        "tasks_lookup",
        client.call_tool_once(call("tasks_lookup", json!({"key": "k"}))),
    )
    .await
    .unwrap();
    let CallToolResponse::Complete(result) = answer else {
        panic!("answered as the upstream answered, not {answer:?}");
    };
    assert_eq!(
        result.structured_content,
        Some(json!({"value": "value of k"}))
    );

    // A task upstream: a task here, followed to the upstream's answer.
    let task = task_of(&client, call("tasks_sleep", json!({"ms": 300}))).await;
    let result = completed(&client, &task).await;
    assert_eq!(result["structuredContent"], json!(300), "{result:?}");

    // An upstream that makes no tasks: this server's call is one once it waits.
    let task = task_of(&client, call("plain_sleep", json!({"ms": 300}))).await;
    let result = completed(&client, &task).await;
    assert_eq!(result["structuredContent"], json!(300), "{result:?}");
    drop(client);
    drop(upstreams);
    makes_tasks.shutdown().await.unwrap();
    makes_none.shutdown().await.unwrap();
}

/// A caller of 2026-07-28 names the level it takes log messages at in each
/// request; the forwarded call names it to the upstream, which sends only
/// those, and they reach the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)]
async fn a_callers_log_level_reaches_the_upstream_and_its_messages_the_caller() {
    use rmcp::model::{ClientRequest, LoggingLevel, ProtocolVersion, RequestMetaObject};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt, PeerRequestOptions};
    use rmcp::transport::StreamableHttpClientTransport;
    use toolgraft::context::{LogLevel, LogMessage};
    let chatty = Tool::builder()
        .name("chatty")
        .description("Log a detail and a warning, then answer.")
        .read_only()
        .body(|key: Key| async move {
            context::log(LogMessage::new(LogLevel::Debug, "a detail"));
            context::log(LogMessage::new(LogLevel::Warning, "careful"));
            Ok(key.key)
        })
        .build()
        .unwrap();
    let served = Toolset::new();
    served.bind((chatty.combo(),)).unwrap();
    let upstream_server = serve_on(&served, 0, Guard::off()).await;
    let upstream = Upstream::connect(config(&upstream_server)).await.unwrap();
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();
    let gateway_server = serve_on(&gateway, 0, Guard::off()).await;
    let transport = StreamableHttpClientTransport::from_uri(gateway_server.url());
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = within(
        "connect",
        crate::support::Client::default().serve_with_lifecycle(transport, lifecycle),
    )
    .await
    .unwrap();
    let mut options = PeerRequestOptions::no_options();
    let mut meta = RequestMetaObject::default();
    meta.set_log_level(LoggingLevel::Warning);
    options.meta = Some(meta);
    let request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("up_chatty").with_arguments(args(json!({"key": "k"}))),
    ));
    let handle = client
        .peer()
        .send_request_with_option(request, options)
        .await
        .unwrap();
    within("the call", handle.await_response()).await.unwrap();
    let logs: Vec<Value> = client
        .service()
        .logs
        .lock()
        .unwrap()
        .iter()
        .map(|log| log.data.clone())
        .collect();
    assert_eq!(logs, [json!("careful")]);
    client.cancel().await.unwrap();
}

/// An HTTP server on a loopback port that answers every request with
/// `status` to `location`, and counts the requests it was sent.
async fn redirecting(status: &'static str, location: String) -> (String, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (seen, location) = (counted.clone(), location.clone());
            tokio::spawn(async move {
                let mut read = Vec::new();
                let mut buffer = [0; 4096];
                while let Ok(len @ 1..) = stream.read(&mut buffer).await {
                    read.extend_from_slice(&buffer[..len]);
                    while let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                        // The requests carry small bodies, read with them.
                        let head = String::from_utf8_lossy(&read[..end]).to_lowercase();
                        let body = head
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .and_then(|len| len.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if read.len() < end + 4 + body {
                            break;
                        }
                        read.drain(..end + 4 + body);
                        seen.fetch_add(1, Ordering::SeqCst);
                        let answer = format!(
                            "HTTP/1.1 {status}\r\nlocation: {location}\r\ncontent-length: 0\r\n\r\n"
                        );
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (url, seen)
}

/// Redirects are followed only to the same origin, with the request kept
/// (307, 308): a redirect to another origin, or one that would turn the POST
/// into a GET (302), fails connecting, and the other origin is never sent
/// the bearer token (nor anything). A loop on one origin ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_go_to_the_same_origin_only() {
    let (elsewhere, reached) = redirecting("404 Not Found", "/".into()).await;
    for status in [
        "307 Temporary Redirect",
        "308 Permanent Redirect",
        "302 Found",
    ] {
        let (url, _) = redirecting(status, elsewhere.clone()).await;
        let mut config = UpstreamConfig::new(
            "up",
            Endpoint::http(&url).with_bearer("a-token-for-one-origin"),
        );
        config.connect_timeout_ms = 3000;
        let connected = within("connect", Upstream::connect(config)).await;
        assert!(connected.is_err(), "{status}: connected");
        assert_eq!(reached.load(Ordering::SeqCst), 0, "{status}: followed");
    }
    // To itself, without end: given up.
    let (url, looped) = redirecting("307 Temporary Redirect", "/mcp".into()).await;
    let mut config = UpstreamConfig::new("up", Endpoint::http(&url));
    config.connect_timeout_ms = 3000;
    let Err(error) = within("connect", Upstream::connect(config)).await else {
        panic!("a redirect loop fails connecting");
    };
    let error = error.to_string();
    assert!(looped.load(Ordering::SeqCst) <= 12, "{error}");
    assert!(error.contains("redirects"), "{error}");
}

/// A TCP front to `backend` that closes a connection as it carries a request
/// naming `method`: that request fails in the HTTP client, whose error names
/// the URL it was sent to.
async fn cutting(backend: std::net::SocketAddr, method: &'static str) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_server, mut to_server) = server.into_split();
                let back = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
                });
                let mut buffer = vec![0; 64 << 10];
                while let Ok(len @ 1..) = from_client.read(&mut buffer).await {
                    let chunk = &buffer[..len];
                    if chunk.windows(method.len()).any(|w| w == method.as_bytes()) {
                        break;
                    }
                    if to_server.write_all(chunk).await.is_err() {
                        break;
                    }
                }
                back.abort();
            });
        }
    });
    address
}

/// A listing that fails in the HTTP client (its connection cut) fails
/// connecting with an error that names the URL without its query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_cut_off_names_the_url_without_its_query() {
    let counters = Counters::default();
    let server = serve_on(&upstream_toolset(&counters), 0, Guard::off()).await;
    let backend: std::net::SocketAddr = server
        .url()
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let front = cutting(backend, "tools/list").await;
    let mut config = UpstreamConfig::new(
        "up",
        Endpoint::http(format!("http://{front}/mcp?key=s3cret")),
    );
    config.connect_timeout_ms = 5000;
    let Err(error) = within("connect", Upstream::connect(config)).await else {
        panic!("a listing cut off fails connecting");
    };
    let error = error.to_string();
    assert!(
        error.contains("tools/list") && !error.contains("s3cret"),
        "{error}"
    );
    server.shutdown().await.unwrap();
}
