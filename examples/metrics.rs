//! Expose the `metrics` wrapper's numbers to Prometheus: install the
//! `metrics-exporter-prometheus` recorder and serve its text format at `/metrics`,
//! bind a tool with `[metrics]` and `[timeout, metrics]` from a manifest, make a
//! few calls, then scrape `/metrics` over HTTP the way Prometheus does and print
//! what it got. (The exporter's own `http-listener` feature serves it the same
//! way, on hyper; this example serves it with the standard library instead.)
//!
//! Run: `cargo run --features metrics --example metrics` (listens on a free
//! loopback port; `-- --listen 127.0.0.1:9464` for a fixed address, `-- --serve`
//! to keep serving until Ctrl-C).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::ext::{Metrics, Timeout};
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft::{Registry, Tool, Toolset};

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
    let listen = match args.iter().position(|arg| arg == "--listen") {
        Some(at) => args
            .get(at + 1)
            .ok_or("--listen needs an address")?
            .as_str(),
        None => "127.0.0.1:0",
    };
    let listener = TcpListener::bind(listen)?;
    let listen: SocketAddr = listener.local_addr()?;
    // The application's choice of recorder: Prometheus, with histogram buckets
    // (without them the exporter renders summaries), served at `listen`.
    let handle = PrometheusBuilder::new()
        .set_buckets(&[0.001, 0.01, 0.1, 1.0, 10.0])?
        .install_recorder()?;
    std::thread::spawn(move || serve(&listener, &handle));

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
        .register(Metrics::default())?
        .register(Configured::new(Timeout::new(Duration::from_secs(30))))?;
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

/// Answers every request with the current text format (what Prometheus scrapes).
fn serve(listener: &TcpListener, handle: &PrometheusHandle) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        // Read the request head (up to its blank line) before answering.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
            match stream.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
        let body = handle.render();
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

/// `GET /metrics` over plain HTTP/1.1; the body.
fn scrape(at: SocketAddr) -> std::io::Result<String> {
    let mut last = None;
    for _ in 0..50 {
        match TcpStream::connect(at) {
            Ok(mut stream) => {
                stream.set_read_timeout(Some(Duration::from_secs(10)))?;
                let request =
                    format!("GET /metrics HTTP/1.1\r\nHost: {at}\r\nConnection: close\r\n\r\n");
                stream.write_all(request.as_bytes())?;
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
