//! Serve a [`Toolset`] over MCP with [`rmcp`], the official Rust SDK.
//!
//! Depend on `rmcp` yourself, with the same minor version (`~3.11`) and the
//! transports you serve over (`transport-io` for stdio); toolgraft enables only its
//! `server` feature.
//!
//! Over HTTP, the `http` feature's `toolgraft_mcp::http` module serves it on MCP's
//! Streamable HTTP transport (an axum router, or a loopback server of its own), with
//! sessions, DNS-rebinding protection and an optional bearer token.
//!
//! [`ToolsetServer`] is an rmcp [`ServerHandler`] built from the toolset at run time:
//! every bound name (bases and every branch) is an MCP tool, listed from
//! [`Toolset::tools`] on each `tools/list` and called through [`Toolset::call`] by
//! name, so live changes ([`Toolset::edit`], `apply_manifest`)
//! show in the next `tools/list`, and the server tells the client with
//! `notifications/tools/list_changed`.
//!
//! What a client sees of a bound name:
//!
//! * `name`, `description`, and `inputSchema` (with `"type": "object"` added when the
//!   root schema has no `type`: MCP requires it, and [`Toolset::call`] only takes an
//!   object anyway, so it narrows nothing).
//! * `outputSchema`: the name's output schema (inherited by [output-schema](toolgraft::rulebook#output-schema)), see
//!   [`OutputShape`] for schemas that are not objects.
//! * Calls: a result is returned as `structuredContent` plus its JSON as text when the
//!   tool advertises an output schema; otherwise as text only (a string result is the
//!   text itself, anything else its JSON).
//!
//! Errors map the way MCP separates them:
//!
//! | [`ToolError`] | MCP |
//! |---|---|
//! | `InvalidArguments` | JSON-RPC error `-32602` (invalid params); `data` = `{tool, field, kind}`; or, with [`BadArguments::AsToolResult`], a result with `isError: true`, the same message as text and the same data in `_meta` under [`ERROR_META`] |
//! | `UnknownTool` | JSON-RPC error `-32602` (invalid params); `data` = `{tool}` |
//! | `Body`, `Panicked`, `Refused`, `Relocation`, `TimedOut`, `Reported`, `Extension`, `Output` | a result with `isError: true` and the error's message as text |
//!
//! An error that cites a section of the [rulebook](toolgraft::rulebook)
//! ([`ToolError::rule`]) names it too, as its [`Rule`] string: in the error's `data`
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
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The modules, bottom to top (`scripts/module-graph` checks it): the server
// handler is this file; `http` serves it over Streamable HTTP.
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult, MetaObject,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, SubscriptionFilter,
    Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use schemars::Schema;
use serde_json::{Value, json};
use tokio::sync::watch;

use toolgraft::error::ArgsErrorKind;
use toolgraft::rulebook::Rule;
use toolgraft::toolset::ToolInfo;
use toolgraft::{Name, ToolError, Toolset};

/// Which output schemas and structured results a client can take, by the protocol
/// version it negotiated.
///
/// Protocol versions before `2026-07-28` require an output schema to be an object
/// schema (root `"type": "object"`) and structured content to be a JSON object.
/// toolgraft output schemas need not be: a tool returning a `String`, a `batch`
/// branch returning a list, a `serde_json::Value` (no `type` at all). For those
/// clients such a tool is listed **without** `outputSchema`, and its results come
/// back as text only. Wrapping the value (`{"result": ...}`) would also fit, but
/// then the same tool would return differently shaped data depending on the
/// client, and the model would read a wrapper the tool never returned. From
/// `2026-07-28` (SEP-2106) any JSON Schema and any JSON value are allowed, so the
/// schema is advertised as it is and results are structured.
///
/// ```
/// use toolgraft_mcp::OutputShape;
/// use rmcp::model::ProtocolVersion;
///
/// assert_eq!(OutputShape::for_protocol(Some(&ProtocolVersion::V_2025_06_18)), OutputShape::ObjectOnly);
/// assert_eq!(OutputShape::for_protocol(Some(&ProtocolVersion::V_2026_07_28)), OutputShape::AnyJson);
/// assert_eq!(OutputShape::for_protocol(None), OutputShape::ObjectOnly);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputShape {
    /// Only object output schemas (before protocol version `2026-07-28`).
    ObjectOnly,
    /// Any output schema and any structured value (`2026-07-28` and later).
    AnyJson,
}

impl OutputShape {
    /// The shape a client on `version` takes; an unknown version is treated as an
    /// older one, which every client can read.
    ///
    /// ```
    /// use toolgraft_mcp::OutputShape;
    /// use rmcp::model::ProtocolVersion;
    /// assert_eq!(OutputShape::for_protocol(Some(&ProtocolVersion::V_2025_11_25)), OutputShape::ObjectOnly);
    /// ```
    pub fn for_protocol(version: Option<&ProtocolVersion>) -> Self {
        // Versions are ISO dates, so they order lexically (as rmcp compares them).
        match version {
            Some(version) if version.as_str() >= ProtocolVersion::V_2026_07_28.as_str() => {
                Self::AnyJson
            }
            _ => Self::ObjectOnly,
        }
    }

    fn admits(self, schema: &Schema) -> bool {
        match self {
            Self::AnyJson => true,
            Self::ObjectOnly => is_object_schema(schema),
        }
    }
}

/// The MCP tool for a bound name, as a client on `shape` sees it (see the
/// [module docs](self) for what goes where).
///
/// ```
/// use serde_json::json;
/// use toolgraft::ext::Batch;
/// use toolgraft_mcp::{OutputShape, mcp_tool};
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct City { city: String }
/// #[derive(serde::Serialize, schemars::JsonSchema)]
/// struct Forecast { celsius: f64 }
///
/// let weather = Tool::builder().name("weather").description("Tomorrow's forecast.")
///     .body(|_: City| async move { Ok(Forecast { celsius: 21.5 }) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((weather.combo().with(Batch::default()),))?;
///
/// let base = mcp_tool(&toolset.info("weather").unwrap(), OutputShape::ObjectOnly);
/// assert_eq!(base.description.as_deref(), Some("Tomorrow's forecast."));
/// assert_eq!(base.output_schema.unwrap()["type"], "object");
///
/// // A batch returns a list: older clients get no output schema, newer ones do.
/// let batch = toolset.info("weather_batch").unwrap();
/// assert!(mcp_tool(&batch, OutputShape::ObjectOnly).output_schema.is_none());
/// assert_eq!(mcp_tool(&batch, OutputShape::AnyJson).output_schema.unwrap()["type"], "array");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn mcp_tool(info: &ToolInfo, shape: OutputShape) -> Tool {
    let mut input = schema_object(&info.input_schema);
    if !input.contains_key("type") {
        input.insert("type".into(), "object".into());
    }
    let description = (!info.description.is_empty()).then(|| info.description.clone().into());
    let tool = Tool::new_with_raw(info.name.to_string(), description, input);
    match structured_schema(info, shape) {
        Some(output) => tool.with_raw_output_schema(schema_object(output).into()),
        None => tool,
    }
}

/// The output schema a client on `shape` is shown, if any: the one place that
/// decides whether results of this name are structured.
fn structured_schema(info: &ToolInfo, shape: OutputShape) -> Option<&Schema> {
    let schema: &Schema = info.output_schema.as_ref()?;
    shape.admits(schema).then_some(schema)
}

/// Whether a schema is one that clients before `2026-07-28` accept as an output
/// schema. The same test rmcp applies when it strips output for those clients, so
/// the two never disagree.
fn is_object_schema(schema: &Schema) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// A schema as the JSON object MCP carries; `true` and `false` become their object
/// spellings, which mean the same.
fn schema_object(schema: &Schema) -> JsonObject {
    match schema.as_object() {
        Some(object) => object.clone(),
        None if schema.as_bool() == Some(false) => {
            json!({"not": {}}).as_object().cloned().unwrap_or_default()
        }
        None => JsonObject::new(),
    }
}

/// The text rendering of a result: a string is the text itself (what a model
/// should read), anything else its JSON.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A toolset's outcome as MCP wants it: a result (success or `isError: true`) or a
/// protocol error.
fn to_mcp(
    outcome: Result<Value, ToolError>,
    structured: bool,
    bad_arguments: BadArguments,
) -> Result<CallToolResult, ErrorData> {
    let error = match outcome {
        Ok(value) if structured => return Ok(CallToolResult::structured(value)),
        Ok(value) => {
            return Ok(CallToolResult::success(vec![ContentBlock::text(text_of(
                &value,
            ))]));
        }
        Err(error) => error,
    };
    let message = error.to_string();
    // The rulebook's section the error cites, where it cites one.
    let rule = error.rule();
    let with_rule = |mut data: Value| {
        if let (Some(rule), Some(fields)) = (rule, data.as_object_mut()) {
            fields.insert("rule".to_owned(), json!(rule));
        }
        Some(data)
    };
    match error {
        ToolError::InvalidArguments {
            tool, field, kind, ..
        } => {
            let kind = match kind {
                ArgsErrorKind::UnknownField => "unknown_field",
                ArgsErrorKind::MissingField => "missing_field",
                ArgsErrorKind::TooDeep => "too_deep",
                // `InvalidValue`, and kinds newer than this crate.
                _ => "invalid_value",
            };
            let data = json!({"tool": tool.as_str(), "field": field, "kind": kind});
            if bad_arguments == BadArguments::AsToolResult {
                let mut meta = rule.map(rule_meta).unwrap_or_default();
                meta.insert(ERROR_META.to_owned(), data);
                let result = CallToolResult::error(vec![ContentBlock::text(message)]);
                return Ok(result.with_meta(Some(meta)));
            }
            Err(ErrorData::invalid_params(message, with_rule(data)))
        }
        // MCP lists an unknown tool among the invalid-params protocol errors.
        ToolError::UnknownTool { name } => Err(ErrorData::invalid_params(
            message,
            with_rule(json!({"tool": name})),
        )),
        // `Body`, `Panicked`, `Refused`, `Relocation`, `TimedOut`, `Reported`,
        // `Extension`, `Output` (and variants newer than this crate): the tool ran
        // and failed, which MCP reports in the result.
        _ => {
            let result = CallToolResult::error(vec![ContentBlock::text(message)]);
            Ok(match rule {
                Some(rule) => result.with_meta(Some(rule_meta(rule))),
                None => result,
            })
        }
    }
}

/// The `_meta` of a failed call's result that cites a rule of the rulebook.
fn rule_meta(rule: Rule) -> MetaObject {
    let mut meta = JsonObject::new();
    meta.insert(RULE_META.to_owned(), json!(rule));
    MetaObject(meta)
}

/// The `_meta` key of a failed call's result that names the rule it cites:
/// `{"_meta": {"toolgraft/rule": "locality-inside-relocation"}}`.
///
/// ```
/// assert_eq!(toolgraft_mcp::RULE_META, "toolgraft/rule");
/// ```
pub const RULE_META: &str = "toolgraft/rule";

/// The `_meta` key of a result that reports bad arguments
/// ([`BadArguments::AsToolResult`]): `{"tool", "field", "kind"}`, what the
/// `-32602` error's `data` holds otherwise.
///
/// ```
/// assert_eq!(toolgraft_mcp::ERROR_META, "toolgraft/error");
/// ```
pub const ERROR_META: &str = "toolgraft/error";

/// How a call with bad arguments is answered ([`ToolsetServer::with_bad_arguments`]).
///
/// ```
/// use toolgraft_mcp::BadArguments;
/// assert_eq!(BadArguments::default(), BadArguments::AsProtocolError);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadArguments {
    /// A JSON-RPC error `-32602` (invalid params) with `{tool, field, kind}` as
    /// its `data`: the request was wrong, and the client sees it as such.
    #[default]
    AsProtocolError,
    /// A result with `isError: true`: the message as text, for the model to read
    /// and call again, and `{tool, field, kind}` in `_meta` under [`ERROR_META`].
    /// What the protocol recommends from `2025-11-25` on, and what rmcp's own
    /// tools do.
    AsToolResult,
}

/// An MCP server for a [`Toolset`]: an rmcp [`ServerHandler`] that lists every
/// bound name as a tool and calls them by name, as the toolset is at each request.
///
/// It advertises the `tools` capability with `listChanged`, and sends
/// `notifications/tools/list_changed` whenever the bound names change: on a
/// session opened with `initialize` (protocol versions before `2026-07-28`) once
/// the client is initialized, and from `2026-07-28` on each `subscriptions/listen`
/// stream that asks for tool changes.
///
/// Serve one per connection (`serve` takes it by value); each is cheap, and they
/// share the toolset. What it sends on a connection stops when rmcp drops it, at
/// the end of that connection.
///
/// Over stdio, as an MCP client launches a server:
///
/// ```no_run
/// use toolgraft::Toolset;
/// use toolgraft_mcp::ToolsetServer;
/// use rmcp::{ServiceExt, transport::stdio};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let toolset = Toolset::new();
/// // ... bind tools and combos ...
/// let server = ToolsetServer::new(toolset)
///     .with_instructions("Weather and translation tools.")
///     .serve(stdio())
///     .await?;
/// server.waiting().await?;
/// # Ok(()) }
/// ```
///
/// See the [module docs](self) for an in-process round trip.
pub struct ToolsetServer {
    toolset: Toolset,
    /// Shared by every session's server: a session copies none of it.
    info: Arc<ServerConfig>,
    bad_arguments: BadArguments,
    notifier: Mutex<Notifier>,
    /// Watches the bound names, for `structuring` to know when it is stale.
    changes: watch::Receiver<u64>,
    structuring: Mutex<Structuring>,
    /// The tools/list answer per output shape, for the toolset at one version:
    /// shared by every session's server, so a list copies no schema (each is
    /// behind an `Arc`), and only the first list after a change builds it.
    listings: Arc<Mutex<Listings>>,
    /// Dropped with the server, which rmcp does when its connection ends: that ends
    /// this connection's notifier task (its receivers see the sender gone).
    connection: watch::Sender<()>,
}

/// The listings of one toolset version (see [`ToolsetServer::list`]).
#[derive(Default)]
struct Listings {
    version: u64,
    object_only: Option<Arc<Vec<Tool>>>,
    any_json: Option<Arc<Vec<Tool>>>,
}

/// Whether results of each name called so far are structured, for the toolset as
/// it was at `version`: a call needs only that bit, and getting it from a clone of
/// the name's `ToolInfo` (its chain, its description) on every call cost more the
/// deeper the branch.
#[derive(Default)]
struct Structuring {
    version: u64,
    /// Bound names only: a name not bound is not kept, so callers cannot grow it.
    names: HashMap<Name, Structured, BuildHasherDefault<NameHasher>>,
}

/// FNV-1a over a bound name, as the toolset hashes its own: every call hashes its
/// name, and SipHash's flooding resistance buys nothing for keys that are all bound
/// names (a caller's unknown name only misses).
struct NameHasher(u64);

impl Default for NameHasher {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Whether a name's results are structured, for each [`OutputShape`].
#[derive(Clone, Copy)]
struct Structured {
    object_only: bool,
    any_json: bool,
}

impl Structured {
    fn of(info: &ToolInfo) -> Self {
        Self {
            object_only: structured_schema(info, OutputShape::ObjectOnly).is_some(),
            any_json: structured_schema(info, OutputShape::AnyJson).is_some(),
        }
    }

    fn for_shape(self, shape: OutputShape) -> bool {
        match shape {
            OutputShape::ObjectOnly => self.object_only,
            OutputShape::AnyJson => self.any_json,
        }
    }
}

/// The list-changed notifier of a session opened with `initialize`.
enum Notifier {
    /// No `initialize` yet.
    Idle,
    /// Watching since `initialize`, so a change before the client's first
    /// `tools/list` is not missed; waits for `notifications/initialized`.
    Armed(watch::Receiver<u64>),
    /// Notifying (a repeated `initialized` starts nothing).
    Running,
}

impl std::fmt::Debug for ToolsetServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsetServer")
            .field("toolset", &self.toolset)
            .field("server_info", &self.info.server_info)
            .finish_non_exhaustive()
    }
}

impl ToolsetServer {
    /// A server for `toolset`, named `toolgraft` with this crate's version (the
    /// workspace's, the same as toolgraft's).
    ///
    /// ```
    /// use toolgraft_mcp::ToolsetServer;
    /// use rmcp::ServerHandler;
    /// let server = ToolsetServer::new(toolgraft::Toolset::new());
    /// let info = server.get_info();
    /// assert_eq!(info.server_info.name, "toolgraft");
    /// assert_eq!(info.capabilities.tools.unwrap().list_changed, Some(true));
    /// ```
    pub fn new(toolset: Toolset) -> Self {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolgraft", env!("CARGO_PKG_VERSION")));
        Self {
            changes: toolset.changes(),
            toolset,
            info: Arc::new(info),
            bad_arguments: BadArguments::default(),
            notifier: Mutex::new(Notifier::Idle),
            structuring: Mutex::default(),
            listings: Arc::default(),
            connection: watch::channel(()).0,
        }
    }

    /// A server for the same toolset with the same info, and the per-connection
    /// state of a new one: what each HTTP session is served by.
    #[cfg(feature = "http")]
    fn fresh(&self) -> Self {
        Self {
            toolset: self.toolset.clone(),
            info: self.info.clone(),
            bad_arguments: self.bad_arguments,
            notifier: Mutex::new(Notifier::Idle),
            changes: self.toolset.changes(),
            structuring: Mutex::default(),
            listings: self.listings.clone(),
            connection: watch::channel(()).0,
        }
    }

    /// Names the server (`serverInfo` in the handshake).
    ///
    /// ```
    /// use toolgraft_mcp::ToolsetServer;
    /// use rmcp::{ServerHandler, model::Implementation};
    /// let server = ToolsetServer::new(toolgraft::Toolset::new())
    ///     .with_server_info(Implementation::new("weather-server", "1.2.0"));
    /// assert_eq!(server.get_info().server_info.name, "weather-server");
    /// ```
    pub fn with_server_info(mut self, server_info: Implementation) -> Self {
        Arc::make_mut(&mut self.info).server_info = server_info;
        self
    }

    /// Instructions for the client (and its model) on using this server.
    ///
    /// ```
    /// use toolgraft_mcp::ToolsetServer;
    /// use rmcp::ServerHandler;
    /// let server = ToolsetServer::new(toolgraft::Toolset::new()).with_instructions("Ask for weather.");
    /// assert_eq!(server.get_info().instructions.as_deref(), Some("Ask for weather."));
    /// ```
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.info).instructions = Some(instructions.into());
        self
    }

    /// How a call with bad arguments is answered: a `-32602` protocol error (the
    /// default) or an `isError` result the model can read ([`BadArguments`]).
    /// Unknown names stay protocol errors either way.
    ///
    /// ```
    /// use toolgraft_mcp::{BadArguments, ToolsetServer};
    /// let server = ToolsetServer::new(toolgraft::Toolset::new())
    ///     .with_bad_arguments(BadArguments::AsToolResult);
    /// ```
    pub fn with_bad_arguments(mut self, bad_arguments: BadArguments) -> Self {
        self.bad_arguments = bad_arguments;
        self
    }

    /// The toolset served (change it live through this handle or any clone).
    ///
    /// ```
    /// let toolset = toolgraft::Toolset::new();
    /// let server = toolgraft_mcp::ToolsetServer::new(toolset.clone());
    /// assert!(server.toolset().names().is_empty());
    /// ```
    pub fn toolset(&self) -> &Toolset {
        &self.toolset
    }

    /// Every bound name as an MCP tool for a client on `shape`, sorted by name: what
    /// `tools/list` returns. For a handler of your own that serves the toolset's
    /// tools beside others.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// use toolgraft_mcp::{OutputShape, ToolsetServer};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// let tools = ToolsetServer::new(toolset).list(OutputShape::AnyJson);
    /// assert_eq!(tools[1].name, "shout_trace");
    /// assert_eq!(tools[1].output_schema.as_ref().unwrap()["type"], "string");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn list(&self, shape: OutputShape) -> Vec<Tool> {
        // Copied outside the listings' lock, so sessions listing at once do not
        // wait for each other; the copy shares every schema (`Arc`): names and
        // descriptions only.
        Vec::clone(&self.listing(shape))
    }

    /// The listing for `shape` of the toolset as it is, built by the first list
    /// after a change and shared by every session until the next.
    fn listing(&self, shape: OutputShape) -> Arc<Vec<Tool>> {
        // Read before the toolset: a listing built after a change is labelled with
        // the version before it at worst, and built again by the next list.
        let version = *self.changes.borrow();
        let mut listings = self.listings.lock().unwrap_or_else(PoisonError::into_inner);
        if listings.version != version {
            *listings = Listings {
                version,
                ..Listings::default()
            };
        }
        let slot = match shape {
            OutputShape::ObjectOnly => &mut listings.object_only,
            OutputShape::AnyJson => &mut listings.any_json,
        };
        slot.get_or_insert_with(|| {
            Arc::new(
                self.toolset
                    .tools()
                    .iter()
                    .map(|info| mcp_tool(info, shape))
                    .collect(),
            )
        })
        .clone()
    }

    /// Calls a bound name for a client on `shape`: what `tools/call` returns, with
    /// errors mapped as the [module docs](self) say. For a handler of your own.
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// use toolgraft_mcp::{OutputShape, ToolsetServer};
    /// use rmcp::model::ErrorCode;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let shout = Tool::builder().name("shout").description("Return the text.")
    ///     .body(|i: Shout| async move {
    ///         if i.text.is_empty() { return Err("nothing to shout".into()) }
    ///         Ok(i.text.to_uppercase())
    ///     }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// let server = ToolsetServer::new(toolset);
    ///
    /// let args = |v: serde_json::Value| v.as_object().cloned();
    /// let ok = server.call("shout", args(json!({"text": "hi"})), OutputShape::AnyJson).await?;
    /// assert_eq!(ok.structured_content, Some(json!("HI")));
    ///
    /// let failed = server.call("shout", args(json!({"text": ""})), OutputShape::AnyJson).await?;
    /// assert_eq!(failed.is_error, Some(true));
    ///
    /// let invalid = server.call("shout", args(json!({"txt": "hi"})), OutputShape::AnyJson).await;
    /// assert_eq!(invalid.unwrap_err().code, ErrorCode::INVALID_PARAMS);
    /// # Ok(()) }
    /// ```
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        shape: OutputShape,
    ) -> Result<CallToolResult, ErrorData> {
        // Whether to structure follows the listing the client read; a name changed
        // meanwhile is looked up again by the call, which reports it if it is gone.
        let structured = self.structured(name, shape);
        let arguments = arguments.map_or(Value::Null, Value::Object);
        to_mcp(
            self.toolset.call(name, arguments).await,
            structured,
            self.bad_arguments,
        )
    }

    /// Whether results of `name` are structured for a client on `shape`, as the
    /// toolset is now.
    fn structured(&self, name: &str, shape: OutputShape) -> bool {
        // Read before the toolset: a change after this is seen by the next call.
        let version = *self.changes.borrow();
        let mut structuring = self
            .structuring
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if structuring.version != version {
            structuring.version = version;
            structuring.names.clear();
        }
        if let Some(structured) = structuring.names.get(name) {
            return structured.for_shape(shape);
        }
        let Some(info) = self.toolset.info(name) else {
            return false;
        };
        let structured = Structured::of(&info);
        structuring.names.insert(info.name, structured);
        structured.for_shape(shape)
    }

    /// Sends `notifications/tools/list_changed` to `peer` after each change of the
    /// bound names that `changes` sees, until the connection or the toolset ends.
    fn spawn_notifier(&self, peer: Peer<RoleServer>, mut changes: watch::Receiver<u64>) {
        let mut connection = self.connection.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    // Only ever an error: the server was dropped with its connection.
                    _ = connection.changed() => return,
                }
                // Changes that came in a burst are seen as one: a client re-lists
                // once per notification anyway.
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }
}

impl ServerHandler for ToolsetServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::clone(&self.info)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        {
            let mut notifier = self.notifier.lock().unwrap_or_else(PoisonError::into_inner);
            if matches!(*notifier, Notifier::Idle) {
                *notifier = Notifier::Armed(self.toolset.changes());
            }
        }
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let changes = {
            let mut notifier = self.notifier.lock().unwrap_or_else(PoisonError::into_inner);
            match std::mem::replace(&mut *notifier, Notifier::Running) {
                Notifier::Armed(changes) => changes,
                Notifier::Idle => self.toolset.changes(),
                Notifier::Running => return,
            }
        };
        self.spawn_notifier(context.peer, changes);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let shape = OutputShape::for_protocol(context.protocol_version().as_ref());
        Ok(ListToolsResult::with_all_items(self.list(shape)))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        // rmcp reads the input schema from this (which no shape changes) for every
        // call of protocol `2026-07-28`: taken from the shared listing, sorted by
        // name, it is not copied per call.
        let listing = self.listing(OutputShape::AnyJson);
        let found = listing.binary_search_by(|tool| tool.name.as_ref().cmp(name));
        found.ok().map(|index| listing[index].clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let shape = OutputShape::for_protocol(context.protocol_version().as_ref());
        // rmcp drops the answer to a cancelled request but lets the handler run on;
        // dropping the call stops the tool (a pool job is aborted with its caller).
        // The call is polled first: a tool that answers at once never registers with
        // the cancellation token (which costs a waiter in its list and its removal),
        // and rmcp drops an answer to a cancelled request anyway.
        tokio::select! {
            biased;
            result = self.call(&request.name, request.arguments, shape) => result.map(Into::into),
            () = context.ct.cancelled() => Err(ErrorData::internal_error(
                format!("the call to `{}` was cancelled", request.name),
                None,
            )),
        }
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp narrows this to what the client asked for.
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        if context.accepted().tools_list_changed != Some(true) {
            context.cancelled().await;
            return Ok(());
        }
        let mut changes = self.toolset.changes();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed() => if changed.is_err() { return Ok(()) },
            }
            // A send fails only once the stream or the connection is gone.
            if context.sink().notify_tool_list_changed().await.is_err() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgraft::Tool as BaseTool;
    use toolgraft::combo::StartCombo;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Shout {
        text: String,
    }

    fn shout(name: &str) -> impl toolgraft::tool::BaseTool {
        BaseTool::builder()
            .name(name)
            .description("Return the text.")
            .body(|input: Shout| async move { Ok(input.text) })
            .build()
            .unwrap()
    }

    #[test]
    fn every_session_shares_one_listing_until_the_toolset_changes() {
        let toolset = Toolset::new();
        toolset.bind((shout("shout").combo(),)).unwrap();
        let server = ToolsetServer::new(toolset.clone());
        let session = server.fresh();
        let first = server.list(OutputShape::AnyJson);
        let again = session.list(OutputShape::AnyJson);
        // One copy of each schema, whoever lists: no schema is copied per list.
        assert!(Arc::ptr_eq(&first[0].input_schema, &again[0].input_schema));
        let older = session.list(OutputShape::ObjectOnly);
        assert_eq!(older.len(), 1);

        toolset.bind((shout("echo").combo(),)).unwrap();
        let after = session.list(OutputShape::AnyJson);
        let names: Vec<_> = after.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(names, ["echo", "shout"]);
        assert_eq!(server.list(OutputShape::ObjectOnly).len(), 2);
    }

    #[test]
    fn a_tool_is_looked_up_in_the_shared_listing() {
        let toolset = Toolset::new();
        for name in ["b", "a", "c_d", "c"] {
            toolset.bind((shout(name).combo(),)).unwrap();
        }
        let server = ToolsetServer::new(toolset.clone());
        let listed = server.list(OutputShape::AnyJson);
        for tool in &listed {
            let found = server.get_tool(&tool.name).expect("a listed name is found");
            assert_eq!(found.name, tool.name);
            assert!(Arc::ptr_eq(&found.input_schema, &tool.input_schema));
        }
        for missing in ["", "c_", "d", "A"] {
            assert!(server.get_tool(missing).is_none(), "{missing}");
        }
        toolset.bind((shout("e").combo(),)).unwrap();
        assert!(
            server.get_tool("e").is_some(),
            "a name bound later is found"
        );
    }
}
