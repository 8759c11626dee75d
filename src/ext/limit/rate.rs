//! `rate_limit`: at most so many calls of a branch per period (GCRA), per
//! caller or for all, refused with the time to retry.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{LimitStore, MemoryLimits, key_of, millis, store_failed};
use crate::Name;
use crate::error::ToolError;
use crate::extension::{ConfigError, Configurable, Extension, LayerInput, Next, Stack, Wrap};
use crate::kind::property::Anywhere;

use super::Admission;

/// The most calls a rate may allow per period, and the largest burst.
const MAX_CALLS: u32 = 1_000_000;

/// The longest period (a day): a longer one is almost certainly a unit mistake.
const MAX_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);

/// The shortest spacing of two calls a rate may ask.
const MIN_INTERVAL: Duration = Duration::from_micros(1);

/// A checked rate: `calls` per `per`, of which `burst` (`calls` unless set) may
/// come at once after a quiet spell, then one every [`interval`](Rate::interval)
/// (`per / calls`). What a [`LimitStore`] counts against, and the one place its
/// rule lives: a store runs GCRA with this [`interval`](Rate::interval) and
/// [`tolerance`](Rate::tolerance), whatever it keeps its counts in, so every
/// store admits the same calls.
///
/// A rate of 2 a second admits 2 calls at once, then one every 500 ms; with a
/// burst of 1 it admits one every 500 ms, never two at once.
///
/// ```
/// use std::time::Duration;
/// use toolgraft::ext::limit::Rate;
/// let rate = Rate::new(5, Duration::from_secs(1))?;
/// assert_eq!((rate.interval(), rate.burst()), (Duration::from_millis(200), 5));
/// let bursty = rate.with_burst(10)?;
/// assert_eq!(bursty.tolerance(), Duration::from_millis(1800));
/// assert_eq!(bursty.to_string(), "5 calls per 1s (bursts of up to 10, then one every 200ms)");
/// assert_eq!(Rate::new(0, Duration::from_secs(1)).unwrap_err().field, "calls");
/// # Ok::<(), toolgraft::extension::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    calls: u32,
    per: Duration,
    burst: NonZeroU32,
}

impl Rate {
    /// `calls` per `per`, with a burst of `calls` (a period's calls may come at
    /// once): 1 to 1,000,000 calls, per 1 ms to a day, at most one call a
    /// microsecond.
    pub fn new(calls: u32, per: Duration) -> Result<Self, ConfigError> {
        if calls == 0 || calls > MAX_CALLS {
            return Err(ConfigError::new(
                "calls",
                format!("{calls} is out of range: use 1 to {MAX_CALLS} calls a period"),
            ));
        }
        if per < Duration::from_millis(1) || per > MAX_PERIOD {
            return Err(ConfigError::new(
                "period_ms",
                format!(
                    "{per:?} is out of range: use 1 ms to a day (check the unit: milliseconds)"
                ),
            ));
        }
        let rate = Self {
            calls,
            per,
            // `calls` is 1 or more here.
            burst: NonZeroU32::new(calls).unwrap_or(NonZeroU32::MIN),
        };
        if rate.interval() < MIN_INTERVAL {
            return Err(ConfigError::new(
                "calls",
                format!("{calls} calls per {per:?} is more than one a microsecond"),
            ));
        }
        Ok(rate)
    }

    /// The same rate, `burst` calls of which may come at once (1 to 1,000,000).
    pub fn with_burst(self, burst: u32) -> Result<Self, ConfigError> {
        let burst = NonZeroU32::new(burst)
            .filter(|burst| burst.get() <= MAX_CALLS)
            .ok_or_else(|| {
                ConfigError::new(
                    "burst",
                    format!("{burst} is out of range: use 1 to {MAX_CALLS} calls at once"),
                )
            })?;
        Ok(Self { burst, ..self })
    }

    /// Calls per period.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// The period.
    pub fn per(&self) -> Duration {
        self.per
    }

    /// How many calls may come at once.
    pub fn burst(&self) -> u32 {
        self.burst.get()
    }

    pub(super) fn burst_nonzero(&self) -> NonZeroU32 {
        self.burst
    }

    /// The spacing of calls at the rate: `per / calls`.
    pub fn interval(&self) -> Duration {
        self.per / self.calls
    }

    /// How far ahead of the rate a key may run (GCRA's tolerance): `interval ×
    /// (burst − 1)`. A call is admitted when the key's theoretical arrival time
    /// is at most this far from now.
    pub fn tolerance(&self) -> Duration {
        self.interval().saturating_mul(self.burst.get() - 1)
    }
}

/// The rate as a refusal states it: what is enforced, burst included.
impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let calls = match self.calls {
            1 => "1 call".to_owned(),
            calls => format!("{calls} calls"),
        };
        write!(
            f,
            "{calls} per {:?} (bursts of up to {}, then one every {:?})",
            self.per,
            self.burst,
            self.interval()
        )
    }
}

/// The operator's side of a rate limit.
///
/// | field | default | range |
/// |---|---|---|
/// | `calls` | (required) | 1 to 1,000,000 a period |
/// | `period_ms` | 1,000 | 1 ms to a day |
/// | `burst` | `calls` | 1 to 1,000,000 |
/// | `per_principal` | `false` | a limit per caller, or one for all |
/// | `max_wait_ms` | 0 (refuse at once) | up to [`MAX_WAIT`](super::MAX_WAIT) |
/// | `max_keys` | 10,000 | 1 to [`MAX_KEYS`](super::MAX_KEYS) (in-process store) |
///
/// ```
/// let config: toolgraft::ext::limit::RateLimitConfig =
///     serde_json::from_str(r#"{"calls": 5, "burst": 10, "per_principal": true}"#)?;
/// assert_eq!((config.calls, config.period_ms, config.burst), (5, 1000, Some(10)));
/// assert!(serde_json::from_str::<toolgraft::ext::limit::RateLimitConfig>(r#"{"calls": 5, "rate": 1}"#).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Calls admitted per period.
    pub calls: u32,
    /// The period, in milliseconds.
    #[serde(default = "second")]
    pub period_ms: u64,
    /// How many calls may come at once after a quiet spell (`calls` when
    /// left out): with a burst of `b`, a period sees at most `calls + b - 1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// A limit per caller (the call context's principal), or one for all.
    #[serde(default)]
    pub per_principal: bool,
    /// How long a call over the limit may wait to be admitted instead of
    /// being refused at once.
    #[serde(default)]
    pub max_wait_ms: u64,
    /// How many callers the in-process store tracks at once (a fleet store
    /// bounds its keys itself).
    #[serde(default = "max_keys")]
    pub max_keys: usize,
}

fn second() -> u64 {
    1000
}

fn max_keys() -> usize {
    MemoryLimits::DEFAULT_MAX_KEYS
}

/// A wrapper that admits at most `calls` per period of its branch (GCRA, on
/// governor in process), per caller with [`with_per_principal`](RateLimit::with_per_principal);
/// over it, [`ToolError::Overloaded`] with the exact time to retry.
///
/// A period's `calls` may come at once after a quiet spell, then one every
/// `period / calls` (GCRA, as a [`Rate`] says); a
/// [`with_burst`](RateLimit::with_burst) of `b` lets `b` come at once instead (so a
/// period sees at most `calls + b - 1`; 1 spaces every call). A refusal says the
/// rate as enforced, burst included. Refused calls are not counted.
/// By default a call over the limit is refused at once;
/// [`with_wait_up_to`](RateLimit::with_wait_up_to) lets it wait for its turn when that
/// comes soon enough.
///
/// Counts live in this process unless [`with_store`](RateLimit::with_store) names one a
/// fleet shares (see [the module](super)). From a manifest:
/// `{"name": "rate_limit", "config": {"calls": 5, "burst": 10}}`
/// ([`RateLimitConfig`]), checked when it is bound.
///
/// ```
/// use std::time::Duration;
/// use serde_json::json;
/// use toolgraft::{Tool, ToolError, Toolset};
/// use toolgraft::ext::RateLimit;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Ping {}
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ping = Tool::builder().name("ping").description("Pong.")
///     .body(|_: Ping| async { Ok("pong") }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((ping.combo().with(RateLimit::per_second(2).with_per_principal()),))?;
///
/// toolset.call("ping_rate_limit", json!({})).await?;
/// toolset.call("ping_rate_limit", json!({})).await?; // 2 a second: both at once
/// let err = toolset.call("ping_rate_limit", json!({})).await.unwrap_err();
/// assert!(matches!(err, ToolError::Overloaded { retry_after: Some(after), .. } if after == Duration::from_millis(500)));
/// assert!(err.to_string().contains("over 2 calls per 1s (bursts of up to 2, then one every 500ms) for this caller"));
/// assert!(err.is_transient());
/// tokio::time::sleep(Duration::from_millis(500)).await;
/// toolset.call("ping_rate_limit", json!({})).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RateLimit {
    config: RateLimitConfig,
    store: Option<Arc<dyn LimitStore>>,
}

impl RateLimit {
    /// `calls` per `per` (all of which may come at once unless
    /// [`with_burst`](RateLimit::with_burst) says), one limit for all callers;
    /// checked when bound.
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolgraft::Extension;
    /// let limit = toolgraft::ext::RateLimit::new(100, Duration::from_secs(60));
    /// assert_eq!(limit.config(), Some(serde_json::json!({"calls": 100, "period_ms": 60000,
    ///     "per_principal": false, "max_wait_ms": 0, "max_keys": 10000})));
    /// ```
    pub fn new(calls: u32, per: Duration) -> Self {
        Self {
            config: RateLimitConfig {
                calls,
                period_ms: millis(per),
                burst: None,
                per_principal: false,
                max_wait_ms: 0,
                max_keys: MemoryLimits::DEFAULT_MAX_KEYS,
            },
            store: None,
        }
    }

    /// `calls` a second.
    ///
    /// ```
    /// let limit = toolgraft::ext::RateLimit::per_second(5).with_burst(10);
    /// # let _ = limit;
    /// ```
    pub fn per_second(calls: u32) -> Self {
        Self::new(calls, Duration::from_secs(1))
    }

    /// `calls` a minute.
    ///
    /// ```
    /// let limit = toolgraft::ext::RateLimit::per_minute(60).with_per_principal();
    /// # let _ = limit;
    /// ```
    pub fn per_minute(calls: u32) -> Self {
        Self::new(calls, Duration::from_secs(60))
    }

    /// Lets `burst` calls come at once after a quiet spell, rather than the
    /// rate's `calls` (1 to 1,000,000, checked when bound).
    ///
    /// ```
    /// let rate = toolgraft::ext::RateLimit::per_second(5).with_burst(1).rate()?;
    /// assert_eq!(rate.burst(), 1);
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn with_burst(mut self, burst: u32) -> Self {
        self.config.burst = Some(burst);
        self
    }

    /// A limit per caller (the call context's
    /// [`Principal`](crate::context::Principal); calls without one share one
    /// anonymous limit).
    pub fn with_per_principal(mut self) -> Self {
        self.config.per_principal = true;
        self
    }

    /// Lets a call over the limit wait for its turn when that comes within
    /// `wait` (up to [`MAX_WAIT`](super::MAX_WAIT)), instead of refusing it.
    ///
    /// ```
    /// use std::time::Duration;
    /// let limit = toolgraft::ext::RateLimit::per_second(5).with_wait_up_to(Duration::from_millis(300));
    /// # let _ = limit;
    /// ```
    pub fn with_wait_up_to(mut self, wait: Duration) -> Self {
        self.config.max_wait_ms = millis(wait);
        self
    }

    /// How many callers the in-process store tracks at once (see
    /// [`MemoryLimits`]).
    pub fn with_max_keys(mut self, max_keys: usize) -> Self {
        self.config.max_keys = max_keys;
        self
    }

    /// Counts in `store` (a fleet's, shared by every replica) rather than in
    /// this process. Every branch bound with this instance shares the store;
    /// each counts under its own branch's name.
    ///
    /// ```
    /// use toolgraft::ext::RateLimit;
    /// use toolgraft::ext::limit::MemoryLimits;
    /// let shared = MemoryLimits::new();
    /// let limit = RateLimit::per_second(5).with_store(shared.clone());
    /// # let _ = limit;
    /// ```
    pub fn with_store(mut self, store: impl LimitStore) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// This instance with an element's config, keeping its store: what
    /// [`Refined`](crate::runtime::Refined) takes, so manifest elements count
    /// in a fleet's store.
    ///
    /// ```
    /// use toolgraft::Registry;
    /// use toolgraft::ext::RateLimit;
    /// use toolgraft::ext::limit::MemoryLimits;
    /// use toolgraft::runtime::Refined;
    /// let fleet = MemoryLimits::new(); // `toolgraft_jobs::RedisLimits` for a fleet
    /// let mut registry = Registry::new();
    /// registry.register(Refined::new(RateLimit::per_second(1).with_store(fleet), RateLimit::configured))?;
    /// # Ok::<(), toolgraft::runtime::RegistryError>(())
    /// ```
    pub fn configured(&self, config: RateLimitConfig) -> Result<Self, ConfigError> {
        let limit = Self {
            config,
            store: self.store.clone(),
        };
        Extension::check_config(&limit)?;
        Ok(limit)
    }

    /// The checked rate.
    ///
    /// ```
    /// let rate = toolgraft::ext::RateLimit::per_second(4).with_burst(2).rate()?;
    /// assert_eq!(rate.interval(), std::time::Duration::from_millis(250));
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn rate(&self) -> Result<Rate, ConfigError> {
        let rate = Rate::new(
            self.config.calls,
            Duration::from_millis(self.config.period_ms),
        )?;
        match self.config.burst {
            Some(burst) => rate.with_burst(burst),
            None => Ok(rate),
        }
    }

    fn reason(&self, rate: &Rate) -> String {
        let whom = if self.config.per_principal {
            " for this caller"
        } else {
            ""
        };
        format!("over {rate}{whom}")
    }
}

impl Configurable for RateLimit {
    type Config = RateLimitConfig;

    fn from_config(config: RateLimitConfig) -> Result<Self, ConfigError> {
        let limit = Self {
            config,
            store: None,
        };
        Extension::check_config(&limit)?;
        Ok(limit)
    }
}

impl crate::Extension for RateLimit {
    type Kind = crate::kind::Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "rate_limit"
    }

    fn config(&self) -> Option<Value> {
        serde_json::to_value(&self.config).ok()
    }

    fn check_config(&self) -> Result<(), ConfigError> {
        self.rate()?;
        if Duration::from_millis(self.config.max_wait_ms) > super::MAX_WAIT {
            return Err(ConfigError::new(
                "max_wait_ms",
                format!(
                    "{} ms is over the limit of {:?}; a caller kept that long is better refused",
                    self.config.max_wait_ms,
                    super::MAX_WAIT
                ),
            ));
        }
        if self.config.max_keys == 0 || self.config.max_keys > super::MAX_KEYS {
            return Err(ConfigError::new(
                "max_keys",
                format!(
                    "{} is out of range: use 1 to {}",
                    self.config.max_keys,
                    super::MAX_KEYS
                ),
            ));
        }
        Ok(())
    }
}

impl<S: Stack> Wrap<S> for RateLimit {
    type Params = ();

    fn for_branch(mut self, _: &LayerInput<'_, Self>) -> Self {
        if self.store.is_none() {
            self.store = Some(Arc::new(
                MemoryLimits::new().with_max_keys(self.config.max_keys),
            ));
        }
        self
    }

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let rate = self
            .rate()
            .map_err(|error| next.refuse(error.to_string()))?;
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| next.refuse("the rate limit has no store for this branch"))?;
        let key = key_of(next.branch(), self.config.per_principal);
        let arrived = tokio::time::Instant::now();
        let deadline = arrived + Duration::from_millis(self.config.max_wait_ms);
        #[cfg(feature = "otel")]
        let mut waited = false;
        loop {
            match store.admit(&key, rate).await {
                Ok(Admission::Admitted) => {
                    #[cfg(feature = "otel")]
                    if waited {
                        super::record_wait(arrived);
                    }
                    return next.call(input).await;
                }
                Ok(Admission::Refused { retry_after }) => {
                    let at = tokio::time::Instant::now() + retry_after;
                    if at <= deadline {
                        tokio::time::sleep_until(at).await;
                        #[cfg(feature = "otel")]
                        {
                            waited = true;
                        }
                        continue;
                    }
                    #[cfg(feature = "otel")]
                    if waited {
                        super::record_wait(arrived);
                    }
                    tracing::debug!(tool = %next.branch(), caller = %key.caller(), ?retry_after, "rate limit refused a call");
                    return Err(ToolError::Overloaded {
                        tool: next.branch().clone(),
                        extension: Name::lossy(next.extension()),
                        reason: self.reason(&rate),
                        retry_after: Some(retry_after),
                    });
                }
                Err(error) => return Err(store_failed(next.branch(), next.extension(), &error)),
            }
        }
    }
}
