//! Serve a [`Toolset`](toolgraft::Toolset) over MCP with [`rmcp`], the official Rust SDK, alone
//! or inside an rmcp server of your own.
//!
//! Depend on `rmcp` yourself, with the same minor version (`~3.11`) and the
//! transports you serve over (`transport-io` for stdio); toolgraft enables only its
//! `server` feature.
//!
//! Over HTTP, the `http` feature's `toolgraft_mcp::http` module serves it on MCP's
//! Streamable HTTP transport (an axum router, or a loopback server of its own), with
//! sessions and toolgraft-guard's bearer token and Host and Origin allow-lists in front.
//!
//! With the `otel` feature, each `tools/call` and `tools/list` is a server span
//! named and attributed by the OpenTelemetry semantic conventions for MCP
//! (`tools/call get_weather`: `mcp.method.name`, `gen_ai.tool.name`,
//! `gen_ai.operation.name`, `jsonrpc.request.id`, `mcp.protocol.version`,
//! `network.transport`, over HTTP a digest of the session as `mcp.session.id`,
//! and `error.type` on failure, `tool_error` for a result with `isError`), its
//! parent the W3C trace context the request sent (see [`call`]), the combo's
//! layers its children (the core's `otel` feature); and the metrics API's global
//! meter gets `mcp.server.operation.duration` per request and
//! `mcp.server.session.duration` per session, in seconds. The application
//! installs the OpenTelemetry SDK as usual: a tracer provider with its exporter
//! (`opentelemetry-otlp`) and sampler behind `tracing_opentelemetry::layer()` on
//! its `tracing` subscriber, and a meter provider with
//! `opentelemetry::global::set_meter_provider` before it makes the server (the
//! instruments are made with it). The core's `metrics` wrapper keeps its series
//! beside these: those are per bound name and layer through the `metrics`
//! facade (Prometheus users of the facade); these are per MCP request by the
//! conventions OpenTelemetry backends read.
//!
//! [`ToolsetServer`] is an rmcp [`ServerHandler`](rmcp::ServerHandler) built from the
//! toolset at run time: every published name (all bound names unless the tool says
//! otherwise: [`Publish`](toolgraft::toolset::Publish)) is an MCP tool, listed from
//! [`Toolset::published`](toolgraft::Toolset::published) on each `tools/list` and
//! called through [`Toolset::call_published`](toolgraft::Toolset::call_published)
//! by name, so live changes ([`Toolset::edit`](toolgraft::Toolset::edit),
//! `apply_manifest`) show in the next `tools/list`, and the server tells the client
//! with `notifications/tools/list_changed`.
//!
//! Inside a server of your own:
//!
//! * [`ToolsetServer::with_handler`] serves the toolset's tools beside your rmcp
//!   handler's prompts, resources, completions, logging and tools: every other
//!   request goes to your handler as it came.
//! * [`import::tools`] brings an rmcp `#[tool_router]` in as base tools (names,
//!   schemas, title, annotations, icons and `_meta` kept), for combos to apply to.
//! * `upstream` (feature `upstream`; over HTTP `upstream-http`) brings another
//!   MCP server's tools in as base tools, in a namespace, with what each says of
//!   itself kept, forwarded call by call, and kept in step with its list.
//! * [`call::McpCall`] is the MCP request of the current call, in the
//!   [call context](toolgraft::context) a body and every extension read: its id and
//!   `_meta`, the peer (elicitation, sampling, logging), cancellation and the HTTP
//!   request; [`toolgraft::context::report_progress`] reaches the client's progress
//!   token, from a pool thread too; `McpHttp::with_identity` and
//!   `McpHttp::with_principal` (feature `http`) set the caller's
//!   [`Identity`](toolgraft::context::Identity) and
//!   [`Principal`](toolgraft::context::Principal). The W3C trace context the
//!   client sent (`_meta`'s `traceparent`, SEP-414, or over HTTP the header) is
//!   a [`TraceContext`](toolgraft::context::TraceContext) there, when valid.
//! * With [access policies](toolgraft::access) on the toolset, each caller is
//!   listed exactly the names it may call; a name it may not call answers as one
//!   that does not exist (and never falls through to the handler's tool of that
//!   name); a step-up answers [`INSUFFICIENT_SCOPE`] (over HTTP, `403` with an
//!   `insufficient_scope` challenge); `list_changed` reaches only the sessions
//!   whose listing changed.
//!
//! What a client sees of a published name:
//!
//! * `name` (the published one), `description`, and `inputSchema` (with `"type":
//!   "object"` added when the root schema has no `type`: MCP requires it, and a call
//!   by name only takes an object anyway, so it narrows nothing).
//! * `title`, `annotations`, `icons` and `_meta`: the base tool's
//!   [`Presentation`](toolgraft::tool::Presentation), on every branch, but for
//!   the hints a transformer's branch does not keep (read-only, destructive,
//!   idempotent: its call is a new tool's; the
//!   [rulebook](toolgraft::rulebook#side-effects) says which).
//! * `outputSchema`: the name's output schema (inherited by [output-schema](toolgraft::rulebook#output-schema)), see
//!   [`OutputShape`] for schemas that are not objects; none for [`McpContent`].
//! * Calls: a result is returned as `structuredContent` plus its JSON as text when the
//!   tool advertises an output schema; an [`McpContent`] as its blocks; otherwise as
//!   text only (a string result is the text itself, anything else its JSON).
//!
//! Errors map the way MCP separates them:
//!
//! | [`ToolError`](toolgraft::ToolError) | MCP |
//! |---|---|
//! | `InvalidArguments` | JSON-RPC error `-32602` (invalid params); `data` = `{tool, field, kind}`; or, with [`BadArguments::AsToolResult`], a result with `isError: true`, the same message as text and the same data in `_meta` under [`ERROR_META`] |
//! | `UnknownTool` (a name that does not exist, or one the caller may not call: the same answer) | JSON-RPC error `-32602` (invalid params); `data` = `{tool}` |
//! | `Unauthorized` (a [step-up](toolgraft::access::Denied::step_up)) | JSON-RPC error [`INSUFFICIENT_SCOPE`] (`-32003`); `data` = `{tool, error: "insufficient_scope", scopes}`; over Streamable HTTP with `403` and a `WWW-Authenticate` challenge naming the scopes |
//! | `Body` whose error is an rmcp [`ErrorData`](rmcp::ErrorData) (an imported rmcp tool's protocol error, in process or from a worker process; a body's `Err(ErrorData::..)`) | that JSON-RPC error, as rmcp answers for its own tools |
//! | `Body`, `Panicked`, `Refused`, `Relocation`, `TimedOut`, `Overloaded`, `Reported`, `Extension`, `Output` | a result with `isError: true` and the error's message as text; when the error says when to call again ([`ToolError::retry_after`](toolgraft::ToolError::retry_after)), the milliseconds in `_meta` under [`RETRY_AFTER_META`] |
//!
//! An error that cites a section of the [rulebook](toolgraft::rulebook)
//! ([`ToolError::rule`](toolgraft::ToolError::rule)) names it too, as its [`Rule`](toolgraft::rulebook::Rule) string: in the error's `data`
//! as `rule`, or in the result's `_meta` under [`RULE_META`] (`"toolgraft/rule"`).
//!
//! Bad arguments and unknown names are the caller's request being wrong, which MCP
//! reports as protocol errors (since protocol `2025-11-25` it prefers bad arguments
//! in the result, so the model can correct itself: [`ToolsetServer::with_bad_arguments`]); everything else happened while running the tool, and
//! MCP wants that in the result so the model can read it and react.
//!
//! An in-process round trip (any rmcp transport works the same way; for stdio, see
//! [`ToolsetServer`]):
//!
//! ```
//! use serde_json::json;
//! use toolgraft::ext::Trace;
//! use toolgraft_mcp::ToolsetServer;
//! use rmcp::ServiceExt;
//! use rmcp::model::CallToolRequestParams;
//! use toolgraft::{Tool, Toolset};
//! use toolgraft::tool::BaseTool;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Shout { text: String }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let shout = Tool::builder().name("shout").description("Return the text, loud.")
//!     .body(|i: Shout| async move { Ok(i.text.to_uppercase()) }).build()?;
//! let toolset = Toolset::new();
//! toolset.bind((shout.combo().with(Trace),))?;
//!
//! let (server_io, client_io) = tokio::io::duplex(64 * 1024);
//! let server = tokio::spawn(ToolsetServer::new(toolset).serve(server_io));
//! let client = ().serve(client_io).await?;
//!
//! let names: Vec<_> = client.list_all_tools().await?.into_iter().map(|t| t.name).collect();
//! assert_eq!(names, ["shout", "shout_trace"]);
//!
//! let args = json!({"text": "hi"}).as_object().cloned().unwrap();
//! let result = client
//!     .call_tool(CallToolRequestParams::new("shout_trace").with_arguments(args))
//!     .await?;
//! assert_eq!(result.content[0].as_text().unwrap().text, "HI");
//!
//! let err = client.call_tool(CallToolRequestParams::new("shout")).await.unwrap_err();
//! assert!(err.to_string().contains("-32602"), "{err}");
//! client.cancel().await?;
//! server.await??.cancel().await?;
//! # Ok(()) }
//! ```
//!
//! The [guide] takes it step by step: serving over stdio, inside an rmcp server of
//! your own, over Streamable HTTP, and asking the caller, with MCP tasks.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The modules, bottom to top (`scripts/module-graph` checks it): what a client
// sees of a tool and of an outcome; the trace context a request brings; the
// call's context; the server handler;
// what an rmcp tool gets of its request, and gives back (a relay where the call
// has no MCP request: on a worker process); rmcp tools brought in; tools of
// other MCP servers brought in;
// `http` serves it over Streamable HTTP.
mod content;
mod tool;
mod outcome;
mod trace_context;
#[cfg(feature = "otel")]
mod otel;
pub mod call;
pub mod task;
mod server;
mod relay;
pub mod import;
#[cfg(feature = "upstream")]
#[cfg_attr(docsrs, doc(cfg(feature = "upstream")))]
pub mod upstream;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
pub mod guide;

pub use content::McpContent;
pub use outcome::{
    BadArguments, ERROR_META, INSUFFICIENT_SCOPE, RETRY_AFTER_META, RULE_META, UnknownArguments,
};
pub use server::{ToolsOnly, ToolsetServer};
pub use tool::{OutputShape, mcp_tool};
