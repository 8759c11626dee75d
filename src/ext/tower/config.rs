//! tower's own limits, ready to register: the operator's configs, each number
//! checked when a combo is bound.

use std::time::Duration;

use ::tower::layer::util::{Identity, Stack};
use ::tower::limit::{ConcurrencyLimitLayer, RateLimitLayer};
use ::tower::load_shed::LoadShedLayer;
use ::tower::timeout::TimeoutLayer;
use ::tower::util::Either;
use serde::{Deserialize, Serialize};

use super::Tower;
use crate::extension::ConfigError;
use crate::runtime::Configured;

/// The longest period or limit an operator may write: one day. A longer one is
/// almost certainly a unit mistake.
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// A limit `L`, with tower's `LoadShed` outside it or not: what [`shed`] makes.
/// Shed, a call that finds the limit full is refused
/// ([`ToolError::Overloaded`](crate::ToolError::Overloaded)) instead of waiting.
/// `LoadShed` must be in the same layer as the limit: in a wrapper of its own, it
/// would see a [`Below`](super::Below), which is always ready.
pub type Shed<L> = Stack<L, Either<LoadShedLayer, Identity>>;

/// `layer`, shed when `load_shed` is set (see [`Shed`]).
///
/// ```
/// use tower::limit::ConcurrencyLimitLayer;
/// use toolgraft::ext::tower::{Tower, shed};
/// let refusing = Tower::new("four_or_refuse", shed(ConcurrencyLimitLayer::new(4), true));
/// # let _ = refusing;
/// ```
pub fn shed<L>(layer: L, load_shed: bool) -> Shed<L> {
    let outside = if load_shed {
        Either::Left(LoadShedLayer::new())
    } else {
        Either::Right(Identity::new())
    };
    Stack::new(layer, outside)
}

/// The operator's side of tower's `ConcurrencyLimit`:
/// `{"max": 4, "load_shed": false}`.
///
/// ```
/// use toolgraft::ext::tower::ConcurrencyLimitConfig;
/// let config: ConcurrencyLimitConfig = serde_json::from_str(r#"{"max": 4}"#)?;
/// assert!(config.layer().is_ok());
/// let err = ConcurrencyLimitConfig { max: 0, load_shed: false }.layer().unwrap_err();
/// assert_eq!(err.field, "max");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyLimitConfig {
    /// How many calls of the branch may run at once: 1 to
    /// [`ConcurrencyLimitConfig::MAX`].
    pub max: usize,
    /// Refuse the calls over the limit instead of queueing them (see [`Shed`]).
    #[serde(default)]
    pub load_shed: bool,
}

impl ConcurrencyLimitConfig {
    /// The highest `max` an operator may write.
    ///
    /// ```
    /// use toolgraft::ext::tower::ConcurrencyLimitConfig;
    /// assert!(ConcurrencyLimitConfig { max: ConcurrencyLimitConfig::MAX + 1, load_shed: false }.layer().is_err());
    /// ```
    pub const MAX: usize = 100_000;

    /// The layer, once the config is checked.
    ///
    /// ```
    /// use toolgraft::ext::tower::{ConcurrencyLimitConfig, Tower};
    /// let config = ConcurrencyLimitConfig { max: 2, load_shed: true };
    /// let two = Tower::new("two", config.layer()?);
    /// # let _ = two;
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn layer(self) -> Result<Shed<ConcurrencyLimitLayer>, ConfigError> {
        if self.max == 0 {
            return Err(ConfigError::new(
                "max",
                "0 would never admit a call; give at least 1",
            ));
        }
        if self.max > Self::MAX {
            return Err(ConfigError::new(
                "max",
                format!("{} is over the limit of {}", self.max, Self::MAX),
            ));
        }
        Ok(shed(ConcurrencyLimitLayer::new(self.max), self.load_shed))
    }
}

/// The operator's side of tower's `RateLimit`: `num` calls per `per_ms`
/// milliseconds, `{"num": 10, "per_ms": 1000, "load_shed": false}`. A call over
/// the rate waits for the next window (or, shed, is refused).
///
/// ```
/// use toolgraft::ext::tower::RateLimitConfig;
/// let config: RateLimitConfig = serde_json::from_str(r#"{"num": 10, "per_ms": 1000}"#)?;
/// assert!(config.layer().is_ok());
/// let err = RateLimitConfig { per_ms: 0, ..config }.layer().unwrap_err();
/// assert_eq!(err.field, "per_ms");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// How many calls each window admits: 1 to [`RateLimitConfig::MAX_NUM`].
    pub num: u64,
    /// The window, in milliseconds: 1 to a day.
    pub per_ms: u64,
    /// Refuse the calls over the rate instead of holding them (see [`Shed`]).
    #[serde(default)]
    pub load_shed: bool,
}

impl RateLimitConfig {
    /// The highest `num` an operator may write.
    ///
    /// ```
    /// use toolgraft::ext::tower::RateLimitConfig;
    /// let config = RateLimitConfig { num: RateLimitConfig::MAX_NUM + 1, per_ms: 1000, load_shed: false };
    /// assert_eq!(config.layer().unwrap_err().field, "num");
    /// ```
    pub const MAX_NUM: u64 = 1_000_000;

    /// The layer, once the config is checked (tower's `Rate` panics on a zero).
    ///
    /// ```
    /// use toolgraft::ext::tower::{RateLimitConfig, Tower};
    /// let config = RateLimitConfig { num: 5, per_ms: 1000, load_shed: false };
    /// let five = Tower::new("five_a_second", config.layer()?);
    /// # let _ = five;
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn layer(self) -> Result<Shed<RateLimitLayer>, ConfigError> {
        if self.num == 0 {
            return Err(ConfigError::new(
                "num",
                "0 would never admit a call; give at least 1",
            ));
        }
        if self.num > Self::MAX_NUM {
            return Err(ConfigError::new(
                "num",
                format!("{} is over the limit of {}", self.num, Self::MAX_NUM),
            ));
        }
        let per = millis("per_ms", self.per_ms)?;
        Ok(shed(RateLimitLayer::new(self.num, per), self.load_shed))
    }
}

/// The operator's side of tower's `Timeout`: `{"ms": 2000}`.
///
/// ```
/// use toolgraft::ext::tower::TimeoutConfig;
/// assert!(TimeoutConfig { ms: 2000 }.layer().is_ok());
/// assert_eq!(TimeoutConfig { ms: 0 }.layer().unwrap_err().field, "ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutConfig {
    /// How long a call may take, in milliseconds: 1 to a day.
    pub ms: u64,
}

impl TimeoutConfig {
    /// The layer, once the config is checked.
    ///
    /// ```
    /// use toolgraft::ext::tower::{TimeoutConfig, Tower};
    /// let deadline = Tower::new("deadline", TimeoutConfig { ms: 500 }.layer()?);
    /// # let _ = deadline;
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn layer(self) -> Result<TimeoutLayer, ConfigError> {
        Ok(TimeoutLayer::new(millis("ms", self.ms)?))
    }
}

/// `ms` as a duration, 1 ms to a day.
fn millis(field: &str, ms: u64) -> Result<Duration, ConfigError> {
    let duration = Duration::from_millis(ms);
    if duration.is_zero() {
        return Err(ConfigError::new(
            field,
            "0 ms is no time at all; give at least 1",
        ));
    }
    if duration > DAY {
        return Err(ConfigError::new(
            field,
            format!("{duration:?} is over the limit of {DAY:?}; check the unit (milliseconds)"),
        ));
    }
    Ok(duration)
}

/// tower's `ConcurrencyLimit`, registered as `tower_concurrency_limit` and built
/// from a [`ConcurrencyLimitConfig`].
///
/// ```
/// let mut registry = toolgraft::Registry::new();
/// registry.register(toolgraft::ext::tower::concurrency_limit())?;
/// assert_eq!(registry.catalogue()[0].name, "tower_concurrency_limit");
/// # Ok::<(), toolgraft::runtime::RegistryError>(())
/// ```
pub fn concurrency_limit() -> Configured<Tower<Shed<ConcurrencyLimitLayer>>> {
    Tower::configured("tower_concurrency_limit", ConcurrencyLimitConfig::layer)
}

/// tower's `RateLimit`, registered as `tower_rate_limit` and built from a
/// [`RateLimitConfig`].
///
/// ```
/// let mut registry = toolgraft::Registry::new();
/// registry.register(toolgraft::ext::tower::rate_limit())?;
/// assert_eq!(registry.catalogue()[0].name, "tower_rate_limit");
/// # Ok::<(), toolgraft::runtime::RegistryError>(())
/// ```
pub fn rate_limit() -> Configured<Tower<Shed<RateLimitLayer>>> {
    Tower::configured("tower_rate_limit", RateLimitConfig::layer)
}

/// tower's `Timeout`, registered as `tower_timeout` and built from a
/// [`TimeoutConfig`] (the built-in [`Timeout`](crate::ext::Timeout) is the same
/// deadline without tower).
///
/// ```
/// let mut registry = toolgraft::Registry::new();
/// registry.register(toolgraft::ext::tower::timeout())?;
/// assert_eq!(registry.catalogue()[0].name, "tower_timeout");
/// # Ok::<(), toolgraft::runtime::RegistryError>(())
/// ```
pub fn timeout() -> Configured<Tower<TimeoutLayer>> {
    Tower::configured("tower_timeout", TimeoutConfig::layer)
}
