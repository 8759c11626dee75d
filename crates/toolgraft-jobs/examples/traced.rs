//! One trace from an MCP client to a worker process: an MCP server over
//! Streamable HTTP whose `forecast` tool is `[proxy, remote, retry, timeout]`,
//! its body on a worker, both exporting their spans over OTLP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set. A client that sends `traceparent` in
//! the request's `_meta` (SEP-414) or as an HTTP header gets the worker's
//! spans in its trace: the job's run (`process forecasts`, a consumer span),
//! its queue wait (`wait forecasts`), and the body's progress as span events.
//!
//! Run a collector (or `cargo run -p toolgraft-jobs --example otlp_receiver`,
//! which prints what it receives), then a worker and the server on one job
//! engine (an SQLite file by default; `--jobs redis://127.0.0.1:6379`):
//!
//! ```text
//! export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318
//! cargo run -p toolgraft-jobs --features otel --example traced -- worker
//! cargo run -p toolgraft-jobs --features otel --example traced -- http --port 8000
//! ```

#[path = "otlp/mod.rs"]
mod otlp;

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgraft::context::{self, Progress, TraceContext};
use toolgraft::error::BoxError;
use toolgraft::ext::{Proxy, Retry, Timeout};
use toolgraft::prelude::*;
use toolgraft_jobs::{Remote, Worker};
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::http::{Guard, McpHttp};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Where to forecast.
#[derive(Clone, Deserialize, Serialize, JsonSchema)]
struct City {
    /// City name, e.g. "Lisbon".
    city: String,
}

/// Three steps of 10 ms, each reported; answers with where it ran and the
/// trace context it would send on.
async fn forecast(input: City) -> Result<Value, BoxError> {
    for step in 1..=3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        context::report_progress(
            Progress::new(step.into())
                .with_total(3.0)
                .with_message(format!("step {step}")),
        );
    }
    Ok(json!({
        "city": input.city,
        "celsius": 21.5,
        "pid": std::process::id(),
        "traceparent": context::get::<TraceContext>().map(|trace| trace.traceparent()),
    }))
}

/// The one binding code of the server and its workers.
fn toolset(remote: &Remote) -> Result<Toolset, Error> {
    let forecast = Tool::builder()
        .name("forecast")
        .description("Tomorrow's forecast for a city, computed on a worker.")
        .read_only()
        .body(forecast)
        .build()?;
    let toolset = Toolset::new();
    toolset.bind_in_place((forecast
        .combo()
        .with(Proxy::allow(["egress-eu"]))
        .with(remote.clone())
        .with(Retry::attempts(2))
        .with(Timeout::new(Duration::from_secs(10))),))?;
    Ok(toolset)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let role = std::env::args().nth(1).unwrap_or_default();
    let _otel = otlp::init(if role == "worker" {
        "traced-worker"
    } else {
        "traced-server"
    })
    .map_err(|error| error.to_string())?;
    if _otel.is_none() {
        eprintln!(
            "traced: traces are not exported; set {}=http://127.0.0.1:4318 (a collector's \
             OTLP/HTTP endpoint) to send them",
            otlp::ENDPOINT
        );
    }
    let jobs = option("--jobs").unwrap_or_else(|| {
        let file = std::env::temp_dir().join("toolgraft-traced.db");
        format!("sqlite://{}", file.display())
    });
    let remote = Remote::new(jobs)?.with_queue("forecasts")?;
    let toolset = toolset(&remote)?;
    match role.as_str() {
        "worker" => {
            eprintln!(
                "traced: worker pid {} on queue `forecasts`",
                std::process::id()
            );
            Worker::new(toolset, &remote).run().await?;
        }
        "http" => {
            let port: u16 = option("--port").unwrap_or_default().parse().unwrap_or(0);
            let serving = McpHttp::new(ToolsetServer::new(toolset), Guard::off())
                .serve(([127, 0, 0, 1], port))
                .await?;
            eprintln!("traced: MCP over HTTP at {}", serving.url());
            serving.wait().await?;
        }
        _ => return Err("say `worker` or `http [--port P]` (and `--jobs URL` for both)".into()),
    }
    Ok(())
}

/// The value after `name` on the command line.
fn option(name: &str) -> Option<String> {
    std::env::args().skip_while(|arg| arg != name).nth(1)
}
