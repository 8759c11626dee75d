//! rmcp tools brought into a toolset: a whole [`ToolRouter`] (what
//! `#[tool_router]` makes) or one [`ToolRoute`] (what each `#[tool]` method is),
//! as base tools that combos, typed or from a manifest, apply to like any other.
//!
//! What the rmcp tool says of itself is kept: name, description, input and
//! output schemas, title, annotations, icons and `_meta`. Its method is the
//! body, and gets what it asks for (`Parameters<T>`, `Peer`, `RequestContext`,
//! `Extension<T>`, the HTTP request parts) from the MCP request the call came in
//! by ([`McpCall`]), on whatever thread a layer runs it. Called without one (on
//! a worker process, or by [`Toolset::call`](toolgraft::Toolset::call)), it gets
//! a request made from what travelled with the call: the request's `_meta` (its
//! progress token), a cancellation token, and a peer whose progress and logging
//! reach the caller (logging goes to the process's log where there is no way
//! back), and whose requests to the
//! client (elicitation, sampling, roots) fail naming rule
//! `caller-outside-relocation`. Its failures read the same wherever it ran, and
//! one [marked transient](transient) is retried by `retry`.
//!
//! ```
//! use rmcp::handler::server::wrapper::Parameters;
//! use rmcp::{tool, tool_router};
//! use std::time::Duration;
//! use serde_json::json;
//! use toolgraft::Toolset;
//! use toolgraft::ext::Timeout;
//!
//! #[derive(Clone)]
//! struct Notes;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Search { query: String }
//!
//! #[tool_router]
//! impl Notes {
//!     #[tool(description = "Search the notes.", annotations(read_only_hint = true))]
//!     async fn search(&self, Parameters(search): Parameters<Search>) -> String {
//!         format!("no note says {}", search.query)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let tools = toolgraft_mcp::import::tools(Notes::tool_router(), Notes)?;
//! let toolset = Toolset::new();
//! toolset.bind(tools.iter().map(|tool| tool.combo().with(Timeout::new(Duration::from_secs(5)))).collect::<Vec<_>>())?;
//! assert_eq!(toolset.names(), ["search", "search_timeout"]);
//! assert_eq!(toolset.info("search_timeout").unwrap().presentation.annotations.read_only, Some(true));
//! let found = toolset.call("search_timeout", json!({"query": "rust"})).await?;
//! assert_eq!(found["content"][0]["text"], "no note says rust");
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorCode, InputRequiredResult,
};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;

use toolgraft::combo::Combo;
use toolgraft::context::{InputRequest, InputRequired, Question};
use toolgraft::error::{ArgsError, ArgsErrorKind, BoxError, InvalidName};
use toolgraft::runtime::DynTool;
use toolgraft::schema::Args;
use toolgraft::tool::BaseTool;

use crate::call::McpCall;
use crate::content::McpContent;
use crate::tool::presentation_of;

pub use crate::relay::{TRANSIENT, transient, transient_result};

/// Every enabled tool of `router`, served by `service`, as base tools sorted by
/// name (see the [module docs](self)).
///
/// `service` is one instance for every call, whichever session it comes in by:
/// what it holds is process-wide. rmcp builds a handler per session; to keep
/// that, import [`per_session`] instead.
///
/// # Errors
///
/// [`ImportError`] for a tool whose name toolgraft does not take (see
/// [`Name`](toolgraft::Name)): rmcp allows characters and lengths toolgraft does not.
pub fn tools<S: Send + Sync + 'static>(
    router: ToolRouter<S>,
    service: impl Into<Arc<S>>,
) -> Result<Imported, ImportError> {
    let service = service.into();
    imported(router, |route| tool(route, service.clone()))
}

/// Every enabled tool of `router`, each call run on the handler of the session
/// it came in by: the `S` given to [`ToolsetServer::with_handler`](crate::ToolsetServer::with_handler)
/// for that session, as rmcp runs a tool on the handler its session was built
/// with. State the handler keeps per instance (a counter in a field) is the
/// session's; state it shares between clones (behind an `Arc`) is shared as
/// its clones share it.
///
/// A call that came in by no session of an `S` (a server with another handler,
/// [`Toolset::call`](toolgraft::Toolset::call), a worker process, which has no
/// session) fails with an error that says so, and runs nothing.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use rmcp::{ServerHandler, tool, tool_handler, tool_router};
/// use rmcp::model::{ServerCapabilities, ServerConfig};
/// use toolgraft::Toolset;
/// use toolgraft_mcp::{ToolsetServer, import};
///
/// #[derive(Clone)]
/// struct Counter { count: Arc<AtomicU32> }
///
/// #[tool_router]
/// impl Counter {
///     fn new() -> Self { Self { count: Arc::default() } }
///
///     #[tool(description = "Add one to this session's count.")]
///     async fn increment(&self) -> String {
///         (self.count.fetch_add(1, Ordering::SeqCst) + 1).to_string()
///     }
/// }
///
/// #[tool_handler]
/// impl ServerHandler for Counter {
///     fn get_info(&self) -> ServerConfig {
///         ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let toolset = Toolset::new();
/// toolset.bind(import::per_session(Counter::tool_router())?.combos())?;
/// let template = ToolsetServer::new(toolset);
/// // One `Counter` per session, as rmcp makes one: with `McpHttp::for_handler`
/// // over HTTP, or once per stdio connection.
/// let _session = template.with_handler(Counter::new());
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// [`ImportError`] for a tool whose name toolgraft does not take.
pub fn per_session<S: Send + Sync + 'static>(
    router: ToolRouter<S>,
) -> Result<Imported, ImportError> {
    imported(router, |route| import(route, Instance::Session))
}

// Defined below the server, which reads it from the tools it serves.
pub use crate::tool::PER_SESSION_META;

/// The enabled routes of `router`, sorted by name, each made a tool by `make`.
fn imported<S: Send + Sync + 'static>(
    router: ToolRouter<S>,
    make: impl Fn(ToolRoute<S>) -> Result<DynTool, ImportError>,
) -> Result<Imported, ImportError> {
    let mut routes: Vec<_> = router
        .map
        .iter()
        .filter(|(name, _)| !router.is_disabled(name))
        .map(|(_, route)| route.clone())
        .collect();
    routes.sort_by(|a, b| a.attr.name.cmp(&b.attr.name));
    let tools = routes.into_iter().map(make).collect::<Result<_, _>>()?;
    Ok(Imported(tools))
}

/// Imported rmcp tools, sorted by name: a slice of base tools (`iter`, `len`),
/// looked up by name with [`get`](Self::get) or indexing.
///
/// ```
/// # use rmcp::{tool, tool_router};
/// # #[derive(Clone)] struct Notes;
/// # #[tool_router] impl Notes {
/// #     #[tool(description = "Search the notes.")] async fn search(&self) -> String { String::new() }
/// #     #[tool(description = "Add a note.")] async fn add(&self) -> String { String::new() }
/// # }
/// use toolgraft::tool::BaseTool;
/// let tools = toolgraft_mcp::import::tools(Notes::tool_router(), Notes)?;
/// assert_eq!(tools.len(), 2);
/// assert_eq!(tools["search"].spec().name, "search");
/// assert!(tools.get("delete").is_none());
/// # Ok::<(), toolgraft_mcp::import::ImportError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Imported(Vec<DynTool>);

impl Imported {
    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&DynTool> {
        let at = self
            .0
            .binary_search_by(|tool| tool.spec().name.as_str().cmp(name))
            .ok()?;
        Some(&self.0[at])
    }

    /// Each tool alone, as a combo with no extension: what
    /// [`Toolset::bind`](toolgraft::Toolset::bind) takes to bind them as they are.
    pub fn combos(&self) -> Vec<Combo<DynTool>> {
        self.0.iter().map(DynTool::combo).collect()
    }
}

impl std::ops::Deref for Imported {
    type Target = [DynTool];

    fn deref(&self) -> &[DynTool] {
        &self.0
    }
}

impl std::ops::Index<&str> for Imported {
    type Output = DynTool;

    /// The tool named `name`.
    ///
    /// # Panics
    ///
    /// When none is: [`get`](Imported::get) does not panic.
    fn index(&self, name: &str) -> &DynTool {
        self.get(name)
            .unwrap_or_else(|| panic!("no imported rmcp tool is named `{name}`"))
    }
}

impl std::ops::Index<usize> for Imported {
    type Output = DynTool;

    /// The tool at `at`, in name order.
    fn index(&self, at: usize) -> &DynTool {
        &self.0[at]
    }
}

impl IntoIterator for Imported {
    type Item = DynTool;
    type IntoIter = std::vec::IntoIter<DynTool>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Imported {
    type Item = &'a DynTool;
    type IntoIter = std::slice::Iter<'a, DynTool>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// One rmcp tool route, served by `service`, as a base tool (see the
/// [module docs](self)).
///
/// # Errors
///
/// [`ImportError`] for a name toolgraft does not take.
pub fn tool<S: Send + Sync + 'static>(
    route: ToolRoute<S>,
    service: Arc<S>,
) -> Result<DynTool, ImportError> {
    import(route, Instance::Shared(service))
}

/// Which instance of the service a route is called on.
enum Instance<S> {
    /// This one, for every call.
    Shared(Arc<S>),
    /// The handler of the session each call came in by.
    Session,
}

impl<S> Clone for Instance<S> {
    fn clone(&self) -> Self {
        match self {
            Self::Shared(service) => Self::Shared(service.clone()),
            Self::Session => Self::Session,
        }
    }
}

impl<S: Send + Sync + 'static> Instance<S> {
    /// The instance to call `tool` on, for the call in `call_in`.
    fn for_call(&self, tool: &str, call_in: Option<&McpCall>) -> Result<Arc<S>, BoxError> {
        match self {
            Self::Shared(service) => Ok(service.clone()),
            Self::Session => call_in.and_then(McpCall::handler::<S>).ok_or_else(|| {
                // The type's own name: its module path is nothing a client needs.
                let full = std::any::type_name::<S>();
                let handler = full.split('<').next().unwrap_or(full).rsplit("::").next().unwrap_or(full);
                format!(
                    "the rmcp tool `{tool}` runs on the handler of the session a call comes in by (imported with `import::per_session`), and this call came in by none that is a `{handler}`: serve the toolset with `ToolsetServer::with_handler` given a `{handler}`, or import the tool with `import::tools(router, instance)` to run every call on one instance"
                )
                .into()
            }),
        }
    }
}

fn import<S: Send + Sync + 'static>(
    route: ToolRoute<S>,
    instance: Instance<S>,
) -> Result<DynTool, ImportError> {
    let attr = &route.attr;
    let name = attr.name.clone();
    let structured = attr.output_schema.is_some();
    let output_schema = match &attr.output_schema {
        Some(schema) => Schema::from(rmcp::model::JsonObject::clone(schema)),
        None => McpContent::json_schema(&mut SchemaGenerator::default()),
    };
    let call = route.call.clone();
    let per_session = matches!(instance, Instance::Session);
    let body = move |args: Args| {
        let (call, instance, name) = (call.clone(), instance.clone(), name.clone());
        async move {
            let call_in = McpCall::current();
            let service = instance.for_call(&name, call_in.as_ref())?;
            // Without an MCP request here, a relay for the call (see `relay`).
            let (request, _relay) = crate::relay::request(call_in.as_ref());
            let mut params = CallToolRequestParams::new(name).with_arguments(args);
            // What an earlier input-required result of the tool's asked for.
            if let Some(call) = &call_in {
                params.input_responses = call.input_responses().cloned();
                params.request_state = call.request_state().map(str::to_owned);
            }
            let response = call(ToolCallContext::new(&*service, params, request)).await;
            outcome(response, structured)
        }
    };
    let mut presentation = presentation_of(attr);
    if per_session {
        let meta = presentation
            .extra
            .entry("_meta")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(PER_SESSION_META.to_owned(), Value::Bool(true));
        }
    }
    DynTool::builder()
        .name(attr.name.as_ref())
        .description(attr.description.as_deref().unwrap_or_default())
        .input_schema(Schema::from(rmcp::model::JsonObject::clone(
            &attr.input_schema,
        )))
        .output_schema(output_schema)
        .presentation(presentation)
        .body(body)
        .build()
        .map_err(|source| ImportError {
            tool: attr.name.to_string(),
            source,
        })
}

/// What an rmcp tool answered, as a body's outcome: a tool that declares an
/// output schema answers its structured content; one that does not, its
/// content blocks ([`McpContent`]); an `isError` result is the body failing
/// with its text; invalid params (rmcp's `Parameters<T>` that did not decode)
/// are bad arguments, which the server answers in the mapping it is set to; any
/// other protocol error is the body failing with it, which the server answers
/// as that error.
pub(crate) fn outcome(
    response: Result<CallToolResponse, ErrorData>,
    structured: bool,
) -> Result<Value, BoxError> {
    let result = match response {
        Ok(CallToolResponse::Complete(result)) => result,
        // Asked of the caller as a toolgraft body asks: through every layer
        // outside it to the server, which answers the call with it.
        Ok(CallToolResponse::InputRequired(result)) => return Err(needed(result)?.into()),
        Ok(_) => {
            return Err(
                "the rmcp tool answered with a task of its own: toolgraft makes the tasks (ToolsetServer::with_tasks)"
                    .into(),
            );
        }
        Err(error) if error.code == ErrorCode::INVALID_PARAMS => {
            let error = ArgsError {
                field: None,
                kind: ArgsErrorKind::InvalidValue,
                problem: error.message.into_owned(),
            };
            return Err(error.into());
        }
        // Answered as the protocol error it is (see the server's error mapping).
        Err(error) => return Err(crate::relay::protocol_failure(error)),
    };
    if result.is_error == Some(true) {
        return Err(crate::relay::result_failure(&result, text_of(&result)));
    }
    if !structured {
        return Ok(serde_json::to_value(McpContent(result))?);
    }
    match result.structured_content {
        Some(value) => Ok(value),
        // rmcp's structured tools send both; a hand-written one may send only text.
        None => Ok(serde_json::from_str(&text_of(&result)).map_err(
            |_| "the rmcp tool declares an output schema but answered no structured content",
        )?),
    }
}

/// An rmcp tool's input-required result as toolgraft's: an elicitation is a
/// question, anything else a protocol request passed on as it is.
fn needed(result: InputRequiredResult) -> Result<InputRequired, BoxError> {
    let requests = result.input_requests.unwrap_or_default();
    let mut needed = InputRequired::new([], result.request_state);
    for (key, request) in requests {
        let request = serde_json::to_value(request)?;
        let method = request["method"].as_str().unwrap_or_default().to_owned();
        let params = request.get("params").cloned().unwrap_or(Value::Null);
        let question = (method == "elicitation/create"
            && params.get("mode").is_none_or(|mode| mode == "form"))
        .then(|| {
            Some(Question::new(
                params.get("message")?.as_str()?,
                params.get("requestedSchema")?.clone(),
            ))
        })
        .flatten();
        let request = match question {
            Some(question) => InputRequest::Ask(question),
            None => InputRequest::protocol(method, params),
        };
        needed.requests.insert(key, request);
    }
    Ok(needed)
}

/// The text blocks of a result, one per line.
fn text_of(result: &CallToolResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
        .collect();
    texts.join("\n")
}

/// An rmcp tool that cannot be a toolgraft base tool: its name is not one
/// toolgraft takes.
///
/// ```
/// let error = toolgraft_mcp::import::ImportError {
///     tool: "notes search".into(),
///     source: toolgraft::Name::new("notes search").unwrap_err(),
/// };
/// assert!(error.to_string().starts_with("the rmcp tool `notes search`"));
/// ```
#[derive(Debug)]
pub struct ImportError {
    /// The rmcp tool's name.
    pub tool: String,
    /// Why toolgraft does not take it.
    pub source: InvalidName,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the rmcp tool `{}` cannot be imported: {}",
            self.tool, self.source
        )
    }
}

impl std::error::Error for ImportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The server's futures (here for the detached request they need): rmcp spawns a task per request whose future holds `handle_request`'s state
/// inline: the largest of every method's future, whichever the request is. Each
/// byte is copied at each spawn (an 8.8 KB future made a call over HTTP cost
/// 222k instructions where 141k do).
#[cfg(test)]
mod future_sizes {
    use rmcp::RoleServer;
    use rmcp::model::CallToolRequestParams;
    use toolgraft::Toolset;

    use crate::{ToolsOnly, ToolsetServer};

    fn ping() -> rmcp::model::ClientRequest {
        serde_json::from_value(serde_json::json!({"method": "ping"})).unwrap()
    }

    #[tokio::test]
    async fn a_request_to_the_server_costs_a_spawn_no_more_than_a_bare_rmcp_handler_plus_1_kib() {
        let server = ToolsetServer::new(Toolset::new());
        let (context, _relay) = crate::relay::request(None);
        let ours = rmcp::Service::<RoleServer>::handle_request(&server, ping(), context.clone());
        let bare = rmcp::Service::<RoleServer>::handle_request(&ToolsOnly, ping(), context.clone());
        let (ours, bare) = (std::mem::size_of_val(&ours), std::mem::size_of_val(&bare));
        assert!(
            ours <= bare + 1024,
            "handle_request: {ours} bytes, a bare handler's {bare}"
        );

        let call =
            rmcp::ServerHandler::call_tool(&server, CallToolRequestParams::new("x"), context);
        let call = std::mem::size_of_val(&call);
        assert!(call <= 1536, "call_tool: {call} bytes");
    }
}
