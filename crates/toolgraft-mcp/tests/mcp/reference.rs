//! Upstreams no one here wrote (features `upstream-http` and `http`): the
//! official `server-everything` and `server-filesystem` (npm, over stdio) and a
//! server written with the official Python SDK (over Streamable HTTP, with a
//! bearer token), installed by scripts/setup and found by the variables
//! `scripts/setup --env` prints (scripts/test sets them).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use toolgraft::Registry;
use toolgraft::ext::approve::{Approve, SealKey};
use toolgraft::ext::{Cache, Retry};
use toolgraft::prelude::*;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::upstream::{Endpoint, Mirror, Upstream, UpstreamConfig};

use crate::support::{args, connect, within};

/// The path or program a variable of `scripts/setup --env` names.
fn installed(var: &str) -> String {
    let value = std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: run the tests with scripts/test, or after scripts/setup with \
             `eval \"$(scripts/setup --env)\"`"
        )
    });
    assert!(
        std::path::Path::new(&value).exists(),
        "{var}={value} does not exist: run scripts/setup"
    );
    value
}

fn everything() -> UpstreamConfig {
    let node = installed("TOOLGRAFT_UPSTREAM_NODE");
    let server = installed("TOOLGRAFT_SERVER_EVERYTHING");
    UpstreamConfig::new("every", Endpoint::stdio(node, [server, "stdio".to_owned()]))
}

fn filesystem(dir: &std::path::Path) -> UpstreamConfig {
    let node = installed("TOOLGRAFT_UPSTREAM_NODE");
    let server = installed("TOOLGRAFT_SERVER_FILESYSTEM");
    UpstreamConfig::new(
        "fs",
        Endpoint::stdio(node, [server, dir.display().to_string()]),
    )
}

const TOKEN: &str = "a-python-upstream-token";

/// The Python SDK's server (tests/upstream/python_server.py), killed when
/// dropped.
struct PythonServer {
    child: Child,
    url: String,
}

impl PythonServer {
    fn start(port: u16) -> Self {
        let python = installed("TOOLGRAFT_UPSTREAM_PYTHON");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/upstream/python_server.py"
        );
        let mut child = Command::new(python)
            .args([script, &port.to_string()])
            .env("UPSTREAM_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the Python server starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("the Python server printed its URL before it ended")
                .unwrap();
            if let Some(url) = line.strip_prefix("python_server: MCP over HTTP at ") {
                break url.to_owned();
            }
        };
        // The rest of its log is drained, so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, url }
    }

    fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|rest| rest.split('/').next())
            .and_then(|port| port.parse().ok())
            .unwrap()
    }

    fn config(&self) -> UpstreamConfig {
        UpstreamConfig::new("py", Endpoint::http(&self.url).with_bearer(TOKEN))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Approve::new(SealKey::random().unwrap()))
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Configured::new(Retry::default()))
        .unwrap();
    registry
}

fn text(value: &Value) -> &str {
    value["content"][0]["text"].as_str().unwrap_or_default()
}

fn bound_ok(mirror: &Mirror) {
    for (tool, outcome) in &mirror.latest().outcomes {
        if let Err(error) = outcome {
            panic!("{tool}: {error}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_upstreams_and_the_servers_own_tools_listed_with_layers_by_annotation() {
    let python = PythonServer::start(0);
    let every = within("everything", Upstream::connect(everything()))
        .await
        .unwrap();
    let py = within("python", Upstream::connect(python.config()))
        .await
        .unwrap();
    // MCP's defaults: a tool that does not say it is read-only may be
    // destructive, so it is approved; a read-only one is cached.
    let manifest = Manifest::from_value(&json!({"tools": {}, "match": [
        {"annotations": {"readOnlyHint": false}, "combos": [["approve"]]},
        {"annotations": {"readOnlyHint": true}, "combos": [["cache"]]}
    ]}))
    .unwrap();
    let toolset = Toolset::new();
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text, loud.")
        .read_only()
        .body(|value: Value| async move { Ok(value["text"].as_str().unwrap_or("").to_uppercase()) })
        .build()
        .unwrap();
    for (tool, outcome) in
        toolset.bind_manifest(&registry(), &BaseTools::new().with(&shout), &manifest)
    {
        outcome.unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    bound_ok(&every.mirror(&toolset, registry(), manifest.clone()));
    bound_ok(&py.mirror(&toolset, registry(), manifest));

    let client = connect(ToolsetServer::new(toolset.clone())).await;
    let listed = client.list_all_tools().await.unwrap();
    eprintln!("tools/list ({} tools):", listed.len());
    for tool in &listed {
        let hints = tool.annotations.clone().unwrap_or_default();
        let hint = |hint: Option<bool>| hint.map_or("-".to_owned(), |hint| hint.to_string());
        eprintln!(
            "  {:<44} readOnly={:<5} destructive={:<5} idempotent={}",
            tool.name,
            hint(hints.read_only_hint),
            hint(hints.destructive_hint),
            hint(hints.idempotent_hint),
        );
    }
    let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_ref()).collect();
    for expected in [
        "shout",
        "shout_cache",
        "every_echo",
        "every_echo_cache",
        "every_trigger-long-running-operation_cache",
        "py_lookup_cache",
        "py_erase_approve",
        "py_bump_approve",
        "py_describe_cache",
    ] {
        assert!(names.contains(&expected), "{expected} not in {names:?}");
    }
    assert!(
        !names.contains(&"py_erase_cache"),
        "no cache on a destructive tool"
    );
    let erase = listed.iter().find(|tool| tool.name == "py_erase").unwrap();
    assert_eq!(
        erase.annotations.as_ref().unwrap().destructive_hint,
        Some(true)
    );
    let describe = listed
        .iter()
        .find(|tool| tool.name == "py_describe")
        .unwrap();
    assert!(
        describe.output_schema.is_some(),
        "its output schema is kept"
    );

    // A read-only upstream tool answered from the cache: the upstream counts
    // one lookup for three calls.
    for _ in 0..3 {
        let found = client
            .call_tool(
                CallToolRequestParams::new("py_lookup_cache")
                    .with_arguments(args(json!({"key": "k"}))),
            )
            .await
            .unwrap();
        assert_eq!(found.content[0].as_text().unwrap().text, "value of k");
    }
    let calls = toolset.call("py_calls", json!({})).await.unwrap();
    assert_eq!(text(&calls), "1", "answered from the cache twice");

    // The everything server's progress reaches the gateway's client.
    let result = within(
        "long-running operation",
        client.call_tool(
            CallToolRequestParams::new("every_trigger-long-running-operation")
                .with_arguments(args(json!({"duration": 1, "steps": 4}))),
        ),
    )
    .await
    .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let progress: Vec<f64> = client
        .service()
        .progress
        .lock()
        .unwrap()
        .iter()
        .map(|report| report.progress)
        .collect();
    eprintln!("progress the gateway's client got: {progress:?}");
    // In order; the last may race the answer (rmcp runs each notification's
    // handler as a task of its own) and is then dropped.
    assert!(
        progress == [1.0, 2.0, 3.0, 4.0] || progress == [1.0, 2.0, 3.0],
        "{progress:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_upstream_tool_is_retried_across_a_killed_upstream() {
    let mut python = PythonServer::start(0);
    let port = python.port();
    let py = Upstream::connect(python.config()).await.unwrap();
    let manifest = Manifest::from_json(
        r#"{"tools": {"py_bump": [[{"name": "retry", "config": {"attempts": 20}}]]}}"#,
    )
    .unwrap();
    let toolset = Toolset::new();
    bound_ok(&py.mirror(&toolset, registry(), manifest));
    let first = toolset
        .call("py_bump_retry", json!({"key": "k"}))
        .await
        .unwrap();

    python.kill();
    let started = Instant::now();
    let retried = tokio::spawn({
        let toolset = toolset.clone();
        async move { toolset.call("py_bump_retry", json!({"key": "k"})).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _again = PythonServer::start(port);
    let answer = within("the retried call", retried).await.unwrap().unwrap();
    eprintln!(
        "py_bump_retry answered {} {:.2} s after the upstream was SIGKILLed (and started again)",
        text(&answer),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(text(&answer), text(&first), "the same answer: idempotent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_added_upstream_is_bound_here() {
    let python = PythonServer::start(0);
    let py = Upstream::connect(python.config()).await.unwrap();
    let toolset = Toolset::new();
    let mut mirror = py.mirror(&toolset, registry(), Manifest::default());
    assert!(!toolset.contains("py_grown"));
    toolset.call("py_grow", json!({})).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !toolset.contains("py_grown") {
        assert!(
            Instant::now() < deadline,
            "py_grown never came: {:?}",
            mirror.latest()
        );
        let _ = tokio::time::timeout(Duration::from_millis(200), mirror.next()).await;
    }
    assert!(toolset.call("py_grown", json!({})).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filesystem_servers_writes_are_destructive_and_land() {
    let dir = std::env::temp_dir().join(format!("toolgraft-fs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let fs = Upstream::connect(filesystem(&dir)).await.unwrap();
    let tools = Arc::new(fs.tools());
    let tool = |name: &str| {
        tools
            .iter()
            .find(|tool| toolgraft::tool::BaseTool::spec(*tool).name == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    let write = tool("fs_write_file");
    let hints = &toolgraft::tool::BaseTool::spec(&write)
        .presentation
        .annotations;
    assert_eq!(
        (hints.read_only, hints.destructive),
        (Some(false), Some(true))
    );
    let toolset = Toolset::new();
    let refused = toolset
        .bind((write.combo().with(Cache::default()),))
        .unwrap_err();
    assert!(
        refused.to_string().contains("not annotated read-only"),
        "{refused}"
    );
    toolset
        .bind((
            write.combo(),
            tool("fs_read_text_file").combo().with(Cache::default()),
        ))
        .unwrap();
    let path = dir.join("note.txt").display().to_string();
    toolset
        .call(
            "fs_write_file",
            json!({"path": path, "content": "written through toolgraft"}),
        )
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "written through toolgraft"
    );
    let read = toolset
        .call("fs_read_text_file_cache", json!({"path": path}))
        .await
        .unwrap();
    assert_eq!(read["content"], "written through toolgraft");
    let outside = toolset
        .call("fs_read_text_file", json!({"path": "/etc/hostname"}))
        .await
        .unwrap_err();
    assert!(outside.to_string().contains("Access denied"), "{outside}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Python SDK sends a call's log messages on that call's own response
/// stream. Two callers' calls in flight at once each reach their own caller
/// with their messages, and none of the other's: a message that names no
/// call could be given to neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    deprecated,
    reason = "logging: deprecated by SEP-2577, still what upstreams send"
)]
async fn log_messages_of_calls_in_flight_at_once_reach_their_own_callers() {
    use rmcp::model::{LoggingLevel, SetLevelRequestParams};
    let python = PythonServer::start(0);
    let py = within("python", Upstream::connect(python.config()))
        .await
        .unwrap();
    let toolset = Toolset::new();
    let combos: Vec<_> = py.tools().iter().map(|tool| tool.combo()).collect();
    toolset.bind(combos).unwrap();
    let alice = connect(ToolsetServer::new(toolset.clone())).await;
    let bob = connect(ToolsetServer::new(toolset.clone())).await;
    for client in [&alice, &bob] {
        client
            .peer()
            .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
            .await
            .unwrap();
    }

    let say = |client: &crate::support::Connection, text: &str| {
        let peer = client.peer().clone();
        let params = CallToolRequestParams::new("py_say")
            .with_arguments(args(json!({"text": text, "ms": 300})));
        async move { peer.call_tool(params).await }
    };
    let (by_alice, by_bob) = within("both calls", async {
        tokio::join!(say(&alice, "alice"), say(&bob, "bob"))
    })
    .await;
    by_alice.unwrap();
    by_bob.unwrap();

    let [alice_got, bob_got] = &crate::support::logged(&[&alice, &bob], 2).await[..] else {
        unreachable!("one list per client")
    };
    assert_eq!(alice_got, &[json!("alice: begun"), json!("alice: done")]);
    assert_eq!(bob_got, &[json!("bob: begun"), json!("bob: done")]);
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
}
