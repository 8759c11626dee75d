//! [`ToolsetServer`]: the toolset's tools as an rmcp server handler, alone or
//! beside a handler of the author's own.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

#[allow(deprecated)] // `SetLevelRequestParams`: logging, which a handler may still serve.
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CancelledNotificationParam, ClientCapabilities, CompleteRequestParams, CompleteResult,
    CreateTaskResult, CustomNotification, CustomRequest, CustomResult, GetPromptRequestParams,
    GetPromptResponse, GetSkillRequestParams, GetSkillResult, GetTaskParams, GetTaskResult,
    Implementation, InitializeRequestParams, InitializeResult, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, TASKS_EXTENSION_ID, Tool, UnsubscribeRequestParams,
    UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::watch;

use rmcp::model::{DetailedTask, Task, TaskPayload, TaskStatus};
use toolgraft::context::Principal;
use toolgraft::relocation::{Deferral, Deferred, Phase};
use toolgraft::toolset::ToolInfo;
use toolgraft::{Name, Toolset};

use crate::call;
use crate::outcome::{self, BadArguments, to_mcp};
use crate::task::{self, FollowedTask, Resume, Running, Settled, Table, TaskSupport, Tasks};
use crate::tool::{OutputShape, Rendering, published_tool};

/// An MCP server for a [`Toolset`]: an rmcp [`ServerHandler`] that lists every
/// published name ([`Publish`](toolgraft::toolset::Publish)) as a tool and calls
/// them by name, as the toolset is at each request; beside a handler of your own
/// with [`with_handler`](Self::with_handler).
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
/// See the [crate docs](crate) for an in-process round trip.
pub struct ToolsetServer<H = ToolsOnly> {
    toolset: Toolset,
    /// Shared by every session's server: a session copies none of it. With a
    /// handler, its info with the tools capability added.
    info: Arc<ServerConfig>,
    /// What `with_server_info` and `with_instructions` set, which win over a
    /// handler's own.
    overrides: Arc<Overrides>,
    /// What the server answers besides the toolset's tools.
    handler: H,
    /// Whether the handler has tools of its own, listed and called after the
    /// toolset's.
    handler_tools: bool,
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
    /// The tasks of every session, when the server makes them.
    tasks: Option<Arc<Table>>,
}

/// The listings of one toolset version (see [`ToolsetServer::list`]).
#[derive(Default)]
struct Listings {
    version: u64,
    object_only: Option<Arc<Vec<Tool>>>,
    any_json: Option<Arc<Vec<Tool>>>,
}

/// How results of each name called so far are answered, for the toolset as
/// it was at `version`: a call needs only that bit, and getting it from a clone of
/// the name's `ToolInfo` (its chain, its description) on every call cost more the
/// deeper the branch.
#[derive(Default)]
struct Structuring {
    version: u64,
    /// Bound names only: a name not bound is not kept, so callers cannot grow it.
    names: HashMap<Name, Renderings, BuildHasherDefault<NameHasher>>,
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

/// How a name's results are answered, for each [`OutputShape`].
#[derive(Clone, Copy)]
struct Renderings {
    object_only: Rendering,
    any_json: Rendering,
    /// Whether the name's body is relocated (what makes it a task by default).
    relocated: bool,
    /// Whether its call may be deferred to a backend the server follows
    /// ([`deferring_backend`]).
    defers: bool,
}

impl Renderings {
    fn of(info: &ToolInfo, tasks: Option<&Table>) -> Self {
        Self {
            object_only: Rendering::of(info, OutputShape::ObjectOnly),
            any_json: Rendering::of(info, OutputShape::AnyJson),
            relocated: info
                .chain
                .iter()
                .any(|link| link.kind.relocates_execution()),
            defers: deferring_backend(info).is_some_and(|backend| {
                tasks.is_some_and(|tasks| tasks.settings().follows_backend(backend))
            }),
        }
    }

    fn for_shape(self, shape: OutputShape) -> Rendering {
        match shape {
            OutputShape::ObjectOnly => self.object_only,
            OutputShape::AnyJson => self.any_json,
        }
    }
}

/// The outermost relocating layer of a name, when only wrappers sit outside it
/// (no layer there changes the output): a backend that may defer its call.
fn deferring_backend(info: &ToolInfo) -> Option<&Name> {
    let at = info
        .chain
        .iter()
        .rposition(|link| link.kind.relocates_execution())?;
    info.chain[at + 1..]
        .iter()
        .all(|link| link.kind == toolgraft::kind::ExtensionKind::Wrapper)
        .then(|| &info.chain[at].extension)
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

impl<H> std::fmt::Debug for ToolsetServer<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsetServer")
            .field("toolset", &self.toolset)
            .field("server_info", &self.info.server_info)
            .finish_non_exhaustive()
    }
}

/// The handler of a [`ToolsetServer`] that serves only the toolset's tools:
/// every other request is answered as a server without it answers
/// (`method not found`, or an empty list).
///
/// ```
/// use toolgraft_mcp::{ToolsOnly, ToolsetServer};
/// let _: ToolsetServer<ToolsOnly> = ToolsetServer::new(toolgraft::Toolset::new());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ToolsOnly;

impl ServerHandler for ToolsOnly {
    /// A server named `toolgraft`, with this crate's version, and no capability
    /// but the toolset's tools (which its server adds).
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::default())
            .with_server_info(Implementation::new("toolgraft", env!("CARGO_PKG_VERSION")))
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
        let shared = Shared {
            toolset,
            overrides: Arc::default(),
            bad_arguments: BadArguments::default(),
            listings: Arc::default(),
            tasks: None,
        };
        shared.serve(ToolsOnly)
    }

    /// The toolset's tools beside `handler`'s prompts, resources, completions,
    /// logging and tools of its own: every request that is not about the
    /// toolset's tools goes to `handler` as it came, so nothing of it is lost or
    /// guessed.
    ///
    /// A server for one connection, sharing this one's toolset, settings and
    /// listings: call it once per session with that session's handler
    /// (`McpHttp::for_handler(move || tools.with_handler(Notes::new()), guard)`),
    /// or once for a handler that is `Clone` and give the result to `McpHttp::new`.
    ///
    /// - The server's info is `handler`'s (read here, once), with the `tools`
    ///   capability and `listChanged` added; [`with_server_info`](Self::with_server_info)
    ///   and [`with_instructions`](Self::with_instructions) still set theirs.
    /// - `tools/list` is the toolset's tools, then `handler`'s own under names
    ///   the toolset does not bind; `tools/call` calls the toolset's tool of that
    ///   name, else `handler`'s.
    /// - `initialize`, `notifications/initialized` and `subscriptions/listen`
    ///   reach both: the toolset's list-changed notifications are sent beside
    ///   whatever `handler` sends.
    ///
    /// ```
    /// use rmcp::ServerHandler;
    /// use rmcp::model::{ServerCapabilities, ServerConfig};
    /// use toolgraft_mcp::ToolsetServer;
    ///
    /// #[derive(Clone)]
    /// struct Prompts;
    /// impl ServerHandler for Prompts {
    ///     fn get_info(&self) -> ServerConfig {
    ///         ServerConfig::new(ServerCapabilities::builder().enable_prompts().build())
    ///     }
    /// }
    ///
    /// let server = ToolsetServer::new(toolgraft::Toolset::new()).with_handler(Prompts);
    /// let capabilities = server.get_info().capabilities;
    /// assert!(capabilities.prompts.is_some());
    /// assert_eq!(capabilities.tools.unwrap().list_changed, Some(true));
    /// ```
    pub fn with_handler<H: ServerHandler>(&self, handler: H) -> ToolsetServer<H> {
        self.shared().serve(handler)
    }
}

/// What every server made from one shares: the toolset, the settings, the
/// listings. Each server adds a handler and its own per-connection state.
struct Shared {
    toolset: Toolset,
    overrides: Arc<Overrides>,
    bad_arguments: BadArguments,
    listings: Arc<Mutex<Listings>>,
    tasks: Option<Arc<Table>>,
}

impl Shared {
    /// A server for `handler`, whose info it reads once, with the toolset's tools
    /// added and the settings applied.
    fn serve<H: ServerHandler>(self, handler: H) -> ToolsetServer<H> {
        let mut info = handler.get_info();
        let handler_tools = info.capabilities.tools.is_some();
        self.overrides
            .apply(&mut info.server_info, &mut info.instructions);
        add_tools(&mut info.capabilities);
        if self.tasks.is_some() {
            add_tasks(&mut info.capabilities);
        }
        self.connect(handler, Arc::new(info), handler_tools)
    }

    /// A server with what a new connection starts with.
    fn connect<H>(
        self,
        handler: H,
        info: Arc<ServerConfig>,
        handler_tools: bool,
    ) -> ToolsetServer<H> {
        ToolsetServer {
            changes: self.toolset.changes(),
            toolset: self.toolset,
            info,
            overrides: self.overrides,
            handler,
            handler_tools,
            bad_arguments: self.bad_arguments,
            notifier: Mutex::new(Notifier::Idle),
            structuring: Mutex::default(),
            listings: self.listings,
            connection: watch::channel(()).0,
            tasks: self.tasks,
        }
    }
}

impl<H> ToolsetServer<H> {
    /// A server for the same toolset with the same info, and the per-connection
    /// state of a new one: what each HTTP session is served by.
    #[cfg(feature = "http")]
    pub(crate) fn fresh(&self) -> Self
    where
        H: Clone,
    {
        self.shared()
            .connect(self.handler.clone(), self.info.clone(), self.handler_tools)
    }

    fn shared(&self) -> Shared {
        Shared {
            toolset: self.toolset.clone(),
            overrides: self.overrides.clone(),
            bad_arguments: self.bad_arguments,
            listings: self.listings.clone(),
            tasks: self.tasks.clone(),
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
        Arc::make_mut(&mut self.info).server_info = server_info.clone();
        Arc::make_mut(&mut self.overrides).server_info = Some(server_info);
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
        let instructions = instructions.into();
        Arc::make_mut(&mut self.info).instructions = Some(instructions.clone());
        Arc::make_mut(&mut self.overrides).instructions = Some(instructions);
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

    /// Makes MCP tasks of the calls that must wait, for clients that declared the
    /// extension (`io.modelcontextprotocol/tasks`, which the server then
    /// advertises): see [`task`](crate::task) for which calls, and how they are
    /// followed. One table for every session made from this server (call it
    /// before [`with_handler`](Self::with_handler)).
    ///
    /// ```
    /// use rmcp::ServerHandler;
    /// use toolgraft_mcp::ToolsetServer;
    /// use toolgraft_mcp::task::Tasks;
    /// let server = ToolsetServer::new(toolgraft::Toolset::new()).with_tasks(Tasks::new());
    /// assert!(server.get_info().capabilities.supports_tasks());
    /// ```
    pub fn with_tasks(mut self, tasks: Tasks) -> Self {
        self.tasks = Some(Arc::new(Table::new(tasks)));
        // What each name defers to depends on the backends followed.
        self.structuring = Mutex::default();
        add_tasks(&mut Arc::make_mut(&mut self.info).capabilities);
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

    /// Every published name as an MCP tool for a client on `shape`, sorted by
    /// name: the toolset's part of what `tools/list` returns.
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
                    .published()
                    .iter()
                    .map(|published| published_tool(published, shape))
                    .collect(),
            )
        })
        .clone()
    }

    /// Calls a published name for a client on `shape`, outside any MCP request
    /// (no [`McpCall`](crate::call::McpCall), progress or principal): what
    /// `tools/call` returns, with errors mapped as the [crate docs](crate) say.
    /// Over MCP, the server's `call_tool` is the call with the request's context.
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
        let rendering = self.rendering(name, shape);
        let arguments = arguments.map_or(Value::Null, Value::Object);
        to_mcp(
            self.toolset.call_published(name, arguments).await,
            name,
            rendering,
            self.bad_arguments,
        )
    }

    /// How results of `name` are answered for a client on `shape`, as the
    /// toolset is now.
    fn rendering(&self, name: &str, shape: OutputShape) -> Rendering {
        self.renderings(name)
            .map_or(Rendering::Text, |renderings| renderings.for_shape(shape))
    }

    /// How results of `name` are answered, and whether its body is relocated, as
    /// the toolset is now; `None` for a name it does not bind.
    fn renderings(&self, name: &str) -> Option<Renderings> {
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
        if let Some(renderings) = structuring.names.get(name) {
            return Some(*renderings);
        }
        let (Some(info), Ok(published)) = (self.toolset.resolve(name), Name::new(name)) else {
            return None;
        };
        let renderings = Renderings::of(&info, self.tasks.as_deref());
        structuring.names.insert(published, renderings);
        Some(renderings)
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

impl<H: Send + Sync + 'static> ToolsetServer<H> {
    /// A call that may become a task: a relocated one is a task from the start
    /// (its body leaves the caller's process, or thread, and whether it is done
    /// by the time it is first asked is a race); any other is answered at once
    /// when it has its answer (or a request for input) without waiting, and is a
    /// task the moment it must wait.
    async fn call_as_task(
        &self,
        tasks: Arc<Table>,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        shape: OutputShape,
        rendering: Rendering,
        relocated: bool,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let arguments = arguments_of(&request.arguments);
        // The place is taken before the call runs: a call that must wait is a
        // task, never a call begun and then refused for want of room.
        let reserved = tasks.reserve(call::principal_of(&context))?;
        let mut context = context;
        // The task's own: the request is answered when the call becomes a task.
        context.ct = reserved.cancel.clone();
        let (toolset, bad_arguments) = (self.toolset.clone(), self.bad_arguments);
        let run = Arc::new(
            move |context: RequestContext<RoleServer>, brought: call::Brought| -> Running {
                let (toolset, name, arguments) = (toolset.clone(), name.clone(), arguments.clone());
                Box::pin(async move {
                    let call = toolset.call_published(&name, arguments);
                    let outcome = call::serve(context, brought, call).await;
                    settled(outcome, &name, rendering, bad_arguments, shape)
                })
            },
        );
        // Every run is the stateless protocol's (tasks are 2026-07-28's): an
        // approval seals the arguments as sent, and asks by a request for input.
        let brought = {
            let arguments = arguments_of(&request.arguments);
            let progress = reserved.progress.clone();
            move |responses, state| call::Brought {
                responses,
                state,
                stateless: true,
                arguments: Some(arguments.clone()),
                progress: Some(progress.clone()),
                deferral: None,
            }
        };
        let mut running = run(
            context.clone(),
            brought(request.input_responses, request.request_state),
        );
        if !relocated
            && let Poll::Ready(settled) =
                std::future::poll_fn(|cx| Poll::Ready(running.as_mut().poll(cx))).await
        {
            tasks.release(&reserved.id);
            return settled.into();
        }
        // Again with what a request for input brought, as the client's next call
        // would bring it.
        let resume: Resume =
            Arc::new(move |responses, state| run(context.clone(), brought(Some(responses), state)));
        let task = tasks.begin(&reserved.id, running, resume);
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }
}

/// What the handler answered for a task the table does not hold: a handler
/// without tasks of its own leaves the table's "no task" standing.
fn or_unknown<T>(theirs: Result<T, ErrorData>, unknown: ErrorData) -> Result<T, ErrorData> {
    match theirs {
        Err(error) if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND => Err(unknown),
        answered => answered,
    }
}

/// The arguments of a call as the client sent them.
fn arguments_of(arguments: &Option<JsonObject>) -> Value {
    arguments.clone().map_or(Value::Null, Value::Object)
}

impl<H: Send + Sync + 'static> ToolsetServer<H> {
    /// A call a backend may defer: enqueued and answered with the task that is
    /// its job (which any server following the backend answers for), or
    /// answered as it ends when it did not defer (a layer outside asked first,
    /// or failed).
    async fn call_deferred(
        &self,
        tasks: Arc<Table>,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        rendering: Rendering,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let arguments = arguments_of(&request.arguments);
        let brought = call::Brought {
            responses: request.input_responses,
            state: request.request_state,
            stateless: true,
            arguments: Some(arguments.clone()),
            progress: None,
            deferral: Some(Deferral::offer(tasks.settings().follower_keys())),
        };
        let call = self.toolset.call_published(&name, arguments);
        let outcome = call::serve(context, brought, call).await;
        if let Err(error) = &outcome
            && let Some(deferred) = error.downcast_ref::<Deferred>()
        {
            let id = tasks.follow(deferred);
            let now = task::now_iso();
            let task = Task::new(id, TaskStatus::Working, now.clone(), now)
                .with_ttl_ms(task::millis(deferred.follower.kept_for()))
                .with_poll_interval_ms(task::millis(tasks.settings().poll_interval()));
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        settled(
            outcome,
            &name,
            rendering,
            self.bad_arguments,
            OutputShape::AnyJson,
        )
        .into()
    }

    /// `tasks/get` of a followed job: its phase, read from its backend's store.
    async fn get_followed(
        &self,
        id: &str,
        followed: FollowedTask,
        principal: Option<&Principal>,
    ) -> Result<DetailedTask, ErrorData> {
        let found = followed
            .follow
            .status(&followed.job)
            .await
            .map_err(|error| {
                ErrorData::internal_error(
                    format!("task `{id}`: its job cannot be read: {error}"),
                    None,
                )
            })?;
        // The job's own principal, and a name this server serves through that
        // backend: or the id is none.
        let serves = |called: &str| {
            self.toolset.resolve(called).is_some_and(|info| {
                deferring_backend(&info)
                    .is_some_and(|backend| backend.as_str() == followed.follow.backend())
            })
        };
        let Some(found) =
            found.filter(|found| found.principal.as_ref() == principal && serves(&found.called))
        else {
            return Err(task::unknown(id));
        };
        let payload = match found.phase {
            Phase::Waiting => TaskPayload::Working,
            Phase::Cancelled => TaskPayload::Cancelled,
            Phase::Ended(outcome) => {
                let rendering = self.rendering(&found.called, OutputShape::AnyJson);
                match to_mcp(outcome, &found.called, rendering, self.bad_arguments) {
                    Ok(result) => TaskPayload::Completed {
                        result: task::object_of(&result),
                    },
                    Err(error) => TaskPayload::Failed {
                        error: task::error_object(&error),
                    },
                }
            }
            // Phases newer than this crate.
            _ => TaskPayload::Working,
        };
        let task = Task::new(id, TaskStatus::Working, found.since, task::now_iso())
            .with_ttl_ms(task::millis(followed.follow.kept_for()))
            .with_poll_interval_ms(task::millis(
                self.tasks
                    .as_ref()
                    .map_or(Duration::from_millis(500), |tasks| {
                        tasks.settings().poll_interval()
                    }),
            ));
        Ok(DetailedTask::new(task, payload))
    }
}

/// A call's outcome as MCP answers it.
fn settled(
    outcome: Result<Value, toolgraft::ToolError>,
    called: &str,
    rendering: Rendering,
    bad_arguments: BadArguments,
    shape: OutputShape,
) -> Settled {
    match outcome::input_required(&outcome, shape) {
        Some(needed) => Settled::Needs(needed),
        None => Settled::Answered(to_mcp(outcome, called, rendering, bad_arguments)),
    }
}

impl From<Settled> for Result<CallToolResponse, ErrorData> {
    fn from(settled: Settled) -> Self {
        match settled {
            Settled::Answered(answered) => answered.map(Into::into),
            Settled::Needs(needed) => Ok(needed.into()),
        }
    }
}

/// What a server was told to say of itself, over what its handler says.
#[derive(Clone, Debug, Default)]
struct Overrides {
    server_info: Option<Implementation>,
    instructions: Option<String>,
}

impl Overrides {
    fn apply(&self, server_info: &mut Implementation, instructions: &mut Option<String>) {
        if let Some(set) = &self.server_info {
            server_info.clone_from(set);
        }
        if let Some(set) = &self.instructions {
            *instructions = Some(set.clone());
        }
    }
}

/// The tasks extension added to what a handler declares.
fn add_tasks(capabilities: &mut ServerCapabilities) {
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
}

/// The `tools` capability with `listChanged` added to what a handler declares.
fn add_tools(capabilities: &mut ServerCapabilities) {
    let mut tools = capabilities.tools.take().unwrap_or_default();
    tools.list_changed = Some(true);
    capabilities.tools = Some(tools);
}

/// Methods that are not about tools, answered by the handler as they came.
macro_rules! forward {
    ($($(#[$attr:meta])* $method:ident($($arg:ident: $ty:ty),*) -> $out:ty;)+) => {$(
        $(#[$attr])*
        async fn $method(&self, $($arg: $ty),*) -> $out {
            self.handler.$method($($arg),*).await
        }
    )+};
}

impl<H: ServerHandler> ServerHandler for ToolsetServer<H> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::clone(&self.info)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        self.handler.supported_protocol_versions()
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
        // The handler negotiates (and does what else it does at initialize);
        // the server says what it is as a whole.
        let mut result = self.handler.initialize(request, context).await?;
        add_tools(&mut result.capabilities);
        if self.tasks.is_some() {
            add_tasks(&mut result.capabilities);
        }
        self.overrides
            .apply(&mut result.server_info, &mut result.instructions);
        Ok(result)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let changes = {
            let mut notifier = self.notifier.lock().unwrap_or_else(PoisonError::into_inner);
            match std::mem::replace(&mut *notifier, Notifier::Running) {
                Notifier::Armed(changes) => Some(changes),
                Notifier::Idle => Some(self.toolset.changes()),
                Notifier::Running => None,
            }
        };
        if let Some(changes) = changes {
            self.spawn_notifier(context.peer.clone(), changes);
        }
        self.handler.on_initialized(context).await;
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let shape = OutputShape::for_protocol(context.protocol_version().as_ref());
        if !self.handler_tools {
            return Ok(ListToolsResult::with_all_items(self.list(shape)));
        }
        // The toolset's tools come first, whole, on the first page; the handler's
        // follow, page by page as it pages them, under names the toolset does
        // not bind (published or hidden: a hidden name is still the toolset's).
        let first_page = request
            .as_ref()
            .is_none_or(|request| request.cursor.is_none());
        let mut theirs = self.handler.list_tools(request, context).await?;
        theirs
            .tools
            .retain(|tool| !self.toolset.contains(&tool.name));
        if first_page {
            let mut tools = self.list(shape);
            tools.append(&mut theirs.tools);
            theirs.tools = tools;
        }
        Ok(theirs)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        // rmcp reads the input schema from this (which no shape changes) for every
        // call of protocol `2026-07-28`: taken from the shared listing, sorted by
        // name, it is not copied per call.
        let listing = self.listing(OutputShape::AnyJson);
        let found = listing.binary_search_by(|tool| tool.name.as_ref().cmp(name));
        match found {
            Ok(index) => Some(listing[index].clone()),
            Err(_) if self.handler_tools && !self.toolset.contains(name) => {
                self.handler.get_tool(name)
            }
            Err(_) => None,
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.handler_tools && !self.toolset.contains(&request.name) {
            return self.handler.call_tool(request, context).await;
        }
        let shape = OutputShape::for_protocol(context.protocol_version().as_ref());
        let renderings = self.renderings(&request.name);
        let rendering = renderings.map_or(Rendering::Text, |known| known.for_shape(shape));
        if let Some(tasks) = &self.tasks {
            let relocated = renderings.is_some_and(|known| known.relocated);
            let defers = renderings.is_some_and(|known| known.defers);
            let declared = context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks());
            // Tasks are protocol 2026-07-28's (an older client that declares
            // the extension has its calls answered as they end).
            let declared = declared && shape == OutputShape::AnyJson;
            match (
                tasks.settings().support_of(&request.name, relocated),
                declared,
            ) {
                (TaskSupport::Required, false) => {
                    return Err(ErrorData::missing_required_client_capability(
                        ClientCapabilities::builder().enable_tasks().build(),
                    ));
                }
                (TaskSupport::Allowed | TaskSupport::Required, true) if defers => {
                    let task = self.call_deferred(tasks.clone(), request, context, rendering);
                    return Box::pin(task).await;
                }
                (TaskSupport::Allowed | TaskSupport::Required, true) => {
                    // Boxed: the call's future stays as small as it is without
                    // tasks (see `import::future_sizes`).
                    let task = self.call_as_task(
                        tasks.clone(),
                        request,
                        context,
                        shape,
                        rendering,
                        relocated,
                    );
                    return Box::pin(task).await;
                }
                _ => {}
            }
        }
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let cancelled = context.ct.clone();
        // Kept only where an approval may seal them: an older client's call
        // copies nothing.
        let stateless = shape == OutputShape::AnyJson;
        let brought = call::Brought {
            responses: request.input_responses,
            state: request.request_state,
            stateless,
            arguments: stateless.then(|| arguments.clone()),
            progress: None,
            deferral: None,
        };
        // Boxed: the call's state is kilobytes, which rmcp's spawn of each request
        // would copy (see `import::future_sizes`).
        let call = Box::pin(call::serve(
            context,
            brought,
            self.toolset.call_published(&request.name, arguments),
        ));
        // rmcp drops the answer to a cancelled request but lets the handler run on;
        // dropping the call stops the tool (a pool job is aborted with its caller).
        // The call is polled first: a tool that answers at once never registers with
        // the cancellation token (which costs a waiter in its list and its removal),
        // and rmcp drops an answer to a cancelled request anyway.
        tokio::select! {
            biased;
            outcome = call => settled(outcome, &request.name, rendering, self.bad_arguments, shape).into(),
            () = cancelled.cancelled() => Err(ErrorData::internal_error(
                format!("the call to `{}` was cancelled", request.name),
                None,
            )),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let Some(tasks) = &self.tasks else {
            return self.handler.get_task(request, context).await;
        };
        let principal = call::principal_of(&context);
        if let Some(followed) = tasks.followed(&request.task_id) {
            return self
                .get_followed(&request.task_id, followed, principal.as_ref())
                .await
                .map(GetTaskResult::new);
        }
        match tasks.get(&request.task_id, principal.as_ref()) {
            Ok(task) => Ok(GetTaskResult::new(task)),
            // Perhaps a task of the handler's own tools.
            Err(unknown) => or_unknown(self.handler.get_task(request, context).await, unknown),
        }
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let Some(tasks) = &self.tasks else {
            return self.handler.update_task(request, context).await;
        };
        let principal = call::principal_of(&context);
        if let Some(followed) = tasks.followed(&request.task_id) {
            // A job asks nothing of its caller: known, nothing to file.
            return self
                .get_followed(&request.task_id, followed, principal.as_ref())
                .await
                .map(drop);
        }
        let responses = request.input_responses.clone();
        match tasks.update(&request.task_id, principal.as_ref(), responses) {
            Ok(()) => Ok(()),
            Err(unknown) => or_unknown(self.handler.update_task(request, context).await, unknown),
        }
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let Some(tasks) = &self.tasks else {
            return self.handler.cancel_task(request, context).await;
        };
        let principal = call::principal_of(&context);
        if let Some(followed) = tasks.followed(&request.task_id) {
            let (follow, job) = (followed.follow.clone(), followed.job.clone());
            // Known to this caller first: an id is no way to cancel another's job.
            self.get_followed(&request.task_id, followed, principal.as_ref())
                .await?;
            return follow.cancel(&job).await.map_err(|error| {
                ErrorData::internal_error(format!("the job cannot be cancelled: {error}"), None)
            });
        }
        match tasks.cancel(&request.task_id, principal.as_ref()) {
            Ok(()) => Ok(()),
            Err(unknown) => or_unknown(self.handler.cancel_task(request, context).await, unknown),
        }
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp narrows this to what the client asked for.
        let mut accepted = self
            .handler
            .accepted_subscription_filter(requested)
            .unwrap_or_default();
        accepted.tools_list_changed = Some(true);
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let tools = (context.accepted().tools_list_changed == Some(true)).then(|| {
            let sink = context.sink().clone();
            let ended = context.request_context().ct.clone();
            let mut changes = self.toolset.changes();
            async move {
                loop {
                    tokio::select! {
                        () = ended.cancelled() => return,
                        changed = changes.changed() => if changed.is_err() { return },
                    }
                    // A send fails only once the stream or the connection is gone.
                    if sink.notify_tool_list_changed().await.is_err() {
                        return;
                    }
                }
            }
        });
        // Boxed, as the call is (see `import::future_sizes`).
        let mut theirs = Box::pin(self.handler.listen(context));
        let Some(tools) = tools else {
            return theirs.await;
        };
        let tools = Box::pin(tools);
        // The subscription lasts as long as the handler's part of it; the
        // toolset's part ending (the stream gone) leaves the handler's running.
        tokio::select! {
            outcome = &mut theirs => return outcome,
            () = tools => {}
        }
        theirs.await
    }

    forward! {
        ping(context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        complete(request: CompleteRequestParams, context: RequestContext<RoleServer>) -> Result<CompleteResult, ErrorData>;
        #[allow(deprecated)]
        set_level(request: SetLevelRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        get_prompt(request: GetPromptRequestParams, context: RequestContext<RoleServer>) -> Result<GetPromptResponse, ErrorData>;
        list_prompts(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListPromptsResult, ErrorData>;
        list_resources(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListResourcesResult, ErrorData>;
        list_resource_templates(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListResourceTemplatesResult, ErrorData>;
        read_resource(request: ReadResourceRequestParams, context: RequestContext<RoleServer>) -> Result<ReadResourceResponse, ErrorData>;
        #[allow(deprecated)]
        subscribe(request: SubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        #[allow(deprecated)]
        unsubscribe(request: UnsubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        on_custom_request(request: CustomRequest, context: RequestContext<RoleServer>) -> Result<CustomResult, ErrorData>;
        on_cancelled(notification: CancelledNotificationParam, context: NotificationContext<RoleServer>) -> ();
        on_progress(notification: ProgressNotificationParam, context: NotificationContext<RoleServer>) -> ();
        on_roots_list_changed(context: NotificationContext<RoleServer>) -> ();
        on_custom_notification(notification: CustomNotification, context: NotificationContext<RoleServer>) -> ();
        list_skills(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListSkillsResult, ErrorData>;
        get_skill(request: GetSkillRequestParams, context: RequestContext<RoleServer>) -> Result<GetSkillResult, ErrorData>;
        read_resource_directory(request: ReadResourceDirectoryRequestParams, context: RequestContext<RoleServer>) -> Result<ReadResourceDirectoryResult, ErrorData>;
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

    // Sessions are the HTTP transport's.
    #[cfg(feature = "http")]
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
