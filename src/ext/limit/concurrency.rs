//! `concurrency`: at most `max` calls of a branch at once (per caller or for
//! all), a bounded queue of waiters, and load shedding beyond it.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{self, Either};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;

use super::{Lease, LimitKey, LimitStore, MemoryLimits, key_of, millis, store_failed};
use crate::Name;
use crate::error::ToolError;
use crate::extension::{ConfigError, Configurable, Extension, LayerInput, Next, Stack, Wrap};
use crate::kind::property::Anywhere;

/// The most permits, and the longest queue, an operator may configure.
const MAX_PERMITS: u32 = 100_000;
const MAX_QUEUE: u32 = 1_000_000;

/// The shortest and the longest lease of a fleet store's permit.
const MIN_LEASE: Duration = Duration::from_secs(1);
const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// How often a waiter asks the store again when no release in this process
/// woke it: another replica's release is not heard here.
const POLL: Duration = Duration::from_millis(25);

/// The operator's side of a concurrency limit.
///
/// | field | default | range |
/// |---|---|---|
/// | `max` | (required) | 1 to 100,000 calls at once |
/// | `queue` | 0 (shed at once) | up to 1,000,000 waiting calls (per process) |
/// | `max_wait_ms` | none (wait for a permit) | 1 ms to [`MAX_WAIT`](super::MAX_WAIT) |
/// | `per_principal` | `false` | a limit per caller, or one for all |
/// | `lease_ms` | 30,000 | 1 s to a day: how soon a crashed replica's permits come back |
///
/// ```
/// let config: toolgraft::ext::limit::ConcurrencyConfig =
///     serde_json::from_str(r#"{"max": 4, "queue": 16, "max_wait_ms": 2000}"#)?;
/// assert_eq!((config.max, config.queue, config.max_wait_ms), (4, 16, Some(2000)));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyConfig {
    /// Calls running at once.
    pub max: u32,
    /// Calls that may wait for a permit in this process; one more is refused
    /// at once.
    #[serde(default)]
    pub queue: u32,
    /// How long a queued call waits for a permit before it is refused; none
    /// waits as long as it takes (put a `timeout` outside).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u64>,
    /// A limit per caller (the call context's principal), or one for all.
    #[serde(default)]
    pub per_principal: bool,
    /// How long a fleet store keeps a permit its holder stopped renewing
    /// (renewed every third of it while the call runs).
    #[serde(default = "lease_ms")]
    pub lease_ms: u64,
}

fn lease_ms() -> u64 {
    30_000
}

/// A wrapper that runs at most `max` calls of its branch at once (per caller
/// with [`with_per_principal`](Concurrency::with_per_principal)). A call beyond them
/// waits in a queue of at most [`with_queue`](Concurrency::with_queue) calls (0 unless
/// set), for at most [`with_wait_up_to`](Concurrency::with_wait_up_to) when set; beyond
/// the queue it is shed at once: [`ToolError::Overloaded`].
///
/// A call that stops waiting (its future dropped: a cancellation, a timeout
/// outside) leaves the queue, and one that stops running gives its permit
/// back. With a fleet store ([`with_store`](Concurrency::with_store)) the permits are
/// the fleet's: each is a lease the running call renews, so a replica that
/// crashes holding permits loses them after `lease_ms`. The queue is each
/// process's own, and waiters are woken by releases in their process and ask
/// the store again every 25 ms.
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Tool, ToolError, Toolset};
/// use toolgraft::ext::Concurrency;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Ping {}
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ping = Tool::builder().name("ping").description("Pong, slowly.")
///     .body(|_: Ping| async {
///         tokio::time::sleep(std::time::Duration::from_secs(1)).await;
///         Ok("pong")
///     })
///     .build()?;
/// let toolset = Toolset::new();
/// toolset.bind((ping.combo().with(Concurrency::at_most(1).with_queue(1)),))?;
///
/// let (first, second, third) = tokio::join!(
///     toolset.call("ping_concurrency", json!({})),
///     toolset.call("ping_concurrency", json!({})),
///     toolset.call("ping_concurrency", json!({})),
/// );
/// assert!(first.is_ok() && second.is_ok(), "one ran, one waited");
/// assert!(matches!(third, Err(ToolError::Overloaded { retry_after: None, .. })), "shed");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Concurrency {
    config: ConcurrencyConfig,
    store: Option<Arc<dyn LimitStore>>,
    waiting: Arc<Waiting>,
}

/// A branch's waiters in this process: how many per key, and the bell a
/// release rings.
#[derive(Debug, Default)]
struct Waiting {
    queued: Mutex<HashMap<LimitKey, u32>>,
    released: Notify,
}

impl Concurrency {
    /// At most `max` calls at once, no queue, one limit for all callers;
    /// checked when bound.
    ///
    /// ```
    /// use toolgraft::Extension;
    /// let limit = toolgraft::ext::Concurrency::at_most(8);
    /// assert_eq!(limit.config(), Some(serde_json::json!({"max": 8, "queue": 0,
    ///     "per_principal": false, "lease_ms": 30000})));
    /// ```
    pub fn at_most(max: u32) -> Self {
        Self::from_parts(
            ConcurrencyConfig {
                max,
                queue: 0,
                max_wait_ms: None,
                per_principal: false,
                lease_ms: lease_ms(),
            },
            None,
        )
    }

    fn from_parts(config: ConcurrencyConfig, store: Option<Arc<dyn LimitStore>>) -> Self {
        Self {
            config,
            store,
            waiting: Arc::default(),
        }
    }

    /// Lets up to `queue` calls wait for a permit (in this process).
    pub fn with_queue(mut self, queue: u32) -> Self {
        self.config.queue = queue;
        self
    }

    /// A queued call waits at most `wait`, then is refused.
    ///
    /// ```
    /// use std::time::Duration;
    /// let limit = toolgraft::ext::Concurrency::at_most(2).with_queue(10).with_wait_up_to(Duration::from_secs(1));
    /// # let _ = limit;
    /// ```
    pub fn with_wait_up_to(mut self, wait: Duration) -> Self {
        self.config.max_wait_ms = Some(millis(wait));
        self
    }

    /// A limit per caller (the call context's
    /// [`Principal`](crate::context::Principal); calls without one share one
    /// anonymous limit).
    pub fn with_per_principal(mut self) -> Self {
        self.config.per_principal = true;
        self
    }

    /// How long a fleet store keeps a permit whose holder stopped renewing it.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.config.lease_ms = millis(lease);
        self
    }

    /// Counts permits in `store` (a fleet's) rather than in this process.
    ///
    /// ```
    /// use toolgraft::ext::Concurrency;
    /// use toolgraft::ext::limit::MemoryLimits;
    /// let limit = Concurrency::at_most(4).with_store(MemoryLimits::new());
    /// # let _ = limit;
    /// ```
    pub fn with_store(mut self, store: impl LimitStore) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// This instance with an element's config, keeping its store (for
    /// [`Refined`](crate::runtime::Refined); see [the module](super)).
    ///
    /// ```
    /// use toolgraft::ext::Concurrency;
    /// use toolgraft::ext::limit::ConcurrencyConfig;
    /// let fleet = Concurrency::at_most(1);
    /// let config = serde_json::from_value::<ConcurrencyConfig>(serde_json::json!({"max": 0}))?;
    /// assert_eq!(fleet.configured(config).unwrap_err().field, "max");
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn configured(&self, config: ConcurrencyConfig) -> Result<Self, ConfigError> {
        let limit = Self::from_parts(config, self.store.clone());
        Extension::check_config(&limit)?;
        Ok(limit)
    }

    fn lease_ttl(&self) -> Duration {
        Duration::from_millis(self.config.lease_ms)
    }

    fn overloaded(&self, tool: &Name, extension: &str, reason: String) -> ToolError {
        ToolError::Overloaded {
            tool: tool.clone(),
            extension: Name::lossy(extension),
            reason,
            retry_after: None,
        }
    }

    fn whom(&self) -> &'static str {
        if self.config.per_principal {
            " for this caller"
        } else {
            ""
        }
    }

    /// Takes a permit, waiting in the queue when there is room.
    async fn acquire(
        &self,
        store: &Arc<dyn LimitStore>,
        key: &LimitKey,
        tool: &Name,
        extension: &str,
    ) -> Result<Lease, ToolError> {
        let max = self.config.max;
        let deadline = self
            .config
            .max_wait_ms
            .map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        let mut place: Option<Place> = None;
        #[cfg(feature = "otel")]
        let arrived = tokio::time::Instant::now();
        loop {
            // Listening before asking: a release between the two still wakes us.
            let mut released = pin!(self.waiting.released.notified());
            released.as_mut().enable();
            match store.acquire(key, max, self.lease_ttl()).await {
                Ok(Some(lease)) => {
                    #[cfg(feature = "otel")]
                    if place.is_some() {
                        super::record_wait(arrived);
                    }
                    return Ok(lease);
                }
                Ok(None) => {}
                Err(error) => return Err(store_failed(tool, extension, &error)),
            }
            if place.is_none() {
                place = Some(
                    Place::take(&self.waiting, key, self.config.queue).ok_or_else(|| {
                        self.overloaded(
                            tool,
                            extension,
                            format!(
                                "all {max} permits{} are taken and the queue of {} is full",
                                self.whom(),
                                self.config.queue
                            ),
                        )
                    })?,
                );
            }
            let poll = tokio::time::Instant::now() + POLL;
            let wake = deadline.map_or(poll, |deadline| deadline.min(poll));
            let _ = future::select(released, pin!(tokio::time::sleep_until(wake))).await;
            if deadline.is_some_and(|deadline| tokio::time::Instant::now() >= deadline) {
                #[cfg(feature = "otel")]
                super::record_wait(arrived);
                match store.acquire(key, max, self.lease_ttl()).await {
                    Ok(Some(lease)) => return Ok(lease),
                    Ok(None) => {}
                    Err(error) => return Err(store_failed(tool, extension, &error)),
                }
                return Err(self.overloaded(
                    tool,
                    extension,
                    format!(
                        "waited {} ms for one of {max} permits{}",
                        self.config.max_wait_ms.unwrap_or_default(),
                        self.whom()
                    ),
                ));
            }
        }
    }
}

/// A queued call's place: given up when it is dropped (admitted, refused or
/// cancelled alike).
struct Place {
    waiting: Arc<Waiting>,
    key: LimitKey,
}

impl Place {
    fn take(waiting: &Arc<Waiting>, key: &LimitKey, queue: u32) -> Option<Self> {
        let mut queued = waiting
            .queued
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let count = queued.entry(key.clone()).or_insert(0);
        if *count >= queue {
            if *count == 0 {
                queued.remove(key);
            }
            return None;
        }
        *count += 1;
        Some(Self {
            waiting: waiting.clone(),
            key: key.clone(),
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut queued = self
            .waiting
            .queued
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = queued.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                queued.remove(&self.key);
            }
        }
    }
}

/// A running call's permit: given back when it is dropped (the call ended or
/// was cancelled), and the waiters of this process woken.
struct Held {
    store: Arc<dyn LimitStore>,
    lease: Option<Lease>,
    waiting: Arc<Waiting>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        let mut released = self.store.release(lease);
        // A store that gives the permit back at once (in process) needs no
        // task: spawning one on every call was half of `concurrency`'s cost.
        if let Some(given_back) = (&mut released).now_or_never() {
            if let Err(error) = given_back {
                tracing::warn!(%error, "a permit could not be given back; its lease expires");
            }
            self.waiting.released.notify_waiters();
            return;
        }
        self.waiting.released.notify_waiters();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let waiting = self.waiting.clone();
            runtime.spawn(async move {
                if let Err(error) = released.await {
                    tracing::warn!(%error, "a permit could not be given back; its lease expires");
                }
                waiting.released.notify_waiters();
            });
        }
    }
}

impl Configurable for Concurrency {
    type Config = ConcurrencyConfig;

    fn from_config(config: ConcurrencyConfig) -> Result<Self, ConfigError> {
        let limit = Self::from_parts(config, None);
        Extension::check_config(&limit)?;
        Ok(limit)
    }
}

impl crate::Extension for Concurrency {
    type Kind = crate::kind::Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "concurrency"
    }

    fn config(&self) -> Option<Value> {
        serde_json::to_value(&self.config).ok()
    }

    fn check_config(&self) -> Result<(), ConfigError> {
        let config = &self.config;
        if config.max == 0 || config.max > MAX_PERMITS {
            return Err(ConfigError::new(
                "max",
                format!(
                    "{} is out of range: use 1 to {MAX_PERMITS} calls at once",
                    config.max
                ),
            ));
        }
        if config.queue > MAX_QUEUE {
            return Err(ConfigError::new(
                "queue",
                format!(
                    "{} is out of range: use 0 to {MAX_QUEUE} waiting calls",
                    config.queue
                ),
            ));
        }
        if let Some(ms) = config.max_wait_ms
            && (ms == 0 || Duration::from_millis(ms) > super::MAX_WAIT)
        {
            return Err(ConfigError::new(
                "max_wait_ms",
                format!(
                    "{ms} is out of range: use 1 ms to {:?} (or none, to wait as long as it takes)",
                    super::MAX_WAIT
                ),
            ));
        }
        let lease = self.lease_ttl();
        if !(MIN_LEASE..=MAX_LEASE).contains(&lease) {
            return Err(ConfigError::new(
                "lease_ms",
                format!(
                    "{lease:?} is out of range: use 1 s to a day (check the unit: milliseconds)"
                ),
            ));
        }
        Ok(())
    }
}

impl<S: Stack> Wrap<S> for Concurrency {
    type Params = ();

    fn for_branch(self, _: &LayerInput<'_, Self>) -> Self {
        let store = self.store.unwrap_or_else(|| Arc::new(MemoryLimits::new()));
        Self::from_parts(self.config, Some(store))
    }

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| next.refuse("the concurrency limit has no store for this branch"))?;
        let key = key_of(next.branch(), self.config.per_principal);
        let lease = self
            .acquire(store, &key, next.branch(), next.extension())
            .await?;
        let held = Held {
            store: store.clone(),
            lease: Some(lease),
            waiting: self.waiting.clone(),
        };
        // The permit is renewed while the call runs (a fleet store's lease).
        let ttl = self.lease_ttl();
        let renewals = async {
            loop {
                tokio::time::sleep(ttl / 3).await;
                if let Some(lease) = &held.lease {
                    match store.renew(lease, ttl).await {
                        Ok(true) => {}
                        Ok(false) => {
                            tracing::warn!(tool = %next.branch(), "a permit's lease expired while its call ran")
                        }
                        Err(error) => {
                            tracing::warn!(tool = %next.branch(), %error, "a permit's lease could not be renewed")
                        }
                    }
                }
            }
        };
        let outcome = match future::select(pin!(next.call(input)), pin!(renewals)).await {
            Either::Left((outcome, _)) => outcome,
            Either::Right((never, _)) => never,
        };
        drop(held);
        outcome
    }
}
