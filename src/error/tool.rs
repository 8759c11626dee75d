use std::sync::Arc;

use thiserror::Error;

use super::args::{ArgsError, ArgsErrorKind};
use super::bind::BindError;
use super::message::{overloaded, timed_out};
use super::transient::Transient;
use crate::name::Name;
use crate::rulebook::Rule;

/// Why a call failed.
///
/// The variants are what any tool or extension can meet; an error of one
/// extension alone (a chain's, an output schema's, a third party's) is
/// [`ToolError::Extension`], matched with [`downcast_ref`](ToolError::downcast_ref).
/// [`rule`](ToolError::rule) names the [rulebook](crate::rulebook) section an
/// error cites.
///
/// Cloning is cheap (sources are shared), so one failure can be handed to every
/// caller waiting on it.
///
/// ```
/// use toolgraft::{Name, ToolError};
/// let err = ToolError::UnknownTool { name: "nope".into() };
/// assert_eq!(err.to_string(), "unknown tool `nope`");
/// ```
#[derive(Clone, Debug, Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool of that name is bound.
    #[error("unknown tool `{name}`")]
    UnknownTool {
        /// The name asked for.
        name: String,
    },
    /// The caller may see the name but holds less than a call needs, and may ask
    /// for it: scopes its authorization server may grant (a step-up; see
    /// [`Denied::step_up`](crate::access::Denied::step_up)). A caller that may
    /// not call a name at all gets [`UnknownTool`](Self::UnknownTool) instead.
    ///
    /// ```
    /// use toolgraft::ToolError;
    /// use toolgraft::access::{Denied, Missing};
    /// let err = ToolError::Unauthorized {
    ///     name: "write_note".into(),
    ///     denied: Denied::new(Missing::Scopes(vec!["notes:write".into()])).with_step_up(),
    /// };
    /// assert_eq!(err.to_string(), "`write_note` refused the caller: the call needs the scope `notes:write`");
    /// ```
    #[error("`{name}` refused the caller: {denied}")]
    Unauthorized {
        /// The name called.
        name: String,
        /// What the caller lacks.
        denied: crate::access::Denied,
    },
    /// The arguments do not fit the tool's input schema.
    #[error("invalid arguments for `{tool}`: {problem}")]
    InvalidArguments {
        /// The bound name that was called.
        tool: Name,
        /// The offending argument, as a path (`text`, `items[2].city`), when known.
        field: Option<String>,
        /// What kind of problem it is.
        kind: ArgsErrorKind,
        /// What is wrong, naming the field.
        problem: String,
    },
    /// The tool body returned an error.
    #[error("tool `{tool}` failed: {source}")]
    Body {
        /// The base tool whose body failed.
        tool: Name,
        /// The body's error.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A tool body or an extension panicked; the panic was caught, and the caller
    /// and the toolset keep running.
    #[error("tool `{tool}` panicked: {message}")]
    Panicked {
        /// The base tool whose body panicked, or the bound name called when an
        /// extension's own code panicked.
        tool: Name,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// An extension refused the call before the layer below ran.
    #[error("`{extension}` refused the call to `{tool}`: {reason}")]
    Refused {
        /// The branch that was called.
        tool: Name,
        /// The extension that refused.
        extension: Name,
        /// Why.
        reason: String,
    },
    /// A backend could not run the layer below.
    #[error("backend `{backend}` could not run `{tool}`: {reason}")]
    Relocation {
        /// The layer the backend was to run.
        tool: Name,
        /// The backend.
        backend: Name,
        /// Why.
        reason: String,
    },
    /// A call ran out of time: a [`Timeout`](crate::ext::Timeout) wrapper's limit
    /// passed (the layer below was cancelled), or a backend stopped waiting for the
    /// job that runs its layer input elsewhere (that job may still run: relocated
    /// execution is at least once).
    #[error("{}", timed_out(.tool, .extension, .job.as_deref(), .after))]
    TimedOut {
        /// The layer that did not finish in time.
        tool: Name,
        /// The extension that stopped waiting (`timeout`, or the backend).
        extension: Name,
        /// The job's id in the job engine, for a backend's job.
        job: Option<String>,
        /// The limit: how long the caller waited.
        after: std::time::Duration,
    },
    /// A limit refused the call, or would have kept it waiting too long: a
    /// `rate_limit` or `concurrency` wrapper's, a tower layer's that sheds load, or
    /// a fleet-wide limit's. Transient: the same call may succeed later, after
    /// `retry_after` when the limit says when.
    #[error("{}", overloaded(.tool, .extension, .reason, .retry_after.as_ref()))]
    Overloaded {
        /// The branch that was called.
        tool: Name,
        /// The extension whose limit refused it.
        extension: Name,
        /// Which limit, in words (`over 5 calls per 1s for this caller`).
        reason: String,
        /// When a retry may be admitted, when the limit knows.
        retry_after: Option<std::time::Duration>,
    },
    /// An error that reached this process as its message only: a batch item's
    /// error in a result relayed from a worker.
    #[error("{message}")]
    Reported {
        /// The error's message.
        message: String,
    },
    /// An extension's own error: a built-in's
    /// ([`ChainError`](crate::ext::chain::ChainError),
    /// [`OutputSchemaError`](crate::ext::output_schema::OutputSchemaError)) or a third
    /// party's, matched with [`ToolError::downcast_ref`]. Its message is the error's
    /// own, which names the branch (as the built-ins' do).
    ///
    /// The error is in a field of its own rather than the [`source`](std::error::Error::source)
    /// chain, where reporters would print its message twice.
    #[error("{error}")]
    Extension {
        /// The branch whose extension failed.
        tool: Name,
        /// The extension.
        extension: Name,
        /// Its error (shared, so that the `ToolError` stays cheap to clone).
        error: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A result could not be turned into JSON.
    #[error("the result of `{tool}` is not valid JSON: {source}")]
    Output {
        /// The bound name that was called.
        tool: Name,
        /// The serializer's error.
        #[source]
        source: Arc<serde_json::Error>,
    },
}

impl ToolError {
    /// A call refused because the `store` its extension keeps its state in could
    /// not answer: the one way every store's failure is handled (fail closed,
    /// transient, with the store's time to retry when it knows one), rather than
    /// run `unchecked` (what the call would be without the store).
    pub(crate) fn store_failed(
        tool: &Name,
        extension: &str,
        store: &str,
        unchecked: &str,
        error: &crate::store::StoreError,
    ) -> Self {
        tracing::warn!(%tool, %error, "the {store} could not answer; the call is refused");
        Self::Overloaded {
            tool: tool.clone(),
            extension: Name::lossy(extension),
            reason: format!(
                "the {store} could not answer ({}); refused rather than run {unchecked}",
                super::shorten(&error.to_string())
            ),
            retry_after: error.retry_after(),
        }
    }

    /// The refusal of a caller of `name` whom a policy denied: the error of a
    /// name that does not exist, or, with a step-up, what the caller lacks. The
    /// one mapping of the toolset's check and the `authorize` layer's.
    pub(crate) fn access_refused(name: &str, denied: crate::access::Denied) -> Self {
        let name = super::shorten(name).into_owned();
        match denied.step_up {
            true => Self::Unauthorized { name, denied },
            false => Self::UnknownTool { name },
        }
    }

    /// The error as the client of a published name reads it: every layer's
    /// name it carries is the name called (a client knows no other).
    pub(crate) fn for_caller(self, called: &Name) -> Self {
        let called = called.clone();
        match self {
            Self::InvalidArguments {
                field,
                kind,
                problem,
                ..
            } => Self::InvalidArguments {
                tool: called,
                field,
                kind,
                problem,
            },
            Self::Body { source, .. } => Self::Body {
                tool: called,
                source,
            },
            Self::Panicked { message, .. } => Self::Panicked {
                tool: called,
                message,
            },
            Self::Refused {
                extension, reason, ..
            } => Self::Refused {
                tool: called,
                extension,
                reason,
            },
            Self::TimedOut {
                extension,
                job,
                after,
                ..
            } => Self::TimedOut {
                tool: called,
                extension,
                job,
                after,
            },
            Self::Relocation {
                backend, reason, ..
            } => Self::Relocation {
                tool: called,
                backend,
                reason,
            },
            Self::Overloaded {
                extension,
                reason,
                retry_after,
                ..
            } => Self::Overloaded {
                tool: called,
                extension,
                reason,
                retry_after,
            },
            Self::Output { source, .. } => Self::Output {
                tool: called,
                source,
            },
            other => other,
        }
    }
}

impl ToolError {
    /// An extension's own error, as [`ToolError::Extension`]: what a third-party
    /// extension returns for a failure of its own that no other variant describes.
    ///
    /// ```
    /// use toolgraft::{Name, ToolError};
    /// #[derive(Debug, thiserror::Error)]
    /// #[error("`{0}` has no quota left")]
    /// struct OverQuota(Name);
    ///
    /// let tool = Name::new("fetch_quota")?;
    /// let err = ToolError::extension(tool.clone(), Name::new("quota")?, OverQuota(tool));
    /// assert_eq!(err.to_string(), "`fetch_quota` has no quota left");
    /// assert!(err.downcast_ref::<OverQuota>().is_some());
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn extension(
        tool: Name,
        extension: Name,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Extension {
            tool,
            extension,
            error: Arc::new(error),
        }
    }

    /// The error of type `E` inside: an extension's ([`ToolError::Extension`]) or a
    /// tool body's ([`ToolError::Body`]); `None` for another type or variant.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use toolgraft::{Name, ToolError};
    /// let err = ToolError::Body {
    ///     tool: Name::new("read")?,
    ///     source: Arc::new(std::io::Error::other("disk full")),
    /// };
    /// assert_eq!(err.downcast_ref::<std::io::Error>().map(|e| e.kind()), Some(std::io::ErrorKind::Other));
    /// assert!(err.downcast_ref::<std::fmt::Error>().is_none());
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Self::Extension { error, .. } => error.downcast_ref(),
            Self::Body { source, .. } => source.downcast_ref(),
            _ => None,
        }
    }

    /// The section of the [rulebook](crate::rulebook) the error cites, when it
    /// cites one: a refusal whose reason names a rule as [`Rule::cited`] writes it
    /// (a backend reached from inside a body-local layer's call refuses by
    /// [`Rule::LocalityInsideRelocation`]), an extension's error that does, or a
    /// body's error that is a toolgraft error citing one (a body that called such
    /// a backend).
    ///
    /// ```
    /// use toolgraft::{Name, ToolError};
    /// use toolgraft::rulebook::Rule;
    /// let refused = ToolError::Refused {
    ///     tool: Name::new("fetch_pool")?,
    ///     extension: Name::new("pool")?,
    ///     reason: format!("place `proxy` inside `pool` ({})", Rule::LocalityInsideRelocation.cited()),
    /// };
    /// assert_eq!(refused.rule(), Some(Rule::LocalityInsideRelocation));
    /// assert_eq!(ToolError::UnknownTool { name: "nope".into() }.rule(), None);
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn rule(&self) -> Option<Rule> {
        match self {
            Self::Refused { reason, .. } | Self::Relocation { reason, .. } => {
                Rule::cited_in(reason)
            }
            Self::Extension { error, .. } => rule_of(error.as_ref()),
            Self::Body { source, .. } => rule_of(source.as_ref()),
            _ => None,
        }
    }
}

impl ToolError {
    /// The variant, in snake case: a stable, low-cardinality name for the kind
    /// of failure, never a value of the call (the `metrics` wrapper's `kind`
    /// label, an OpenTelemetry span's `error.type` with the `otel` feature).
    ///
    /// ```
    /// use toolgraft::ToolError;
    /// assert_eq!(ToolError::UnknownTool { name: "x".into() }.code(), "unknown_tool");
    /// assert_eq!(ToolError::Reported { message: "lost".into() }.code(), "reported");
    /// ```
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownTool { .. } => "unknown_tool",
            Self::Unauthorized { .. } => "unauthorized",
            Self::InvalidArguments { .. } => "invalid_arguments",
            Self::Body { .. } => "body",
            Self::Panicked { .. } => "panicked",
            Self::Refused { .. } => "refused",
            Self::Relocation { .. } => "relocation",
            Self::TimedOut { .. } => "timed_out",
            Self::Overloaded { .. } => "overloaded",
            Self::Reported { .. } => "reported",
            Self::Extension { .. } => "extension",
            Self::Output { .. } => "output",
        }
    }
}

impl ToolError {
    /// Whether the same call may succeed if made again: the job engine was
    /// unreachable or a backend could not run it ([`Relocation`](Self::Relocation)),
    /// it ran out of time ([`TimedOut`](Self::TimedOut)), a limit refused it
    /// ([`Overloaded`](Self::Overloaded)), or a body or an extension said so by
    /// returning a [`Transient`] error. Never invalid arguments, a panic, or a
    /// body's own error that is not marked: what `retry` retries.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use toolgraft::{Name, ToolError};
    /// use toolgraft::error::Transient;
    /// let tool = Name::new("read")?;
    /// let busy = ToolError::Body { tool: tool.clone(), source: Arc::new(Transient::new("the database is busy")) };
    /// assert!(busy.is_transient());
    /// let missing = ToolError::Body { tool: tool.clone(), source: Arc::new(std::io::Error::other("no such file")) };
    /// assert!(!missing.is_transient());
    /// let late = ToolError::TimedOut { tool, extension: Name::new("timeout")?, job: None, after: Duration::from_secs(1) };
    /// assert!(late.is_transient());
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Relocation { .. } | Self::TimedOut { .. } | Self::Overloaded { .. } => true,
            Self::Body { source, .. } => transient(source.as_ref()),
            Self::Extension { error, .. } => transient(error.as_ref()),
            _ => false,
        }
    }
}

impl ToolError {
    /// How long a limit that refused the call asks to wait before the next
    /// ([`Overloaded`](Self::Overloaded)'s `retry_after`), also when a body or an
    /// extension met it (a body that called a limited branch).
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolgraft::{Name, ToolError};
    /// let over = ToolError::Overloaded {
    ///     tool: Name::new("search")?, extension: Name::new("rate_limit")?,
    ///     reason: "over 5 calls per 1s".into(), retry_after: Some(Duration::from_millis(200)),
    /// };
    /// assert_eq!(over.retry_after(), Some(Duration::from_millis(200)));
    /// assert_eq!(over.to_string(), "`rate_limit` refused the call to `search`: over 5 calls per 1s; retry after 200 ms");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Self::Overloaded { retry_after, .. } => *retry_after,
            Self::Body { source, .. } => source
                .downcast_ref::<ToolError>()
                .and_then(ToolError::retry_after),
            Self::Extension { error, .. } => error
                .downcast_ref::<ToolError>()
                .and_then(ToolError::retry_after),
            _ => None,
        }
    }
}

/// Whether a body's or an extension's error is marked transient, or is a
/// transient toolgraft error (a body that called a branch and met one).
fn transient(error: &(dyn std::error::Error + 'static)) -> bool {
    if error.downcast_ref::<Transient>().is_some() {
        return true;
    }
    error
        .downcast_ref::<ToolError>()
        .is_some_and(ToolError::is_transient)
}

/// The rule an error from a body or an extension cites: a toolgraft error's own
/// (a body that called a branch, or bound a combo), or one its message cites.
fn rule_of(error: &(dyn std::error::Error + 'static)) -> Option<Rule> {
    if let Some(inner) = error.downcast_ref::<ToolError>() {
        inner.rule()
    } else if let Some(refused) = error.downcast_ref::<BindError>() {
        refused.rule()
    } else {
        Rule::cited_in(&error.to_string())
    }
}

// Here rather than in `args.rs`: it builds a `ToolError`, and `args.rs` sits below
// this file.
impl ArgsError {
    /// Attaches the called name: the error an extension returns for an argument
    /// of its own.
    ///
    /// ```
    /// use toolgraft::{Name, ToolError, error::ArgsError};
    /// let error = ArgsError::field("exp", "must be >= 0").for_tool(&Name::new("shout_cache")?);
    /// assert!(matches!(error, ToolError::InvalidArguments { field: Some(f), .. } if f == "exp"));
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn for_tool(self, tool: &Name) -> ToolError {
        let problem = match &self.field {
            Some(field) if !self.problem.contains(&format!("`{field}`")) => {
                format!("`{field}`: {}", self.problem)
            }
            _ => self.problem,
        };
        ToolError::InvalidArguments {
            tool: tool.clone(),
            field: self.field,
            kind: self.kind,
            problem,
        }
    }
}
