//! A gateway: the tools of other MCP servers (upstreams) beside a tool of its
//! own, served over Streamable HTTP, with the layers an operator's manifest
//! puts on them, by name or by what each tool's annotations say.
//!
//! Run: `cargo run -p toolgraft-mcp --features http,upstream-http --example gateway -- --config gateway.json --port 0`
//!
//! The config names the upstreams (each an `UpstreamConfig`) and the manifest:
//!
//! ```json
//! { "upstreams": [
//!     {"namespace": "fs", "endpoint": {"stdio": {"command": "node", "args": ["server-filesystem/dist/index.js", "/tmp/files"]}}},
//!     {"namespace": "py", "endpoint": {"http": {"url": "http://127.0.0.1:8000/mcp", "bearer_token_env": "UPSTREAM_TOKEN"}}}
//!   ],
//!   "manifest": {"tools": {}, "match": [
//!     {"annotations": {"readOnlyHint": false}, "combos": [["approve"]]},
//!     {"annotations": {"readOnlyHint": true}, "combos": [["cache"]]}
//!   ]} }
//! ```
//!
//! Without `--config`, it prints what binds and stops. It prints
//! `gateway: MCP over HTTP at <url>` once it serves. The extensions a
//! manifest may name: `approve` (sealed with `TOOLGRAFT_APPROVAL_KEY`, or a
//! random key), `cache`, `retry`, `timeout`, `rate_limit`, `concurrency`,
//! `trace`.

use std::error::Error;

use schemars::JsonSchema;
use serde::Deserialize;
use toolgraft::ext::approve::{Approve, SealKey};
use toolgraft::ext::{Cache, Concurrency, RateLimit, Retry, Timeout, Trace};
use toolgraft::runtime::manifest::Manifest;
use toolgraft::runtime::{Configured, Refined};
use toolgraft::toolset::BaseTools;
use toolgraft::{Registry, Tool, Toolset};
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::http::{Guard, McpHttp};
use toolgraft_mcp::upstream::{Upstream, UpstreamConfig};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    upstreams: Vec<UpstreamConfig>,
    #[serde(default)]
    manifest: serde_json::Value,
}

#[derive(Deserialize, JsonSchema)]
struct Shout {
    /// What to shout.
    text: String,
}

fn registry() -> Result<Registry, Box<dyn Error>> {
    let key = match std::env::var("TOOLGRAFT_APPROVAL_KEY") {
        Ok(key) => SealKey::new(key.into_bytes())?,
        Err(_) => SealKey::random()?,
    };
    let mut registry = Registry::new();
    registry
        .register(Approve::new(key))?
        .register(Configured::new(Cache::default()))?
        .register(Configured::new(Retry::default()))?
        .register(Configured::<Timeout>::named("timeout"))?
        .register(Configured::<RateLimit>::named("rate_limit"))?
        .register(Refined::new(
            Concurrency::at_most(16),
            Concurrency::configured,
        ))?
        .register(Trace)?;
    Ok(registry)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|arg| arg == name)
            .and_then(|at| args.get(at + 1))
            .cloned()
    };
    let config: Config = match flag("--config") {
        Some(path) => serde_json::from_slice(&std::fs::read(&path)?)?,
        None => Config {
            upstreams: Vec::new(),
            manifest: serde_json::json!({"tools": {}}),
        },
    };
    let port: u16 = flag("--port").map_or(Ok(0), |port| port.parse())?;
    let manifest = Manifest::from_value(&config.manifest)?;
    let registry = registry()?;

    // The gateway's own tool, bound by the same manifest.
    let toolset = Toolset::new();
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text, loud.")
        .read_only()
        .body(|shout: Shout| async move { Ok(shout.text.to_uppercase()) })
        .build()?;
    let namespaces: Vec<String> = config
        .upstreams
        .iter()
        .map(|upstream| format!("{}_", upstream.namespace))
        .collect();
    let own = toolset.bind_manifest(&registry, &BaseTools::new().with(&shout), &manifest);
    for (tool, outcome) in own {
        // An upstream's keys are its mirror's to report.
        let upstreams = namespaces
            .iter()
            .any(|prefix| tool.starts_with(prefix.as_str()));
        if let Err(error) = &outcome
            && !upstreams
        {
            eprintln!("gateway: {tool}: {error}");
        }
    }
    let mut upstreams = Vec::new();
    for upstream in config.upstreams {
        let upstream = Upstream::connect(upstream).await?;
        let mirror = upstream.mirror(&toolset, registry.clone(), manifest.clone());
        for refused in &mirror.latest().refused {
            eprintln!("gateway: {refused}");
        }
        for (tool, outcome) in &mirror.latest().outcomes {
            if let Err(error) = outcome {
                eprintln!("gateway: {tool}: {error}");
            }
        }
        upstreams.push(upstream);
    }
    for tool in toolset.published() {
        eprintln!("gateway: serves {}", tool.name);
    }
    let serving = McpHttp::new(ToolsetServer::new(toolset), Guard::off())
        .serve(([127, 0, 0, 1], port))
        .await?;
    eprintln!("gateway: MCP over HTTP at {}", serving.url());
    // Stopped (SIGTERM, or Ctrl-C), it stops serving and drops its upstreams,
    // whose child processes go with them.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        served = serving.wait() => served?,
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    drop(upstreams);
    Ok(())
}
