//! Raw rmcp: a `#[tool_router]` server whose router is built once per server
//! (the field pattern of rmcp's examples), served by `StreamableHttpService`
//! with `LocalSessionManager` on `axum::serve` with TCP_NODELAY.

use std::sync::Arc;

use futures_util::FutureExt;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use tokio::io::DuplexStream;

use super::{Served, Tools, serve_axum};
use crate::tool::{self, RepeatArgs};

/// The rmcp server: its tool router, shared by every session's copy.
#[derive(Clone)]
pub struct Raw {
    router: ToolRouter<Raw>,
}

#[tool_router(router = repeat_router)]
impl Raw {
    #[tool(description = "Repeat the text `count` times.")]
    async fn repeat(&self, Parameters(args): Parameters<RepeatArgs>) -> String {
        tool::repeat(&args)
    }
}

#[tool_handler(router = self.router)]
impl ServerHandler for Raw {}

impl Raw {
    /// The server for `tools`: `repeat` (through the macros), or `n` dynamic
    /// routes sharing one input schema (an `Arc`, as the router's own are).
    pub fn new(tools: Tools) -> Self {
        let router = match tools {
            Tools::Repeat | Tools::Layered => Self::repeat_router(),
            Tools::List(n) => {
                let schema = rmcp::handler::server::common::schema_for_type::<RepeatArgs>();
                let mut router = ToolRouter::new();
                for i in 0..n {
                    let attr =
                        Tool::new(tool::list_name(i), tool::DESCRIPTION, Arc::clone(&schema));
                    router.add_route(ToolRoute::new_dyn(attr, |context| {
                        async move {
                            let args =
                                serde_json::Value::Object(context.arguments.unwrap_or_default());
                            let args: RepeatArgs = serde_json::from_value(args)
                                .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
                            let text = tool::repeat(&args);
                            Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
                        }
                        .boxed()
                    }));
                }
                router
            }
        };
        Self { router }
    }
}

/// Serves `tools` on one end of an in-process pipe.
pub async fn serve_io(io: DuplexStream, tools: Tools) {
    if let Ok(running) = Raw::new(tools).serve(io).await {
        let _ = running.waiting().await;
    }
}

/// Streamable HTTP on `127.0.0.1:port`, rmcp's default configuration (its Host
/// check allows `localhost`, `127.0.0.1` and `::1` by default), with TCP_NODELAY.
pub async fn serve_http(port: u16) -> Served {
    let template = Raw::new(Tools::Repeat);
    let config =
        StreamableHttpServerConfig::default().with_allowed_hosts(["localhost", "127.0.0.1", "::1"]);
    let service = StreamableHttpService::new(
        move || Ok(template.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().route_service("/mcp", service);
    serve_axum(router, port, true, "/mcp").await
}
