//! `tower` (feature `tower`): tower both ways. Any [`tower::Layer`]
//! as a wrapper on any tool ([`Tower`]), and a branch as a
//! [`tower::Service`], so that it sits under `ServiceBuilder`
//! layers or in an axum router ([`service`]).
//!
//! # A tower layer as a wrapper
//!
//! [`Tower::new`] takes a name and a layer over [`Below`]: the service at the
//! bottom of the layer, whose request is a [`Call`] (the rest of the call, as a
//! `'static` value that names none of the stack's types) and whose response is
//! that call's [`Done`]. So the layered service has one type per layer, whatever
//! the tool below, and the wrapper fits every stack, typed or run-time.
//!
//! ```
//! use std::time::Duration;
//! use serde_json::json;
//! use tower::limit::ConcurrencyLimitLayer;
//! use toolgraft::ext::tower::Tower;
//! use toolgraft::{Tool, Toolset};
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Nap { ms: u64 }
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let nap = Tool::builder().name("nap").description("Sleep, then answer.")
//!     .body(|input: Nap| async move {
//!         tokio::time::sleep(Duration::from_millis(input.ms)).await;
//!         Ok("awake")
//!     })
//!     .build()?;
//! let toolset = Toolset::new();
//! toolset.bind((nap.combo().with(Tower::new("one_at_a_time", ConcurrencyLimitLayer::new(1))),))?;
//!
//! let started = tokio::time::Instant::now();
//! let (a, b) = tokio::join!(
//!     toolset.call("nap_one_at_a_time", json!({"ms": 50})),
//!     toolset.call("nap_one_at_a_time", json!({"ms": 50})),
//! );
//! assert_eq!((a?, b?), (json!("awake"), json!("awake")));
//! assert_eq!(started.elapsed(), Duration::from_millis(100)); // one after the other
//! # Ok(()) }
//! ```
//!
//! The layered service is made once per branch (at its first call), so what
//! it keeps (`ConcurrencyLimit`'s semaphore, `RateLimit`'s window) is shared by
//! every call of the branch, and by nothing else. Calls reach it one at a time
//! through a fair (first come, first served) lock held across `poll_ready` and
//! `call` only, never across the response: a service that is not `Clone`
//! (`RateLimit`) needs no `Buffer`, and a call dropped while it waits for the
//! service to be ready leaves what it was waiting for (a permit being acquired)
//! to the next call, so the limit is not wedged.
//!
//! # Errors
//!
//! What the layered service answers becomes a [`ToolError`]:
//!
//! | the service's error | the caller gets |
//! |---|---|
//! | a [`ToolError`] (from the layer below) | the same, unchanged |
//! | tower's `load_shed::error::Overloaded` | [`ToolError::Overloaded`], naming the branch and the layer, no `retry_after` |
//! | tower's `timeout::error::Elapsed` | [`ToolError::TimedOut`], naming the layer below, `after` the time waited |
//! | any other | [`ToolError::Extension`] with a [`LayerError`] naming the branch and the layer |
//!
//! An MCP server answers each of them as a result with `isError: true` and the
//! message, as it does every error of a tool that ran.
//!
//! # From a manifest
//!
//! [`Tower::configured`] registers a layer built from each element's config by a
//! closure; [`concurrency_limit`], [`rate_limit`] and [`timeout`] are tower's own,
//! ready to register, their configs checked when a combo is bound.
//!
//! ```
//! use toolgraft::Registry;
//! use toolgraft::ext::tower;
//! let mut registry = Registry::new();
//! registry
//!     .register(tower::concurrency_limit())?
//!     .register(tower::rate_limit())?
//!     .register(tower::timeout())?;
//! // {"tools": {"fetch": [{"name": "tower_concurrency_limit", "config": {"max": 4, "load_shed": true}}]}}
//! # Ok::<(), toolgraft::runtime::RegistryError>(())
//! ```

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use ::tower::{BoxError, Layer, Service};
use serde_json::{Map, Value};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::Name;
use crate::error::ToolError;
use crate::extension::{Call, ConfigError, Done, LayerInput, Next, Stack, Wrap, decode_args};
use crate::kind::property::Anywhere;
use crate::runtime::Configured;

mod config;
pub mod service;

pub use config::{
    ConcurrencyLimitConfig, RateLimitConfig, Shed, TimeoutConfig, concurrency_limit, rate_limit,
    shed, timeout,
};
pub use service::ToolService;

/// The service at the bottom of a [`Tower`]'s layer: it runs the rest of the call
/// ([`Call::run`]). Always ready; its errors are the layer below's
/// [`ToolError`]s, boxed as tower's middleware boxes errors.
///
/// A layer of one's own, written for toolgraft, is a `tower::Layer<Below>` whose
/// service takes a [`Call`] (and may read its [`name`](Call::name)):
///
/// ```
/// use tower::ServiceBuilder;
/// use tower::limit::ConcurrencyLimitLayer;
/// use tower::load_shed::LoadShedLayer;
/// use toolgraft::ext::tower::Tower;
///
/// // Refuse, rather than queue, the calls over 4 at a time.
/// let layer = ServiceBuilder::new()
///     .layer(LoadShedLayer::new())
///     .layer(ConcurrencyLimitLayer::new(4))
///     .into_inner();
/// let bounded = Tower::new("bounded", layer);
/// # let _ = bounded;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Below {
    _private: (),
}

impl Service<Call> for Below {
    type Response = Done;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Done, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call) -> Self::Future {
        Box::pin(async move { call.run().await.map_err(BoxError::from) })
    }
}

/// A wrapper that runs every call of its branch through a tower layer `L`.
///
/// Anywhere in a combo, over any stack; it reserves no params. See the
/// [module](self) for the layer's service, how calls reach it, and how its errors
/// are answered.
///
/// ```
/// use std::time::Duration;
/// use serde_json::json;
/// use tower::timeout::TimeoutLayer;
/// use toolgraft::ext::tower::Tower;
/// use toolgraft::{Tool, ToolError, Toolset};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Nap { ms: u64 }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let nap = Tool::builder().name("nap").description("Sleep, then answer.")
///     .body(|input: Nap| async move {
///         tokio::time::sleep(Duration::from_millis(input.ms)).await;
///         Ok("awake")
///     })
///     .build()?;
/// let toolset = Toolset::new();
/// toolset.bind((nap.combo().with(Tower::new("deadline", TimeoutLayer::new(Duration::from_secs(1)))),))?;
/// let err = toolset.call("nap_deadline", json!({"ms": 5_000})).await.unwrap_err();
/// assert!(matches!(err, ToolError::TimedOut { .. }));
/// assert_eq!(err.to_string(), "`nap` did not finish within 1s; `deadline` cancelled it");
/// # Ok(()) }
/// ```
pub struct Tower<L: Layer<Below>> {
    name: Cow<'static, str>,
    layer: L,
    /// The branch's service: a new one for each branch ([`Wrap::for_branch`]),
    /// made at its first call, in the runtime that serves it (tower's
    /// `RateLimit` starts a timer when it is made).
    service: Arc<OnceLock<Mutex<L::Service>>>,
    /// The element's config, when it was built from one: part of its identity.
    config: Option<Value>,
}

impl<L: Layer<Below> + Clone> Clone for Tower<L> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            layer: self.layer.clone(),
            service: self.service.clone(),
            config: self.config.clone(),
        }
    }
}

impl<L: Layer<Below>> fmt::Debug for Tower<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tower")
            .field("name", &self.name)
            .field("layer", &std::any::type_name::<L>())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<L: Layer<Below>> Tower<L> {
    /// The wrapper `name`, running each call through `layer` (see the type's
    /// example). The name is the branch's suffix; a name that is not a valid
    /// [`Name`] refuses the combo when it is bound.
    ///
    /// ```
    /// use tower::limit::ConcurrencyLimitLayer;
    /// use toolgraft::Extension;
    /// use toolgraft::ext::tower::Tower;
    /// let one = Tower::new("one_at_a_time", ConcurrencyLimitLayer::new(1));
    /// assert_eq!(one.name(), "one_at_a_time");
    /// ```
    pub fn new(name: impl Into<Cow<'static, str>>, layer: L) -> Self {
        Self {
            name: name.into(),
            layer,
            service: Arc::default(),
            config: None,
        }
    }

    /// The layer.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower::timeout::TimeoutLayer;
    /// use toolgraft::ext::tower::Tower;
    /// let deadline = Tower::new("deadline", TimeoutLayer::new(Duration::from_secs(1)));
    /// let _: &TimeoutLayer = deadline.layer();
    /// ```
    pub fn layer(&self) -> &L {
        &self.layer
    }

    /// A registration of the wrapper `name` for a [`Registry`](crate::Registry),
    /// its layer built by `build` from each manifest element's config, read as
    /// `C` (an element without config is read from an empty one). A config that
    /// does not fit `C`, or that `build` refuses, refuses the combo when it is
    /// bound, naming the field. The config is the element's identity: two combos
    /// with another config are two stacks.
    ///
    /// ```
    /// use serde_json::json;
    /// use tower::limit::ConcurrencyLimitLayer;
    /// use toolgraft::extension::ConfigError;
    /// use toolgraft::ext::tower::Tower;
    /// use toolgraft::runtime::Manifest;
    /// use toolgraft::toolset::BaseTools;
    /// use toolgraft::{BindError, Registry, Tool, Toolset};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Concurrency { max: usize }
    ///
    /// let mut registry = Registry::new();
    /// registry.register(Tower::configured("concurrency", |config: Concurrency| {
    ///     if config.max == 0 {
    ///         return Err(ConfigError::new("max", "0 would never admit a call"));
    ///     }
    ///     Ok(ConcurrencyLimitLayer::new(config.max))
    /// }))?;
    /// let ping = Tool::builder().name("ping").description("Pong.")
    ///     .body(|_: Ping| async { Ok("pong") }).build()?;
    /// let manifest = Manifest::from_json(&json!({"tools": {"ping": [
    ///     {"name": "concurrency", "config": {"max": 0}},
    /// ]}}).to_string())?;
    /// let outcome = Toolset::new().bind_manifest(&registry, &BaseTools::new().with(&ping), &manifest);
    /// assert!(matches!(&outcome[0].1, Err(BindError::InvalidConfig { field, .. }) if field == "max"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn configured<C, F>(name: impl Into<Cow<'static, str>>, build: F) -> Configured<Self>
    where
        C: serde::de::DeserializeOwned,
        F: Fn(C) -> Result<L, ConfigError> + Send + Sync + 'static,
    {
        let name = name.into();
        Configured::from_fn(
            name.clone().into_owned(),
            move |written: Map<String, Value>| {
                let config = decode_args(written.clone()).map_err(|err| {
                    ConfigError::new(
                        err.field.unwrap_or_else(|| "config".to_owned()),
                        err.problem,
                    )
                })?;
                let mut tower = Self::new(name.clone(), build(config)?);
                tower.config = (!written.is_empty()).then_some(Value::Object(written));
                Ok(tower)
            },
        )
    }

    /// How the service's error `error` reaches the caller (the module's table).
    fn answer(&self, next: &NextNames, error: BoxError, started: Instant) -> ToolError {
        let error = match error.downcast::<ToolError>() {
            Ok(error) => return *error,
            Err(error) => error,
        };
        let extension = Name::lossy(&self.name);
        if error.is::<::tower::load_shed::error::Overloaded>() {
            return ToolError::Overloaded {
                tool: next.branch.clone(),
                extension,
                reason: "its limit is full, and it sheds the calls over it".to_owned(),
                retry_after: None,
            };
        }
        if error.is::<::tower::timeout::error::Elapsed>() {
            // Whole milliseconds: what the caller waited, as people read it.
            let waited = started.elapsed();
            let after = std::time::Duration::from_millis(
                u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            );
            return ToolError::TimedOut {
                tool: next.below.clone(),
                extension,
                job: None,
                after,
            };
        }
        ToolError::extension(
            next.branch.clone(),
            extension.clone(),
            LayerError {
                tool: next.branch.clone(),
                extension,
                error,
            },
        )
    }
}

/// The names an error of the layered service carries.
struct NextNames {
    below: Name,
    branch: Name,
}

// Bounded by what an extension is (`Send + Sync + 'static`) only: a layer whose
// service does not take a `Call` is refused by `Wrap`, which says so.
impl<L> crate::Extension for Tower<L>
where
    L: Layer<Below> + Send + Sync + 'static,
    L::Service: Send + 'static,
{
    type Kind = crate::kind::Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        &self.name
    }

    fn config(&self) -> Option<Value> {
        self.config.clone()
    }
}

impl<S, L> Wrap<S> for Tower<L>
where
    S: Stack,
    L: Layer<Below> + Clone + Send + Sync + 'static,
    L::Service: Service<Call, Response = Done> + Send + 'static,
    <L::Service as Service<Call>>::Error: Into<BoxError>,
    <L::Service as Service<Call>>::Future: Send,
{
    type Params = ();

    fn for_branch(mut self, _: &LayerInput<'_, Self>) -> Self {
        self.service = Arc::default();
        self
    }

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let started = Instant::now();
        let names = NextNames {
            below: next.name().clone(),
            branch: next.branch().clone(),
        };
        next.through(input, |call| async {
            let response = {
                // Held across readiness and `call` only: the response runs
                // beside the other calls'. Dropped with this future, so a
                // cancelled wait frees the service for the next call.
                let mut service = self
                    .service
                    .get_or_init(|| Mutex::new(self.layer.layer(Below { _private: () })))
                    .lock()
                    .await;
                std::future::poll_fn(|cx| service.poll_ready(cx))
                    .await
                    .map_err(|error| self.answer(&names, error.into(), started))?;
                service.call(call)
            };
            response
                .await
                .map_err(|error| self.answer(&names, error.into(), started))
        })
        .await
    }
}

/// A tower layer's own error (neither a [`ToolError`] nor one of tower's that
/// toolgraft maps): what [`ToolError::Extension`] carries for it, naming the
/// branch and the layer. The layer's error is [`inner`](LayerError::inner).
///
/// ```
/// use std::task::{Context, Poll};
/// use tower::{BoxError, Layer, Service};
/// use toolgraft::ext::tower::{Below, LayerError, Tower};
/// use toolgraft::extension::{Call, Done};
/// use toolgraft::{Tool, Toolset};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
///
/// /// A service that is never ready.
/// #[derive(Clone)]
/// struct Closed;
/// impl Layer<Below> for Closed {
///     type Service = Closed;
///     fn layer(&self, _: Below) -> Closed { Closed }
/// }
/// impl Service<Call> for Closed {
///     type Response = Done;
///     type Error = BoxError;
///     type Future = std::future::Ready<Result<Done, BoxError>>;
///     fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
///         Poll::Ready(Err("closed for the night".into()))
///     }
///     fn call(&mut self, _: Call) -> Self::Future { unreachable!("never ready") }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ping = Tool::builder().name("ping").description("Pong.")
///     .body(|_: Ping| async { Ok("pong") }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((ping.combo().with(Tower::new("closed", Closed)),))?;
/// let err = toolset.call("ping_closed", serde_json::json!({})).await.unwrap_err();
/// assert_eq!(err.to_string(), "tower layer `closed` failed the call to `ping_closed`: closed for the night");
/// assert_eq!(err.downcast_ref::<LayerError>().map(|e| e.inner().to_string()).as_deref(), Some("closed for the night"));
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[error("tower layer `{extension}` failed the call to `{tool}`: {error}")]
pub struct LayerError {
    tool: Name,
    extension: Name,
    error: BoxError,
}

impl LayerError {
    /// The layer's error itself, to downcast to the layer's type.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.error
    }
}
