//! MCP over Streamable HTTP: a [`ToolsetServer`] behind rmcp's Streamable HTTP
//! server transport, on an [axum](https://docs.rs/axum/0.8) router (feature `http`).
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
//! * **`notifications/tools/list_changed`** on the session's `GET` stream after every
//!   live change of the toolset ([`Toolset::edit`](toolgraft::Toolset::edit),
//!   `apply_manifest`), as over stdio.
//! * **DNS-rebinding protection.** A request whose `Host` is not on the host
//!   allow-list, or whose `Origin` (when it has one) is not on the origin allow-list,
//!   is refused with `403` before anything else runs. By default both lists name only
//!   the loopback addresses (`localhost`, `127.0.0.1`, `[::1]`), so a page on another
//!   site that resolves its own name to `127.0.0.1` cannot reach the server. Clients
//!   that are not browsers send no `Origin`.
//! * **Loopback unless configured otherwise.** [`McpHttp::serve`] refuses an address
//!   that is not a loopback address until [`McpHttp::allow_non_loopback`] says so.
//! * **A bearer token**, when [`Auth::bearer`] is chosen: a request without
//!   `Authorization: Bearer <token>` gets `401` with `WWW-Authenticate: Bearer`.
//!   Whether to ask for one is a choice [`McpHttp::new`] requires: [`Auth::off`] is
//!   for servers that only a trusted local user can reach.
//!
//! Hostile input gets an HTTP error and never takes the server down: bodies over
//! 4 MiB are refused with `413`, bad JSON with `400`, and the arguments of a call are
//! checked by the toolset as over stdio.
//!
//! ```
//! use toolgraft::Toolset;
//! use toolgraft_mcp::ToolsetServer;
//! use toolgraft_mcp::http::{Auth, McpHttp};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let toolset = Toolset::new();
//! // ... bind tools and combos ...
//! let server = McpHttp::new(ToolsetServer::new(toolset), Auth::bearer("s3cret")?)
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
//! use toolgraft_mcp::http::{Auth, McpHttp};
//!
//! let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off());
//! let app: Router = Router::new()
//!     .route("/health", get(|| async { "ok" }))
//!     .merge(mcp.router());
//! // axum::serve(listener, app).await
//! ```

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::ToolsetServer;

/// The path the MCP endpoint is served at, in [`McpHttp::router`]'s router.
///
/// ```
/// assert_eq!(toolgraft_mcp::http::MCP_PATH, "/mcp");
/// ```
pub const MCP_PATH: &str = "/mcp";

/// The hosts a request may name (`Host`) by default: the loopback names, any port.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The browser origins allowed by default: pages the loopback interface serves, on
/// any port and either scheme.
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// Whether requests must carry a bearer token: [`McpHttp::new`] takes one of these,
/// so serving without a token is always a visible choice.
///
/// ```
/// use toolgraft_mcp::http::Auth;
/// assert!(Auth::bearer("s3cret").unwrap().requires_token());
/// assert!(!Auth::off().requires_token());
/// // The token is never printed.
/// assert_eq!(format!("{:?}", Auth::bearer("s3cret").unwrap()), "Auth::Bearer(..)");
/// ```
#[derive(Clone)]
pub struct Auth {
    token: Option<Arc<str>>,
}

impl Auth {
    /// Every request must carry `Authorization: Bearer <token>`.
    ///
    /// The token must be 1 to 4096 characters of the `token68` alphabet
    /// (`A-Z a-z 0-9 - . _ ~ + /`, then `=` padding), which is what fits in the header.
    ///
    /// ```
    /// use toolgraft_mcp::http::{Auth, HttpError};
    /// assert!(Auth::bearer("tok-3n.v4lue~").is_ok());
    /// assert!(matches!(Auth::bearer(""), Err(HttpError::BadToken { .. })));
    /// assert!(matches!(Auth::bearer("has space"), Err(HttpError::BadToken { .. })));
    /// ```
    pub fn bearer(token: impl Into<String>) -> Result<Self, HttpError> {
        let token: String = token.into();
        let body = token.trim_end_matches('=');
        let reason = if token.is_empty() {
            Some("it is empty")
        } else if token.len() > 4096 {
            Some("it is longer than 4096 bytes")
        } else if body.is_empty()
            || !body
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
        {
            Some("it has characters outside `A-Z a-z 0-9 - . _ ~ + /` (and `=` at the end)")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(HttpError::BadToken { reason }),
            None => Ok(Self {
                token: Some(token.into()),
            }),
        }
    }

    /// No token: anyone who can reach the address (and passes the Host and Origin
    /// checks) can list and call every tool. For a server on the loopback interface
    /// of a machine whose users are trusted.
    ///
    /// ```
    /// let auth = toolgraft_mcp::http::Auth::off();
    /// assert_eq!(format!("{auth:?}"), "Auth::Off");
    /// ```
    pub fn off() -> Self {
        Self { token: None }
    }

    /// Whether a token is required.
    ///
    /// ```
    /// assert!(!toolgraft_mcp::http::Auth::off().requires_token());
    /// ```
    pub fn requires_token(&self) -> bool {
        self.token.is_some()
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.token {
            Some(_) => "Auth::Bearer(..)",
            None => "Auth::Off",
        })
    }
}

/// Why MCP over HTTP could not be set up or served.
///
/// ```
/// use toolgraft_mcp::http::HttpError;
/// let error = HttpError::BadToken { reason: "it is empty" };
/// assert_eq!(error.to_string(), "bad bearer token: it is empty");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum HttpError {
    /// [`Auth::bearer`] was given a token that cannot be sent in a header.
    BadToken {
        /// What is wrong with it (the token itself is never quoted).
        reason: &'static str,
    },
    /// An allow-list entry that can never match.
    BadAllowListEntry {
        /// `"host"` or `"origin"`.
        list: &'static str,
        /// The entry, shortened.
        entry: String,
        /// What it should look like.
        expected: &'static str,
    },
    /// [`McpHttp::serve`] was given an address that is not a loopback address, and
    /// [`McpHttp::allow_non_loopback`] was not called.
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
            Self::BadToken { reason } => write!(f, "bad bearer token: {reason}"),
            Self::BadAllowListEntry {
                list,
                entry,
                expected,
            } => write!(
                f,
                "bad {list} allow-list entry `{entry}`: expected {expected}"
            ),
            Self::NotLoopback { addr } => write!(
                f,
                "{addr} is not a loopback address; serving MCP beyond this machine needs \
                 `McpHttp::allow_non_loopback` (and a host allow-list naming the server)"
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

/// MCP over Streamable HTTP for a [`ToolsetServer`]: its configuration, and the
/// router or server built from it. See the [module docs](self).
///
/// ```
/// use toolgraft_mcp::ToolsetServer;
/// use toolgraft_mcp::http::{Auth, McpHttp};
///
/// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off())
///     .allow_hosts(["mcp.example.com"])?
///     .allow_origins(["https://app.example.com"])?
///     .allow_non_loopback();
/// assert_eq!(mcp.hosts(), ["mcp.example.com"]);
/// # Ok::<(), toolgraft_mcp::http::HttpError>(())
/// ```
pub struct McpHttp {
    server: ToolsetServer,
    auth: Auth,
    hosts: Vec<String>,
    origins: Vec<String>,
    non_loopback: bool,
    cancel: CancellationToken,
}

impl fmt::Debug for McpHttp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpHttp")
            .field("server", &self.server)
            .field("auth", &self.auth)
            .field("hosts", &self.hosts)
            .field("origins", &self.origins)
            .field("non_loopback", &self.non_loopback)
            .finish_non_exhaustive()
    }
}

impl McpHttp {
    /// MCP over HTTP for `server` (a fresh copy of it serves each session: same
    /// toolset, server info and instructions), with the loopback allow-lists.
    ///
    /// ```
    /// use toolgraft_mcp::ToolsetServer;
    /// use toolgraft_mcp::http::{Auth, McpHttp};
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off());
    /// assert_eq!(mcp.hosts(), ["localhost", "127.0.0.1", "::1"]);
    /// assert!(mcp.origins().contains(&"http://localhost:*".to_owned()));
    /// ```
    pub fn new(server: ToolsetServer, auth: Auth) -> Self {
        Self {
            server,
            auth,
            hosts: LOOPBACK_HOSTS.map(String::from).to_vec(),
            origins: LOOPBACK_ORIGINS.map(String::from).to_vec(),
            non_loopback: false,
            cancel: CancellationToken::new(),
        }
    }

    /// Replaces the `Host` allow-list: host names or addresses, with or without a
    /// port (`mcp.example.com`, `mcp.example.com:8443`, `10.0.0.7`, `::1`). A request
    /// naming any other host is refused with `403`.
    ///
    /// ```
    /// use toolgraft_mcp::{ToolsetServer, http::{Auth, HttpError, McpHttp}};
    /// let mcp = || McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off());
    /// assert!(mcp().allow_hosts(["localhost", "mcp.example.com:8443"]).is_ok());
    /// assert!(matches!(mcp().allow_hosts(["http://mcp.example.com"]),
    ///                  Err(HttpError::BadAllowListEntry { list: "host", .. })));
    /// ```
    pub fn allow_hosts(
        mut self,
        hosts: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, HttpError> {
        let hosts: Vec<String> = hosts.into_iter().map(Into::into).collect();
        for host in &hosts {
            let bare = host.trim();
            let ok = !bare.is_empty()
                && !bare.contains(['/', '@', '?', '#', ' '])
                && (bare.contains(':') || axum::http::uri::Authority::try_from(bare).is_ok());
            if !ok {
                return Err(bad_entry(
                    "host",
                    host,
                    "a host name or address, with an optional port",
                ));
            }
        }
        self.hosts = hosts;
        Ok(self)
    }

    /// Replaces the `Origin` allow-list: `scheme://host` with `:port` or `:*` (any
    /// port), or `null`. A request that carries an `Origin` not on the list is
    /// refused with `403`; requests without one (clients that are not browsers) are
    /// not affected. An empty list refuses every request that has an `Origin`.
    ///
    /// ```
    /// use toolgraft_mcp::{ToolsetServer, http::{Auth, HttpError, McpHttp}};
    /// let mcp = || McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off());
    /// assert!(mcp().allow_origins(["https://app.example.com:443", "http://localhost:*"]).is_ok());
    /// assert!(matches!(mcp().allow_origins(["app.example.com"]),
    ///                  Err(HttpError::BadAllowListEntry { list: "origin", .. })));
    /// ```
    pub fn allow_origins(
        mut self,
        origins: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, HttpError> {
        let origins: Vec<String> = origins.into_iter().map(Into::into).collect();
        for origin in &origins {
            if !origin_entry_is_valid(origin) {
                return Err(bad_entry(
                    "origin",
                    origin,
                    "`scheme://host` with `:port` or `:*`, or `null`",
                ));
            }
        }
        self.origins = origins;
        Ok(self)
    }

    /// Lets [`McpHttp::serve`] listen on addresses beyond the loopback interface
    /// (`0.0.0.0`, a LAN address). Set the host allow-list to the names clients use,
    /// and choose [`Auth::bearer`].
    ///
    /// ```
    /// use toolgraft_mcp::{ToolsetServer, http::{Auth, McpHttp}};
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::bearer("t0k")?)
    ///     .allow_non_loopback();
    /// # Ok::<(), toolgraft_mcp::http::HttpError>(())
    /// ```
    pub fn allow_non_loopback(mut self) -> Self {
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
    /// use toolgraft_mcp::{ToolsetServer, http::{Auth, McpHttp}};
    /// let shutdown = CancellationToken::new();
    /// let router = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off())
    ///     .with_cancellation(shutdown.clone())
    ///     .router();
    /// // axum::serve(listener, router).with_graceful_shutdown(shutdown.cancelled_owned())
    /// ```
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// The `Host` allow-list.
    ///
    /// ```
    /// # use toolgraft_mcp::{ToolsetServer, http::{Auth, McpHttp}};
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off());
    /// assert!(mcp.hosts().iter().any(|h| h == "localhost"));
    /// ```
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The `Origin` allow-list.
    ///
    /// ```
    /// # use toolgraft_mcp::{ToolsetServer, http::{Auth, McpHttp}};
    /// let mcp = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off());
    /// assert!(mcp.origins().iter().all(|o| o.contains("localhost") || o.contains("127.0.0.1") || o.contains("[::1]")));
    /// ```
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// A router serving MCP at [`MCP_PATH`] (`POST`, `GET` and `DELETE`), with the
    /// bearer-token check on that route only: merge it into your application's
    /// router (`app.merge(mcp.router())`), or nest it under a prefix.
    ///
    /// ```
    /// # use toolgraft_mcp::{ToolsetServer, http::{Auth, McpHttp}};
    /// let router: axum::Router =
    ///     McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off()).router();
    /// ```
    pub fn router(&self) -> Router {
        self.router_until(&self.cancel)
    }

    /// [`router`](Self::router), its sessions ended when `cancel` is cancelled.
    fn router_until(&self, cancel: &CancellationToken) -> Router {
        let template = self.server.fresh();
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.hosts.iter().cloned())
            .with_allowed_origins(self.origins.iter().cloned())
            .enforce_origin_validation()
            .with_cancellation_token(cancel.child_token());
        let service = StreamableHttpService::new(
            move || Ok(template.fresh()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let router = Router::new().route_service(MCP_PATH, service);
        match &self.auth.token {
            Some(token) => router.route_layer(middleware::from_fn_with_state(
                token.clone(),
                require_bearer,
            )),
            None => router,
        }
    }

    /// Listens on `addr` and serves [`router`](Self::router) there until
    /// [`Serving::shutdown`] (or the [`with_cancellation`](Self::with_cancellation)
    /// token). Port 0 takes any free port; [`Serving::url`] tells which.
    ///
    /// Refuses an address that is not a loopback address unless
    /// [`allow_non_loopback`](Self::allow_non_loopback) was called.
    ///
    /// ```
    /// # use toolgraft_mcp::{ToolsetServer, http::{Auth, HttpError, McpHttp}};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mcp = || McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off());
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
    /// # use toolgraft_mcp::{ToolsetServer, http::{Auth, McpHttp}};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off())
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
    /// # use toolgraft_mcp::{ToolsetServer, http::{Auth, McpHttp}};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off())
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
    /// # use toolgraft_mcp::{ToolsetServer, http::{Auth, McpHttp}};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off())
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
    /// # use toolgraft_mcp::{ToolsetServer, http::{Auth, McpHttp}};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = McpHttp::new(ToolsetServer::new(toolgraft::Toolset::new()), Auth::off())
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

fn bad_entry(list: &'static str, entry: &str, expected: &'static str) -> HttpError {
    HttpError::BadAllowListEntry {
        list,
        entry: toolgraft::error::shorten(entry).into_owned(),
        expected,
    }
}

/// `null`, or `scheme://host[:port|:*]` with nothing after the authority.
fn origin_entry_is_valid(entry: &str) -> bool {
    let entry = entry.trim();
    if entry.eq_ignore_ascii_case("null") {
        return true;
    }
    let Some((scheme, rest)) = entry.split_once("://") else {
        return false;
    };
    let rest = rest.strip_suffix(":*").unwrap_or(rest);
    !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        && !rest.is_empty()
        && !rest.contains(['/', '?', '#', '@'])
        && axum::http::uri::Authority::try_from(rest).is_ok()
}

/// Refuses a request without the bearer token, comparing in constant time.
async fn require_bearer(State(token): State<Arc<str>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, credentials) = value.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then_some(credentials.trim())
        });
    match given {
        Some(given) if same(given.as_bytes(), token.as_bytes()) => next.run(request).await,
        other => {
            let (error, message) = match other {
                None => ("invalid_request", "a bearer token is required"),
                Some(_) => ("invalid_token", "the bearer token is not valid"),
            };
            let challenge = format!("Bearer error=\"{error}\", error_description=\"{message}\"");
            let mut response =
                (StatusCode::UNAUTHORIZED, format!("Unauthorized: {message}")).into_response();
            if let Ok(value) = HeaderValue::from_str(&challenge) {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, value);
            }
            response
        }
    }
}

/// Equality whose time depends on the lengths only, not on where the bytes differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    diff == 0 && a.len() == b.len()
}
