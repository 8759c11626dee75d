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
//!
//! With `--upstream URL` (feature `upstream-http`), the tools are another such
//! server's, at `URL`, served through an upstream connection (see
//! [`upstream`]): the conformance suite runs against both.

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
#[cfg(feature = "upstream-http")]
mod upstream;

use std::process::ExitCode;

use author::{Author, Subscriptions};
use rmcp::model::Implementation;
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::http::{Guard, McpHttp};

const USAGE: &str = "usage: everything [--port PORT] [--upstream URL]";

#[tokio::main]
async fn main() -> ExitCode {
    let (port, upstream) = match arguments(std::env::args().skip(1)) {
        Ok(arguments) => arguments,
        Err(message) => {
            eprintln!("everything: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let toolset = match upstream {
        None => tools::toolset().map(|toolset| (toolset, None)),
        #[cfg(feature = "upstream-http")]
        Some(url) => upstream::toolset(&url)
            .await
            .map(|(toolset, upstream)| (toolset, Some(upstream))),
        #[cfg(not(feature = "upstream-http"))]
        Some(_) => Err("--upstream needs the feature `upstream-http`".into()),
    };
    // The upstream lives as long as the server.
    let (toolset, _upstream) = match toolset {
        Ok(toolset) => toolset,
        Err(error) => {
            eprintln!("everything: {error}");
            return ExitCode::FAILURE;
        }
    };
    #[cfg(feature = "upstream-http")]
    let policy = match _upstream {
        Some(_) => upstream::policy(),
        None => tasks::policy(),
    };
    #[cfg(not(feature = "upstream-http"))]
    let policy = tasks::policy();
    let policy = match policy {
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

/// The port of `--port PORT` (or `--port=PORT`), 0 without one; the URL of
/// `--upstream URL`, if given.
fn arguments(mut args: impl Iterator<Item = String>) -> Result<(u16, Option<String>), String> {
    let (mut port, mut upstream) = (0, None);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or(format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--port" => {
                let value = value()?;
                port = value
                    .parse()
                    .map_err(|_| format!("`{value}` is not a port number"))?;
            }
            "--upstream" => upstream = Some(value()?),
            _ => return Err(format!("unknown argument `{arg}`")),
        }
    }
    Ok((port, upstream))
}
