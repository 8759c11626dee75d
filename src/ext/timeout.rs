//! `timeout`: a deadline on every call of the layer below.
//!
//! At the deadline the layer below is cancelled: its future is dropped, so a body
//! stops at its next `.await`, and a [`Pool`](crate::ext::Pool) below aborts its
//! job on the pool's threads. The caller gets [`ToolError::TimedOut`] naming the
//! layer and the limit.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Name;
use crate::error::ToolError;
use crate::extension::{ConfigError, Configurable, Extension, Wrap};
use crate::extension::{Next, Stack};
use crate::kind::property::Anywhere;

/// The operator's side of a timeout: the limit, in milliseconds.
///
/// ```
/// let config: toolgraft::ext::timeout::TimeoutConfig = serde_json::from_str(r#"{"ms": 1500}"#)?;
/// assert_eq!(config.ms, 1500);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutConfig {
    /// How long a call may take, in milliseconds: 1 to [`Timeout::MAX`] (a day).
    pub ms: u64,
}

/// A wrapper that cancels the layer below when a call takes longer than its limit.
///
/// Anywhere in a combo: `[pool, timeout]` bounds the wait for the pool (and aborts
/// the pool's job at the deadline); `[timeout, pool]` runs the deadline on the
/// pool's threads, around the body. A body that blocks its thread without
/// awaiting is not interrupted (nothing in async Rust can do that): run such a
/// body on a `pool` and put the `timeout` outside it, so the caller is answered
/// at the deadline.
///
/// The limit is checked when binding: zero, or more than [`Timeout::MAX`], refuses
/// the tool ([`BindError::InvalidConfig`](crate::BindError::InvalidConfig)). From a
/// manifest it is `{"name": "timeout", "config": {"ms": 2000}}`.
///
/// ```
/// use std::time::Duration;
/// use serde_json::json;
/// use toolgraft::{Tool, ToolError, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::Timeout;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Nap { ms: u64 }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let nap = Tool::builder().name("nap").description("Sleep, then answer.")
///     .body(|input: Nap| async move {
///         tokio::time::sleep(Duration::from_millis(input.ms)).await;
///         Ok("awake")
///     })
///     .build()?;
/// let toolset = Toolset::new();
/// toolset.bind((nap.combo().with(Timeout::new(Duration::from_secs(1))),))?;
///
/// assert_eq!(toolset.call("nap_timeout", json!({"ms": 10})).await?, json!("awake"));
/// let err = toolset.call("nap_timeout", json!({"ms": 5_000})).await.unwrap_err();
/// assert!(matches!(err, ToolError::TimedOut { after, .. } if after == Duration::from_secs(1)));
/// assert_eq!(err.to_string(), "`nap` did not finish within 1s; `timeout` cancelled it");
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeout {
    after: Duration,
}

impl Timeout {
    /// The longest limit an operator may set: one day. A longer one is almost
    /// certainly a unit mistake (seconds written as milliseconds the other way).
    ///
    /// ```
    /// use toolgraft::Extension;
    /// use toolgraft::ext::Timeout;
    /// assert!(Timeout::new(Timeout::MAX).check_config().is_ok());
    /// assert!(Timeout::new(Timeout::MAX * 2).check_config().is_err());
    /// ```
    pub const MAX: Duration = Duration::from_secs(24 * 60 * 60);

    /// A timeout of `after`; checked when it is bound (see [`Timeout::MAX`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolgraft::Extension;
    /// let timeout = toolgraft::ext::Timeout::new(Duration::from_millis(250));
    /// assert_eq!(timeout.config(), Some(serde_json::json!({"ms": 250})));
    /// assert_eq!(timeout.after(), Duration::from_millis(250));
    /// ```
    pub fn new(after: Duration) -> Self {
        Self { after }
    }

    /// The limit.
    pub fn after(&self) -> Duration {
        self.after
    }
}

impl Configurable for Timeout {
    type Config = TimeoutConfig;

    fn from_config(config: TimeoutConfig) -> Result<Self, ConfigError> {
        let timeout = Self::new(Duration::from_millis(config.ms));
        Extension::check_config(&timeout)?;
        Ok(timeout)
    }
}

impl crate::Extension for Timeout {
    type Kind = crate::kind::Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "timeout"
    }

    fn config(&self) -> Option<Value> {
        let ms = u64::try_from(self.after.as_millis()).unwrap_or(u64::MAX);
        serde_json::to_value(TimeoutConfig { ms }).ok()
    }

    fn check_config(&self) -> Result<(), ConfigError> {
        if self.after.is_zero() {
            return Err(ConfigError::new(
                "ms",
                "a limit of 0 would cancel every call; give at least 1 ms",
            ));
        }
        if self.after > Self::MAX {
            return Err(ConfigError::new(
                "ms",
                format!(
                    "{:?} is over the limit of {:?}; check the unit (milliseconds)",
                    self.after,
                    Self::MAX
                ),
            ));
        }
        Ok(())
    }
}

impl<S: Stack> Wrap<S> for Timeout {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        // Dropping the inner future at the deadline is the cancellation.
        match tokio::time::timeout(self.after, next.call(input)).await {
            Ok(result) => result,
            Err(_) => Err(ToolError::TimedOut {
                tool: next.name().clone(),
                extension: Name::lossy(next.extension()),
                job: None,
                after: self.after,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_round_trips_through_config_and_is_checked() {
        let timeout = Timeout::from_config(TimeoutConfig { ms: 1500 }).unwrap();
        assert_eq!(timeout.after(), Duration::from_millis(1500));
        assert_eq!(
            Extension::config(&timeout),
            Some(serde_json::json!({"ms": 1500}))
        );
        for ms in [0, u64::MAX] {
            let err = Timeout::from_config(TimeoutConfig { ms }).unwrap_err();
            assert_eq!(err.field, "ms");
        }
        assert!(Timeout::from_config(TimeoutConfig { ms: 86_400_000 }).is_ok());
        assert!(Timeout::from_config(TimeoutConfig { ms: 86_400_001 }).is_err());
    }
}
