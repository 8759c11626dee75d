//! tower-mcp: an `McpRouter` of `ToolBuilder` tools, served by its own
//! `HttpTransport` (defaults) on `axum::serve` with TCP_NODELAY (its own
//! `serve` does not set it), and in process by `StdioTransport::run_with_streams`.

use tokio::io::DuplexStream;
use tower_mcp::{CallToolResult, HttpTransport, McpRouter, StdioTransport, ToolBuilder};

use super::{Served, Tools, serve_axum};
use crate::tool::{self, RepeatArgs};

fn repeat_tool(name: String) -> tower_mcp::Tool {
    ToolBuilder::new(name)
        .description(tool::DESCRIPTION)
        .handler(|args: RepeatArgs| async move { Ok(CallToolResult::text(tool::repeat(&args))) })
        .build()
}

/// The router for `tools`.
pub fn router(tools: Tools) -> McpRouter {
    let router = McpRouter::new().server_info("peer-bench-tower-mcp", "0.0.0");
    match tools {
        Tools::Repeat | Tools::Layered => router.tool(repeat_tool("repeat".to_owned())),
        Tools::List(n) => (0..n).fold(router, |router, i| {
            router.tool(repeat_tool(tool::list_name(i)))
        }),
    }
}

/// Serves `tools` on one end of an in-process pipe (newline-delimited JSON,
/// what rmcp's async read/write transport speaks too).
pub async fn serve_io(io: DuplexStream, tools: Tools) {
    let (read, write) = tokio::io::split(io);
    let mut transport = StdioTransport::new(router(tools));
    let _ = transport.run_with_streams(read, write).await;
}

/// Streamable HTTP on `127.0.0.1:port`: tower-mcp's transport with its
/// defaults (bare JSON answers, localhost Host/Origin allowed), at `/`.
pub async fn serve_http(port: u16) -> Served {
    let router = HttpTransport::new(router(Tools::Repeat)).into_router();
    serve_axum(router, port, true, "/").await
}
