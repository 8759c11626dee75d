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
//! [`with_manifest_file`](Authoring::with_manifest_file) it is written to the file: only the
//! tool's entry changes, everything else in the file stays as it was, byte for
//! byte (JSON and TOML, comments included), and the file is replaced atomically
//! (a temporary file in the same directory, renamed over it). The temporary file
//! a writer killed mid-write left is removed when the next server starts (one of
//! a process that no longer runs, or, where that cannot be told, ten minutes old).
//!
//! Every route is behind a [`Guard`] (the `toolgraft-guard` crate's, the one the
//! MCP endpoint of `toolgraft-mcp` takes too), which [`Authoring::with_guard`] requires:
//! a request whose `Host` is not on its host allow-list, or whose `Origin` is not
//! on its origin allow-list, gets `403` (both lists name only the loopback
//! addresses unless set, so a page on another site cannot reach a local server by
//! DNS rebinding); with [`Guard::bearer`], one without `Authorization: Bearer
//! <token>` gets `401`, and the page signs in with the token once and keeps it in
//! an HTTP-only, same-site cookie. [`Guard::off`] is the written-out choice of no
//! token.
//!
//! ```
//! use toolgraft::ext::{Pool, Trace};
//! use toolgraft::{Registry, Tool, Toolset};
//! use toolgraft_http::{Authoring, Guard};
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
//!     .with_guard(Guard::bearer("a-long-random-token-from-the-operators-secrets")?)
//!     .router()?;
//! // axum::serve(tokio::net::TcpListener::bind("127.0.0.1:8080").await?, router).await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]

// The modules, bottom to top: each imports only from the ones above it
// (`scripts/module-graph` checks it), and none from this file.
mod state;
mod problem;
mod body;
mod page;
mod writeback;
mod api;
mod auth;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use toolgraft::runtime::manifest::Manifest;
use toolgraft::{Registry, Toolset};

use state::State;

pub use body::MAX_BODY;

/// The guard's vocabulary, re-exported: [`Authoring::with_guard`] takes a [`Guard`], as
/// `toolgraft_mcp::http::McpHttp::new` does.
pub use toolgraft_guard::{Guard, GuardError};

/// Builds the authoring router for a toolset and the registry its combos are bound
/// from (see the [crate docs](crate)).
///
/// `G` records whether the guard was chosen: [`router`](Authoring::router) exists
/// only after [`with_guard`](Authoring::with_guard), so a server cannot lose its
/// authentication by forgetting a line.
///
/// ```
/// # use toolgraft::{Registry, Toolset};
/// use toolgraft_http::{Authoring, Guard};
/// let authoring = Authoring::new(Toolset::new(), Registry::new())
///     .with_manifest_file("combos.toml")
///     .with_guard(Guard::off());
/// assert!(format!("{authoring:?}").contains("combos.toml"));
/// ```
#[derive(Debug)]
pub struct Authoring<G = GuardNotChosen> {
    toolset: Toolset,
    registry: Registry,
    manifest: Option<PathBuf>,
    guard: G,
}

/// The state of an [`Authoring`] whose [`Guard`] is not chosen yet.
///
/// ```
/// # use toolgraft::{Registry, Toolset};
/// let _: toolgraft_http::Authoring<toolgraft_http::GuardNotChosen> =
///     toolgraft_http::Authoring::new(Toolset::new(), Registry::new());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct GuardNotChosen;

impl Authoring<GuardNotChosen> {
    /// The authoring API over `toolset`, binding combos with the extensions of
    /// `registry`; choose the [`with_guard`](Authoring::with_guard) next.
    pub fn new(toolset: Toolset, registry: Registry) -> Self {
        Self {
            toolset,
            registry,
            manifest: None,
            guard: GuardNotChosen,
        }
    }

    /// The guard every route is behind: [`Guard::bearer`] (the page signs in with
    /// the same token) or, explicitly, [`Guard::off`]; with its Host and Origin
    /// allow-lists, the loopback ones unless set.
    ///
    /// ```
    /// # use toolgraft::{Registry, Toolset};
    /// use toolgraft_http::{Authoring, Guard};
    /// let guard = Guard::bearer("0123456789abcdef0123456789abcdef")?
    ///     .allow_hosts(["authoring.example.com"])?
    ///     .allow_origins(["https://authoring.example.com"])?;
    /// let router = Authoring::new(Toolset::new(), Registry::new()).with_guard(guard).router()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_guard(self, guard: Guard) -> Authoring<Guard> {
        Authoring {
            toolset: self.toolset,
            registry: self.registry,
            manifest: self.manifest,
            guard,
        }
    }
}

impl<G> Authoring<G> {
    /// The manifest file (`.json` or `.toml`) the toolset's combos were loaded
    /// from: every change is written back to it, so a restart keeps it.
    ///
    /// A change writes the changed tool's entry only: the tool's combos as the
    /// toolset holds them after the change (typed combos bound in code included,
    /// so their extensions should be registered too), its other combos as the file
    /// wrote them. A tool left without combos loses its key (a manifest has no
    /// empty lists). The file is read again at each change, so an operator's edits
    /// to other tools are kept; one the manifest parser refuses stops the change.
    pub fn with_manifest_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.manifest = Some(path.into());
        self
    }
}

impl Authoring<Guard> {
    /// The router. Refused when the manifest file cannot be read as a manifest
    /// (checked now, not at the first change); a bad token was refused already,
    /// by [`Guard::bearer`].
    ///
    /// ```
    /// # use toolgraft::{Registry, Toolset};
    /// use toolgraft_http::{Authoring, Guard};
    /// let router = Authoring::new(Toolset::new(), Registry::new()).with_guard(Guard::off()).router();
    /// assert!(router.is_ok());
    /// ```
    pub fn router(self) -> Result<Router, SetupError> {
        if let Some(path) = &self.manifest {
            check_manifest(path)?;
            // What a writer killed mid-write (its temporary file) left beside it.
            writeback::remove_leftovers(path);
        }
        let state = Arc::new(State {
            toolset: self.toolset,
            registry: self.registry,
            manifest: self.manifest,
            guard: self.guard,
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
            .layer(auth::layer(&state.guard))
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
///     .with_manifest_file("/nonexistent/combos.json")
///     .with_guard(toolgraft_http::Guard::off())
///     .router()
///     .unwrap_err();
/// assert!(matches!(err, toolgraft_http::SetupError::Manifest { .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The manifest file cannot be read as a manifest.
    #[error("{problem}")]
    Manifest {
        /// Why.
        problem: String,
    },
}
