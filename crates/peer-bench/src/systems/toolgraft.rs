//! toolgraft-mcp: `repeat` built with `Tool::builder()` and bound into a
//! `Toolset`, served by `ToolsetServer` (in process) and `McpHttp` (HTTP).
//!
//! With feature `before-0be0cca` this builds against toolgraft at commit
//! `0be0cca`: the guard was `http::Auth`, binding took the base tool beside its
//! combos, and `McpHttp::serve` did not set TCP_NODELAY.

use rmcp::ServiceExt;
use tokio::io::DuplexStream;
use toolgraft::error::BoxError;
use toolgraft::ext::Trace;
use toolgraft::prelude::*;
use toolgraft_mcp::ToolsetServer;
#[cfg(feature = "before-0be0cca")]
use toolgraft_mcp::http::Auth as Guard;
#[cfg(not(feature = "before-0be0cca"))]
use toolgraft_mcp::http::Guard;
use toolgraft_mcp::http::McpHttp;

use super::{Served, ToolgraftHttp, Tools, serve_axum};
use crate::tool::{self, RepeatArgs};

async fn repeat(args: RepeatArgs) -> Result<String, BoxError> {
    Ok(tool::repeat(&args))
}

/// The name of the 4-layer branch: `repeat` under four `trace` wrappers (no
/// tracing subscriber is installed, so each is a pass-through).
pub const LAYERED: &str = "repeat_trace_trace_trace_trace";

/// The toolset for `tools`: `repeat` alone, `repeat` and its 4-layer branch, or
/// `n` base tools `t0000`... with `repeat`'s input.
pub fn toolset(tools: Tools) -> Toolset {
    let toolset = Toolset::new();
    let make = |name: String| {
        Tool::builder()
            .name(name)
            .description(tool::DESCRIPTION)
            .body(repeat)
            .build()
            .expect("a valid tool name")
    };
    match tools {
        Tools::Repeat => bind_base(&toolset, &make("repeat".to_owned())),
        Tools::Layered => {
            let base = make("repeat".to_owned());
            let combo = base.combo().with(Trace).with(Trace).with(Trace).with(Trace);
            #[cfg(feature = "before-0be0cca")]
            toolset.bind_combos((combo,)).expect("bind");
            #[cfg(not(feature = "before-0be0cca"))]
            toolset.bind((combo,)).expect("bind");
        }
        Tools::List(n) => (0..n).for_each(|i| bind_base(&toolset, &make(tool::list_name(i)))),
    }
    toolset
}

fn bind_base<B: BaseTool>(toolset: &Toolset, base: &B) {
    #[cfg(feature = "before-0be0cca")]
    toolset.bind_tool(base).expect("bind");
    #[cfg(not(feature = "before-0be0cca"))]
    toolset.bind((base.combo(),)).expect("bind");
}

/// Serves `tools` on one end of an in-process pipe.
pub async fn serve_io(io: DuplexStream, tools: Tools) {
    if let Ok(running) = ToolsetServer::new(toolset(tools)).serve(io).await {
        let _ = running.waiting().await;
    }
}

/// Streamable HTTP on `127.0.0.1:port`, as `mode` says.
pub async fn serve_http(port: u16, mode: ToolgraftHttp) -> Served {
    let mcp = McpHttp::new(ToolsetServer::new(toolset(Tools::Repeat)), Guard::off());
    match mode {
        ToolgraftHttp::Shipped => {
            let serving = mcp.serve(([127, 0, 0, 1], port)).await.expect("serve");
            let url = serving.url();
            Served::new(url, async move {
                let _ = serving.shutdown().await;
            })
        }
        ToolgraftHttp::RouterPlain => serve_axum(mcp.router(), port, false, "/mcp").await,
        ToolgraftHttp::RouterNoDelay => serve_axum(mcp.router(), port, true, "/mcp").await,
    }
}
