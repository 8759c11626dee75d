//! [`ToolsetServer`]: the toolset's tools as an rmcp server handler, alone or
//! beside a handler of the author's own.
//!
//! The files, bottom to top: what the server lists (`listing`), how it renders
//! each name's results (`rendering`), a call's outcome as MCP answers it
//! (`answer`), calls that become tasks and followed jobs (`tasks`), the
//! list-changed notifier (`notify`), and the rmcp handler that routes every
//! request, the plain `tools/call` among them (`handler`).

use std::sync::{Arc, Mutex};

use rmcp::ServerHandler;
use rmcp::model::{
    Implementation, JsonObject, ServerCapabilities, ServerConfig, TASKS_EXTENSION_ID,
};
use tokio::sync::watch;

use toolgraft::Toolset;

use crate::outcome::{BadArguments, UnknownArguments};
use crate::task::{Table, Tasks};

mod listing;
mod rendering;
mod answer;
mod tasks;
mod notify;
mod handler;

use listing::Listings;
use notify::Notifier;
use rendering::Structuring;

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
    /// What the server answers besides the toolset's tools; shared with each
    /// call, whose imported tools may run on it ([`import::per_session`](crate::import::per_session)).
    handler: Arc<H>,
    /// Whether the handler has tools of its own, listed and called after the
    /// toolset's.
    handler_tools: bool,
    bad_arguments: BadArguments,
    unknown_arguments: UnknownArguments,
    notifier: Mutex<Notifier>,
    /// Watches the bound names, for `structuring` to know when it is stale.
    changes: watch::Receiver<u64>,
    structuring: Mutex<Structuring>,
    /// The tools/list answer per output shape, for the toolset at one version:
    /// shared by every session's server, so a list copies no schema (each is
    /// behind an `Arc`), and only the first list after a change builds it.
    listings: Arc<Mutex<Listings>>,
    /// What this connection's client was last shown, for its notifier to tell
    /// it of the changes that change that only.
    seen: notify::Seen,
    /// Dropped with the server, which rmcp does when its connection ends: that ends
    /// this connection's notifier task (its receivers see the sender gone).
    connection: watch::Sender<()>,
    /// The tasks of every session, when the server makes them.
    tasks: Option<Arc<Table>>,
    /// This connection's, unique in the process: what keys the calls of tools
    /// imported per session.
    session: crate::call::Session,
    /// The least severe log level this connection's client asked for with
    /// `logging/setLevel` (0: none yet, else its index in [`LOG_LEVELS`] + 1).
    log_level: std::sync::atomic::AtomicU8,
    /// This connection's OpenTelemetry instruments (feature `otel`).
    #[cfg(feature = "otel")]
    instruments: crate::otel::Instruments,
}

/// MCP's log levels, least severe first.
const LOG_LEVELS: [toolgraft::context::LogLevel; 8] = {
    use toolgraft::context::LogLevel::*;
    [
        Debug, Info, Notice, Warning, Error, Critical, Alert, Emergency,
    ]
};

impl<H> ToolsetServer<H> {
    /// The level this connection's client set with `logging/setLevel`, if it did.
    pub(crate) fn session_level(&self) -> Option<toolgraft::context::LogLevel> {
        let set = self.log_level.load(std::sync::atomic::Ordering::Relaxed);
        LOG_LEVELS.get(usize::from(set).checked_sub(1)?).copied()
    }

    /// Keeps `level` as the one this connection's client set.
    fn set_session_level(&self, level: toolgraft::context::LogLevel) {
        let at = LOG_LEVELS
            .iter()
            .position(|known| *known == level)
            .unwrap_or(0);
        let at = u8::try_from(at + 1).unwrap_or(1);
        self.log_level
            .store(at, std::sync::atomic::Ordering::Relaxed);
    }
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
            unknown_arguments: UnknownArguments::default(),
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
    ///   name, else `handler`'s. A name of the toolset that its
    ///   [access policies](toolgraft::access) keep from the caller is answered
    ///   as the toolset answers a name it does not have, never by `handler`'s
    ///   tool of that name: a policy cannot be bypassed through it.
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
    unknown_arguments: UnknownArguments,
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
            handler: Arc::new(handler),
            handler_tools,
            bad_arguments: self.bad_arguments,
            unknown_arguments: self.unknown_arguments,
            notifier: Mutex::new(Notifier::Idle),
            structuring: Mutex::default(),
            listings: self.listings,
            seen: notify::Seen::default(),
            connection: watch::channel(()).0,
            tasks: self.tasks,
            session: crate::call::Session::new(),
            log_level: std::sync::atomic::AtomicU8::new(0),
            #[cfg(feature = "otel")]
            instruments: crate::otel::Instruments::new(),
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
        self.shared().connect(
            H::clone(&self.handler),
            self.info.clone(),
            self.handler_tools,
        )
    }

    fn shared(&self) -> Shared {
        Shared {
            toolset: self.toolset.clone(),
            overrides: self.overrides.clone(),
            bad_arguments: self.bad_arguments,
            unknown_arguments: self.unknown_arguments,
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

    /// What the server does with an argument a tool's input schema does not
    /// name: as each schema says (the default, as rmcp does), or refused for
    /// every tool, each schema then listed as saying so ([`UnknownArguments`]).
    /// Set it before [`with_handler`](Self::with_handler).
    ///
    /// ```
    /// use toolgraft_mcp::{ToolsetServer, UnknownArguments};
    /// let server = ToolsetServer::new(toolgraft::Toolset::new())
    ///     .with_unknown_arguments(UnknownArguments::Refuse);
    /// ```
    pub fn with_unknown_arguments(mut self, unknown_arguments: UnknownArguments) -> Self {
        self.unknown_arguments = unknown_arguments;
        // The listings say it: built again, and no longer shared with servers
        // that do not.
        self.listings = Arc::default();
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

/// The `tools` capability with `listChanged` added to what a handler declares,
/// and `logging`: the toolset's bodies send log messages to a client that asks
/// for them.
fn add_tools(capabilities: &mut ServerCapabilities) {
    let mut tools = capabilities.tools.take().unwrap_or_default();
    tools.list_changed = Some(true);
    capabilities.tools = Some(tools);
    #[allow(deprecated)] // logging, deprecated by SEP-2577 and still served.
    capabilities.logging.get_or_insert_with(Default::default);
}
