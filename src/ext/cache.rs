//! `cache`: a per-branch result cache with a TTL, bounded by LRU eviction.

use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lru::LruCache;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::{ArgsError, ToolError};
use crate::extension::{Extension, Layer, LayerInput};
use crate::kind::Wrapper;
use crate::name::Name;
use crate::params::{Params, ReservedParams, WithParams};
use crate::rules::Anywhere;
use crate::schema;
use crate::stack::{Args, Stack};

/// The operator's side of a cache.
///
/// ```
/// let config: toolgraft::ext::cache::CacheConfig = serde_json::from_str(r#"{"capacity": 16}"#)?;
/// assert_eq!(config.default_ttl_secs, 60.0);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// How many results one branch keeps; the least recently used goes first.
    pub capacity: NonZeroUsize,
    /// How long a result stays fresh when the caller gives no `exp`.
    pub default_ttl_secs: f64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            capacity: NonZeroUsize::new(1024).expect("1024 is not zero"),
            default_ttl_secs: 60.0,
        }
    }
}

/// The caller's side: the `exp` reserved param.
///
/// ```
/// let params: toolgraft::ext::CacheParams = serde_json::from_str(r#"{"exp": 30}"#)?;
/// assert_eq!(params.exp, Some(30.0));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CacheParams {
    /// Seconds a result stays fresh (0 bypasses the cache); defaults to the
    /// operator's TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "f64", range(min = 0))]
    pub exp: Option<f64>,
}

impl Params for CacheParams {}

/// Caches results per branch, keyed by the layer input's JSON; `exp` (seconds) sets
/// the TTL per call. Errors are not cached, concurrent identical calls run the layer
/// below once, and the store never holds more than `capacity` results.
///
/// ```
/// use frunk::hlist;
/// use serde_json::json;
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// use toolgraft::{BaseTool, Tool, Toolset};
/// use toolgraft::ext::Cache;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runs = Arc::new(AtomicUsize::new(0));
/// let counter = runs.clone();
/// let shout = Tool::builder().name("shout").description("Return the text.")
///     .body(move |i: Shout| {
///         counter.fetch_add(1, Ordering::SeqCst);
///         async move { Ok(i.text) }
///     })
///     .build()?;
/// let toolset = Toolset::new();
/// toolset.bind(&shout, hlist![shout.combo().with(Cache::default())])?;
/// for _ in 0..3 {
///     toolset.call("shout_cache", json!({"text": "hi", "exp": 10})).await?;
/// }
/// assert_eq!(runs.load(Ordering::SeqCst), 1);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Cache {
    config: CacheConfig,
}

impl Cache {
    /// A cache with the given config.
    ///
    /// ```
    /// use toolgraft::ext::{cache::CacheConfig, Cache};
    /// let cache = Cache::new(CacheConfig { default_ttl_secs: 5.0, ..CacheConfig::default() });
    /// # let _ = cache;
    /// ```
    pub fn new(config: CacheConfig) -> Self {
        Self { config }
    }

    /// A cache holding at most `capacity` results per branch (at least one).
    ///
    /// ```
    /// let cache = toolgraft::ext::Cache::with_capacity(2);
    /// # let _ = cache;
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        Self::new(CacheConfig {
            capacity: NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
            ..CacheConfig::default()
        })
    }
}

impl Extension for Cache {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "cache"
    }

    fn config(&self) -> Option<Value> {
        (self.config != CacheConfig::default())
            .then(|| serde_json::to_value(&self.config).ok())
            .flatten()
    }
}

impl<S> Layer<S> for Cache
where
    S: Stack,
    S::Input: Serialize,
    S::Output: Clone + Sync,
{
    type Branch = Cached<S>;

    fn layer(self, inner: S, below: &LayerInput<'_>) -> Cached<S> {
        Cached {
            inner,
            below: below.name.clone(),
            store: Arc::new(Store::new(self.config.capacity)),
            default_ttl: self.config.default_ttl_secs,
            reserved: schema::property_names(&schema::of::<CacheParams>())
                .unwrap_or_default()
                .into(),
        }
    }
}

/// The branch [`Cache`] mints: takes `WithParams<CacheParams, _>` of the layer's
/// input (see [`Cache`]'s example).
pub struct Cached<S: Stack> {
    inner: S,
    below: Name,
    store: Arc<Store<S::Output>>,
    default_ttl: f64,
    reserved: Arc<[String]>,
}

impl<S: Stack> Clone for Cached<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            below: self.below.clone(),
            store: self.store.clone(),
            default_ttl: self.default_ttl,
            reserved: self.reserved.clone(),
        }
    }
}

impl<S: Stack> Cached<S> {
    /// How many results the store holds now.
    ///
    /// ```
    /// # use frunk::{hlist, hlist_pat}; use toolgraft::{BaseTool, Stack, Tool, Toolset, WithParams};
    /// # use toolgraft::ext::{Cache, CacheParams};
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let hlist_pat![cached] = Toolset::new().bind(&shout, hlist![shout.combo().with(Cache::with_capacity(1))])?;
    /// for text in ["a", "b"] {
    ///     cached.call(WithParams::new(CacheParams::default(), Shout { text: text.into() })).await?;
    /// }
    /// assert_eq!(cached.stack().len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.store.lock().ready.len()
    }

    /// Whether the store is empty (see [`Cached::len`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn ttl(&self, exp: Option<f64>) -> Result<Duration, ArgsError> {
        let seconds = exp.unwrap_or(self.default_ttl);
        Duration::try_from_secs_f64(seconds).map_err(|_| {
            ArgsError::field(
                "exp",
                format!("`exp` must be a number of seconds >= 0, not {seconds}"),
            )
        })
    }
}

impl<S> Stack for Cached<S>
where
    S: Stack,
    S::Input: Serialize,
    S::Output: Clone + Sync,
{
    type Input = WithParams<CacheParams, S::Input>;
    type Output = S::Output;

    async fn call(&self, input: Self::Input) -> Result<S::Output, ToolError> {
        let ttl = self
            .ttl(input.params.exp)
            .map_err(|err| err.for_tool(&self.below))?;
        if ttl.is_zero() {
            return self.inner.call(input.input).await;
        }
        let key = serde_json::to_string(&input.input).map_err(|err| ToolError::Refused {
            tool: self.below.clone(),
            extension: Name::unchecked("cache"),
            reason: format!("the arguments cannot be used as a cache key: {err}"),
        })?;
        self.store
            .get_or_run(key, ttl, || self.inner.call(input.input))
            .await
    }

    fn decode(&self, mut args: Args) -> Result<Self::Input, ArgsError> {
        let params = CacheParams::take(&mut args, &self.reserved)?;
        self.ttl(params.exp)?;
        Ok(WithParams::new(params, self.inner.decode(args)?))
    }
}

/// Results by key, plus the keys being computed right now.
struct Store<O> {
    state: Mutex<StoreState<O>>,
}

struct StoreState<O> {
    ready: LruCache<String, (O, Instant)>,
    running: HashMap<String, Arc<Notify>>,
}

/// What the store has for a key.
enum LookUp<O> {
    Fresh(O),
    Running(Arc<Notify>),
    /// Nothing: the caller is now the key's runner.
    Run,
}

impl<O> Store<O> {
    fn new(capacity: NonZeroUsize) -> Self {
        Self {
            state: Mutex::new(StoreState {
                ready: LruCache::new(capacity),
                running: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, StoreState<O>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<O: Clone> Store<O> {
    fn look_up(&self, key: &str) -> LookUp<O> {
        let mut state = self.lock();
        if let Some((value, fresh_until)) = state.ready.get(key) {
            if Instant::now() < *fresh_until {
                return LookUp::Fresh(value.clone());
            }
            state.ready.pop(key);
        }
        match state.running.get(key) {
            Some(running) => LookUp::Running(running.clone()),
            None => {
                state
                    .running
                    .insert(key.to_owned(), Arc::new(Notify::new()));
                LookUp::Run
            }
        }
    }

    /// The fresh result for `key`, or `run`'s. One caller per key runs at a time;
    /// the others wait for it and take its result, or (if it failed) try again.
    async fn get_or_run<F, Fut>(&self, key: String, ttl: Duration, run: F) -> Result<O, ToolError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<O, ToolError>>,
    {
        loop {
            let running = match self.look_up(&key) {
                LookUp::Fresh(value) => return Ok(value),
                LookUp::Running(running) => running,
                LookUp::Run => break,
            };
            let finished = running.notified();
            tokio::pin!(finished);
            finished.as_mut().enable();
            // The run may have ended before `enable`; then its wake-up is gone, and
            // the entry is gone or belongs to a newer run: look again instead.
            let same_run = self
                .lock()
                .running
                .get(&key)
                .is_some_and(|current| Arc::ptr_eq(current, &running));
            if same_run {
                finished.await;
            }
        }
        let runner = Runner { store: self, key };
        let result = run().await;
        if let Ok(value) = &result {
            let fresh_until = Instant::now() + ttl;
            runner
                .store
                .lock()
                .ready
                .put(runner.key.clone(), (value.clone(), fresh_until));
        }
        drop(runner);
        result
    }
}

/// The caller computing a key; when it finishes (or is cancelled), waiters wake.
struct Runner<'a, O> {
    store: &'a Store<O>,
    key: String,
}

impl<O> Drop for Runner<'_, O> {
    fn drop(&mut self) {
        if let Some(running) = self.store.lock().running.remove(&self.key) {
            running.notify_waiters();
        }
    }
}
