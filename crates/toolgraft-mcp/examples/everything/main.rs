//! The `everything` example: every server scenario of the official MCP
//! conformance suite, served by toolgraft inside a server of an author's own.
//!
//! - The author's rmcp handler ([`author::Author`]) serves prompts, resources,
//!   completions and logging, as any rmcp server does.
//! - The toolset ([`tools`]) serves the tools beside it: toolgraft tools, and the
//!   rmcp `#[tool_router]` of [`fixtures`] imported whole. `test_simple_text` is
//!   served by its `timeout` branch and `test_tool_with_progress` by its `pool`
//!   branch (its progress comes from a worker thread), each published under the
//!   suite's name.
//!
//! Run: `cargo run -p toolgraft-mcp --features http --example everything -- --port 8931`
//! (port 0, the default, takes a free port). It prints the endpoint's URL on
//! stderr, e.g. `everything: MCP over HTTP at http://127.0.0.1:8931/mcp`; no
//! token, loopback only.

// Logging is deprecated by the newest protocol, and still what clients show.
#![allow(deprecated)]

// `Author`'s log-level handles and resource updates are its API for tools of
// its own; this server's tools do not use them.
#[allow(dead_code)]
mod author;
mod fixtures;
mod mrtr;
mod tasks;
mod tools;

use std::process::ExitCode;

use author::{Author, Subscriptions};
use rmcp::model::Implementation;
use toolgraft_mcp::ToolsetServer;
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
    let toolset = match tools::toolset() {
        Ok(toolset) => toolset,
        Err(error) => {
            eprintln!("everything: {error}");
            return ExitCode::FAILURE;
        }
    };
    let policy = match tasks::policy() {
        Ok(policy) => policy,
        Err(error) => {
            eprintln!("everything: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Calls that must wait become MCP tasks, for clients that take them.
    let tools = ToolsetServer::new(toolset).with_tasks(policy);
    let subscriptions = Subscriptions::default();
    let info = Implementation::new("toolgraft-everything", env!("CARGO_PKG_VERSION"));
    // One server per session: the toolset's tools beside that session's Author.
    let mcp = McpHttp::for_handler(
        move || {
            tools
                .with_handler(Author::new_shared(&subscriptions))
                .with_server_info(info.clone())
        },
        Guard::off(),
    );
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
