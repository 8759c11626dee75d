//! `cache`: a per-branch result cache with a TTL, bounded in entries and in bytes
//! by LRU eviction.

use std::any::Any;
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

use crate::context;
use crate::error::{ArgsError, ToolError, shorten};
use crate::extension::Params;
use crate::extension::{ConfigError, Configurable, Extension, LayerInput, Wrap};
use crate::extension::{Next, Stack};
use crate::kind::property::SharedAnswers;

mod key;

use key::cache_key;

/// The operator's side of a cache.
///
/// Both bounds hold at once: the least recently used result goes first when the
/// store would hold more than `capacity` results or more than `max_bytes`. A result
/// larger than `max_bytes` on its own is not stored (the call still runs).
///
/// | field | default | range |
/// |---|---|---|
/// | `capacity` | 1,024 results | 1 to [`MAX_CAPACITY`] |
/// | `max_bytes` | 64 MiB | 1 to [`MAX_BYTES`] |
/// | `default_ttl_secs` | 60 | 0 and up (the operator's: a TTL too long to represent never expires) |
/// | `max_ttl_secs` | 86,400 (a day) | 1 to [`LONGEST_MAX_TTL_SECS`] (a year): the longest `exp` a caller or a pin may ask |
/// | `public` | `false`: each caller's answers are its own | |
/// | `side_effects` | `"refused"` | `"refused"`, `"allowed"` |
///
/// A cache answers calls without making them, so it binds only on a tool whose
/// hints say a call not made loses nothing: read-only, or idempotent and said
/// not destructive (`.destructive(false)`, `destructiveHint: false`; MCP reads an
/// unsaid one as destructive) (rule `side-effects` in the [rulebook](crate::rulebook)).
/// `"side_effects": "allowed"` is the operator's word that skipping the calls is
/// what they want anyway.
///
/// A cache answers from what it kept, so it sits inside (before) every
/// authorization check of its combo: `[cache, authorize]` binds, `[authorize,
/// cache]` does not (rule `shared-answers-inside-authorization`); its locality is
/// [`SharedAnswers`].
///
/// The key holds the caller's [`Principal`](crate::context::Principal) (when the
/// server in front set one): one caller's answer never answers another. `public`
/// is the operator's word that the tool answers everyone alike: one entry serves
/// every caller.
///
/// ```
/// let config: toolgraft::ext::cache::CacheConfig = serde_json::from_str(r#"{"capacity": 16}"#)?;
/// assert_eq!(config.default_ttl_secs, 60.0);
/// assert_eq!(config.max_ttl_secs, 86_400.0);
/// assert_eq!(config.max_bytes, 64 << 20);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// How many results one branch keeps; the least recently used goes first.
    pub capacity: NonZeroUsize,
    /// How many bytes of keys and results one branch keeps (results counted as
    /// their JSON text); the least recently used goes first.
    pub max_bytes: usize,
    /// How long a result stays fresh when the caller gives no `exp`.
    pub default_ttl_secs: f64,
    /// The longest `exp` a caller (or an operator's pin) may ask, in seconds:
    /// without it one caller of a `public` cache could keep an entry for
    /// everyone for good. The schema of `exp` says it as its `maximum`.
    pub max_ttl_secs: f64,
    /// Whether the tool answers every caller alike, so that one entry serves them
    /// all (the caller's principal is left out of the key).
    pub public: bool,
    /// Whether the cache may sit on a tool whose hints do not say skipping a call
    /// is safe.
    pub side_effects: SideEffects,
}

/// Whether a [`Cache`] may skip calls of a tool whose hints do not say that is
/// safe (rule `side-effects` in the [rulebook](crate::rulebook)).
///
/// ```
/// use toolgraft::ext::cache::{CacheConfig, SideEffects};
/// let config: CacheConfig = serde_json::from_str(r#"{"side_effects": "allowed"}"#)?;
/// assert_eq!(config.side_effects, SideEffects::Allowed);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffects {
    /// Only on tools that are read-only, or idempotent and said not destructive.
    #[default]
    Refused,
    /// On any tool: the operator wants the calls skipped.
    Allowed,
}

/// The most results one cache branch may be configured to keep.
///
/// ```
/// use std::num::NonZeroUsize;
/// use toolgraft::Extension;
/// use toolgraft::ext::{Cache, cache::{CacheConfig, MAX_CAPACITY}};
/// let capacity = NonZeroUsize::new(MAX_CAPACITY + 1).unwrap();
/// let cache = Cache::new(CacheConfig { capacity, ..CacheConfig::default() });
/// assert_eq!(cache.check_config().unwrap_err().field, "capacity");
/// ```
pub const MAX_CAPACITY: usize = 10_000_000;

/// The most bytes one cache branch may be configured to keep (64 GiB).
///
/// ```
/// use toolgraft::Extension;
/// use toolgraft::ext::{Cache, cache::{CacheConfig, MAX_BYTES}};
/// let cache = Cache::new(CacheConfig { max_bytes: MAX_BYTES, ..CacheConfig::default() });
/// assert!(cache.check_config().is_ok());
/// ```
pub const MAX_BYTES: usize = 64 << 30;

/// The longest `max_ttl_secs` an operator may configure (a year): a longer
/// one is almost certainly a unit mistake, and an entry kept past it is better
/// the operator's `default_ttl_secs`, said for every caller.
///
/// ```
/// use toolgraft::Extension;
/// use toolgraft::ext::{Cache, cache::{CacheConfig, LONGEST_MAX_TTL_SECS}};
/// let cache = Cache::new(CacheConfig { max_ttl_secs: LONGEST_MAX_TTL_SECS + 1.0, ..CacheConfig::default() });
/// assert_eq!(cache.check_config().unwrap_err().field, "max_ttl_secs");
/// ```
pub const LONGEST_MAX_TTL_SECS: f64 = 365.0 * 86_400.0;

/// `max_ttl_secs` unless set: a day. The schema of [`CacheParams`] says it,
/// so an operator who keeps it shares one schema with every other.
const DEFAULT_MAX_TTL_SECS: f64 = 86_400.0;

/// What an entry costs beyond its key and result: the store's own bookkeeping.
const ENTRY_OVERHEAD: usize = 96;

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            capacity: NonZeroUsize::new(1024).unwrap_or(NonZeroUsize::MIN),
            max_bytes: 64 << 20,
            default_ttl_secs: 60.0,
            max_ttl_secs: DEFAULT_MAX_TTL_SECS,
            public: false,
            side_effects: SideEffects::Refused,
        }
    }
}

/// The caller's side: the `exp` reserved param, at least 1 and at most the
/// operator's `max_ttl_secs` (a day unless set; seconds). A caller cannot
/// switch the cache off, nor keep an entry for good: a smaller `exp`, 0 among
/// them, or a larger one is refused with [`ToolError::InvalidArguments`] naming
/// `exp` before the layer below runs, typed or by name; the schema says both
/// bounds (`minimum`, `maximum`), and an operator's pin must be one it admits
/// too, checked when bound. An operator who wants no caching leaves the cache
/// off, or sets its `default_ttl_secs` to 0 and hides `exp` (rule
/// `reserved-params` in the [rulebook](crate::rulebook)).
///
/// ```
/// let params: toolgraft::ext::CacheParams = serde_json::from_str(r#"{"exp": 30}"#)?;
/// assert_eq!(params.exp, Some(30.0));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CacheParams {
    /// Seconds a result stays fresh, at least 1 and at most the operator's
    /// maximum; defaults to the operator's TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // One line for the model: MCP clients show a description as it is. The
    // maximum is the default `max_ttl_secs`; a cache configured otherwise
    // presents its own (`Extension::reserved_schema`).
    #[schemars(
        with = "f64",
        range(min = 1, max = 86400),
        description = "Seconds a result stays fresh, at least 1 and at most the schema's maximum; defaults to the operator's TTL."
    )]
    pub exp: Option<f64>,
}

/// The least `exp` a caller may send: less would let the model switch the
/// cache off (0 bypassed it) or make it keep nothing worth keeping.
const MIN_EXP_SECS: f64 = 1.0;

/// A caller's `exp` as a TTL: the one check of it, for JSON and typed params
/// alike (checked where the cache runs, so params copied for each item of a
/// batch are refused per item, naming `exp`). At most `max` (the operator's
/// `max_ttl_secs`): one caller's `exp` is every caller's entry in a public
/// cache, and must not outlive what the operator allows.
fn callers_ttl(exp: f64, max: f64) -> Result<Option<Duration>, String> {
    if exp.is_nan() || exp < MIN_EXP_SECS {
        return Err(format!(
            "must be at least {MIN_EXP_SECS} (seconds), not {}: the caller cannot switch the cache off",
            seconds(exp)
        ));
    }
    if exp > max {
        return Err(format!(
            "must be at most {} (seconds, the operator's maximum), not {}",
            seconds(max),
            seconds(exp)
        ));
    }
    ttl_of(exp)
}

/// Seconds as a message says them: a huge number in exponent form rather than
/// its 300 digits.
fn seconds(value: f64) -> String {
    if value.abs() < 1e15 {
        format!("{value}")
    } else {
        format!("{value:e}")
    }
}

/// `max_ttl_secs` as a schema's `maximum`: a whole number as an integer, as the
/// derived schema writes the default.
fn schema_number(value: f64) -> Value {
    if value.fract() == 0.0 && (0.0..=LONGEST_MAX_TTL_SECS).contains(&value) {
        // In range and whole: the cast is exact.
        Value::from(value as u64)
    } else {
        Value::from(value)
    }
}

impl Params for CacheParams {}

/// Caches results per branch, keyed by the layer input's JSON; `exp` (seconds) sets
/// the TTL when a result is stored. Errors are not stored; concurrent identical
/// calls run the layer below once and share its result (or error); the store never
/// holds more than `capacity` results, nor more than `max_bytes` (see
/// [`CacheConfig`]).
///
/// A stored result keeps the TTL it was stored with: a later, shorter `exp` does
/// not shorten it. The key is the input's JSON with the entries of every map
/// sorted by key, so arguments given in another order hit the same result. Inside
/// a [`Proxy`](crate::ext::Proxy), the route is part of the key too: a proxy
/// changes the answer without changing the input. An input JSON cannot key (a map
/// with `None` or sequence keys) is refused, never mistaken for another.
///
/// ```
/// use serde_json::json;
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::Cache;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runs = Arc::new(AtomicUsize::new(0));
/// let counter = runs.clone();
/// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
///     .body(move |i: Shout| {
///         counter.fetch_add(1, Ordering::SeqCst);
///         async move { Ok(i.text) }
///     })
///     .build()?;
/// let toolset = Toolset::new();
/// toolset.bind((shout.combo().with(Cache::default()),))?;
/// for _ in 0..3 {
///     toolset.call("shout_cache", json!({"text": "hi", "exp": 10})).await?;
/// }
/// assert_eq!(runs.load(Ordering::SeqCst), 1);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Cache {
    config: CacheConfig,
    /// This branch's results: made when the cache is layered, so each branch has
    /// its own store (typed by the output of the stack below).
    store: Option<Arc<dyn AnyStore>>,
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
        Self {
            config,
            store: None,
        }
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

    /// The operator's word that the tool answers every caller alike: one entry
    /// serves them all (the caller's principal is left out of the key).
    ///
    /// ```
    /// let cache = toolgraft::ext::Cache::default().with_public();
    /// # let _ = cache;
    /// ```
    pub fn with_public(mut self) -> Self {
        self.config.public = true;
        self
    }

    /// The operator's word that this cache may skip calls of a tool whose hints
    /// do not say that is safe (rule `side-effects` in the [rulebook](crate::rulebook)).
    ///
    /// ```
    /// use toolgraft::Extension;
    /// let cache = toolgraft::ext::Cache::default().with_side_effects_allowed();
    /// assert_eq!(cache.demands(), None);
    /// ```
    pub fn with_side_effects_allowed(mut self) -> Self {
        self.config.side_effects = SideEffects::Allowed;
        self
    }
}

impl Configurable for Cache {
    type Config = CacheConfig;

    fn from_config(config: CacheConfig) -> Result<Self, ConfigError> {
        let cache = Self::new(config);
        Extension::check_config(&cache)?;
        Ok(cache)
    }
}

/// A stack a [`Cache`] can sit on: its input is the key (`Serialize`), and its
/// output is cloned out of the store (`Clone`).
///
/// One trait, proven once per stack type, rather than bounds on `S::Input` and
/// `S::Output` wherever a cache appears: those make the compiler resolve the
/// associated types through every layer below, again in each query. And the
/// output need not be `Sync` (the store keeps it behind a `Mutex`): asking it made
/// the compiler walk the whole output type in every query.
///
/// When a stack is not, the compiler names the half that fails, with the fix:
/// [`CacheKey`] for the input, [`CachedOutput`] for the output.
pub trait Cacheable: Stack<Input: CacheKey, Output: CachedOutput> {}

impl<S> Cacheable for S
where
    S: Stack,
    S::Input: CacheKey,
    S::Output: CachedOutput,
{
}

/// The input of a stack a [`Cache`] sits on: serialized, it is the key.
///
/// Implemented for every `Serialize` type. A trait of its own (not `Serialize`
/// itself) so that the compiler's message names the rule and the fix rather than
/// a bare `Serialize` bound several layers down.
///
/// ```
/// use toolgraft::ext::cache::CacheKey;
/// fn key<K: CacheKey>() {}
/// key::<String>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`cache` keys each call by its input serialized, but `{Self}` is not `Serialize`",
    label = "the layer below takes `{Self}`, which is not `Serialize`",
    note = "add `#[derive(serde::Serialize)]` to `{Self}` beside its `Deserialize` (an rmcp tool's argument struct usually derives `Deserialize` and `JsonSchema` only)",
    note = "the key is the input as JSON, written canonically, so calls with equal arguments share an entry"
)]
pub trait CacheKey: Serialize {}

// `do_not_recommend`: the compiler reports this trait, with its message, instead
// of the bare `Serialize` bound the impl asks.
#[diagnostic::do_not_recommend]
impl<T: Serialize + ?Sized> CacheKey for T {}

/// The output of a stack a [`Cache`] sits on: each hit hands out a clone of the
/// stored result.
///
/// Implemented for every `Clone` type; a trait of its own for its message, as
/// [`CacheKey`].
///
/// ```
/// use toolgraft::ext::cache::CachedOutput;
/// fn output<O: CachedOutput>() {}
/// output::<Vec<String>>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`cache` hands out a clone of a stored result, but the output `{Self}` is not `Clone`",
    label = "the layer below returns `{Self}`, which is not `Clone`",
    note = "add `#[derive(Clone)]` to `{Self}` (or return an `Arc` of it): every hit returns a clone of the stored result"
)]
pub trait CachedOutput: Clone {}

#[diagnostic::do_not_recommend]
impl<T: Clone> CachedOutput for T {}

impl crate::Extension for Cache {
    type Kind = crate::kind::Wrapper;
    // It answers from what it kept: inside every authorization check (rule
    // `shared-answers-inside-authorization`), public or per caller alike (a
    // caller's own answer may have been given under a token it no longer holds).
    type Locality = SharedAnswers;

    fn name(&self) -> &str {
        "cache"
    }

    fn config(&self) -> Option<Value> {
        (self.config != CacheConfig::default())
            .then(|| serde_json::to_value(&self.config).ok())
            .flatten()
    }

    fn demands(&self) -> Option<crate::tool::Demand> {
        (self.config.side_effects == SideEffects::Refused).then_some(crate::tool::Demand::Skippable)
    }

    fn check_config(&self) -> Result<(), ConfigError> {
        let capacity = self.config.capacity.get();
        if capacity > MAX_CAPACITY {
            return Err(ConfigError::new(
                "capacity",
                format!(
                    "{capacity} results is over the limit of {MAX_CAPACITY}; bound the store with `max_bytes` instead"
                ),
            ));
        }
        let max_bytes = self.config.max_bytes;
        if max_bytes == 0 || max_bytes > MAX_BYTES {
            return Err(ConfigError::new(
                "max_bytes",
                format!("{max_bytes} is out of range: use 1 to {MAX_BYTES} bytes"),
            ));
        }
        let max_ttl = self.config.max_ttl_secs;
        if !(MIN_EXP_SECS..=LONGEST_MAX_TTL_SECS).contains(&max_ttl) {
            return Err(ConfigError::new(
                "max_ttl_secs",
                format!(
                    "{} is out of range: use {MIN_EXP_SECS} to {LONGEST_MAX_TTL_SECS} seconds (a year)",
                    seconds(max_ttl)
                ),
            ));
        }
        ttl_of(self.config.default_ttl_secs)
            .map(drop)
            .map_err(|problem| ConfigError::new("default_ttl_secs", problem))
    }

    fn reserved_schema(&self, typed: Arc<schemars::Schema>) -> Arc<schemars::Schema> {
        if self.config.max_ttl_secs == DEFAULT_MAX_TTL_SECS {
            return typed;
        }
        let mut schema = schemars::Schema::clone(&typed);
        if let Some(exp) = schema
            .get_mut("properties")
            .and_then(|properties| properties.get_mut("exp"))
            .and_then(Value::as_object_mut)
        {
            exp.insert(
                "maximum".to_owned(),
                schema_number(self.config.max_ttl_secs),
            );
        }
        Arc::new(schema)
    }
}

impl<S: Cacheable> Wrap<S> for Cache {
    type Params = CacheParams;

    fn for_branch(mut self, _: &LayerInput<'_, Self>) -> Self {
        self.store = Some(Arc::new(Store::<S::Output>::new(&self.config)));
        self
    }

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        params: CacheParams,
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let store = self
            .store
            .as_ref()
            .and_then(|store| store.as_any().downcast_ref::<Store<S::Output>>())
            .ok_or_else(|| ToolError::Reported {
                message: format!(
                    "`{}`: the cache has no store for this branch",
                    next.branch()
                ),
            })?;
        let ttl = match params.exp {
            Some(exp) => callers_ttl(exp, self.config.max_ttl_secs),
            None => ttl_of(self.config.default_ttl_secs),
        }
        .map_err(|problem| ArgsError::field("exp", problem).for_tool(next.branch()))?;
        if ttl == Some(Duration::ZERO) {
            return next.call(input).await;
        }
        let mut key = cache_key(&input).map_err(|err| {
            next.refuse(format!(
                "the arguments cannot be used as a cache key: {}",
                shorten(&err.to_string())
            ))
        })?;
        // What the context says changes the answer without changing the input
        // (a proxy's route, any keyed entry of a layer outside) is part of the key.
        if context::has_keyed() {
            let mut bytes = key.into_bytes();
            let write = if self.config.public {
                context::write_keyed_but::<context::Principal>
            } else {
                context::write_keyed
            };
            write(&mut bytes).map_err(|err| next.refuse(err.to_string()))?;
            key = String::from_utf8(bytes)
                .map_err(|_| next.refuse("a context entry wrote a key that is not UTF-8"))?;
        }
        // A key the store could never keep would only pin memory while it runs.
        if key.len() + ENTRY_OVERHEAD > store.max_bytes {
            return next.call(input).await;
        }
        store.get_or_run(key, ttl, || next.call(input)).await
    }
}

impl Cache {
    /// How many results this branch's store holds now (0 before it is layered).
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::ext::Cache;
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let (cached,) = Toolset::new().bind((shout.combo().with(Cache::with_capacity(1)),))?;
    /// for text in ["a", "b"] {
    ///     cached.call(Shout { text: text.into() }).await?;
    /// }
    /// assert_eq!(cached.stack().wrapper().len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.store.as_ref().map_or(0, |store| store.len())
    }

    /// How many bytes of keys and results this branch's store holds now.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::ext::{Cache, cache::CacheConfig};
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let cache = Cache::new(CacheConfig { max_bytes: 4096, ..CacheConfig::default() });
    /// let (cached,) = Toolset::new().bind((shout.combo().with(cache),))?;
    /// for n in 0..100 {
    ///     cached.call(Shout { text: format!("{n:0>100}") }).await?;
    /// }
    /// assert!(cached.stack().wrapper().bytes() <= 4096);
    /// assert!(cached.stack().wrapper().len() < 100);
    /// # Ok(()) }
    /// ```
    pub fn bytes(&self) -> usize {
        self.store.as_ref().map_or(0, |store| store.bytes())
    }

    /// Whether this branch's store holds no result.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A branch's store, whatever the output type it keeps.
trait AnyStore: Any + Send + Sync {
    fn len(&self) -> usize;
    fn bytes(&self) -> usize;
    fn as_any(&self) -> &dyn Any;
}

impl<O: Send + 'static> AnyStore for Store<O> {
    fn len(&self) -> usize {
        self.lock().ready.as_ref().map_or(0, LruCache::len)
    }

    fn bytes(&self) -> usize {
        Store::bytes(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl std::fmt::Debug for dyn AnyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("len", &self.len())
            .field("bytes", &self.bytes())
            .finish()
    }
}

/// A TTL in seconds as a duration; `None` for one too long to ever expire.
fn ttl_of(seconds: f64) -> Result<Option<Duration>, String> {
    if seconds.is_nan() || seconds < 0.0 {
        return Err(format!("must be a number of seconds >= 0, not {seconds}"));
    }
    Ok(Duration::try_from_secs_f64(seconds).ok())
}

/// Results by key, plus the runs in flight.
struct Store<O> {
    state: Mutex<StoreState<O>>,
    capacity: usize,
    max_bytes: usize,
}

struct StoreState<O> {
    /// Results with the instant they go stale (`None`: never) and what they cost
    /// in bytes. Unbounded as an `LruCache` (which would allocate its capacity up
    /// front): `put` evicts by both bounds. Made at the first `put`: an empty one
    /// allocates already, and most branches of a large toolset are never called.
    ready: Option<LruCache<String, Ready<O>>>,
    /// What `ready` holds, in bytes.
    bytes: usize,
    running: HashMap<String, Arc<Flight<O>>>,
}

/// A stored result.
struct Ready<O> {
    value: O,
    stale_at: Option<Instant>,
    bytes: usize,
}

impl<O> StoreState<O> {
    fn pop(&mut self, key: &str) {
        if let Some(ready) = self.ready.as_mut().and_then(|ready| ready.pop(key)) {
            self.bytes -= ready.bytes;
        }
    }
}

/// One run of the layer below for a key, which identical callers join.
struct Flight<O> {
    /// Set once, when the run finishes (behind a `Mutex`, so `O` need not be `Sync`).
    result: Mutex<Option<Result<O, ToolError>>>,
    finished: Notify,
}

impl<O: Clone> Flight<O> {
    /// The run's result, once it finished.
    fn finished_with(&self) -> Option<Result<O, ToolError>> {
        self.result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What the store has for a key.
enum LookUp<O> {
    Fresh(O),
    Join(Arc<Flight<O>>),
    /// Nothing: the caller now runs the key.
    Run(Arc<Flight<O>>),
}

impl<O> Store<O> {
    fn new(config: &CacheConfig) -> Self {
        Self {
            state: Mutex::new(StoreState {
                ready: None,
                bytes: 0,
                running: HashMap::new(),
            }),
            capacity: config.capacity.get(),
            max_bytes: config.max_bytes,
        }
    }

    /// Stores `ready` under `key`, evicting the least recently used results until
    /// both bounds hold; a result over `max_bytes` alone is not stored.
    fn put(&self, key: String, ready: Ready<O>) {
        let mut state = self.lock();
        state.pop(&key);
        if ready.bytes > self.max_bytes {
            return;
        }
        state.bytes += ready.bytes;
        let StoreState {
            ready: stored,
            bytes,
            ..
        } = &mut *state;
        let stored = stored.get_or_insert_with(LruCache::unbounded);
        stored.put(key, ready);
        while stored.len() > self.capacity || *bytes > self.max_bytes {
            match stored.pop_lru() {
                Some((_, evicted)) => *bytes -= evicted.bytes,
                None => break,
            }
        }
    }

    /// How many bytes the store holds now.
    fn bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> MutexGuard<'_, StoreState<O>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<O: Clone + Serialize> Store<O> {
    fn look_up(&self, key: &str) -> LookUp<O> {
        let mut state = self.lock();
        if let Some(ready) = state.ready.as_mut().and_then(|ready| ready.get(key)) {
            if ready
                .stale_at
                .is_none_or(|stale_at| Instant::now() < stale_at)
            {
                return LookUp::Fresh(ready.value.clone());
            }
            state.pop(key);
        }
        if let Some(flight) = state.running.get(key) {
            return LookUp::Join(flight.clone());
        }
        let flight = Arc::new(Flight {
            result: Mutex::new(None),
            finished: Notify::new(),
        });
        state.running.insert(key.to_owned(), flight.clone());
        LookUp::Run(flight)
    }

    /// The fresh result for `key`, or `run`'s. Identical concurrent callers join one
    /// run and share its result, error included; only a success is stored.
    async fn get_or_run<F, Fut>(
        &self,
        key: String,
        ttl: Option<Duration>,
        run: F,
    ) -> Result<O, ToolError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<O, ToolError>>,
    {
        loop {
            let flight = match self.look_up(&key) {
                LookUp::Fresh(value) => {
                    #[cfg(feature = "otel")]
                    record_hit(true);
                    return Ok(value);
                }
                LookUp::Run(flight) => {
                    #[cfg(feature = "otel")]
                    record_hit(false);
                    let runner = Runner {
                        store: self,
                        key,
                        flight,
                    };
                    let result = run().await;
                    runner.finish(&result, ttl);
                    return result;
                }
                LookUp::Join(flight) => flight,
            };
            let finished = flight.finished.notified();
            tokio::pin!(finished);
            finished.as_mut().enable();
            if let Some(result) = flight.finished_with() {
                #[cfg(feature = "otel")]
                record_hit(true);
                return result;
            }
            // A run cancelled before `enable` woke nobody: only wait on one that is
            // still registered.
            let registered = self
                .lock()
                .running
                .get(&key)
                .is_some_and(|current| Arc::ptr_eq(current, &flight));
            if registered {
                finished.await;
            }
            if let Some(result) = flight.finished_with() {
                // Another call's answer: this one did not call below.
                #[cfg(feature = "otel")]
                record_hit(true);
                return result;
            }
            // The run was cancelled: look again (and maybe run it ourselves).
        }
    }
}

/// The caller running a key. Finished or cancelled (dropped), it unregisters the
/// run and wakes whoever joined it.
struct Runner<'a, O> {
    store: &'a Store<O>,
    key: String,
    flight: Arc<Flight<O>>,
}

impl<O: Clone + Serialize> Runner<'_, O> {
    fn finish(&self, result: &Result<O, ToolError>, ttl: Option<Duration>) {
        *self
            .flight
            .result
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(result.clone());
        if let Ok(value) = result {
            let stale_at = ttl.and_then(|ttl| Instant::now().checked_add(ttl));
            let bytes = self.key.len() + json_len(value) + ENTRY_OVERHEAD;
            let ready = Ready {
                value: value.clone(),
                stale_at,
                bytes,
            };
            self.store.put(self.key.clone(), ready);
        }
    }
}

/// The length of `value`'s JSON text, without writing it anywhere; a value that
/// does not serialize counts as too large to keep.
fn json_len<O: Serialize>(value: &O) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX / 2,
    }
}

impl<O> Drop for Runner<'_, O> {
    fn drop(&mut self) {
        let mut state = self.store.lock();
        if state
            .running
            .get(&self.key)
            .is_some_and(|current| Arc::ptr_eq(current, &self.flight))
        {
            state.running.remove(&self.key);
        }
        drop(state);
        self.flight.finished.notify_waiters();
    }
}

/// Whether the call was answered from the store, on its layer's span (see
/// [`otel`](crate::otel)): inside `around`, the current span is the layer's.
#[cfg(feature = "otel")]
fn record_hit(hit: bool) {
    tracing::Span::current().record(crate::otel::CACHE_HIT, hit);
}
