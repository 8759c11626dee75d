//! `once`: effects once, even where calls repeat. A call with a key the
//! branch has answered before gets the first call's outcome, and the layer
//! below does not run again.
//!
//! A call's key is, first found first:
//!
//! 1. the caller's `idempotency_key` (a reserved param: 1 to
//!    [`OncePerKey::MAX_KEY_LEN`] characters), for a client that sends a request
//!    again after losing its answer; the key names the request: sent again with
//!    other arguments, it still gets the first answer;
//! 2. the call a [`Retry`](crate::ext::Retry) outside makes again (its
//!    [`Attempt`](crate::ext::retry::Attempt)), so that an attempt whose first
//!    try did its work answers that work's outcome;
//! 3. the job a backend outside runs the call as
//!    ([`JobRun`]), so that a job run again after its
//!    worker died answers the first run's outcome.
//!
//! A retry's or a job's key covers every call made under it (a batch's items,
//! a body's own calls of other tools), so with it a call is told apart by its
//! arguments and by how many calls of the branch with the same arguments came
//! before it in the attempt or run. A call with no key at all runs as it would
//! without `once`.
//!
//! Keys are kept per caller ([`Principal`]) and per
//! layer below: one caller's key never answers another's call. Callers nothing
//! in front named share one namespace: give them keys no one guesses.
//!
//! What is recorded, and kept for `keep_ms`, is the first call's answer: its
//! result, or its error (replayed as [`ToolError::Reported`], its message).
//! Failures that say nothing below ran release the key instead, so the next
//! call runs: invalid arguments, a refusal before the layer below ran
//! ([`ToolError::Refused`], [`ToolError::Overloaded`] from a limit, an unknown
//! name, an unauthorized caller), and a body's own error marked
//! [transient](crate::error::Transient) (the body says it did nothing). A call with the key still running makes a second one wait
//! its turn (`Overloaded`, transient, with a `retry_after`). A call whose
//! outcome is not known (it timed out, its answer was lost on the way back, its
//! process died between its claim and its record, or it was cancelled) leaves
//! the key **unfinished**: whether its effect happened is not known, so a later
//! call with that key is refused, not run again: at most once, never twice.
//!
//! A call made again through it does no more than once, whatever the tool below
//! says: a `retry` may sit outside it on any tool (rule `side-effects` in the
//! [rulebook](crate::rulebook)), typed or from a manifest. Its branch is not
//! published as idempotent (a client's call without a key runs each time), and a
//! `cache` over it still needs the tool's own hints. It answers from what it
//! kept, so it sits inside every authorization check (rule
//! `shared-answers-inside-authorization`).
//!
//! Inside a backend that runs a job again (`toolgraft-jobs`' `remote`), give it a
//! store every worker shares (`toolgraft_jobs::JobOutcomes`): a worker killed
//! after the body's effect and before its reply leaves the outcome recorded, and
//! the job's next run answers it.
//!
//! ```
//! use std::sync::{Arc, atomic::{AtomicU32, Ordering}};
//! use serde_json::json;
//! use toolgraft::{Tool, Toolset};
//! use toolgraft::ext::OncePerKey;
//! # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Payment { cents: u64 }
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let charged = Arc::new(AtomicU32::new(0));
//! let seen = charged.clone();
//! let pay = Tool::builder().name("pay").description("Charge the card.")
//!     .body(move |p: Payment| {
//!         let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
//!         async move { Ok(format!("charge {n}: {} cents", p.cents)) }
//!     })
//!     .build()?;
//! let toolset = Toolset::new();
//! toolset.bind((pay.combo().with(OncePerKey::default()),))?;
//! let call = json!({"cents": 500, "idempotency_key": "order-7"});
//! assert_eq!(toolset.call("pay_once", call.clone()).await?, json!("charge 1: 500 cents"));
//! assert_eq!(toolset.call("pay_once", call).await?, json!("charge 1: 500 cents"));
//! assert_eq!(charged.load(Ordering::SeqCst), 1);
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Name;
use crate::context::{self, Principal};
use crate::error::{ArgsError, ToolError, shorten};
use crate::extension::{ConfigError, Configurable, Extension, Next, Params, Stack, Wrap};
use crate::kind::property::AnswersRepeats;
use crate::relocation::JobRun;

mod store;

pub use store::{Claim, MemoryOutcomes, OutcomeKey, OutcomeStore};

/// The operator's side of `once`.
///
/// | field | default | range |
/// |---|---|---|
/// | `lease_ms` | 60,000: how long a running call holds its key; past it, with no outcome, the key is unfinished | 1 to [`OncePerKey::MAX_MS`] |
/// | `keep_ms` | 86,400,000 (a day): how long a key and its outcome are kept | twice `lease_ms` to [`OncePerKey::MAX_MS`] |
/// | `max_outcome_bytes` | 1,048,576: the largest answer kept; a larger one is answered once, and a repeat gets an error saying so | 1,024 to [`OncePerKey::MAX_OUTCOME_BYTES`] |
///
/// `lease_ms` must outlast the longest call of the layer below (relocated:
/// the job's wait in the queue too), or a call still running is taken for one
/// that died.
///
/// ```
/// let config: toolgraft::ext::once::OnceConfig = serde_json::from_str(r#"{"lease_ms": 5000}"#)?;
/// assert_eq!((config.lease_ms, config.keep_ms, config.max_outcome_bytes), (5_000, 86_400_000, 1 << 20));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OnceConfig {
    /// How long a running call holds its key, in milliseconds.
    pub lease_ms: u64,
    /// How long a key and its outcome are kept, in milliseconds.
    pub keep_ms: u64,
    /// The largest answer kept, in bytes of JSON.
    pub max_outcome_bytes: usize,
}

impl Default for OnceConfig {
    fn default() -> Self {
        Self {
            lease_ms: 60_000,
            keep_ms: 86_400_000,
            max_outcome_bytes: 1 << 20,
        }
    }
}

/// The caller's side: the `idempotency_key` reserved param.
///
/// ```
/// let params: toolgraft::ext::once::OnceParams =
///     serde_json::from_str(r#"{"idempotency_key": "order-7"}"#)?;
/// assert_eq!(params.idempotency_key.as_deref(), Some("order-7"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OnceParams {
    /// The call's key: a second call with it gets the first one's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 255),
        description = "A key for this request, unique to it: sent again with the same key, the request is answered as the first time and not run twice."
    )]
    pub idempotency_key: Option<String>,
}

impl Params for OnceParams {}

/// A wrapper that runs the layer below once per key and answers every later
/// call with the key from the first one's outcome (see [the module](self)).
#[derive(Clone, Debug)]
pub struct OncePerKey {
    config: OnceConfig,
    store: Arc<dyn OutcomeStore>,
}

impl Default for OncePerKey {
    /// The default config, in this process's memory ([`MemoryOutcomes`]).
    fn default() -> Self {
        Self::new(OnceConfig::default())
    }
}

impl OncePerKey {
    /// The longest `idempotency_key`, in characters.
    pub const MAX_KEY_LEN: usize = 255;
    /// The longest lease or keep: 30 days.
    pub const MAX_MS: u64 = 30 * 86_400_000;
    /// The largest `max_outcome_bytes`: 64 MiB (every key's answer is held by
    /// the store until its keep passes).
    pub const MAX_OUTCOME_BYTES: usize = 64 << 20;

    /// A `once` with `config`, in this process's memory; see
    /// [`with_store`](OncePerKey::with_store) for a fleet.
    pub fn new(config: OnceConfig) -> Self {
        Self {
            config,
            store: Arc::new(MemoryOutcomes::default()),
        }
    }

    /// This `once`, keeping its claims and outcomes in `store`.
    ///
    /// ```
    /// use toolgraft::ext::OncePerKey;
    /// use toolgraft::ext::once::MemoryOutcomes;
    /// let once = OncePerKey::default().with_store(MemoryOutcomes::new(10));
    /// # let _ = once;
    /// ```
    pub fn with_store(mut self, store: impl OutcomeStore) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// This instance with an element's config, keeping its store (for
    /// [`Refined`](crate::runtime::Refined)).
    ///
    /// ```
    /// use toolgraft::Registry;
    /// use toolgraft::ext::OncePerKey;
    /// use toolgraft::ext::once::MemoryOutcomes;
    /// use toolgraft::runtime::Refined;
    /// let mut registry = Registry::new();
    /// // `{"name": "once", "config": {"lease_ms": 300000}}`, every element on one store
    /// registry.register(Refined::new(OncePerKey::default().with_store(MemoryOutcomes::default()), OncePerKey::configured))?;
    /// # Ok::<(), toolgraft::runtime::RegistryError>(())
    /// ```
    pub fn configured(&self, config: OnceConfig) -> Result<Self, ConfigError> {
        let once = Self {
            config,
            store: self.store.clone(),
        };
        Extension::check_config(&once)?;
        Ok(once)
    }

    fn lease(&self) -> Duration {
        Duration::from_millis(self.config.lease_ms)
    }

    fn keep(&self) -> Duration {
        Duration::from_millis(self.config.keep_ms)
    }

    /// The call's key, first found first; `None`: the call has none. A key a
    /// retry or a job gives is theirs for every call made under them (a batch's
    /// items, a body's own calls), so it is told apart by the call's arguments
    /// and by how many calls of this branch with them came before it in the
    /// attempt or run: the calls an attempt or run makes again, it makes in the
    /// same order.
    fn key_of<S: Stack<Input: OnceInput>>(
        &self,
        next: &Next<'_, S, Self>,
        params: OnceParams,
        input: &S::Input,
    ) -> Result<Option<OutcomeKey>, ToolError> {
        let key = if let Some(key) = params.idempotency_key {
            let length = key.chars().count();
            if length == 0 || length > Self::MAX_KEY_LEN {
                return Err(ArgsError::field(
                    "idempotency_key",
                    format!("{length} characters: use 1 to {}", Self::MAX_KEY_LEN),
                )
                .for_tool(next.branch()));
            }
            format!("key:{key}")
        } else {
            let Some(scope) = Scope::current() else {
                return Ok(None);
            };
            let arguments = arguments_digest(input).map_err(|error| {
                next.refuse(format!(
                    "the arguments cannot be told apart from another call's: {}",
                    shorten(&error.to_string())
                ))
            })?;
            let occurrence = scope.occurrence(&format!("{}\n{arguments}", next.branch()));
            format!("{}:{arguments}:{occurrence}", scope.id())
        };
        Ok(Some(OutcomeKey::new(
            context::get::<Principal>(),
            next.name().clone(),
            key,
        )))
    }
}

/// The input of a stack [`OncePerKey`] sits on: a retry's or a job's key covers
/// every call made under it, and `once` tells those calls apart by their
/// arguments, serialized. Implemented for every `Serialize` type; a trait of its
/// own so that the compiler's message names why.
///
/// ```
/// use toolgraft::ext::once::OnceInput;
/// fn input<I: OnceInput>() {}
/// input::<String>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`once` tells calls apart by their arguments serialized, but `{Self}` is not `Serialize`",
    label = "the layer below takes `{Self}`, which is not `Serialize`",
    note = "add `#[derive(serde::Serialize)]` to `{Self}` beside its `Deserialize`",
    note = "a retry's or a job's key covers every call made under it (a batch's items, a body's own calls): `once` tells them apart by their arguments"
)]
pub trait OnceInput: Serialize {}

// `do_not_recommend`: the compiler reports this trait, with its message, instead
// of the bare `Serialize` bound the impl asks.
#[diagnostic::do_not_recommend]
impl<T: Serialize + ?Sized> OnceInput for T {}

/// The output of a stack [`OncePerKey`] sits on: kept as JSON for the key's
/// later calls, and read back for them. Implemented for every type that is
/// `Serialize` and `DeserializeOwned`.
///
/// ```
/// use toolgraft::ext::once::OnceOutput;
/// fn output<O: OnceOutput>() {}
/// output::<Vec<String>>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`once` keeps each answer as JSON and reads it back for a repeat, but `{Self}` is not both `Serialize` and `Deserialize`",
    label = "the layer below answers `{Self}`",
    note = "derive `serde::Serialize` and `serde::Deserialize` for `{Self}`"
)]
pub trait OnceOutput: Serialize + DeserializeOwned {}

#[diagnostic::do_not_recommend]
impl<T: Serialize + DeserializeOwned> OnceOutput for T {}

/// What gives a call with no key of its own one: the attempt of a `retry`
/// outside, or else the run of the job a backend runs it as.
enum Scope {
    #[cfg(feature = "retry")]
    Attempt(crate::ext::retry::Attempt),
    Job(JobRun),
}

impl Scope {
    fn current() -> Option<Self> {
        #[cfg(feature = "retry")]
        if let Some(attempt) = context::get::<crate::ext::retry::Attempt>() {
            return Some(Self::Attempt(attempt));
        }
        context::get::<JobRun>().map(Self::Job)
    }

    /// The key's first part: where it came from, and which attempt's call or job.
    fn id(&self) -> String {
        match self {
            #[cfg(feature = "retry")]
            Self::Attempt(attempt) => format!("retry:{}", attempt.call),
            Self::Job(run) => format!("job:{}", run.id()),
        }
    }

    /// Counts `what` once more in the attempt or run: the count before.
    fn occurrence(&self, what: &str) -> u64 {
        match self {
            #[cfg(feature = "retry")]
            Self::Attempt(attempt) => attempt.occurrence(what),
            Self::Job(run) => run.occurrence(what),
        }
    }
}

/// SHA-256 of the arguments' JSON, as 64 hex digits.
fn arguments_digest(input: &impl Serialize) -> Result<String, serde_json::Error> {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    serde_json::to_writer(HashWriter(&mut hash), input)?;
    Ok(crate::hex::hex(&hash.finalize()))
}

/// Feeds what JSON writes straight into the hash.
struct HashWriter<'a>(&'a mut sha2::Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(self.0, bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A call's answer as the store keeps it: written from the output by
/// reference, read straight into the output type (no JSON value between).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Recorded<T> {
    Ok(T),
    Error(String),
}

impl Configurable for OncePerKey {
    type Config = OnceConfig;

    fn from_config(config: OnceConfig) -> Result<Self, ConfigError> {
        let once = Self::new(config);
        Extension::check_config(&once)?;
        Ok(once)
    }
}

impl Extension for OncePerKey {
    type Kind = crate::kind::Wrapper;
    type Locality = AnswersRepeats;

    fn name(&self) -> &str {
        "once"
    }

    fn config(&self) -> Option<Value> {
        (self.config != OnceConfig::default())
            .then(|| serde_json::to_value(self.config).ok())
            .flatten()
    }

    fn check_config(&self) -> Result<(), ConfigError> {
        let OnceConfig {
            lease_ms,
            keep_ms,
            max_outcome_bytes,
        } = self.config;
        let max = Self::MAX_MS;
        if !(1..=max).contains(&lease_ms) {
            return Err(ConfigError::new(
                "lease_ms",
                format!("{lease_ms} is out of range: use 1 to {max} ms"),
            ));
        }
        // A lapsed claim is refused only while it is kept: kept no longer than
        // its lease, the key of a call that died would run again at once.
        let least = lease_ms.saturating_mul(2);
        if !(least..=max).contains(&keep_ms) {
            return Err(ConfigError::new(
                "keep_ms",
                format!("{keep_ms} is out of range: use twice `lease_ms` ({least}) to {max} ms"),
            ));
        }
        if !(1024..=Self::MAX_OUTCOME_BYTES).contains(&max_outcome_bytes) {
            return Err(ConfigError::new(
                "max_outcome_bytes",
                format!(
                    "{max_outcome_bytes} is out of range: use 1024 to {}",
                    Self::MAX_OUTCOME_BYTES
                ),
            ));
        }
        Ok(())
    }
}

/// Leaves a claim unfinished when the call is dropped before it answers (its
/// caller gave up): the layer below was cancelled somewhere in its work.
struct Unanswered<'a> {
    key: Option<&'a OutcomeKey>,
    store: &'a Arc<dyn OutcomeStore>,
    keep: Duration,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (store, key, keep) = (self.store.clone(), key.clone(), self.keep);
        runtime.spawn(async move {
            // The claim lapses by itself if this fails too: unfinished either way.
            let _ = store.record(&key, UNFINISHED, keep).await;
        });
    }
}

/// What a dropped call records: not a [`Recorded`], so it reads as unfinished.
const UNFINISHED: &str = r#"{"unfinished":true}"#;

impl<S> Wrap<S> for OncePerKey
where
    S: Stack<Input: OnceInput, Output: OnceOutput>,
{
    type Params = OnceParams;

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        params: OnceParams,
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let Some(key) = self.key_of(&next, params, &input)? else {
            return next.call(input).await;
        };
        let claim = self
            .store
            .claim(&key, self.lease(), self.keep())
            .await
            .map_err(|error| {
                ToolError::store_failed(
                    next.branch(),
                    next.extension(),
                    "outcome store",
                    "unclaimed",
                    &error,
                )
            })?;
        match claim {
            Claim::Granted => {}
            Claim::Answered(recorded) => return replay(&next, &recorded),
            Claim::Running { left } => {
                return Err(ToolError::Overloaded {
                    tool: next.branch().clone(),
                    extension: Name::lossy(next.extension()),
                    reason: "a call with this key is running".into(),
                    retry_after: Some(left.min(Duration::from_secs(1))),
                });
            }
            Claim::Lapsed => return Err(unfinished(&next)),
        }
        let mut unanswered = Unanswered {
            key: Some(&key),
            store: &self.store,
            keep: self.keep(),
        };
        let outcome = next.call(input).await;
        unanswered.key = None;
        let recorded = match &outcome {
            Err(error) if nothing_done(error) => {
                if let Err(error) = self.store.release(&key).await {
                    tracing::warn!(tool = %next.branch(), %error, "once: the key of a call that did nothing could not be released; the next call with it waits for its lease");
                }
                return outcome;
            }
            // Transient, but the work may have been done (a timeout, a reply
            // lost on its way back): not known, so never run again.
            Err(error) if error.is_transient() => Ok(UNFINISHED.to_owned()),
            Err(error) => serde_json::to_string(&Recorded::<()>::Error(error.to_string())),
            Ok(output) => serde_json::to_string(&Recorded::Ok(output)).or_else(|error| {
                serde_json::to_string(&Recorded::<()>::Error(format!(
                    "the result of `{}` cannot be kept: {error}",
                    next.name()
                )))
            }),
        };
        let mut recorded = recorded.unwrap_or_else(|_| UNFINISHED.to_owned());
        if recorded.len() > self.config.max_outcome_bytes {
            // Answered once, never again: a repeat learns why, not a second run.
            recorded = serde_json::to_string(&Recorded::<()>::Error(format!(
                "the first call with this key was answered, but its answer ({} bytes) was larger \
                 than `{}` keeps ({} bytes): it is not answered again, nor run again",
                recorded.len(),
                next.extension(),
                self.config.max_outcome_bytes
            )))
            .unwrap_or_else(|_| UNFINISHED.to_owned());
        }
        if let Err(error) = self.store.record(&key, &recorded, self.keep()).await {
            // The work is done: its caller gets its answer. A later call with the
            // key finds it running, then unfinished: never run twice.
            tracing::warn!(tool = %next.branch(), %error, "once: an outcome could not be recorded");
        }
        outcome
    }
}

/// Whether a failure says the work below was not done, so that trying again is
/// safe: arguments refused, a caller or a call refused before the layers under
/// it ran (a limit, an extension's refusal, an unknown name), or a body's own
/// error it marked transient (the body's word: it did nothing). A timeout, a
/// relocation's failure, a panic or an extension's own error may come after the
/// work was done.
fn nothing_done(error: &ToolError) -> bool {
    match error {
        ToolError::InvalidArguments { .. }
        | ToolError::UnknownTool { .. }
        | ToolError::Unauthorized { .. }
        | ToolError::Refused { .. }
        | ToolError::Overloaded { .. } => true,
        ToolError::Body { .. } => error.is_transient(),
        _ => false,
    }
}

/// The first call's answer, again.
fn replay<S: Stack<Output: OnceOutput>>(
    next: &Next<'_, S, OncePerKey>,
    recorded: &str,
) -> Result<S::Output, ToolError> {
    if recorded == UNFINISHED {
        return Err(unfinished(next));
    }
    match serde_json::from_str::<Recorded<S::Output>>(recorded) {
        Ok(Recorded::Ok(output)) => Ok(output),
        Ok(Recorded::Error(message)) => Err(ToolError::Reported { message }),
        Err(error) => Err(next.refuse(format!(
            "the answer kept for this key does not read as `{}`'s output: {}",
            next.name(),
            shorten(&error.to_string())
        ))),
    }
}

fn unfinished<S: Stack>(next: &Next<'_, S, OncePerKey>) -> ToolError {
    next.refuse(
        "a call with this key started and its outcome is not known (it timed out, its answer \
         was lost, its process stopped, or it was cancelled): whether its work was done is not \
         known, so it is not run again; send a new key to run it",
    )
}
