//! Tools of other MCP servers as base tools (feature `upstream`; over
//! Streamable HTTP, `upstream-http`).
//!
//! [`Upstream::connect`] starts an MCP server as a child process (stdio) or
//! reaches one over Streamable HTTP (with a bearer token), and takes its
//! tools as base tools, each named into the upstream's namespace (`fs` makes
//! `write_file` `fs_write_file`), with what it says of itself kept: title,
//! description, input and output schemas, annotations, icons and `_meta`. Combos
//! apply to them as to any tool, from code or from a manifest, and the rules
//! decide from their annotations: `cache` only on a read-only tool, `retry` only
//! on an idempotent one, `approve` where a manifest puts it (MCP's defaults say
//! a tool that does not say it is read-only may be destructive). An operator's
//! `"annotations"` in the manifest is the only way to widen what a tool says of
//! itself.
//!
//! A call is forwarded with the caller's `_meta` and trace context; the
//! upstream's progress reaches the caller; a call dropped (the client
//! cancelled, a `timeout` layer gave up) or past `call_timeout_ms` is cancelled
//! upstream; an input-required result passes through to the client, and its
//! answers back; an upstream's task is followed to its end. The upstream's
//! requests to the client (elicitation, sampling, roots) and its log messages
//! go to the client of the call they name (over HTTP, the request whose stream
//! they come on), else of the one call in flight; a caller of protocol
//! 2025-11-25 reaches an upstream of 2026-07-28 by a link of its session's own.
//!
//! The connection is watched: lost, it is made again with backoff (100 ms,
//! doubling, up to 5 s), and its calls meanwhile fail with a transient error
//! (`retry` makes them again). [`Upstream::mirror`] keeps a toolset in step with
//! the upstream's tool list (on `notifications/tools/list_changed` and each
//! reconnect), tool by tool through the toolset's one edit path.
//!
//! ```no_run
//! use toolgraft::{Registry, Toolset};
//! use toolgraft::ext::Cache;
//! use toolgraft::runtime::{Configured, manifest::Manifest};
//! use toolgraft_mcp::upstream::{Endpoint, Upstream, UpstreamConfig};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let files = Upstream::connect(UpstreamConfig::new(
//!     "fs",
//!     Endpoint::stdio("mcp-server-filesystem", ["/srv/files"]),
//! ))
//! .await?;
//! let mut registry = Registry::new();
//! registry.register(Configured::new(Cache::default()))?;
//! let manifest = Manifest::from_json(r#"{"tools": {"fs_read_text_file": ["cache"]}}"#)?;
//! let toolset = Toolset::new();
//! let mirror = files.mirror(&toolset, registry, manifest);
//! for (tool, outcome) in &mirror.latest().outcomes {
//!     if let Err(error) = outcome { eprintln!("{tool}: {error}"); }
//! }
//! # Ok(()) }
//! ```

mod client;
mod config;
mod error;
mod forward;
#[cfg(feature = "upstream-http")]
mod http_client;
mod link;
mod log_level;
mod mirror;
mod stdio;
#[cfg(feature = "upstream-http")]
mod stream_origin;
mod tools;

use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::{CancellationToken, DropGuard};
use toolgraft::runtime::DynTool;
use toolgraft::toolset::BaseTools;

pub use config::{
    ClientCredentials, Endpoint, MAX_NAMESPACE_LEN, MAX_STDIO_RESULT_BYTES, Secret, UpstreamConfig,
};
pub use error::{Refused, UpstreamError};
pub use mirror::{Mirror, Resync};

use client::Listener;
use forward::Forwarder;
use link::Current;

/// A connection to another MCP server and its tools as base tools (see the
/// [module docs](self)). Clones share the connection; the last one dropped
/// closes it (and stops its child process).
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
}

struct Inner {
    config: UpstreamConfig,
    current: Current,
    listener: Listener,
    forwarder: Arc<Forwarder>,
    tools: Mutex<Listed>,
    _stop: DropGuard,
}

/// The tools as last listed.
#[derive(Default)]
struct Listed {
    bases: Vec<(DynTool, rmcp::model::Tool)>,
    refused: Vec<Refused>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("namespace", &self.inner.config.namespace)
            .field("endpoint", &self.inner.config.endpoint)
            .field("connected", &self.is_connected())
            .finish()
    }
}

impl Upstream {
    /// Connects to the upstream `config` names and lists its tools.
    ///
    /// # Errors
    ///
    /// [`UpstreamError`]: a config field out of bounds, or a server that
    /// could not be started or reached, or did not complete the handshake and
    /// its first `tools/list` within `connect_timeout_ms`. (Tools that cannot
    /// be taken do not fail it: see [`refused`](Self::refused).)
    pub async fn connect(config: UpstreamConfig) -> Result<Self, UpstreamError> {
        config.check()?;
        let stop = CancellationToken::new();
        // Over HTTP, each log message is marked with the request it came
        // within (`stream_origin`).
        let listener = Listener::new(
            cfg!(feature = "upstream-http") && matches!(config.endpoint, Endpoint::Http { .. }),
        );
        let current = link::open(&config, &listener, link::Protocol::Newest, stop.clone()).await?;
        let forwarder = Arc::new(Forwarder {
            current: current.clone(),
            sessions: Default::default(),
            config: config.clone(),
            stop: stop.clone(),
            listener: listener.clone(),
            endpoint: format!("{:?}", config.endpoint),
            call_timeout: config.call_timeout(),
            max_result_bytes: config.max_result_bytes,
            calls: Default::default(),
        });
        let upstream = Self {
            inner: Arc::new(Inner {
                config,
                current,
                listener,
                forwarder,
                tools: Mutex::default(),
                _stop: stop.drop_guard(),
            }),
        };
        let listed = tokio::time::timeout(upstream.inner.config.connect_timeout(), upstream.list())
            .await
            .map_err(|_| {
                upstream.unreachable("no `tools/list` answer within `connect_timeout_ms`".into())
            })?;
        listed.map_err(|error| upstream.unreachable(error))?;
        Ok(upstream)
    }

    /// The namespace its tools' names start with (and `_`); empty when they
    /// keep their own names.
    pub fn namespace(&self) -> &str {
        &self.inner.config.namespace
    }

    /// Whether the connection is up now (it is made again when lost).
    pub fn is_connected(&self) -> bool {
        self.inner.current.peer().is_some()
    }

    /// Its tools as last listed, as base tools sorted by name.
    pub fn tools(&self) -> Vec<DynTool> {
        let listed = self.lock();
        listed.bases.iter().map(|(tool, _)| tool.clone()).collect()
    }

    /// Its tools as last listed, for [`Toolset::bind_manifest`](toolgraft::Toolset::bind_manifest).
    pub fn bases(&self) -> BaseTools {
        let listed = self.lock();
        let mut bases = BaseTools::new();
        for (tool, _) in &listed.bases {
            bases.add(tool);
        }
        bases
    }

    /// The tools of its last listing that were not taken, and why.
    pub fn refused(&self) -> Vec<Refused> {
        self.lock().refused.clone()
    }

    /// Lists the upstream's tools again, now, and keeps what it lists.
    async fn list(&self) -> Result<(), String> {
        let listed = self.fetch().await?;
        self.keep(&listed);
        Ok(())
    }

    /// A `tools/list` of the upstream, made on its own: the future holds
    /// neither the upstream nor its toolset, only the connection (see
    /// [`Mirror`]).
    fn fetch(
        &self,
    ) -> impl std::future::Future<Output = Result<Vec<rmcp::model::Tool>, String>> + Send + 'static
    {
        let peer = self.inner.current.peer();
        let max_tools = self.inner.config.max_tools;
        async move {
            let peer = peer.ok_or("not connected")?;
            // The HTTP client's error names the URL whole.
            link::list(&peer, max_tools)
                .await
                .map_err(|error| config::urls_redacted(&format!("`tools/list` failed: {error}")))
        }
    }

    /// Keeps what a listing listed as the upstream's tools.
    fn keep(&self, listed: &[rmcp::model::Tool]) {
        let (bases, refused) = tools::bases(listed, &self.inner.config, &self.inner.forwarder);
        for refusal in &refused {
            tracing::warn!(namespace = %self.inner.config.namespace, "{refusal}");
        }
        *self.lock() = Listed { bases, refused };
    }

    fn unreachable(&self, problem: String) -> UpstreamError {
        UpstreamError::Connect {
            endpoint: format!("{:?}", self.inner.config.endpoint),
            problem,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Listed> {
        self.inner
            .tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
