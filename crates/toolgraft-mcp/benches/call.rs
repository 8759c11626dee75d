//! A `tools/call` round trip in process: rmcp's client and a server joined by
//! `tokio::io::duplex`, the client sending the request and awaiting the reply.
//!
//! Served by `ToolsetServer` for a base tool, a 4-layer branch of it (wrappers that
//! only forward) and a branch of four built-in `trace`s (no subscriber), and, as the
//! floor, by a hand-written rmcp `ServerHandler` answering the same tool with no
//! toolgraft at all: the ratio of the two is what toolgraft adds to rmcp. Each on a
//! current-thread runtime and on a multi-thread runtime with 2 workers. The base
//! once more with its requests in a trace (`_meta`'s `traceparent` and
//! `tracestate`), against the same `_meta` under keys no one reads: what reading
//! the trace context costs a call.
//!
//! And `tools/list` as the server answers it, for 10 and 1,000 tools; and for
//! 1,000 tools with access policies on half of them, per caller, against the
//! listing every caller shares without policies (`mcp-list-guarded`).
//!
//! Run: `cargo bench -p toolgraft-mcp --bench call`.

use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, JsonObject, RequestMetaObject,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use toolgraft::ToolError;
use toolgraft::Wrap;
use toolgraft::error::BoxError;
use toolgraft::ext::Trace;
use toolgraft::extension::{Anywhere, Next};
use toolgraft::prelude::*;
use toolgraft_mcp::ToolsetServer;

#[derive(Deserialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

/// An object, so that results are structured for every client (the path with the
/// most work: the value and its JSON text).
#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

async fn add(input: Add) -> Result<Sum, BoxError> {
    Ok(Sum {
        sum: input.a + input.b,
    })
}

/// A wrapper that only forwards.
#[derive(Clone)]
struct Pass;

impl toolgraft::Extension for Pass {
    type Kind = toolgraft::extension::Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "pass"
    }
}

impl<S: Stack> Wrap<S> for Pass {
    type Params = ();

    fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send {
        next.call(input)
    }
}

fn toolset() -> Toolset {
    let tool = Tool::builder()
        .name("add")
        .description("Add two numbers.")
        .body(add)
        .build()
        .unwrap();
    let toolset = Toolset::new();
    // Beside it the built-in `trace`, four times, with no subscriber installed:
    // what tracing costs when nobody listens.
    toolset
        .bind((
            tool.combo().with(Pass).with(Pass).with(Pass).with(Pass),
            tool.combo().with(Trace).with(Trace).with(Trace).with(Trace),
        ))
        .unwrap();
    toolset
}

/// The same tool answered by rmcp alone: decode the arguments, add, return the
/// same structured result, the least any handler does.
struct Raw;

impl ServerHandler for Raw {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "add" {
            return Err(ErrorData::invalid_params("unknown tool", None));
        }
        let args = request.arguments.map_or(Value::Null, Value::Object);
        let input: Add = serde_json::from_value(args)
            .map_err(|error| ErrorData::invalid_params(error.to_string(), None))?;
        let output = add(input).await.map_err(|error| {
            ErrorData::internal_error(error.to_string(), None) // never: `add` cannot fail
        })?;
        let value = serde_json::to_value(output)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        Ok(CallToolResult::structured(value).into())
    }
}

/// Serves `server` on one end of a pipe and connects rmcp's client (a session
/// opened with `initialize`, what today's clients do) on the other.
async fn connect<S: ServerHandler>(server: S) -> RunningService<RoleClient, ()> {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.unwrap()
}

fn runtimes() -> [(&'static str, Runtime); 2] {
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    [("current-thread", current), ("multi-thread", multi)]
}

fn params(name: &str) -> CallToolRequestParams {
    let args: JsonObject = json!({"a": 2, "b": 3}).as_object().cloned().unwrap();
    CallToolRequestParams::new(name.to_owned()).with_arguments(args)
}

/// [`params`] with a W3C trace context's two values in `_meta`, under `keys`
/// (`traceparent` and `tracestate`, as a traced client sends them, or others).
fn params_with_meta(name: &str, keys: [&str; 2]) -> CallToolRequestParams {
    let mut meta = RequestMetaObject::new();
    let values = [
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
    ];
    for (key, value) in keys.into_iter().zip(values) {
        meta.insert(key.to_owned(), json!(value));
    }
    let mut params = params(name);
    params.meta = Some(meta);
    params
}

/// `iters` round trips, timed inside one `block_on`: what criterion's `to_async`
/// does, without its per-sample `block_on` cost landing in every iteration (as
/// `b.iter(|| rt.block_on(..))` would). On the multi-thread runtime the loop is a
/// task on a worker, like the server's own tasks, so nothing runs on a third thread
/// of a 2-core machine; the `block_on` around it is outside the timed span.
fn round_trips(
    rt: &Runtime,
    client: &RunningService<RoleClient, ()>,
    params: &CallToolRequestParams,
    iters: u64,
) -> Duration {
    let peer = client.peer().clone();
    let params = params.clone();
    rt.block_on(async move {
        tokio::spawn(async move {
            let start = Instant::now();
            for _ in 0..iters {
                let result = peer.call_tool(params.clone()).await;
                black_box(result.unwrap());
            }
            start.elapsed()
        })
        .await
        .unwrap()
    })
}

fn call(c: &mut Criterion) {
    let mut group = c.benchmark_group("mcp-call");
    for (flavor, rt) in runtimes() {
        let toolset = toolset();
        let served = [
            (
                "base",
                "add",
                rt.block_on(connect(ToolsetServer::new(toolset.clone()))),
            ),
            (
                "4-layer",
                "add_pass_pass_pass_pass",
                rt.block_on(connect(ToolsetServer::new(toolset.clone()))),
            ),
            (
                "4-trace",
                "add_trace_trace_trace_trace",
                rt.block_on(connect(ToolsetServer::new(toolset))),
            ),
            ("raw-rmcp", "add", rt.block_on(connect(Raw))),
        ];
        for (what, name, client) in &served {
            let params = params(name);
            let result = rt.block_on(client.call_tool(params.clone())).unwrap();
            assert_eq!(result.structured_content, Some(json!({"sum": 5})), "{what}");
            group.bench_function(format!("{what}/{flavor}"), |b| {
                b.iter_custom(|iters| round_trips(&rt, client, &params, iters))
            });
        }
        // The base again, its requests in a trace (`_meta`'s `traceparent` and
        // `tracestate`, SEP-414), and with the same two values under keys no
        // one reads: the ratio of the two is what reading and checking a trace
        // context costs a call (sending a `_meta` costs both alike).
        let (_, name, client) = &served[0];
        for (what, keys) in [
            ("base, _meta/", ["example.com/parent", "example.com/state"]),
            ("base, traced/", ["traceparent", "tracestate"]),
        ] {
            let params = params_with_meta(name, keys);
            let result = rt.block_on(client.call_tool(params.clone())).unwrap();
            assert_eq!(result.structured_content, Some(json!({"sum": 5})));
            group.bench_function(format!("{what}{flavor}"), |b| {
                b.iter_custom(|iters| round_trips(&rt, client, &params, iters))
            });
        }
        for (_, _, client) in served {
            rt.block_on(client.cancel()).unwrap();
        }
    }
    group.finish();
}

/// `tools/list` as the server answers it (no transport), for toolsets of 10 and
/// 1,000 base tools: what a client pays per list.
fn list(c: &mut Criterion) {
    let mut group = c.benchmark_group("mcp-list");
    for tools in [10, 1000] {
        let toolset = Toolset::new();
        for i in 0..tools {
            let tool = Tool::builder()
                .name(format!("add_{i}"))
                .description("Add two numbers.")
                .body(add)
                .build()
                .unwrap();
            toolset.bind((tool.combo(),)).unwrap();
        }
        let server = ToolsetServer::new(toolset);
        assert_eq!(
            server.list(toolgraft_mcp::OutputShape::AnyJson).len(),
            tools
        );
        group.bench_function(format!("{tools} tools"), |b| {
            b.iter(|| black_box(server.list(toolgraft_mcp::OutputShape::AnyJson)))
        });
    }
    group.finish();
}

/// `tools/list` of 1,000 tools with access policies on half of them, as each
/// caller is shown it (`list_for`), callers taking turns, against the listing
/// every caller shares when no policy is set (`list`): what showing each
/// caller only the names it may call costs.
fn list_guarded(c: &mut Criterion) {
    use toolgraft::access::Scopes;
    use toolgraft::context::Identity;
    use toolgraft_mcp::OutputShape;

    let mut group = c.benchmark_group("mcp-list-guarded");
    let toolset = Toolset::new();
    for i in 0..1000 {
        let tool = Tool::builder()
            .name(format!("add_{i}"))
            .description("Add two numbers.")
            .body(add)
            .build()
            .unwrap();
        toolset.bind((tool.combo(),)).unwrap();
    }
    let shared = ToolsetServer::new(toolset.clone());
    assert_eq!(shared.list(OutputShape::AnyJson).len(), 1000);
    group.bench_function("shared", |b| {
        b.iter(|| black_box(shared.list(OutputShape::AnyJson)))
    });

    let guarded = || {
        let guarded = Toolset::new();
        for i in 0..1000 {
            let tool = Tool::builder()
                .name(format!("add_{i}"))
                .description("Add two numbers.")
                .body(add)
                .build()
                .unwrap();
            guarded.bind((tool.combo(),)).unwrap();
        }
        let mut edit = guarded.edit();
        for i in (0..1000).step_by(2) {
            // Four groups of names, by scope: callers holding some of them.
            edit = edit.authorize(
                &format!("add_{i}"),
                Scopes::all([format!("group_{}", i % 8)]),
            );
        }
        edit.commit().unwrap();
        guarded
    };
    let server = ToolsetServer::new(guarded());
    // 64 callers, in 4 groups the policies tell apart; half of them on the
    // `pro` plan (an audience, below).
    let callers: Vec<Identity> = (0..64)
        .map(|i| {
            let scopes: Vec<String> = (0..=(i % 4)).map(|g| format!("group_{}", 2 * g)).collect();
            let plan = if i % 8 < 4 { "pro" } else { "free" };
            Identity::new(format!("caller_{i}"))
                .with_scopes(scopes)
                .with_claim("plan", plan)
        })
        .collect();
    let shown = |server: &ToolsetServer, who: &Identity| {
        server.list_for(Some(who), OutputShape::AnyJson).len()
    };
    assert_eq!(shown(&server, &callers[0]), 625);
    assert_eq!(shown(&server, &callers[3]), 1000);
    let mut turn = 0;
    group.bench_function("per-principal", |b| {
        b.iter(|| {
            turn = (turn + 1) % callers.len();
            black_box(server.list_for(Some(&callers[turn]), OutputShape::AnyJson))
        })
    });

    // The same with an audience: the `pro` plan is not published every
    // fourth tool (8 groups of callers).
    let audienced = guarded();
    let mut edit = audienced
        .edit()
        .audience("pro", toolgraft::access::Claim::is("plan", "pro"));
    for i in (1..1000).step_by(4) {
        let tool = format!("add_{i}");
        edit = edit.publish_to("pro", &tool, toolgraft::toolset::Publish::Only(Vec::new()));
    }
    edit.commit().unwrap();
    let server = ToolsetServer::new(audienced);
    assert_eq!(shown(&server, &callers[0]), 375);
    assert_eq!(shown(&server, &callers[4]), 625);
    group.bench_function("per-principal, 2 audiences", |b| {
        b.iter(|| {
            turn = (turn + 1) % callers.len();
            black_box(server.list_for(Some(&callers[turn]), OutputShape::AnyJson))
        })
    });
    group.finish();
}

criterion_group!(benches, call, list, list_guarded);
criterion_main!(benches);
