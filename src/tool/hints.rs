//! What a tool's hints promise about calling it again, or not calling it: what
//! `retry` and `cache` rely on (rule `side-effects` in the [rulebook](crate::rulebook)).
//!
//! The hints are values ([`Annotations`]) that the binding engine reads for every
//! combo, typed or from a manifest; a typed tool also carries the two that make a
//! second call safe as a type ([`ReadOnly`], [`Idempotent`], or [`Unsaid`]), so
//! that a typed `retry` on a tool that does not promise it does not compile.

use crate::annotations::Annotations;
use crate::kind::property::{
    AnswersRepeats, Anywhere, Authorizing, BodyLocal, CallerLocal, Locality, SharedAnswers,
};
use crate::stack::Stack;
use crate::stack::erased::DynStack;
use crate::stack::segment::Segment;

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
    note = "a second call of a tool that is neither read-only nor idempotent may do its work again, sending a mail or charging a card twice (rule `side-effects` in `toolgraft::rulebook`)",
    note = "if a second call does no more than the first, say so in the tool's builder: `.idempotent()` (or `.read_only()`); otherwise put `OncePerKey` under the retry (`.with(OncePerKey::default()).with(Retry..)`), which answers a repeated call with the first one's outcome, or leave the retry off"
)]
pub trait Repeatable: Hints {}

impl Repeatable for ReadOnly {}
impl Repeatable for Idempotent {}
impl Repeatable for AtBind {}

/// A stack that carries its base tool's [`Hints`] as a type: a typed tool, every
/// wrapper's and backend's branch over one (they keep their layer's hints), the
/// [`Segment`](crate::extension::Segment) a deep combo closes its layers into
/// (it carries its base tool's type), and the run-time stacks ([`AtBind`]). A
/// transformer's branch is a new tool and carries none (rule `side-effects` in the
/// [rulebook](crate::rulebook)), nor does a segment with a transformer in it.
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
    label = "its type says nothing of the side effects (a transformer's branch, an `impl BaseTool`, a stack of your own)",
    note = "a transformer's branch is a new tool: its base's hints do not say what it does (rule `side-effects` in `toolgraft::rulebook`); place the retry inside the transformer",
    note = "a backend's branch keeps its layer's hints: implement `Hinted` for it with `type Hints = S::Hints;`",
    note = "a tool returned as `impl BaseTool<..>` hides its hints: return `impl BaseTool<..> + Hinted<Hints = ReadOnly>` (or `Idempotent`)"
)]
pub trait Hinted: Stack {
    /// The base tool's hints.
    type Hints: Hints;
}

impl Hinted for DynStack {
    type Hints = AtBind;
}

// A segment's layers are its base tool's, closed: it carries that tool's hints when
// every layer in it keeps its layer's, as a wrapper's and a backend's branch do.
// With a transformer among them its `Base` is `NewTool`, which carries none; then
// the compiler names the segment (whose type shows `NewTool`), not `NewTool` alone.
#[diagnostic::do_not_recommend]
impl<I, O, B> Hinted for Segment<I, O, B>
where
    I: Send + 'static,
    O: serde::Serialize + Send + 'static,
    B: Hinted,
{
    type Hints = B::Hints;
}

// A segment with a layer that answers repeats among its layers presents
// idempotent hints, whatever its base (a transformer's branch too).
#[diagnostic::do_not_recommend]
impl<I, O, B> Hinted for Segment<I, O, Repeated<B>>
where
    I: Send + 'static,
    O: serde::Serialize + Send + 'static,
    B: 'static,
{
    type Hints = Idempotent;
}

/// The hints a wrapper whose locality is `Self` gives its branch over `S`:
/// `S`'s own, or, for one that answers repeated calls from what it kept
/// ([`AnswersRepeats`](crate::extension::AnswersRepeats)), [`Idempotent`] whatever
/// `S` says (a transformer's branch, a stack that carries no hints, included).
/// Nothing to implement.
#[doc(hidden)]
pub trait Grants<S>: Locality {
    /// The branch's hints.
    type Hints: Hints;
}

macro_rules! keeps_its_layers_hints {
    ($($locality:ty),*) => {$(
        impl<S: Hinted> Grants<S> for $locality {
            type Hints = S::Hints;
        }
    )*};
}

keeps_its_layers_hints!(Anywhere, BodyLocal, CallerLocal, Authorizing, SharedAnswers);

impl<S> Grants<S> for AnswersRepeats {
    type Hints = Idempotent;
}

/// What a combo's typestate carries as its base once a layer answers repeated
/// calls from what it kept ([`AnswersRepeats`](crate::extension::AnswersRepeats)):
/// the base `B`, made idempotent. Never held.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Repeated<B>(std::marker::PhantomData<fn() -> B>);

/// What a [`Segment`](crate::extension::Segment) carries as its base once a
/// transformer sits among its layers: a transformer's branch is a new tool, which
/// carries no hints of the tool under it (rule `side-effects` in the
/// [rulebook](crate::rulebook)). Never held.
#[derive(Clone, Copy, Debug)]
pub struct NewTool;

#[cfg(test)]
mod tests {
    use std::any::TypeId;

    use super::*;

    /// Whether a wrapper of locality `L` gives its branch over a stack of hints
    /// known only when bound (`DynStack`) idempotent hints of its own.
    fn grants_idempotence<L: Grants<DynStack>>() -> bool {
        TypeId::of::<<L as Grants<DynStack>>::Hints>() == TypeId::of::<Idempotent>()
    }

    // The typed rule (`Grants`) and the one the binding engine reads
    // (`Locality::ANSWERS_REPEATS`) say the same of every locality.
    #[test]
    fn the_typed_and_the_run_time_rule_agree_on_every_locality() {
        fn agrees<L: Grants<DynStack>>() -> bool {
            grants_idempotence::<L>() == L::ANSWERS_REPEATS
        }
        assert!(agrees::<Anywhere>());
        assert!(agrees::<BodyLocal>());
        assert!(agrees::<CallerLocal>());
        assert!(agrees::<Authorizing>());
        assert!(agrees::<SharedAnswers>());
        assert!(agrees::<AnswersRepeats>());
        assert!(grants_idempotence::<AnswersRepeats>());
    }
}
