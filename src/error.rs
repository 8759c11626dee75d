//! The crate's errors: [`ToolError`] at call time, [`BindError`] at bind time.
//!
//! Both are shared by the typed and the run-time (manifest) paths: the same rule gives
//! the same variant wherever it is checked, and [`BindError::rule`] names it as a
//! [`Rule`]. Errors of a single built-in live with it
//! ([`ChainError`](crate::ext::chain::ChainError),
//! [`OutputSchemaError`](crate::ext::output_schema::OutputSchemaError)), inside
//! [`ToolError::Extension`].

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use crate::kind::ExtensionKind;
pub use crate::name::InvalidName;
use crate::name::Name;
pub use crate::quote::{QUOTE_LEN, shorten, shorten_json};
use crate::rulebook::Rule;

/// The error type of tool bodies: any `std::error::Error` converts into it with
/// `?`, and so does a `&str` or `String` with `.into()`.
///
/// ```
/// use toolgraft::error::BoxError;
/// let err: BoxError = "city not found".into();
/// assert_eq!(err.to_string(), "city not found");
/// let io: BoxError = std::io::Error::other("disk full").into();
/// assert_eq!(io.to_string(), "disk full");
/// ```
///
/// It is a struct around `Box<dyn Error + Send + Sync>` rather than that type
/// itself, and (like `anyhow::Error`) does not implement `Error`, which is what lets
/// every error convert into it. Why not the plain box: its `'static` would sit in
/// the type of every closure body, and a lifetime in a type keeps the compiler from
/// reusing what it proved about a stack, so type-checking a deep combo over a
/// closure body would grow with the square of its depth.
pub struct BoxError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl BoxError {
    /// The boxed error inside.
    ///
    /// ```
    /// let err = toolgraft::error::BoxError::from("no").into_inner();
    /// assert_eq!(err.to_string(), "no");
    /// ```
    pub fn into_inner(self) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self.0
    }
}

impl<E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>> From<E> for BoxError {
    fn from(error: E) -> Self {
        Self(error.into())
    }
}

impl fmt::Debug for BoxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for BoxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

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

/// What kind of argument problem an [`ArgsError`] is.
///
/// ```
/// use toolgraft::error::{ArgsError, ArgsErrorKind};
/// assert_eq!(ArgsError::unknown("exp", &["text".into()]).kind, ArgsErrorKind::UnknownField);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ArgsErrorKind {
    /// An argument the input schema does not list.
    UnknownField,
    /// A required argument is absent.
    MissingField,
    /// An argument (or the arguments as a whole) has the wrong shape or value.
    InvalidValue,
    /// The arguments nest deeper than the toolset's
    /// [`Limits::max_depth`](crate::limits::Limits::max_depth).
    TooDeep,
}

/// Arguments that do not fit an input type, before the tool name is known.
///
/// Layers produce it while decoding JSON arguments; the toolset adds the called
/// name and turns it into [`ToolError::InvalidArguments`].
///
/// ```
/// use toolgraft::error::ArgsError;
/// let err = ArgsError::field("exp", "expected a number");
/// assert_eq!(err.to_string(), "`exp`: expected a number");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub struct ArgsError {
    /// The offending argument, as a path, when known.
    pub field: Option<String>,
    /// What kind of problem it is.
    pub kind: ArgsErrorKind,
    /// What is wrong.
    pub problem: String,
}

impl ArgsError {
    /// An error about one argument.
    ///
    /// ```
    /// # use toolgraft::error::ArgsError;
    /// assert_eq!(ArgsError::field("text", "missing").field.as_deref(), Some("text"));
    /// ```
    pub fn field(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: Some(field.into()),
            kind: ArgsErrorKind::InvalidValue,
            problem: problem.into(),
        }
    }

    /// An argument the input schema does not list; `expected` are those it does.
    ///
    /// ```
    /// # use toolgraft::error::ArgsError;
    /// let err = ArgsError::unknown("exp", &["text".into()]);
    /// assert_eq!(err.problem, "unknown field `exp`, expected one of `text`");
    /// ```
    pub fn unknown(field: &str, expected: &[String]) -> Self {
        let field = shorten(field);
        let expected = if expected.is_empty() {
            "no arguments".to_owned()
        } else {
            let listed: Vec<String> = expected.iter().map(|name| format!("`{name}`")).collect();
            format!("one of {}", listed.join(", "))
        };
        Self {
            problem: format!("unknown field `{field}`, expected {expected}"),
            field: Some(field.into_owned()),
            kind: ArgsErrorKind::UnknownField,
        }
    }

    /// An error about the arguments as a whole.
    ///
    /// ```
    /// # use toolgraft::error::ArgsError;
    /// assert_eq!(ArgsError::whole("expected an object").field, None);
    /// ```
    pub fn whole(problem: impl Into<String>) -> Self {
        Self {
            field: None,
            kind: ArgsErrorKind::InvalidValue,
            problem: problem.into(),
        }
    }

    /// The same error, one level down: `field` becomes `outer.field`.
    ///
    /// ```
    /// # use toolgraft::error::ArgsError;
    /// let err = ArgsError::field("city", "missing").within("items[2]");
    /// assert_eq!(err.field.as_deref(), Some("items[2].city"));
    /// ```
    pub fn within(self, outer: &str) -> Self {
        let field = match self.field {
            Some(inner) => format!("{outer}.{inner}"),
            None => outer.to_owned(),
        };
        Self {
            field: Some(field),
            ..self
        }
    }

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

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "`{field}`: {}", self.problem),
            None => f.write_str(&self.problem),
        }
    }
}

/// Why a tool and its combos could not be bound. Any of these leaves nothing of the
/// tool bound ([all-or-nothing](crate::rulebook#all-or-nothing)); [`BindError::rule`]
/// names the rule broken.
///
/// ```
/// use toolgraft::{BindError, Name};
/// let err = BindError::LocalityOutsideRelocation {
///     tool: Name::new("fetch")?,
///     extension: Name::new("proxy")?,
///     relocating: Name::new("pool")?,
/// };
/// assert!(err.to_string().contains("place `proxy` before `pool`"));
/// assert_eq!(err.rule(), Some(toolgraft::rulebook::Rule::LocalityInsideRelocation));
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum BindError {
    /// A tool or extension name is not a valid [`Name`].
    #[error(transparent)]
    InvalidName(#[from] InvalidName),

    /// Rule `branch-by-rename`: an extension minted a branch named like its base.
    #[error(
        "`{extension}` on `{tool}` mints a branch with the same name as the tool; a branch must have a new name"
    )]
    SameName {
        /// The base tool.
        tool: Name,
        /// The extension that chose the name.
        extension: Name,
    },

    /// Rule `one-branch-per-prefix`: two different stacks of one tool mint the same name.
    #[error(
        "two different stacks of `{tool}` mint `{name}`: [{first}] and [{second}]; rename an extension or drop one combo"
    )]
    NameClash {
        /// The base tool.
        tool: Name,
        /// The contested name.
        name: Name,
        /// The first stack, as `a, b`.
        first: String,
        /// The second stack.
        second: String,
    },

    /// The tool is bound already.
    #[error(
        "a base tool named `{tool}` is already bound; if it is this tool, bind all of its combos in one call, or change them with `Toolset::edit` or `apply_manifest`; if it is another tool, give one of the two another name"
    )]
    AlreadyBound {
        /// The tool.
        tool: Name,
    },

    /// A combo with no element.
    #[error("a combo of `{tool}` is empty; list at least one extension")]
    EmptyCombo {
        /// The tool.
        tool: Name,
    },

    /// A combo has more elements than the toolset's
    /// [`Limits::max_combo_len`](crate::limits::Limits::max_combo_len) ([depth](crate::rulebook#depth)).
    #[error(
        "a combo of `{tool}` has {len} elements, over the limit of {limit}; shorten it, or raise the limit with `Limits::with_max_combo_len` (rule `depth` in `toolgraft::rulebook`)"
    )]
    ComboTooLong {
        /// The tool.
        tool: Name,
        /// The combo's length.
        len: usize,
        /// The limit.
        limit: usize,
    },

    /// A name the tool would bind is longer than the toolset's
    /// [`Limits::max_name_len`](crate::limits::Limits::max_name_len) (MCP clients expect at
    /// most 128 bytes): a branch name grows with each layer, so the name limit is
    /// what limits a combo's depth ([depth](crate::rulebook#depth)).
    #[error(
        "`{tool}` would bind `{name}`, {len} bytes long, over the limit of {limit}: each layer adds `_<extension>` to the name, so {fits} of this combo's {layers} layers fit; use shorter tool or extension names (`Pool::with_name(..)`, or register the extension under a shorter name), or raise the limit with `Limits::with_max_name_len` (rule `depth` in `toolgraft::rulebook`)"
    )]
    NameTooLong {
        /// The tool.
        tool: Name,
        /// The name (shortened).
        name: String,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        limit: usize,
        /// The layers of the combo up to this name (its depth).
        layers: usize,
        /// How many of them bind: the depth whose name fits the limit.
        fits: usize,
    },

    /// An element pins a param that is not one of its reserved params
    /// ([reserved-params](crate::rulebook#reserved-params)).
    #[error(
        "`{extension}` (on `{tool}`) pins `{param}`, which is not one of its reserved params (it reserves: {reserved}); pin only those, or set the extension's config instead (rule `reserved-params` in `toolgraft::rulebook`)"
    )]
    PinNotReserved {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// The param it pins (shortened).
        param: String,
        /// The params it reserves, listed.
        reserved: String,
    },

    /// A tool publishes a name its bound names do not include
    /// ([published-names](crate::rulebook#published-names)).
    #[error(
        "`{tool}` would publish `{published}` as `{bound}`, which `{tool}` does not bind; publish one of its bound names, or bind the combo that mints `{bound}` (rule `published-names` in `toolgraft::rulebook`)"
    )]
    PublishedUnbound {
        /// The tool.
        tool: Name,
        /// The published name.
        published: Name,
        /// The bound name it would be served by.
        bound: Name,
    },

    /// A published name is longer than the toolset's
    /// [`Limits::max_published_len`](crate::limits::Limits::max_published_len)
    /// ([published-names](crate::rulebook#published-names)).
    #[error(
        "`{tool}` would publish `{published}` (served by `{bound}`), {len} bytes long, over the limit of {limit} for published names; publish it under a shorter name (`Publish::only([(\"short\", \"{bound}\")])` with `Toolset::bind_publishing` or `Edit::publish`, or `\"publish\"` in the manifest), publish only the outermost branches, or raise the limit with `Limits::with_max_published_len` (rule `published-names` in `toolgraft::rulebook`)"
    )]
    PublishedTooLong {
        /// The tool.
        tool: Name,
        /// The published name (shortened).
        published: String,
        /// The bound name it would be served by.
        bound: Name,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        limit: usize,
    },

    /// Two published names are the same
    /// ([published-names](crate::rulebook#published-names)).
    #[error(
        "`{tool}` would publish `{published}`, which `{owner}` publishes already: a client calls one tool by one name; publish one of them under another name (rule `published-names` in `toolgraft::rulebook`)"
    )]
    PublishedTwice {
        /// The tool publishing it.
        tool: Name,
        /// The contested published name.
        published: Name,
        /// The tool that publishes it already (the same tool, if it lists it twice).
        owner: Name,
    },

    /// A run-time extension's factory failed (or panicked) while building a branch.
    #[error("`{extension}` (on `{tool}`) could not build its branch: {problem}")]
    ExtensionFailed {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// What its factory said.
        problem: String,
    },

    /// Rule `branch-by-rename`: the branch name an extension chose is not a valid name.
    #[error(
        "`{extension}` (on `{tool}`) names its branch `{name}`, which is not a valid name: {problem}"
    )]
    InvalidBranchName {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// The name it chose.
        name: String,
        /// What is wrong with it.
        problem: String,
    },

    /// A name the tool would bind is already bound by another tool.
    #[error("`{name}` is already bound (by tool `{owner}`); `{tool}` cannot bind it too")]
    NameTaken {
        /// The tool being bound.
        tool: Name,
        /// The contested name.
        name: Name,
        /// The base tool that holds it.
        owner: Name,
    },

    /// A change or a manifest names a tool that is not bound.
    #[error(
        "no base tool `{tool}` is bound (or offered in the `BaseTools` given to `bind_manifest`); bind or offer it first, or fix the name"
    )]
    UnknownTool {
        /// The name asked for.
        tool: String,
    },

    /// Rule `branch-bookkeeping`: a change or a manifest targets a branch instead of a base tool.
    #[error(
        "`{name}` is a branch of `{base}`, not a base tool; attach the combo to `{base}` instead"
    )]
    NotABase {
        /// The branch named.
        name: Name,
        /// Its base tool.
        base: Name,
    },

    /// A combo added to a tool that already carries it.
    #[error("[{combo}] is already attached to `{tool}`; leave it, or detach it first")]
    AlreadyAttached {
        /// The tool.
        tool: Name,
        /// The combo, as `a, b`.
        combo: String,
    },

    /// A combo removed from a tool that does not carry it.
    #[error("[{combo}] is not attached to `{tool}`; its combos are {attached}")]
    NotAttached {
        /// The tool.
        tool: Name,
        /// The combo, as `a, b`.
        combo: String,
        /// The combos it carries, as `[a, b], [c]`, or `none`.
        attached: String,
    },

    /// Rule `unknown-extension`: extensions that the registry does not know.
    #[error("unknown extension{} {} in a combo of `{tool}`; check the spelling, or register {}; registered: {}", if .names.len() == 1 { "" } else { "s" }, crate::error::ticked(.names), if .names.len() == 1 { "it" } else { "them" }, crate::error::ticked(.registered))]
    UnknownExtensions {
        /// The tool.
        tool: Name,
        /// Every unknown name, sorted.
        names: Vec<String>,
        /// The registered names, sorted.
        registered: Vec<String>,
    },

    /// Rule `cardinality`: more than one extension of a kind whose `multiple` is false.
    #[error("a combo of `{tool}` holds more than one {kind}: [{}]; a combo allows one {kind}, so put each in its own combo", crate::error::listed(.extensions))]
    MultipleOfKind {
        /// The tool.
        tool: Name,
        /// The kind.
        kind: ExtensionKind,
        /// The offending extensions, in combo order.
        extensions: Vec<Name>,
    },

    /// Rule `locality-inside-relocation`: a body-locality extension outside a relocating one.
    #[error(
        "on `{tool}`, `{extension}` needs to run beside the tool body but sits outside `{relocating}`, which runs the body elsewhere; place `{extension}` before `{relocating}`"
    )]
    LocalityOutsideRelocation {
        /// The tool.
        tool: Name,
        /// The extension that needs body locality.
        extension: Name,
        /// The relocating extension inside it.
        relocating: Name,
    },

    /// Rule `caller-outside-relocation`: an extension that needs the caller's session
    /// inside a relocating one.
    #[error(
        "on `{tool}`, `{extension}` needs the caller's session but sits inside `{relocating}`, which would run it on a worker with no caller to ask or report to; place `{extension}` after `{relocating}`"
    )]
    CallerLocalInsideRelocation {
        /// The tool.
        tool: Name,
        /// The extension that needs the caller's session.
        extension: Name,
        /// The relocating extension outside it.
        relocating: Name,
    },

    /// Rule `side-effects`: an extension that makes a call again (`retry`) or
    /// answers without making it (`cache`), on a layer whose hints do not allow it.
    #[error("{}", side_effects(.tool, .extension, .layer, *.demand, .transformer.as_ref()))]
    SideEffects {
        /// The tool.
        tool: Name,
        /// The extension that relies on the hints.
        extension: Name,
        /// The layer it sits on (the tool, or a branch of it).
        layer: Name,
        /// What it relies on them for.
        demand: crate::annotations::Demand,
        /// The transformer inside it whose branch, a new tool, says nothing of
        /// side effects, when there is one.
        transformer: Option<Name>,
    },

    /// Rule `config`: non-empty config for an extension that takes none.
    #[error(
        "`{extension}` (on `{tool}`) does not accept config; remove its `config` or leave it empty"
    )]
    ConfigNotAccepted {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
    },

    /// Rule `config`: a config the extension cannot parse.
    #[error(
        "config of `{extension}` (on `{tool}`) is invalid at `{field}`: {problem}; fix that field, or leave the config out for the default"
    )]
    InvalidConfig {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// The offending field.
        field: String,
        /// What is wrong.
        problem: String,
    },

    /// Rule `wrapper-input-schema`: a wrapper presented another input schema than its layer input's.
    #[error(
        "wrapper changed the schema: `{extension}` on `{tool}` must present the input schema of `{below}` unchanged (plus its reserved params), but {difference}; present it unchanged, or declare `{extension}` a transformer"
    )]
    WrapperChangedSchema {
        /// The tool.
        tool: Name,
        /// The wrapper.
        extension: Name,
        /// Its layer input.
        below: Name,
        /// The first difference found.
        difference: String,
    },

    /// Rule `output-schema`: a kind that returns the layer's output declared another
    /// output schema than the layer's.
    #[error(
        "`{extension}` on `{tool}` returns the output of `{below}` unchanged, but declares another output schema than its; declare none (the branch inherits it), or make `{extension}` a transformer"
    )]
    OutputSchemaContradicts {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// Its layer input.
        below: Name,
    },

    /// Rule `reserved-params`: a reserved param that would mask a parameter of the layer input.
    #[error(
        "reserved param `{param}` already exists: `{extension}` on `{tool}` reserves `{param}`, which `{below}` already takes; rename the reserved param"
    )]
    ReservedParamExists {
        /// The tool.
        tool: Name,
        /// The wrapper.
        extension: Name,
        /// Its layer input.
        below: Name,
        /// The contested parameter.
        param: String,
    },

    /// Rule `reserved-params`: a reserved param whose schema is not inline.
    #[error(
        "reserved param `{param}` of `{extension}` (on `{tool}`) is not an inline JSON type; reserved params cannot use `$defs` or `$ref`"
    )]
    ReservedParamNotInline {
        /// The tool.
        tool: Name,
        /// The wrapper.
        extension: Name,
        /// The parameter.
        param: String,
    },

    /// A layer input's schema is not a JSON Schema the rules can work with.
    #[error(
        "the input schema below `{extension}` (on `{tool}`) is malformed: {problem}; the layer below must present a valid object schema"
    )]
    MalformedSchema {
        /// The tool.
        tool: Name,
        /// The extension that could not be applied.
        extension: Name,
        /// What is wrong.
        problem: String,
    },

    /// Rule `transformer-input-schema`: a transformer without a concrete input schema of its own.
    #[error(
        "transformer must present its own concrete schema: `{extension}` on `{tool}` presents {presented}; give it an object schema with named properties (or none, for zero parameters)"
    )]
    TransformerSchemaNotConcrete {
        /// The tool.
        tool: Name,
        /// The transformer.
        extension: Name,
        /// What it presented instead.
        presented: String,
    },
}

impl BindError {
    /// The section of the [rulebook](crate::rulebook) this refusal enforces, such
    /// as [`Rule::Cardinality`]; `None` for a refusal that is not one of the rules (a
    /// limit, an unknown tool, a live change that does not apply).
    ///
    /// ```
    /// use toolgraft::{BindError, Name};
    /// use toolgraft::rulebook::Rule;
    /// let err = BindError::EmptyCombo { tool: Name::new("fetch")? };
    /// assert_eq!(err.rule(), Some(Rule::ManifestShape));
    /// assert_eq!(err.rule().map(Rule::as_str), Some("manifest-shape"));
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn rule(&self) -> Option<Rule> {
        Some(match self {
            Self::InvalidName(_) | Self::SameName { .. } | Self::InvalidBranchName { .. } => {
                Rule::BranchByRename
            }
            Self::NameClash { .. } | Self::NameTaken { .. } => Rule::OneBranchPerPrefix,
            Self::EmptyCombo { .. } => Rule::ManifestShape,
            Self::NotABase { .. } => Rule::BranchBookkeeping,
            Self::UnknownExtensions { .. } => Rule::UnknownExtension,
            Self::MultipleOfKind { .. } => Rule::Cardinality,
            Self::LocalityOutsideRelocation { .. } => Rule::LocalityInsideRelocation,
            Self::CallerLocalInsideRelocation { .. } => Rule::CallerOutsideRelocation,
            Self::SideEffects { .. } => Rule::SideEffects,
            Self::ExtensionFailed { .. }
            | Self::ConfigNotAccepted { .. }
            | Self::InvalidConfig { .. } => Rule::Config,
            Self::WrapperChangedSchema { .. } => Rule::WrapperInputSchema,
            Self::PinNotReserved { .. }
            | Self::ReservedParamExists { .. }
            | Self::ReservedParamNotInline { .. }
            | Self::MalformedSchema { .. } => Rule::ReservedParams,
            Self::TransformerSchemaNotConcrete { .. } => Rule::TransformerInputSchema,
            Self::OutputSchemaContradicts { .. } => Rule::OutputSchema,
            Self::ComboTooLong { .. } | Self::NameTooLong { .. } => Rule::Depth,
            Self::PublishedUnbound { .. }
            | Self::PublishedTooLong { .. }
            | Self::PublishedTwice { .. } => Rule::PublishedNames,
            // Live-change bookkeeping, not rules of a combo.
            Self::AlreadyBound { .. }
            | Self::UnknownTool { .. }
            | Self::AlreadyAttached { .. }
            | Self::NotAttached { .. } => return None,
        })
    }
}

impl ToolError {
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

/// A body's or an extension's error that may not happen again: what a body
/// returns to let `retry` make the call again (a busy database, a dropped
/// connection). Its message is the error's own.
///
/// ```
/// use toolgraft::error::{BoxError, Transient};
/// async fn fetch(url: String) -> Result<String, BoxError> {
///     Err(Transient::new(format!("{url}: connection reset")).into())
/// }
/// # let _ = fetch;
/// let err = Transient::new(std::io::Error::other("connection reset"));
/// assert_eq!(err.to_string(), "connection reset");
/// ```
#[derive(Debug)]
pub struct Transient(Box<dyn std::error::Error + Send + Sync + 'static>);

impl Transient {
    /// Marks `error` transient.
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        Self(error.into())
    }
}

impl fmt::Display for Transient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Transient {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
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

fn timed_out(
    tool: &Name,
    extension: &Name,
    job: Option<&str>,
    after: &std::time::Duration,
) -> String {
    match job {
        Some(job) => format!(
            "backend `{extension}` waited {after:?} for job `{}` (running `{tool}`) and gave up; \
             is a worker serving its queue?",
            shorten(job)
        ),
        None => format!("`{tool}` did not finish within {after:?}; `{extension}` cancelled it"),
    }
}

fn side_effects(
    tool: &Name,
    extension: &Name,
    layer: &Name,
    demand: crate::annotations::Demand,
    transformer: Option<&Name>,
) -> String {
    use crate::annotations::Demand;
    let does = match demand {
        Demand::Repeatable => "makes a call again after a failure",
        Demand::Skippable => "answers calls without making them",
    };
    let needs = demand.needs();
    if let Some(transformer) = transformer {
        return format!(
            "on `{tool}`, `{extension}` {does}, but it sits on `{layer}`, the branch of `{transformer}`: \
             a new tool whose hints say nothing of its side effects; place `{extension}` inside \
             `{transformer}`, on a layer of `{tool}` that is {needs}"
        );
    }
    let fix = match demand {
        Demand::Repeatable => format!(
            "if a second call does no more than the first, annotate `{tool}` idempotent \
             (`.idempotent()` in its builder, or \"annotations\": {{\"idempotentHint\": true}} \
             for it in the manifest); otherwise leave `{extension}` off"
        ),
        _ => format!(
            "if a call not made loses nothing, annotate `{tool}` so (`.read_only()` in its \
             builder, or `.destructive(false)` on an idempotent one; in the manifest \
             \"annotations\": {{\"readOnlyHint\": true}} or {{\"idempotentHint\": true, \
             \"destructiveHint\": false}} for it), or let `{extension}` skip its calls anyway where its config allows it (`cache`: \
             \"side_effects\": \"allowed\")"
        ),
    };
    format!("on `{tool}`, `{extension}` {does}, but `{tool}` is not annotated {needs}; {fix}")
}

fn overloaded(
    tool: &Name,
    extension: &Name,
    reason: &str,
    retry_after: Option<&std::time::Duration>,
) -> String {
    match retry_after {
        Some(after) => format!(
            "`{extension}` refused the call to `{tool}`: {reason}; retry after {}",
            Millis(*after)
        ),
        None => format!("`{extension}` refused the call to `{tool}`: {reason}"),
    }
}

/// A wait as people read it: whole milliseconds, at least 1 ms for any wait.
struct Millis(std::time::Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        let ms = nanos.div_ceil(1_000_000);
        write!(f, "{ms} ms")
    }
}

pub(crate) fn ticked(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", shorten(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Items as `a, b, c` (names, combo elements, chain links).
pub(crate) fn listed<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|item| shorten(&item.to_string()).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text of a panic payload (`panic!("..")` carries a `&str` or a `String`).
///
/// ```
/// let payload = std::panic::catch_unwind(|| panic!("boom {}", 1)).unwrap_err();
/// assert_eq!(toolgraft::error::panic_message(payload.as_ref()), "boom 1");
/// ```
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}
