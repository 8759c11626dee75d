//! Expose the `metrics` wrapper's numbers to Prometheus: install the
//! `metrics-exporter-prometheus` recorder with its HTTP listener, bind a tool with
//! `[metrics]` and `[timeout, metrics]` from a manifest, make a few calls, then
//! scrape `/metrics` over HTTP the way Prometheus does and print what it got.
//!
//! Run: `cargo run --features metrics --example metrics` (listens on a free
//! loopback port; `-- --listen 127.0.0.1:9464` for a fixed address, `-- --serve`
//! to keep serving until Ctrl-C).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::ext::{Metrics, Timeout};
use toolgraft::manifest::Manifest;
use toolgraft::{BaseTools, Registry, Tool, Toolset};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Lookup {
    /// City name; `Atlantis` is not found, `Slowtown` takes a while.
    city: String,
}

const MANIFEST: &str = r#"{ "tools": {
    "weather": [["metrics"], [{"name": "timeout", "config": {"ms": 100}}, "metrics"]]
} }"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let listen: SocketAddr = match args.iter().position(|arg| arg == "--listen") {
        Some(at) => args
            .get(at + 1)
            .ok_or("--listen needs an address")?
            .parse()?,
        None => std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?,
    };
    // The application's choice of recorder: Prometheus, served at `listen`, with
    // histogram buckets (without them the exporter renders summaries).
    PrometheusBuilder::new()
        .with_http_listener(listen)
        .set_buckets(&[0.001, 0.01, 0.1, 1.0, 10.0])?
        .install()?;

    let weather = Tool::builder()
        .name("weather")
        .description("Tomorrow's weather in a city.")
        .body(|input: Lookup| async move {
            match input.city.as_str() {
                "Atlantis" => Err("no such city".into()),
                "Slowtown" => {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Ok("late".to_owned())
                }
                city => Ok(format!("sunny in {city}")),
            }
        })
        .build()?;
    let mut registry = Registry::new();
    registry
        .register(Metrics)?
        .register_configurable(Timeout::new(Duration::from_secs(30)))?;
    let toolset = Toolset::new();
    for (tool, outcome) in toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&weather),
        &Manifest::from_json(MANIFEST)?,
    ) {
        outcome.map_err(|err| format!("{tool}: {err}"))?;
    }
    println!("bound: {:?}", toolset.names());

    for (name, city) in [
        ("weather_metrics", "Lisbon"),
        ("weather_metrics", "Porto"),
        ("weather_metrics", "Atlantis"),
        ("weather_timeout_metrics", "Lisbon"),
        ("weather_timeout_metrics", "Slowtown"),
    ] {
        match toolset.call(name, json!({ "city": city })).await {
            Ok(out) => println!("{name}({city}) = {out}"),
            Err(err) => println!("{name}({city}) failed: {err}"),
        }
    }

    // What Prometheus would scrape.
    let text = tokio::task::spawn_blocking(move || scrape(listen)).await??;
    println!("\nGET http://{listen}/metrics\n{text}");
    for needed in [
        r#"toolgraft_tool_calls_total{tool="weather",outcome="success"} 2"#,
        r#"toolgraft_tool_errors_total{tool="weather",kind="body"} 1"#,
        r#"toolgraft_tool_errors_total{tool="weather_timeout",kind="timed_out"} 1"#,
    ] {
        if !text.contains(needed) {
            return Err(format!("the scrape lacks `{needed}`").into());
        }
    }
    if args.iter().any(|arg| arg == "--serve") {
        println!("serving http://{listen}/metrics until Ctrl-C");
        std::future::pending::<()>().await;
    }
    Ok(())
}

/// `GET /metrics` over plain HTTP/1.1; the body.
fn scrape(at: SocketAddr) -> std::io::Result<String> {
    let mut last = None;
    // The listener starts in the background: try for a few seconds.
    for _ in 0..50 {
        match TcpStream::connect(at) {
            Ok(mut stream) => {
                stream.set_read_timeout(Some(Duration::from_secs(10)))?;
                write!(
                    stream,
                    "GET /metrics HTTP/1.1\r\nHost: {at}\r\nConnection: close\r\n\r\n"
                )?;
                let mut response = String::new();
                stream.read_to_string(&mut response)?;
                let body = response
                    .split_once("\r\n\r\n")
                    .map_or(response.as_str(), |(_, body)| body);
                return Ok(body.to_owned());
            }
            Err(err) => last = Some(err),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no connection")))
}
