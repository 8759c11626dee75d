//! `retry`: makes a call again when it failed for a reason that may pass, on tools
//! whose hints say a second call does no more than the first.
//!
//! A typed `retry` over a tool that is not [`read_only`](crate::tool::ToolBuilder::read_only)
//! or [`idempotent`](crate::tool::ToolBuilder::idempotent) does not compile; a
//! manifest's is refused when bound (rule `side-effects` in the
//! [rulebook](crate::rulebook)). It retries only [transient](ToolError::is_transient)
//! errors: the job engine unreachable, a call timed out, a limit that refused it,
//! or a body's error marked [`Transient`](crate::error::Transient); never invalid
//! arguments, a panic, or a body's own error.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

use crate::context::{self, Entry, Serialized, Unkeyed};
use crate::error::ToolError;
use crate::extension::{ConfigError, Configurable, Extension, Resendable, Wrap};
use crate::extension::{Next, Stack};
use crate::kind::property::Anywhere;
use crate::tool::{Demand, Hinted, Repeatable};

/// The operator's side of a retry.
///
/// | field | default | range |
/// |---|---|---|
/// | `attempts` | 3 (the first call and two more) | 1 to [`Retry::MAX_ATTEMPTS`] |
/// | `backoff_ms` | 100: the wait before the second attempt | 1 to `max_backoff_ms` |
/// | `max_backoff_ms` | 5,000: no wait is longer | up to [`Retry::MAX_WAIT_MS`] |
/// | `deadline_ms` | 30,000: no attempt starts later than this after the first | 1 to [`Retry::MAX_WAIT_MS`] |
///
/// Each wait doubles the one before, up to `max_backoff_ms`, and is drawn at
/// random between half of it and all of it (jitter: callers that failed together
/// do not come back together). A limit that says when to come back
/// ([`ToolError::Overloaded`]'s `retry_after`) is waited for instead, when longer.
///
/// ```
/// let config: toolgraft::ext::retry::RetryConfig = serde_json::from_str(r#"{"attempts": 5}"#)?;
/// assert_eq!((config.attempts, config.backoff_ms), (5, 100));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    /// How many calls at most, the first included.
    pub attempts: u32,
    /// The wait before the second call, in milliseconds.
    pub backoff_ms: u64,
    /// The longest wait between two calls, in milliseconds.
    pub max_backoff_ms: u64,
    /// How long after the first call the last may start, in milliseconds.
    pub deadline_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            attempts: 3,
            backoff_ms: 100,
            max_backoff_ms: 5_000,
            deadline_ms: 30_000,
        }
    }
}

/// A wrapper that makes a call again after a [transient](ToolError::is_transient)
/// failure, with backoff and jitter, within a number of attempts and a deadline;
/// the last failure is the caller's answer.
///
/// It binds only on a layer whose hints are read-only or idempotent (rule
/// `side-effects`): typed, `Tool::builder()..idempotent()`; from a manifest, the
/// tool's own hints or the entry's `"annotations": {"idempotentHint": true}`.
/// Around a backend, each attempt is one more job; the attempt a call is on is
/// in its [context] as an [`Attempt`], for the layers inside,
/// in worker processes too: a backend that runs a job again (`toolgraft-jobs`,
/// when a worker dies mid-job) counts that run against the same attempts, so
/// the body runs at most `attempts` times for one call.
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicU32, Ordering}};
/// use serde_json::json;
/// use toolgraft::prelude::*;
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::error::Transient;
/// use toolgraft::ext::Retry;
/// # #[derive(serde::Deserialize, schemars::JsonSchema, Clone)] struct Query { q: String }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let calls = Arc::new(AtomicU32::new(0));
/// let seen = calls.clone();
/// let search = Tool::builder().name("search").description("Search the index.")
///     .read_only()
///     .body(move |i: Query| {
///         let call = seen.fetch_add(1, Ordering::SeqCst);
///         async move {
///             if call < 2 { return Err(Transient::new("the index is warming up").into()); }
///             Ok(i.q)
///         }
///     })
///     .build()?;
/// let toolset = Toolset::new();
/// toolset.bind((search.combo().with(Retry::attempts(3)),))?;
/// assert_eq!(toolset.call("search_retry", json!({"q": "rust"})).await?, json!("rust"));
/// assert_eq!(calls.load(Ordering::SeqCst), 3);
/// # Ok(()) }
/// ```
///
/// On a tool that does not say a second call is safe, it does not compile:
///
/// ```compile_fail
/// # use toolgraft::prelude::*;
/// # use toolgraft::{Tool, Toolset};
/// # use toolgraft::ext::Retry;
/// # #[derive(serde::Deserialize, schemars::JsonSchema, Clone)] struct Mail { to: String }
/// let send = Tool::builder().name("send").description("Send a mail.")
///     .body(|m: Mail| async move { Ok(m.to) }).build().unwrap();
/// Toolset::new().bind((send.combo().with(Retry::default()),));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retry {
    config: RetryConfig,
}

impl Retry {
    /// The most attempts an operator may set.
    ///
    /// ```
    /// use toolgraft::Extension;
    /// use toolgraft::ext::Retry;
    /// assert!(Retry::attempts(Retry::MAX_ATTEMPTS + 1).check_config().is_err());
    /// ```
    pub const MAX_ATTEMPTS: u32 = 20;

    /// The longest wait or deadline an operator may set, in milliseconds (an hour).
    pub const MAX_WAIT_MS: u64 = 3_600_000;

    /// A retry with the given config.
    ///
    /// ```
    /// use toolgraft::ext::{Retry, retry::RetryConfig};
    /// let retry = Retry::new(RetryConfig { deadline_ms: 2_000, ..RetryConfig::default() });
    /// # let _ = retry;
    /// ```
    pub fn new(config: RetryConfig) -> Self {
        Self { config }
    }

    /// A retry of at most `attempts` calls, the first included, with the
    /// default backoff and deadline.
    ///
    /// ```
    /// let retry = toolgraft::ext::Retry::attempts(5);
    /// # let _ = retry;
    /// ```
    pub fn attempts(attempts: u32) -> Self {
        Self::new(RetryConfig {
            attempts,
            ..RetryConfig::default()
        })
    }

    /// The wait before attempt `next` (2 for the second call): the backoff
    /// doubled per attempt before, capped, drawn between half of it and all of it.
    fn backoff(&self, next: u32) -> Duration {
        let doublings = next.saturating_sub(2).min(32);
        let full = self
            .config
            .backoff_ms
            .saturating_mul(1 << doublings)
            .min(self.config.max_backoff_ms);
        let half = full / 2;
        let drawn = getrandom::u64().map_or(0, |random| random % (full - half + 1));
        Duration::from_millis(half + drawn)
    }
}

/// Which attempt of a [`Retry`] a call is: what the layers inside read (a job's
/// log line, a backend that counts a redelivery as one more attempt). `number`
/// is 1 for the first call; `call` names the retried call, the same on each of
/// its attempts.
///
/// It travels to worker processes ([`Serialized`]): a job backend that runs a
/// job again (its worker died) counts that run against the same `of`, so the
/// body runs at most `of` times for one call, attempts and redeliveries
/// together (`toolgraft-jobs` does).
///
/// ```
/// use toolgraft::context;
/// use toolgraft::ext::retry::Attempt;
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// assert_eq!(context::get::<Attempt>(), None);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// This attempt, from 1.
    pub number: u32,
    /// How many runs the retry allows at most.
    pub of: u32,
    /// The retried call: 32 hex digits, unique across a fleet, the same on
    /// every attempt.
    pub call: String,
    /// What the layers below counted in this attempt (`once`'s calls).
    #[serde(skip)]
    occurrences: crate::context::Occurrences,
}

impl Attempt {
    /// Counts `what` once more in this attempt: the count before (0 the first
    /// time). Each attempt counts from 0, so the calls an attempt makes in the
    /// same order as the one before get the same counts.
    #[cfg(feature = "once")]
    pub(crate) fn occurrence(&self, what: &str) -> u64 {
        self.occurrences.next(what)
    }
}

impl Attempt {
    /// The longest `call` a backend should take from a job: a job's context
    /// is a caller's word, and a store's key is made of it.
    pub const MAX_CALL_LEN: usize = 64;
}

impl Entry for Attempt {
    const NAME: &'static str = "toolgraft.retry.attempt";
    type Travel = Serialized;
    type Key = Unkeyed;
}

/// A new call's name, unique across a fleet: 64 random bits drawn once per
/// process, then a count of the process's retried calls (32 hex digits). Not a
/// secret: it only tells attempts of one call from another's. Drawing randomness
/// on every call was most of `retry`'s cost (two system calls).
fn call_name() -> String {
    static PROCESS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let process = *PROCESS.get_or_init(|| {
        getrandom::u64().unwrap_or_else(|_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos() as u64)
                ^ u64::from(std::process::id())
        })
    });
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{process:016x}{call:016x}")
}

impl Configurable for Retry {
    type Config = RetryConfig;

    fn from_config(config: RetryConfig) -> Result<Self, ConfigError> {
        let retry = Self::new(config);
        Extension::check_config(&retry)?;
        Ok(retry)
    }
}

impl crate::Extension for Retry {
    type Kind = crate::kind::Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "retry"
    }

    fn demands(&self) -> Option<Demand> {
        Some(Demand::Repeatable)
    }

    fn config(&self) -> Option<Value> {
        (self.config != RetryConfig::default())
            .then(|| serde_json::to_value(self.config).ok())
            .flatten()
    }

    fn check_config(&self) -> Result<(), ConfigError> {
        let RetryConfig {
            attempts,
            backoff_ms,
            max_backoff_ms,
            deadline_ms,
        } = self.config;
        let max = Self::MAX_WAIT_MS;
        if !(1..=Self::MAX_ATTEMPTS).contains(&attempts) {
            return Err(ConfigError::new(
                "attempts",
                format!(
                    "{attempts} is out of range: use 1 to {}",
                    Self::MAX_ATTEMPTS
                ),
            ));
        }
        if !(1..=max).contains(&max_backoff_ms) {
            return Err(ConfigError::new(
                "max_backoff_ms",
                format!("{max_backoff_ms} is out of range: use 1 to {max} ms"),
            ));
        }
        if !(1..=max_backoff_ms).contains(&backoff_ms) {
            return Err(ConfigError::new(
                "backoff_ms",
                format!(
                    "{backoff_ms} is out of range: use 1 to `max_backoff_ms` ({max_backoff_ms} ms)"
                ),
            ));
        }
        if !(1..=max).contains(&deadline_ms) {
            return Err(ConfigError::new(
                "deadline_ms",
                format!("{deadline_ms} is out of range: use 1 to {max} ms"),
            ));
        }
        Ok(())
    }
}

impl<S> Wrap<S> for Retry
where
    S: Hinted<Hints: Repeatable> + Stack<Input: Resendable>,
{
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let of = self.config.attempts;
        let deadline = Instant::now() + Duration::from_millis(self.config.deadline_ms);
        let call = call_name();
        let mut number = 1;
        loop {
            let attempt = Attempt {
                number,
                of,
                call: call.clone(),
                occurrences: Default::default(),
            };
            #[cfg(feature = "otel")]
            {
                // An event of the span only (not a log line a `fmt` subscriber would
                // print for every call), its attempt a signed integer, as
                // OpenTelemetry's integers are.
                use tracing_opentelemetry::OpenTelemetrySpanExt as _;
                tracing::Span::current().add_event(
                    crate::otel::RETRY_EVENT,
                    vec![opentelemetry::KeyValue::new(
                        crate::otel::RETRY_ATTEMPT,
                        i64::from(number),
                    )],
                );
            }
            let error = match context::with(attempt, next.call(input.clone())).await {
                Err(error) if error.is_transient() && number < of => error,
                outcome => return outcome,
            };
            let mut wait = self.backoff(number + 1);
            if let Some(after) = error.retry_after() {
                wait = wait.max(after);
            }
            if wait > deadline.saturating_duration_since(Instant::now()) {
                tracing::warn!(tool = %next.name(), attempt = number, %error, "retry: the deadline passes before the next attempt; giving up");
                return Err(error);
            }
            tracing::warn!(tool = %next.name(), attempt = number, of, ?wait, %error, "retry: a transient failure; trying again");
            tokio::time::sleep(wait).await;
            number += 1;
        }
    }
}
