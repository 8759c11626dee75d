//! What a tool's hints promise about calling it again, or not calling it: what
//! `retry` and `cache` rely on (rule `side-effects` in the [rulebook](crate::rulebook)).
//!
//! The hints are values ([`Annotations`]) that the binding engine reads for every
//! combo, typed or from a manifest; a typed tool also carries the two that make a
//! second call safe as a type ([`ReadOnly`], [`Idempotent`], or [`Unsaid`]), so
//! that a typed `retry` on a tool that does not promise it does not compile.

use crate::stack::Stack;
use crate::stack::erased::DynStack;
use crate::tool::Annotations;

/// What an extension relies on a tool's hints for: what it does with the calls it
/// is given (rule `side-effects` in the [rulebook](crate::rulebook)).
///
/// ```
/// use toolgraft::tool::{Annotations, Demand};
/// let read_only = Annotations { read_only: Some(true), ..Annotations::default() };
/// let deletes = Annotations { idempotent: Some(true), destructive: Some(true), ..Annotations::default() };
/// assert!(read_only.allow(Demand::Repeatable) && read_only.allow(Demand::Skippable));
/// assert!(deletes.allow(Demand::Repeatable) && !deletes.allow(Demand::Skippable));
/// assert!(!Annotations::default().allow(Demand::Repeatable));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Demand {
    /// It makes a call again with the same arguments (`retry`): the tool must be
    /// read-only or idempotent, so that two calls do no more than one.
    Repeatable,
    /// It answers some calls without making them (`cache`): the tool must be
    /// read-only, or idempotent and not destructive, so that a call not made
    /// loses nothing.
    Skippable,
}

impl Demand {
    /// What the demand promises in words, as errors say it.
    pub(crate) fn needs(self) -> &'static str {
        match self {
            Self::Repeatable => "read-only or idempotent",
            Self::Skippable => "read-only, or idempotent and not destructive",
        }
    }
}

impl Annotations {
    /// Whether these hints allow what `demand` does. Only hints said count: MCP's
    /// defaults for a tool that says nothing are "may change things, may destroy,
    /// not idempotent".
    pub fn allow(&self, demand: Demand) -> bool {
        let read_only = self.read_only == Some(true);
        let idempotent = self.idempotent == Some(true);
        match demand {
            Demand::Repeatable => read_only || idempotent,
            Demand::Skippable => read_only || (idempotent && self.destructive != Some(true)),
        }
    }

    /// These hints with each one `other` says replacing this one's: what a
    /// manifest's `"annotations"` do to a tool's own.
    ///
    /// ```
    /// use toolgraft::tool::Annotations;
    /// let own = Annotations { read_only: Some(false), open_world: Some(true), ..Annotations::default() };
    /// let said = Annotations { read_only: Some(true), ..Annotations::default() };
    /// let hints = own.overridden_by(&said);
    /// assert_eq!((hints.read_only, hints.open_world), (Some(true), Some(true)));
    /// ```
    pub fn overridden_by(&self, other: &Annotations) -> Self {
        Self {
            title: other.title.clone().or_else(|| self.title.clone()),
            read_only: other.read_only.or(self.read_only),
            destructive: other.destructive.or(self.destructive),
            idempotent: other.idempotent.or(self.idempotent),
            open_world: other.open_world.or(self.open_world),
        }
    }

    /// The hints of a transformer's branch: a new tool, of which the base's hints
    /// about side effects say nothing (a `chain` also calls another tool, a
    /// `batch` calls many times). What is not about side effects is kept.
    pub(crate) fn of_new_tool(&self) -> Self {
        Self {
            title: self.title.clone(),
            open_world: self.open_world,
            read_only: None,
            destructive: None,
            idempotent: None,
        }
    }
}

mod sealed {
    pub trait Hints {}
}

/// A typed tool's hints about a second call, as a type: [`Unsaid`] (the default),
/// [`ReadOnly`] or [`Idempotent`], set by the builder's
/// [`read_only`](crate::tool::ToolBuilder::read_only) and
/// [`idempotent`](crate::tool::ToolBuilder::idempotent). Sealed.
pub trait Hints: sealed::Hints + Send + Sync + 'static {
    /// Writes what the type promises into the hints' values.
    #[doc(hidden)]
    fn say(annotations: &mut Annotations) {
        let _ = annotations;
    }
}

/// The tool says nothing of calling it twice: MCP's defaults (it may change
/// things, and twice may do more than once).
#[derive(Clone, Copy, Debug, Default)]
pub struct Unsaid;

/// The tool changes nothing (`readOnlyHint`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadOnly;

/// Calling the tool twice with the same arguments does no more than once
/// (`idempotentHint`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Idempotent;

/// Hints read when the combo is bound, not before: a run-time stack's
/// ([`DynStack`](crate::runtime::DynStack), a [`DynTool`](crate::runtime::DynTool)'s), whose hints are values.
#[derive(Clone, Copy, Debug, Default)]
pub struct AtBind;

impl sealed::Hints for Unsaid {}
impl sealed::Hints for ReadOnly {}
impl sealed::Hints for Idempotent {}
impl sealed::Hints for AtBind {}
impl Hints for Unsaid {}
impl Hints for ReadOnly {
    fn say(annotations: &mut Annotations) {
        annotations.read_only = Some(true);
    }
}
impl Hints for Idempotent {
    fn say(annotations: &mut Annotations) {
        annotations.idempotent = Some(true);
    }
}
impl Hints for AtBind {}

/// Hints that let a call be made again: what a typed `retry` asks of the tool
/// under it.
///
/// ```
/// use toolgraft::tool::{AtBind, Idempotent, ReadOnly, Repeatable};
/// fn repeatable<H: Repeatable>() {}
/// repeatable::<ReadOnly>();
/// repeatable::<Idempotent>();
/// repeatable::<AtBind>(); // checked when bound
/// ```
#[diagnostic::on_unimplemented(
    message = "this wrapper makes a call again, but the tool's hints are `{Self}`: it is not annotated read-only or idempotent",
    label = "the tool under this layer may do more when called twice",
    note = "a second call of a tool that is neither read-only nor idempotent may send the mail twice (rule `side-effects` in `toolgraft::rulebook`)",
    note = "if a second call does no more than the first, say so in the tool's builder: `.idempotent()` (or `.read_only()`); otherwise leave the retry off"
)]
pub trait Repeatable: Hints {}

impl Repeatable for ReadOnly {}
impl Repeatable for Idempotent {}
impl Repeatable for AtBind {}

/// A stack that carries its base tool's [`Hints`] as a type: a typed tool, every
/// wrapper's and backend's branch over one (they keep their layer's hints), and
/// the run-time stacks ([`AtBind`]). A transformer's branch is a new tool and
/// carries none (rule `side-effects` in the [rulebook](crate::rulebook)).
///
/// A backend of another crate implements it for its branch as
/// `type Hints = S::Hints;`. What the type says is checked again when the combo is
/// bound, from the hints' values: a branch that claimed more than its layer's is
/// refused there.
///
/// ```
/// use toolgraft::Tool;
/// use toolgraft::tool::{Hinted, ReadOnly};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Query { q: String }
/// fn hints<S: Hinted<Hints = ReadOnly>>(_: &S) {}
/// let search = Tool::builder().name("search").description("Search.").read_only()
///     .body(|i: Query| async move { Ok(i.q) }).build()?;
/// hints(&search);
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` carries no hints of its base tool, so whether a call may be made again is not known",
    label = "a transformer's branch (or a stack of your own) says nothing of its side effects",
    note = "a transformer's branch is a new tool: its base's hints do not say what it does (rule `side-effects` in `toolgraft::rulebook`); place the retry inside the transformer",
    note = "a backend's branch keeps its layer's hints: implement `Hinted` for it with `type Hints = S::Hints;`"
)]
pub trait Hinted: Stack {
    /// The base tool's hints.
    type Hints: Hints;
}

impl Hinted for DynStack {
    type Hints = AtBind;
}
