//! The `everything` example, for now only its author's part ([`author::Author`]:
//! prompts, resources, completions and logging) served over Streamable HTTP.
//! A temporary harness: the example's tools handler, delegating the rest to
//! `Author`, takes its place.
//!
//! Run: `cargo run -p toolgraft-mcp --features http --example everything -- --port 8931`
//! (port 0, the default, takes a free port). It prints the endpoint's URL on
//! stderr, e.g. `everything: MCP over HTTP at http://127.0.0.1:8931/mcp`; no
//! token, loopback only.

// The tools handler (to come) reads the session's log level and announces
// resource updates; until then those parts of `Author` go unused.
#[expect(dead_code, reason = "the tools handler is not written yet")]
mod author;

use std::process::ExitCode;

use author::{Author, Subscriptions};
use toolgraft_mcp::http::{Guard, McpHttp};

const USAGE: &str = "usage: everything [--port PORT]";

#[tokio::main]
async fn main() -> ExitCode {
    let port = match port(std::env::args().skip(1)) {
        Ok(port) => port,
        Err(message) => {
            eprintln!("everything: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let subscriptions = Subscriptions::default();
    let mcp = McpHttp::for_handler(move || Author::new_shared(&subscriptions), Guard::off());
    let serving = match mcp.serve(([127, 0, 0, 1], port)).await {
        Ok(serving) => serving,
        Err(error) => {
            eprintln!("everything: {error}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("everything: MCP over HTTP at {}", serving.url());
    match serving.wait().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("everything: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The port of `--port PORT` (or `--port=PORT`); 0 without one.
fn port(mut args: impl Iterator<Item = String>) -> Result<u16, String> {
    let mut port = 0;
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix("--port") {
            Some("") => args.next().ok_or("--port needs a value")?,
            Some(rest) if rest.starts_with('=') => rest[1..].to_owned(),
            _ => return Err(format!("unknown argument `{arg}`")),
        };
        port = value
            .parse()
            .map_err(|_| format!("`{value}` is not a port number"))?;
    }
    Ok(port)
}
