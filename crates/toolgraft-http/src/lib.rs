//! An HTTP authoring API, and a page, for a [`toolgraft`] toolset: operators read
//! the bound names and the catalogue, and change a tool's combos live, through the
//! same binding engine as every other change; when the toolset was loaded from a
//! manifest file, each change is written back to it.
//!
//! [`Authoring`] builds an [`axum::Router`] that the embedding server mounts:
//!
//! | method and path | what it does |
//! |---|---|
//! | `GET /` | the page: bound names, catalogue, forms to add and remove combos |
//! | `GET /tools` | every bound name: base, layers (kind, config, where each runs), schemas |
//! | `GET /tools/{name}/extensions` | the tool's combos, its bound names, the registry's catalogue |
//! | `PUT /tools/{name}/extensions` | `{"combos": [...]}`: replace all of the tool's combos |
//! | `POST /tools/{name}/extensions/combos` | `{"add": [...], "remove": [...]}`: one atomic change |
//! | `DELETE /tools/{name}/extensions` | clear the tool's combos |
//!
//! Combos are written as in a manifest (`["trace", "cache"]`, or
//! `[{"name": "batch", "config": {"max_items": 10}}, "pool"]`; a flat list is one
//! combo). A change is checked in this order, and a refused one changes nothing:
//! the body's shape (400, rule `manifest-shape` for a combo's), the tool (404 when
//! it is not bound; 400 naming its base when it is a branch, rule
//! `branch-bookkeeping`), membership (409: an added combo already attached, a
//! removed one not attached), then every combo through the binding engine (400,
//! naming the rule; 409 when a name is taken). Errors are JSON,
//! `{"error": "...", "rule": "..."}`, `rule` being the section of
//! [`toolgraft::rulebook`] that refused the change, when one did.
//!
//! A change is live at once (an MCP server over the same toolset announces it with
//! `notifications/tools/list_changed`), and with
//! [`manifest_file`](Authoring::manifest_file) it is written to the file: only the
//! tool's entry changes, everything else in the file stays as it was, byte for
//! byte (JSON and TOML, comments included), and the file is replaced atomically
//! (a temporary file in the same directory, renamed over it).
//!
//! Every route needs `Authorization: Bearer <token>` unless the server is
//! explicitly built [`without_auth`](Authoring::without_auth); the page signs in
//! with the token once and keeps it in an HTTP-only, same-site cookie.
//!
//! ```
//! use toolgraft::ext::{Pool, Trace};
//! use toolgraft::{Registry, Tool, Toolset};
//! use toolgraft_http::Authoring;
//!
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct City { city: String }
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let weather = Tool::builder().name("weather").description("Tomorrow's weather.")
//!     .body(|input: City| async move { Ok(format!("sunny in {}", input.city)) }).build()?;
//! let toolset = Toolset::new();
//! toolset.bind((weather.combo(),))?;
//! let mut registry = Registry::new();
//! registry.register(Trace)?.register(Pool::new(2)?)?;
//!
//! let router: axum::Router = Authoring::new(toolset, registry)
//!     .bearer_token("a long random token from the operator's secrets")
//!     .router()?;
//! // axum::serve(tokio::net::TcpListener::bind("127.0.0.1:8080").await?, router).await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]

mod api;
mod auth;
mod body;
mod page;
mod problem;
mod writeback;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use toolgraft::runtime::manifest::Manifest;
use toolgraft::{Registry, Toolset};

/// The largest request body the API reads (combos are small; a manifest's config
/// rarely passes a few kilobytes).
pub const MAX_BODY: usize = 256 * 1024;

/// The shortest bearer token accepted: a token is a secret, not a password.
pub const MIN_TOKEN_LEN: usize = 16;

/// Builds the authoring router for a toolset and the registry its combos are bound
/// from (see the [crate docs](crate)).
///
/// `A` records whether authentication was chosen: [`router`](Authoring::router)
/// exists only after [`bearer_token`](Authoring::bearer_token) or
/// [`without_auth`](Authoring::without_auth), so a server cannot lose its
/// authentication by forgetting a line.
///
/// ```
/// # use toolgraft::{Registry, Toolset};
/// let authoring = toolgraft_http::Authoring::new(Toolset::new(), Registry::new())
///     .manifest_file("combos.toml")
///     .without_auth();
/// assert!(format!("{authoring:?}").contains("combos.toml"));
/// ```
#[derive(Debug)]
pub struct Authoring<A = AuthNotChosen> {
    toolset: Toolset,
    registry: Registry,
    manifest: Option<PathBuf>,
    auth: A,
}

/// The state of an [`Authoring`] whose authentication is not chosen yet.
#[derive(Clone, Copy, Debug, Default)]
pub struct AuthNotChosen;

/// The state of an [`Authoring`] whose authentication is chosen: a bearer token,
/// or none (explicitly).
#[derive(Clone)]
pub struct AuthChosen(Option<String>);

impl std::fmt::Debug for AuthChosen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself.
        match &self.0 {
            Some(_) => f.write_str("AuthChosen(bearer token)"),
            None => f.write_str("AuthChosen(none)"),
        }
    }
}

impl Authoring<AuthNotChosen> {
    /// The authoring API over `toolset`, binding combos with the extensions of
    /// `registry`; choose authentication next.
    pub fn new(toolset: Toolset, registry: Registry) -> Self {
        Self {
            toolset,
            registry,
            manifest: None,
            auth: AuthNotChosen,
        }
    }
}

impl<A> Authoring<A> {
    /// The manifest file (`.json` or `.toml`) the toolset's combos were loaded
    /// from: every change is written back to it, so a restart keeps it.
    ///
    /// A change writes the changed tool's entry only: the tool's combos as the
    /// toolset holds them after the change (typed combos bound in code included,
    /// so their extensions should be registered too), its other combos as the file
    /// wrote them. A tool left without combos loses its key (a manifest has no
    /// empty lists). The file is read again at each change, so an operator's edits
    /// to other tools are kept; one the manifest parser refuses stops the change.
    pub fn manifest_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.manifest = Some(path.into());
        self
    }

    /// Every route requires `Authorization: Bearer <token>` (or the page's cookie,
    /// set by signing in with the token); at least [`MIN_TOKEN_LEN`] bytes.
    pub fn bearer_token(self, token: impl Into<String>) -> Authoring<AuthChosen> {
        self.with_auth(AuthChosen(Some(token.into())))
    }

    /// No authentication: anyone who reaches the server may change the combos.
    /// For a server bound to loopback on a single-user machine, or behind a proxy
    /// that authenticates.
    pub fn without_auth(self) -> Authoring<AuthChosen> {
        self.with_auth(AuthChosen(None))
    }

    fn with_auth(self, auth: AuthChosen) -> Authoring<AuthChosen> {
        Authoring {
            toolset: self.toolset,
            registry: self.registry,
            manifest: self.manifest,
            auth,
        }
    }
}

impl Authoring<AuthChosen> {
    /// The router. Refused when the token is shorter than [`MIN_TOKEN_LEN`] or the
    /// manifest file cannot be read as a manifest (checked now, not at the first
    /// change).
    ///
    /// ```
    /// # use toolgraft::{Registry, Toolset};
    /// let err = toolgraft_http::Authoring::new(Toolset::new(), Registry::new())
    ///     .bearer_token("short").router().unwrap_err();
    /// assert!(err.to_string().contains("at least 16 bytes"));
    /// ```
    pub fn router(self) -> Result<Router, SetupError> {
        if let Some(token) = &self.auth.0
            && token.len() < MIN_TOKEN_LEN
        {
            return Err(SetupError::ShortToken { len: token.len() });
        }
        if let Some(path) = &self.manifest {
            check_manifest(path)?;
        }
        let state = Arc::new(State {
            toolset: self.toolset,
            registry: self.registry,
            manifest: self.manifest,
            token: self.auth.0,
            changing: tokio::sync::Mutex::new(()),
        });
        let router = Router::new()
            .route("/", get(page::show))
            .route("/login", post(auth::login))
            .route("/tools", get(api::tools))
            .route(
                "/tools/{name}/extensions",
                get(api::extensions).put(api::replace).delete(api::clear),
            )
            .route("/tools/{name}/extensions/combos", post(api::edit))
            .fallback(api::not_found)
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                auth::require,
            ))
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(state);
        Ok(router)
    }
}

fn check_manifest(path: &Path) -> Result<(), SetupError> {
    Manifest::load(path)
        .map(drop)
        .map_err(|err| SetupError::Manifest {
            problem: err.to_string(),
        })
}

/// Why [`Authoring::router`] refused to build the router.
///
/// ```
/// # use toolgraft::{Registry, Toolset};
/// let err = toolgraft_http::Authoring::new(Toolset::new(), Registry::new())
///     .manifest_file("/nonexistent/combos.json").without_auth().router().unwrap_err();
/// assert!(matches!(err, toolgraft_http::SetupError::Manifest { .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The bearer token is too short to be a secret.
    #[error(
        "the bearer token has {len} bytes; use at least 16 bytes of random text (or `without_auth()` to run without one)"
    )]
    ShortToken {
        /// Its length.
        len: usize,
    },
    /// The manifest file cannot be read as a manifest.
    #[error("{problem}")]
    Manifest {
        /// Why.
        problem: String,
    },
}

/// What every handler shares.
pub(crate) struct State {
    pub toolset: Toolset,
    pub registry: Registry,
    pub manifest: Option<PathBuf>,
    pub token: Option<String>,
    /// One change at a time, so the file is written in the order changes apply.
    pub changing: tokio::sync::Mutex<()>,
}

pub(crate) type Shared = Arc<State>;
