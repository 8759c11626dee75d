//! MCP over Streamable HTTP: a [`ToolsetServer`], or any rmcp [`ServerHandler`]
//! ([`McpHttp::for_handler`]), behind rmcp's Streamable HTTP server transport, on
//! an [axum](https://docs.rs/axum/0.8) router (feature `http`).
//!
//! [`McpHttp`] is the configuration; it gives either a [`Router`] that serves MCP at
//! [`MCP_PATH`] (`/mcp`), for an embedding server to merge into its own router beside
//! other routes, or, through [`McpHttp::serve`], a running server of its own.
//!
//! What a client gets:
//!
//! * **Sessions.** `initialize` opens a session (`Mcp-Session-Id` in the answer); the
//!   client sends the id with every later request, `GET` opens its stream of server
//!   messages, `DELETE` ends it. Each session has its own [`ToolsetServer`] over the
//!   one shared toolset. Idle sessions end after five minutes.
//! * **Replies as one JSON body.** A request whose answer is its reply alone (most
//!   calls, every list) gets that reply as one `application/json` body, in a session
//!   and without one; the transport allows either to a client that accepts both,
//!   as clients must. A reply preceded by anything else (progress, a log message, a
//!   request to the client), or not ready within a second, keeps its event stream,
//!   with its priming event and ids for resuming.
//! * **`notifications/tools/list_changed`** on the session's `GET` stream after every
//!   live change of the toolset ([`Toolset::edit`](toolgraft::Toolset::edit),
//!   `apply_manifest`), as over stdio.
//! * **A [`Guard`] in front of the endpoint**, the one `toolgraft-http`'s authoring
//!   API uses too ([`toolgraft_guard`]), which [`McpHttp::new`] requires:
//!   * **DNS-rebinding protection.** A request whose `Host` is not on the guard's
//!     host allow-list, or whose `Origin` (when it has one) is not on its origin
//!     allow-list, is refused with `403` before anything else runs. By default both
//!     lists name only the loopback addresses (`localhost`, `127.0.0.1`, `[::1]`),
//!     so a page on another site that resolves its own name to `127.0.0.1` cannot
//!     reach the server. Clients that are not browsers send no `Origin`.
//!   * **A bearer token**, with [`Guard::bearer`]: a request without
//!     `Authorization: Bearer <token>` gets `401` with `WWW-Authenticate: Bearer`.
//!     [`Guard::off`] is the written-out choice of no token, for servers that only a
//!     trusted local user can reach.
//! * **Loopback unless configured otherwise.** [`McpHttp::serve`] refuses an address
//!   that is not a loopback address until [`McpHttp::with_non_loopback`] says so.
//!
//! Hostile input gets an HTTP error and never takes the server down: bodies over
//! 4 MiB are refused with `413`, a body said to be JSON that is no JSON-RPC message
//! with `400` and a JSON-RPC parse error (`-32700`), a body of another media type
//! with `415`, and the arguments of a call are checked by the toolset as over stdio.
//!
//! ```
//! use toolgraft::Toolset;
//! use toolgraft_mcp::ToolsetServer;
//! use toolgraft_mcp::http::{Guard, McpHttp};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let toolset = Toolset::new();
//! // ... bind tools and combos ...
//! let guard = Guard::bearer("a-long-random-s3cret")?; // or Guard::off(), explicitly
//! let server = McpHttp::new(ToolsetServer::new(toolset), guard)
//!     .serve(([127, 0, 0, 1], 0))  // port 0: any free port
//!     .await?;
//! assert!(server.url().starts_with("http://127.0.0.1:"));
//! assert!(server.url().ends_with("/mcp"));
//! server.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! Mounted in an application's own router, beside its other routes:
//!
//! ```
//! use axum::{Router, routing::get};
//! use toolgraft_mcp::ToolsetServer;
//! use toolgraft_mcp::http::{Guard, McpHttp};
//!
//! let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off());
//! let app: Router = Router::new()
//!     .route("/health", get(|| async { "ok" }))
//!     .merge(mcp.router());
//! // Listen through `no_delay`: without TCP_NODELAY each event of a stream waits for
//! // the client's delayed acknowledgement.
//! // axum::serve(toolgraft_mcp::http::no_delay(listener), app).await
//! ```

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use rmcp::ServerHandler;

use crate::ToolsetServer;

mod service;
mod sessions;
mod whole;

#[cfg(feature = "oauth")]
#[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
pub use toolgraft_guard::ResourceServer;
/// The guard's vocabulary, re-exported: `McpHttp::new` takes a [`Guard`], as
/// `toolgraft_http::Authoring::with_guard` does.
pub use toolgraft_guard::{Authenticated, Guard, GuardError, TokenTable};

/// The path the MCP endpoint is served at, in [`McpHttp::router`]'s router.
///
/// ```
/// assert_eq!(toolgraft_mcp::http::MCP_PATH, "/mcp");
/// ```
pub const MCP_PATH: &str = "/mcp";

/// Why MCP over HTTP could not be served (a bad token or allow-list entry is a
/// [`GuardError`], when the [`Guard`] is made).
///
/// ```
/// use toolgraft_mcp::http::HttpError;
/// let addr = ([0, 0, 0, 0], 8931).into();
/// assert!(HttpError::NotLoopback { addr }.to_string().contains("with_non_loopback"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum HttpError {
    /// [`McpHttp::serve`] was given an address that is not a loopback address, and
    /// [`McpHttp::with_non_loopback`] was not called.
    NotLoopback {
        /// The address.
        addr: SocketAddr,
    },
    /// The address could not be bound (in use, not permitted, ...).
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The system's error.
        source: std::io::Error,
    },
    /// The server stopped with an I/O error, or its task failed.
    Serve {
        /// What happened.
        message: String,
    },
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotLoopback { addr } => write!(
                f,
                "{addr} is not a loopback address; serving MCP beyond this machine needs \
                 `McpHttp::with_non_loopback` (and a guard whose host allow-list names the server)"
            ),
            Self::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            Self::Serve { message } => write!(f, "the MCP HTTP server stopped: {message}"),
        }
    }
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Bind { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// MCP over Streamable HTTP for a [`ToolsetServer`], or for any rmcp
/// [`ServerHandler`] of your own ([`McpHttp::for_handler`]): its configuration,
/// and the router or server built from it. See the [module docs](self).
///
/// ```
/// use toolgraft_mcp::ToolsetServer;
/// use toolgraft_mcp::http::{Guard, McpHttp};
///
/// let guard = Guard::bearer("a-long-random-s3cret")?
///     .allow_hosts(["mcp.example.com"])?
///     .allow_origins(["https://app.example.com"])?;
/// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), guard)
///     .with_non_loopback();
/// assert_eq!(mcp.guard().hosts(), ["mcp.example.com"]);
/// # Ok::<(), toolgraft_mcp::http::GuardError>(())
/// ```
pub struct McpHttp<S = ToolsetServer> {
    /// Makes the handler of each session (and of each request served without one).
    handler: Arc<dyn Fn() -> S + Send + Sync>,
    guard: Guard,
    non_loopback: bool,
    cancel: CancellationToken,
    identify: service::Identify,
    /// Whether the handler is a [`ToolsetServer`], whose calls a step-up
    /// refusal answers `403`.
    step_up: bool,
    max_sessions: usize,
    max_sessions_per_principal: usize,
}

/// How many sessions [`McpHttp`] keeps open at once unless told otherwise
/// ([`McpHttp::with_max_sessions`]): an idle session holds about 61 KiB until it
/// expires (five minutes unused).
pub const DEFAULT_MAX_SESSIONS: usize = 1_000;

impl<S> fmt::Debug for McpHttp<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpHttp")
            .field("handler", &std::any::type_name::<S>())
            .field("guard", &self.guard)
            .field("non_loopback", &self.non_loopback)
            .finish_non_exhaustive()
    }
}

impl<H: ServerHandler + Clone> McpHttp<ToolsetServer<H>> {
    /// MCP over HTTP for `server` (a fresh copy of it serves each session: same
    /// toolset, server info and instructions), behind `guard`: its token, if it has
    /// one, and its Host and Origin allow-lists (the loopback ones unless set).
    ///
    /// ```
    /// use toolgraft_mcp::ToolsetServer;
    /// use toolgraft_mcp::http::{Guard, McpHttp};
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off());
    /// assert_eq!(mcp.guard().hosts(), ["localhost", "127.0.0.1", "::1"]);
    /// ```
    pub fn new(server: ToolsetServer<H>, guard: Guard) -> Self {
        let mut mcp = Self::for_handler(move || server.fresh(), guard);
        mcp.step_up = true;
        mcp
    }
}

impl<S: ServerHandler + Send + 'static> McpHttp<S> {
    /// MCP over HTTP for a [`ServerHandler`] of your own, one made by `handler`
    /// for each session, behind `guard`, with everything [`McpHttp::new`] gives a
    /// [`ToolsetServer`]: the same token, Host, Origin and loopback checks,
    /// replies sent whole, sessions, streams.
    ///
    /// ```
    /// use rmcp::ServerHandler;
    /// use rmcp::model::{ServerCapabilities, ServerConfig};
    /// use toolgraft_mcp::http::{Guard, McpHttp};
    ///
    /// #[derive(Clone)]
    /// struct Notes;
    /// impl ServerHandler for Notes {
    ///     fn get_info(&self) -> ServerConfig {
    ///         ServerConfig::new(ServerCapabilities::builder().enable_prompts().build())
    ///     }
    /// }
    /// let mcp = McpHttp::for_handler(|| Notes, Guard::bearer("a-long-random-s3cret")?);
    /// assert!(mcp.guard().requires_token());
    /// # Ok::<(), toolgraft_mcp::http::GuardError>(())
    /// ```
    pub fn for_handler(handler: impl Fn() -> S + Send + Sync + 'static, guard: Guard) -> Self {
        Self {
            handler: Arc::new(handler),
            guard,
            non_loopback: false,
            cancel: CancellationToken::new(),
            identify: service::Identify::default(),
            step_up: false,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_principal: usize::MAX,
        }
    }

    /// The most sessions one principal ([`with_principal`](Self::with_principal))
    /// has open at once (from 1; no cap of its own unless set, so one principal
    /// may take all [`with_max_sessions`](Self::with_max_sessions)). Refused as
    /// the cap in all is.
    ///
    /// ```
    /// use toolgraft::context::Principal;
    /// use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off())
    ///     .with_principal(|request| Some(Principal::new(request.headers.get("x-user")?.to_str().ok()?)))
    ///     .with_max_sessions_per_principal(10);
    /// ```
    pub fn with_max_sessions_per_principal(mut self, max: usize) -> Self {
        self.max_sessions_per_principal = max.max(1);
        self
    }

    /// The most sessions open at once (from 1; [`DEFAULT_MAX_SESSIONS`] unless
    /// set). A client that would open one more is answered `503 Service
    /// Unavailable` with `Retry-After: 30` and a JSON-RPC error saying why;
    /// sessions end when their client deletes them or five minutes unused.
    /// Requests of protocol `2026-07-28` and later open no session.
    ///
    /// ```
    /// use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off())
    ///     .with_max_sessions(200);
    /// ```
    pub fn with_max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(1);
        self
    }

    /// Who each request is from, as the application tells from the request
    /// (a header an authenticating proxy sets, a token of its own it maps to a
    /// user): the [`Principal`](toolgraft::context::Principal) of every call the
    /// request makes, which bodies and extensions read from the call context,
    /// which travels to worker processes, and on which a cache keys. `None`
    /// leaves the call the subject of its [identity](Self::with_identity) as
    /// principal, if it has one, else none. It runs after the guard's checks
    /// and the identity's hook, on every request of the endpoint.
    ///
    /// ```
    /// use toolgraft::context::Principal;
    /// use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off())
    ///     .with_principal(|request| {
    ///         let user = request.headers.get("x-authenticated-user")?;
    ///         Some(Principal::new(user.to_str().ok()?))
    ///     });
    /// ```
    pub fn with_principal(
        mut self,
        identify: impl Fn(&axum::http::request::Parts) -> Option<toolgraft::context::Principal>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.identify.principal = Some(Arc::new(identify));
        self
    }

    /// Who each request is from, as the application proved it (a token it
    /// checked, a header an authenticating proxy sets): the
    /// [`Identity`](toolgraft::context::Identity) of every call the request
    /// makes, which the toolset's [access policies](toolgraft::access) decide
    /// on, in `tools/list` (a caller is shown the names it may call) and in
    /// `tools/call`; it travels to worker processes. Unless
    /// [`with_principal`](Self::with_principal) says otherwise, the call's
    /// [`Principal`](toolgraft::context::Principal) is the identity's subject.
    /// It runs after the guard's checks, on every request of the endpoint,
    /// before the principal's hook (which finds the identity in the request's
    /// extensions).
    ///
    /// Without it, an `Identity` a layer in front of the endpoint put in the
    /// request's extensions is the call's. Over stdio there is none: the
    /// caller is whoever launched the server, and a policy that needs an
    /// identity refuses it.
    ///
    /// ```
    /// use toolgraft::context::Identity;
    /// use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off())
    ///     .with_identity(|request| {
    ///         let user = request.headers.get("x-authenticated-user")?.to_str().ok()?;
    ///         let scopes = request.headers.get("x-authenticated-scopes")?.to_str().ok()?;
    ///         Some(Identity::new(user).with_scopes(scopes.split(' ')))
    ///     });
    /// ```
    pub fn with_identity(
        mut self,
        identify: impl Fn(&axum::http::request::Parts) -> Option<toolgraft::context::Identity>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.identify.identity = Some(Arc::new(identify));
        self
    }

    /// Lets [`McpHttp::serve`] listen on addresses beyond the loopback interface
    /// (`0.0.0.0`, a LAN address). Give it a guard whose host allow-list names what
    /// clients use, and with a token ([`Guard::bearer`]).
    ///
    /// ```
    /// use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// let guard = Guard::bearer("a-long-random-s3cret")?.allow_hosts(["mcp.lan"])?;
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), guard)
    ///     .with_non_loopback();
    /// # Ok::<(), toolgraft_mcp::http::GuardError>(())
    /// ```
    pub fn with_non_loopback(mut self) -> Self {
        self.non_loopback = true;
        self
    }

    /// Ends every session and stream of this server (and a [`serve`](Self::serve)d
    /// server's listener) when `token` is cancelled: give it the token your
    /// application cancels at shutdown, since open event streams would otherwise keep
    /// a graceful shutdown waiting.
    ///
    /// ```
    /// use tokio_util::sync::CancellationToken;
    /// use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// let shutdown = CancellationToken::new();
    /// let router = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off())
    ///     .with_cancellation(shutdown.clone())
    ///     .router();
    /// // axum::serve(toolgraft_mcp::http::no_delay(listener), router).with_graceful_shutdown(shutdown.cancelled_owned())
    /// ```
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// The guard in front of the endpoint.
    ///
    /// ```
    /// # use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off());
    /// assert!(!mcp.guard().requires_token());
    /// ```
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// A router serving MCP at [`MCP_PATH`] (`POST`, `GET` and `DELETE`), with the
    /// guard on that route only: merge it into your application's
    /// router (`app.merge(mcp.router())`), or nest it under a prefix. Serve it
    /// from a listener wrapped in [`no_delay`], or each event of a stream waits for the
    /// client's delayed acknowledgement.
    ///
    /// ```
    /// # use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// let router: axum::Router =
    ///     McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off()).router();
    /// ```
    pub fn router(&self) -> Router {
        self.router_until(&self.cancel)
    }

    /// [`router`](Self::router), its sessions ended when `cancel` is cancelled.
    fn router_until(&self, cancel: &CancellationToken) -> Router {
        let handler = self.handler.clone();
        // rmcp's own Host and Origin checks are off: the guard in front of the
        // service makes them, the same way as for the authoring API, and a request
        // it lets through must not meet a second list with other rules.
        // An answer that is the whole reply (no progress or notification before it)
        // goes back as one JSON body where the protocol allows it (requests served
        // without a session: protocol `2026-07-28` on): one write instead of an
        // event stream's several.
        let config = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .disable_allowed_origins()
            .with_json_response(true)
            .with_cancellation_token(cancel.child_token());
        // Sessions as rmcp's `LocalSessionManager` keeps them, without its task
        // between the HTTP handlers and the service loop: two hops fewer a call.
        let sessions = Arc::new(sessions::DirectSessions::with_max(
            self.max_sessions,
            self.max_sessions_per_principal,
        ));
        let service = StreamableHttpService::new(move || Ok(handler()), sessions.clone(), config);
        let challenge = self.step_up.then(|| self.challenge());
        let router = Router::new()
            .route_service(
                MCP_PATH,
                service::McpService::new(service, sessions, self.identify.clone(), challenge),
            )
            .route_layer(self.guard.layer());
        // RFC 9728: where a client that was refused finds who issues tokens for
        // this resource; outside the guard, since that client has no token yet.
        #[cfg(feature = "oauth")]
        if let Some(resource) = self.guard.resource_server() {
            return router.route_service(resource.metadata_path(), resource.metadata_service());
        }
        router
    }

    /// The step-up challenge: the guard's OAuth resource server's (naming its
    /// metadata) when it has one.
    fn challenge(&self) -> Arc<service::Challenge> {
        #[cfg(feature = "oauth")]
        if let Some(resource) = self.guard.resource_server().cloned() {
            return Arc::new(move |scopes: &[String]| {
                resource.insufficient_scope_challenge(scopes)
            });
        }
        Arc::new(service::insufficient_scope)
    }

    /// Listens on `addr` and serves [`router`](Self::router) there until
    /// [`Serving::shutdown`] (or the [`with_cancellation`](Self::with_cancellation)
    /// token). Port 0 takes any free port; [`Serving::url`] tells which.
    ///
    /// Refuses an address that is not a loopback address unless
    /// [`with_non_loopback`](Self::with_non_loopback) was called.
    ///
    /// ```
    /// # use toolgraft_mcp::{ToolsetServer, http::{Guard, HttpError, McpHttp}};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mcp = || McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off());
    /// let refused = mcp().serve(([0, 0, 0, 0], 0)).await;
    /// assert!(matches!(refused, Err(HttpError::NotLoopback { .. })));
    ///
    /// let server = mcp().serve(([127, 0, 0, 1], 0)).await?;
    /// assert!(server.local_addr().ip().is_loopback());
    /// server.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub async fn serve(self, addr: impl Into<SocketAddr>) -> Result<Serving, HttpError> {
        let addr = addr.into();
        if !addr.ip().is_loopback() && !self.non_loopback {
            return Err(HttpError::NotLoopback { addr });
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| HttpError::Bind { addr, source })?;
        let listener = no_delay(listener);
        // A child: `Serving::shutdown` stops this server, not the embedder's token.
        let cancel = self.cancel.child_token();
        let router = self.router_until(&cancel);
        let stop = cancel.clone();
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
        });
        Ok(Serving {
            addr: local,
            cancel,
            task,
        })
    }
}

/// `listener` with `TCP_NODELAY` set on every connection it accepts: what
/// [`McpHttp::serve`] listens with, and what to serve [`McpHttp::router`] with.
///
/// A reply sent whole is one write, but an event stream (a call's progress, a
/// reply later than a second, the session's `GET` stream) is written an event at a
/// time; with Nagle's algorithm on, an event written while the one before is
/// unacknowledged waits for the client, which delays its acknowledgement (about
/// 40 ms on Linux): every such event would be that late.
///
/// ```no_run
/// # use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp, no_delay}};
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let router = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off()).router();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// axum::serve(no_delay(listener), router).await?;
/// # Ok(()) }
/// ```
pub fn no_delay(
    listener: TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = SocketAddr> {
    listener.tap_io(|tcp: &mut tokio::net::TcpStream| {
        // A socket that refuses the option still works, only slower: not a
        // reason to drop the connection.
        let _ = tcp.set_nodelay(true);
    })
}

/// A server started by [`McpHttp::serve`]; it runs until [`shutdown`](Self::shutdown)
/// (dropping this handle leaves it running, like a spawned task).
#[derive(Debug)]
pub struct Serving {
    addr: SocketAddr,
    cancel: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
}

impl Serving {
    /// The address listened on (with the port chosen when 0 was asked for).
    ///
    /// ```
    /// # use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off())
    ///     .serve(([127, 0, 0, 1], 0)).await?;
    /// assert_ne!(server.local_addr().port(), 0);
    /// # server.shutdown().await?; Ok(()) }
    /// ```
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint's URL, e.g. `http://127.0.0.1:8931/mcp`.
    ///
    /// ```
    /// # use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off())
    ///     .serve(([127, 0, 0, 1], 0)).await?;
    /// assert_eq!(server.url(), format!("http://{}/mcp", server.local_addr()));
    /// # server.shutdown().await?; Ok(()) }
    /// ```
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// Stops listening, ends every session and stream, and waits for the server to
    /// stop.
    ///
    /// ```
    /// # use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off())
    ///     .serve(([127, 0, 0, 1], 0)).await?;
    /// let addr = server.local_addr();
    /// server.shutdown().await?;
    /// assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(self) -> Result<(), HttpError> {
        self.cancel.cancel();
        self.wait().await
    }

    /// Waits until the server stops (after a cancellation, or an I/O error).
    ///
    /// ```no_run
    /// # use toolgraft_mcp::{ToolsetServer, http::{Guard, McpHttp}};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Guard::off())
    ///     .serve(([127, 0, 0, 1], 8931)).await?;
    /// server.wait().await?; // serves until the process is stopped
    /// # Ok(()) }
    /// ```
    pub async fn wait(self) -> Result<(), HttpError> {
        match self.task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(HttpError::Serve {
                message: error.to_string(),
            }),
            Err(error) => Err(HttpError::Serve {
                message: error.to_string(),
            }),
        }
    }
}
