//! An MCP server for a weather/translation toolset with combos, over stdio or
//! Streamable HTTP: every bound name (bases and branches, among them `proxy`
//! branches and `pool` backends) is an MCP tool.
//!
//! Run: `cargo run -p toolgraft-mcp --example mcp_server` (speaks MCP on stdin and
//! stdout; logs go to stderr). Try it with the MCP Inspector:
//! `npx @modelcontextprotocol/inspector cargo run -q -p toolgraft-mcp --example mcp_server`.
//!
//! With `--manifest <file.json|file.toml>` the operator's manifest is applied over
//! the combos below at start, and again whenever the file changes: connected
//! clients get `notifications/tools/list_changed` and see the new branches in
//! their next `tools/list`.
//!
//! With `--http [ADDR]` (feature `http`) it serves MCP over Streamable HTTP instead,
//! on `ADDR` (default `127.0.0.1:8931`; port 0 takes a free one), and prints the
//! endpoint's URL on stderr:
//! `cargo run -p toolgraft-mcp --features http --example mcp_server -- --http`.
//! Clients must send `Authorization: Bearer $MCP_TOKEN` when `MCP_TOKEN` is set (16
//! bytes or more: `openssl rand -hex 16`); without it there is no token (and the
//! server only listens on loopback anyway). Either way, the Host and Origin
//! allow-lists name only the loopback addresses.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::Implementation;
use rmcp::{ServiceExt, transport::stdio};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::Registry;
use toolgraft::error::BoxError;
use toolgraft::ext::{Batch, Cache, OutputSchema, Pool, Proxy, Trace, proxy};
use toolgraft::prelude::*;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft_mcp::ToolsetServer;

/// Where to forecast.
// Closed (`deny_unknown_fields`: the schema says `"additionalProperties": false`),
// so a model that sends a field `weather` does not take, or a branch's `exp` to
// `weather`, is told so. A schema that does not say it takes such a field.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ForecastRequest {
    /// City name, e.g. "Lisbon".
    city: String,
    /// Temperature unit.
    #[serde(default)]
    units: Units,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Units {
    #[default]
    Metric,
    Imperial,
}

/// Tomorrow's forecast.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
struct Forecast {
    city: String,
    temperature: f64,
    conditions: String,
    /// The egress route the lookup used.
    route: String,
}

/// A stand-in for a weather service: deterministic (no network), but it reports
/// the egress route it ran with, so the proxy branches show.
async fn forecast(request: ForecastRequest) -> Result<Forecast, BoxError> {
    if request.city.trim().is_empty() {
        return Err("a city is required".into());
    }
    let seed = request
        .city
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    let celsius = 5.0 + f64::from(seed % 250) / 10.0;
    Ok(Forecast {
        temperature: match request.units {
            Units::Metric => celsius,
            Units::Imperial => (celsius * 9.0 / 5.0 + 32.0).round(),
        },
        conditions: ["sunny", "cloudy", "rain", "windy"][(seed % 4) as usize].to_owned(),
        route: proxy::current_route().unwrap_or_else(|| "direct".into()),
        city: request.city,
    })
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Translate {
    /// The text to translate.
    text: String,
    /// Target language, e.g. "pt".
    to: String,
}

async fn translate(input: Translate) -> Result<String, BoxError> {
    Ok(format!("[{}] {}", input.to, input.text))
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct UserId {
    user_id: i64,
}

async fn get_user(input: UserId) -> Result<serde_json::Value, BoxError> {
    match input.user_id {
        1 => Ok(json!({"name": "Alice", "email": "alice@example.com"})),
        // Breaks the declared output schema (name too short): the client gets a
        // tool error naming the field.
        2 => Ok(json!({"name": "Al"})),
        other => Err(format!("no user {other}").into()),
    }
}

fn registry(pool: &Pool) -> Result<Registry, Box<dyn std::error::Error>> {
    let mut registry = Registry::new();
    registry
        .register(Trace)?
        .register(Configured::new(Cache::default()))?
        .register(Configured::new(Batch::default()))?
        .register(Configured::new(Proxy::allow(["egress-eu", "egress-us"])))?
        .register(pool.clone())?
        .register(Configured::<OutputSchema>::named("output_schema"))?;
    Ok(registry)
}

/// Applies the manifest at `path`, reporting on stderr (stdout is the protocol).
fn apply(toolset: &Toolset, registry: &Registry, path: &Path) {
    match Manifest::load(path) {
        Ok(manifest) => {
            for (tool, outcome) in toolset.apply_manifest(registry, &manifest) {
                match outcome {
                    Ok(()) => eprintln!("mcp_server: {tool}: combos from {}", path.display()),
                    Err(error) => eprintln!("mcp_server: {tool}: kept its combos: {error}"),
                }
            }
        }
        Err(error) => eprintln!("mcp_server: {error}"),
    }
}

/// Re-applies the manifest whenever its text changes (polling keeps the example
/// free of a file-watching dependency).
async fn watch(toolset: Toolset, registry: Registry, path: PathBuf) {
    let mut applied = std::fs::read_to_string(&path).ok();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tick.tick().await;
        let now = std::fs::read_to_string(&path).ok();
        if now.is_some() && now != applied {
            apply(&toolset, &registry, &path);
            applied = now;
        }
    }
}

/// What the command line asks for.
struct Args {
    manifest: Option<PathBuf>,
    /// `--http [ADDR]`: serve over Streamable HTTP on ADDR instead of stdio.
    http: Option<String>,
}

const USAGE: &str = "usage: mcp_server [--manifest <file.json|file.toml>] [--http [ADDR]]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        manifest: None,
        http: None,
    };
    let mut given = std::env::args().skip(1).peekable();
    while let Some(arg) = given.next() {
        match arg.as_str() {
            "--manifest" => args.manifest = Some(given.next().ok_or(USAGE)?.into()),
            "--http" => {
                let addr = given.next_if(|next| !next.starts_with("--"));
                args.http = Some(addr.unwrap_or_else(|| "127.0.0.1:8931".into()));
            }
            _ => return Err(USAGE.into()),
        }
    }
    Ok(args)
}

/// Serves over Streamable HTTP until the process is stopped.
#[cfg(feature = "http")]
async fn serve_http(server: ToolsetServer, addr: &str) -> Result<(), Box<dyn std::error::Error>> {
    use toolgraft_mcp::http::{Guard, McpHttp};
    let addr: std::net::SocketAddr = addr.parse().map_err(|e| format!("--http {addr}: {e}"))?;
    // The loopback Host and Origin allow-lists either way; a token when one is set.
    let guard = match std::env::var("MCP_TOKEN") {
        Ok(token) => Guard::bearer(token)?,
        Err(_) => Guard::off(),
    };
    let requires_token = guard.requires_token();
    let running = McpHttp::new(server, guard).serve(addr).await?;
    // Scripts read this line for the URL (with the port chosen for port 0).
    eprintln!("mcp_server: MCP over HTTP at {}", running.url());
    if !requires_token {
        eprintln!("mcp_server: no bearer token (set MCP_TOKEN to require one)");
    }
    running.wait().await?;
    Ok(())
}

#[cfg(not(feature = "http"))]
async fn serve_http(_: ToolsetServer, _: &str) -> Result<(), Box<dyn std::error::Error>> {
    Err("--http needs the `http` feature: cargo run -p toolgraft-mcp --features http --example mcp_server -- --http".into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Args { manifest, http } = parse_args()?;

    let weather = Tool::builder()
        .name("weather")
        .description("Tomorrow's forecast for a city.")
        .read_only()
        .body(forecast)
        .build()?;
    let translate = Tool::builder()
        .name("translate")
        .description("Translate a text.")
        .read_only()
        .body(translate)
        .build()?;
    let get_user = Tool::builder()
        .name("get_user")
        .description("Look a user up by id.")
        .read_only()
        .body(get_user)
        .build()?;

    let pool = Pool::new(2)?;
    let toolset = Toolset::new();
    toolset.bind((
        weather.combo().with(Trace).with(Cache::default()),
        // proxy inside pool: the egress route travels with the body to the worker
        weather
            .combo()
            .with(Proxy::allow(["egress-eu", "egress-us"]))
            .with(pool.clone()),
        weather
            .combo()
            .with(Batch::max_items(10))
            .with(pool.clone()),
    ))?;
    toolset.bind((translate.combo().with(Cache::default()),))?;
    let user_schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 3},
            "email": {"type": "string"}
        },
        "required": ["name"]
    });
    toolset.bind((get_user.combo().with(OutputSchema::new(user_schema)?),))?;

    if let Some(path) = manifest {
        let registry = registry(&pool)?;
        apply(&toolset, &registry, &path);
        tokio::spawn(watch(toolset.clone(), registry, path));
    }

    let server = ToolsetServer::new(toolset)
        .with_server_info(Implementation::new(
            "toolgraft-weather",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Weather, translation and user tools. Each tool has branches named \
             `<tool>_<extension>...`: `_cache` takes `exp` (seconds), `_proxy` takes \
             `proxies` (egress routes), `_batch` takes `items`.",
        );
    if let Some(addr) = http {
        return serve_http(server, &addr).await;
    }
    let server = server.serve(stdio()).await?;
    server.waiting().await?;
    // On stderr, where a client keeps the server's log.
    eprintln!("mcp_server: the client closed the connection");
    Ok(())
}
