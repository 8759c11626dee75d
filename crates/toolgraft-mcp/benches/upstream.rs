//! A `tools/call` through a gateway against the same call made to its
//! upstream directly, and against one in-process MCP call, in one sitting.
//!
//! One tool, `repeat {text, count} -> {text}` (an object, so that its result
//! is structured on every protocol, as `benches/call.rs`'s is), served by a toolgraft server
//! over Streamable HTTP on a loopback port (the upstream). Measured, each as
//! round trips of rmcp's client (its reqwest transport as `from_uri` makes it,
//! `initialize` as its default lifecycle):
//!
//! * `direct`: the client calls the upstream.
//! * `gateway`: the client calls a second toolgraft server over HTTP (the
//!   gateway), whose toolset binds the upstream's tool through
//!   [`Upstream`]; its body forwards the call to the upstream over HTTP.
//! * `gateway, in process`: the gateway's toolset called by name
//!   (`Toolset::call`), no downstream MCP hop: what forwarding costs beside
//!   the upstream's round trip.
//! * `direct, 2026-07-28` and `gateway, 2026-07-28`: the same with the
//!   client opening its session by `server/discover` at protocol 2026-07-28,
//!   the one the gateway's own link to the upstream speaks (a caller of
//!   2025-11-25 goes by a second link of that protocol).
//! * `direct, kept connection` and `gateway, kept connection`: the client's
//!   reqwest keeping its connection between calls, as the gateway's links
//!   do (rmcp's `from_uri` client makes a TCP connection per request).
//! * `gateway in process, kept connection`: the client joined to the
//!   gateway's server by `tokio::io::duplex`, the gateway's link to the
//!   upstream over HTTP: the requirement's own terms, the upstream call (as
//!   `direct, kept connection` makes it) plus what one in-process MCP call
//!   to the gateway adds.
//! * `in-process`: the client and the upstream's server joined by
//!   `tokio::io::duplex`, as `benches/call.rs`'s base case: one MCP call with
//!   no network.
//!
//! The requirement: a call through the gateway costs at most the upstream call
//! plus 1.2 in-process MCP calls, `(gateway - direct) / in-process <= 1.2`.
//! Each on a current-thread runtime (servers, gateway and client on one
//! thread) and on a multi-thread runtime with 2 workers.
//!
//! Run: `cargo bench -p toolgraft-mcp --features http,upstream-http --bench upstream`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::model::{CallToolRequestParams, JsonObject, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use toolgraft::error::BoxError;
use toolgraft::prelude::*;
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::http::{Guard, McpHttp, Serving};
use toolgraft_mcp::upstream::{Endpoint, Upstream, UpstreamConfig};

#[derive(Deserialize, JsonSchema)]
struct Repeat {
    /// The text to repeat.
    text: String,
    /// How many times.
    count: u32,
}

#[derive(Serialize, JsonSchema)]
struct Repeated {
    text: String,
}

async fn repeat(input: Repeat) -> Result<Repeated, BoxError> {
    Ok(Repeated {
        text: input.text.repeat(input.count as usize),
    })
}

fn upstream_toolset() -> Toolset {
    let tool = Tool::builder()
        .name("repeat")
        .description("Repeat the text `count` times.")
        .read_only()
        .body(repeat)
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((tool.combo(),)).unwrap();
    toolset
}

fn arguments() -> Value {
    json!({"text": "hello ", "count": 8})
}

fn params(name: &str) -> CallToolRequestParams {
    let args: JsonObject = arguments().as_object().cloned().unwrap();
    CallToolRequestParams::new(name.to_owned()).with_arguments(args)
}

async fn serve_http(toolset: &Toolset) -> Serving {
    McpHttp::new(ToolsetServer::new(toolset.clone()), Guard::off())
        .serve(([127, 0, 0, 1], 0))
        .await
        .unwrap()
}

/// rmcp's client over Streamable HTTP, as `from_uri` makes it, opening its
/// session with `initialize` (rmcp's default, protocol 2025-11-25), or
/// `newest` as the gateway's link does (`server/discover`, 2026-07-28).
async fn connect_http(url: String, newest: bool) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_uri(url);
    let client = if newest {
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::LATEST],
            legacy_version: None,
        };
        ().serve_with_lifecycle(transport, lifecycle).await
    } else {
        ().serve(transport).await
    };
    client.unwrap()
}

/// rmcp's client over Streamable HTTP with a reqwest client that keeps its
/// connection between calls (`TCP_NODELAY`), as the gateway's links do, and as
/// a long-lived client would: no TCP connection made per call.
async fn connect_kept(url: String) -> RunningService<RoleClient, ()> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let config = StreamableHttpClientTransportConfig::with_uri(url);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    ().serve(transport).await.unwrap()
}

/// `server` on one end of a pipe, rmcp's client on the other.
async fn connect_duplex<S: ServerHandler>(server: S) -> RunningService<RoleClient, ()> {
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

/// `iters` round trips timed inside one task on `rt` (see `benches/call.rs`).
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

/// `iters` calls of `name` by `Toolset::call`, timed as [`round_trips`].
fn calls_by_name(rt: &Runtime, toolset: &Toolset, name: &str, iters: u64) -> Duration {
    let toolset = toolset.clone();
    let name = name.to_owned();
    let args = arguments();
    rt.block_on(async move {
        tokio::spawn(async move {
            let start = Instant::now();
            for _ in 0..iters {
                black_box(toolset.call(&name, args.clone()).await.unwrap());
            }
            start.elapsed()
        })
        .await
        .unwrap()
    })
}

fn through_gateway(c: &mut Criterion) {
    let mut group = c.benchmark_group("mcp-upstream");
    let expected = json!({"text": "hello ".repeat(8)});
    for (flavor, rt) in runtimes() {
        let upstream_toolset = upstream_toolset();
        let upstream_server = rt.block_on(serve_http(&upstream_toolset));
        let upstream = rt
            .block_on(Upstream::connect(UpstreamConfig::new(
                "up",
                Endpoint::http(upstream_server.url()),
            )))
            .unwrap();
        let gateway = Toolset::new();
        let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
        gateway.bind(combos).unwrap();
        let gateway_server = rt.block_on(serve_http(&gateway));

        let clients = [
            (
                "direct",
                "repeat",
                rt.block_on(connect_http(upstream_server.url(), false)),
            ),
            (
                "gateway",
                "up_repeat",
                rt.block_on(connect_http(gateway_server.url(), false)),
            ),
            (
                "direct, 2026-07-28",
                "repeat",
                rt.block_on(connect_http(upstream_server.url(), true)),
            ),
            (
                "gateway, 2026-07-28",
                "up_repeat",
                rt.block_on(connect_http(gateway_server.url(), true)),
            ),
            (
                "direct, kept connection",
                "repeat",
                rt.block_on(connect_kept(upstream_server.url())),
            ),
            (
                "gateway, kept connection",
                "up_repeat",
                rt.block_on(connect_kept(gateway_server.url())),
            ),
            (
                "gateway in process, kept connection",
                "up_repeat",
                rt.block_on(connect_duplex(ToolsetServer::new(gateway.clone()))),
            ),
            (
                "in-process",
                "repeat",
                rt.block_on(connect_duplex(ToolsetServer::new(upstream_toolset.clone()))),
            ),
        ];
        for (what, name, client) in &clients {
            let params = params(name);
            let result = rt.block_on(client.call_tool(params.clone())).unwrap();
            assert_eq!(
                result.structured_content.as_ref(),
                Some(&expected),
                "{what}"
            );
            let protocol = client.peer_info().map(|info| info.protocol_version.clone());
            eprintln!("{what}/{flavor}: protocol {protocol:?}");
            group.bench_function(format!("{what}/{flavor}"), |b| {
                b.iter_custom(|iters| round_trips(&rt, client, &params, iters))
            });
            if *what == "gateway" {
                let answer = rt.block_on(gateway.call("up_repeat", arguments())).unwrap();
                assert_eq!(answer, expected);
                group.bench_function(format!("gateway, in process/{flavor}"), |b| {
                    b.iter_custom(|iters| calls_by_name(&rt, &gateway, "up_repeat", iters))
                });
            }
        }
        for (_, _, client) in clients {
            rt.block_on(client.cancel()).unwrap();
        }
        drop(upstream);
        rt.block_on(gateway_server.shutdown()).unwrap();
        rt.block_on(upstream_server.shutdown()).unwrap();
    }
    group.finish();
}

criterion_group!(benches, through_gateway);
criterion_main!(benches);
