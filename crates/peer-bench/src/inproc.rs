//! In process: rmcp's client over a `tokio::io::duplex` pipe, `tools/call` and
//! `tools/list` in a loop, one system after another, rounds rotating the order.

use std::hint::black_box;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{ClientCacheConfig, RunningService};

use crate::client;
use crate::report::Table;
use crate::systems::{self, System, Tools, toolgraft};
use crate::tool;

/// What one in-process `tools/call` measurement serves and calls.
struct Entry {
    system: System,
    label: &'static str,
    name: &'static str,
    tools: Tools,
}

const ENTRIES: [Entry; 4] = [
    Entry {
        system: System::Toolgraft,
        label: "toolgraft",
        name: "repeat",
        tools: Tools::Repeat,
    },
    Entry {
        system: System::Toolgraft,
        label: "toolgraft 4-layer",
        name: toolgraft::LAYERED,
        tools: Tools::Layered,
    },
    Entry {
        system: System::Rmcp,
        label: "rmcp",
        name: "repeat",
        tools: Tools::Repeat,
    },
    Entry {
        system: System::TowerMcp,
        label: "tower-mcp",
        name: "repeat",
        tools: Tools::Repeat,
    },
];

/// A client whose response cache is off (rmcp's client caches lists a server
/// gives a TTL for; every list here must reach the server).
async fn connect(system: System, tools: Tools) -> RunningService<RoleClient, ()> {
    let client = systems::connect(system, tools).await;
    client
        .peer()
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    client
}

fn params(name: &str) -> CallToolRequestParams {
    let args: JsonObject = tool::call_args().as_object().cloned().unwrap_or_default();
    CallToolRequestParams::new(name.to_owned()).with_arguments(args)
}

/// Runs `op` for `warmup`, then for `secs`; the mean duration of one `op` (µs).
async fn time_loop<F, Fut>(warmup: Duration, secs: Duration, min: u64, mut op: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let start = Instant::now();
    while start.elapsed() < warmup {
        op().await;
    }
    let start = Instant::now();
    let mut n = 0u64;
    while n < min || start.elapsed() < secs {
        op().await;
        n += 1;
    }
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

/// `tools/call repeat` per system: tables of µs per call and calls/s.
pub async fn calls(rounds: usize, warmup: Duration, secs: Duration) -> Vec<Table> {
    let mut us = Table::new(
        "In process: tools/call (rmcp client over duplex)",
        "µs per call, lower is better",
    );
    let mut rate = Table::new(
        "In process: tools/call (rmcp client over duplex)",
        "calls/s, higher is better",
    );
    for round in 0..rounds {
        for k in 0..ENTRIES.len() {
            let entry = &ENTRIES[(round + k) % ENTRIES.len()];
            eprintln!("inproc round {}: {}", round + 1, entry.label);
            let client = connect(entry.system, entry.tools).await;
            let peer = client.peer().clone();
            let params = params(entry.name);
            let first = peer.call_tool(params.clone()).await.expect("tools/call");
            client::check(&serde_json::to_value(&first).expect("result as JSON"))
                .unwrap_or_else(|e| panic!("{}: {e}", entry.label));
            let mean = time_loop(warmup, secs, 100, || {
                let peer = peer.clone();
                let params = params.clone();
                async move {
                    black_box(peer.call_tool(params).await.expect("tools/call"));
                }
            })
            .await;
            us.row("repeat", entry.label, entry.system)
                .values
                .push(mean);
            rate.row("repeat", entry.label, entry.system)
                .values
                .push(1e6 / mean);
            let _ = client.cancel().await;
        }
    }
    vec![us, rate]
}

/// `tools/list` per system and tool count: a table of µs per list.
pub async fn lists(
    rounds: usize,
    counts: &[usize],
    warmup: Duration,
    secs: Duration,
) -> Vec<Table> {
    let mut us = Table::new(
        "In process: tools/list (rmcp client over duplex)",
        "µs per list, lower is better",
    );
    for &n in counts {
        let group = format!("{n} tools");
        for round in 0..rounds {
            for k in 0..System::ALL.len() {
                let system = System::ALL[(round + k) % System::ALL.len()];
                eprintln!("list {n} round {}: {}", round + 1, system.name());
                let client = connect(system, Tools::List(n)).await;
                let peer = client.peer().clone();
                let listed = peer.list_tools(None).await.expect("tools/list");
                assert_eq!(listed.tools.len(), n, "{}: tools listed", system.name());
                assert!(listed.next_cursor.is_none(), "{}: paginated", system.name());
                let mean = time_loop(warmup, secs, 5, || {
                    let peer = peer.clone();
                    async move {
                        black_box(peer.list_tools(None).await.expect("tools/list"));
                    }
                })
                .await;
                us.row(&group, system.name(), system).values.push(mean);
                let _ = client.cancel().await;
            }
        }
    }
    vec![us]
}
