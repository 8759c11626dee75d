//! The typestate behind [`Combo::with`](super::Combo::with): how the compiler
//! proves the stacking rules. Nothing here is needed to use the crate; it is here
//! for the curious reader, and for the names that appear in compile errors (a
//! helper generic over combos states [`Takes`](super::Takes) instead).
//!
//! A combo's type carries a [`State`]: the base tool whose hints its stack carries
//! (rule `side-effects` in the [rulebook](crate::rulebook)), the extensions of kinds
//! that allow one per combo (rule `cardinality`), the first extension that
//! relocates execution (rule `locality-inside-relocation`), the first that needs
//! the caller's session (rule `caller-outside-relocation`), how many layers are
//! stacked by value since the last [`Segment`], which the base goes into, and the
//! first authorization check (rule `shared-answers-inside-authorization`).
//! `.with(e)` asks one trait per rule of the state and of `e`'s [`Kind`]:
//! [`OneOfKindPerCombo`], [`InsideRelocation`], [`OutsideCallerLocal`],
//! [`OutsideAuthorization`], [`InsideAuthorization`], [`InputContract`] and
//! [`OutputContract`]. Each carries a `#[diagnostic::on_unimplemented]` message that
//! names both offenders, the rule and the fix; each is sealed, so no extension can
//! switch a rule off by implementing it. The binding engine decides the same rules
//! again at run time from the same kind properties (`bind::rules`), which is what
//! lets manifests refuse exactly what the compiler refuses.
//!
//! Typed calls find reserved params by type with [`Assemble`] and [`ReservedIn`],
//! whose `Index` ([`Here`], [`There`], [`Inside`]) the compiler infers: how many
//! wrappers sit above the one that reserves the params, and which transformers'
//! inputs the path goes into.

use std::marker::PhantomData;
use std::sync::Arc;

use frunk::hlist::{HCons, HNil};
use schemars::Schema;

use crate::extension::{Extension, FitsDynStack, Mint};
use crate::kind::property::{
    self, Anywhere, Authorizing, BodyLocal, CallerLocal, Cardinality, Declared, Execution, InPlace,
    InputRule, Locality, NoAuthorizer, NoCallerLocal, NotRelocated, Preserved, Relocator, Reshaped,
    SameShape, Unconstrained,
};
use crate::kind::{Kind, Succ, Zero};
use crate::stack::Stack;
use crate::stack::params::{self, Forwards};
pub use crate::stack::params::{Assemble, Here, Inside, ReservedIn, There};
#[doc(hidden)]
pub use crate::stack::params::{ParamBagRef, Token};
use crate::stack::segment::{SEGMENT, Segment};
use crate::tool::{NewTool, Repeated};

mod sealed {
    pub trait Sealed {}

    /// Names no one outside this crate can write: a trait with a required method
    /// taking it cannot be implemented elsewhere, so a rule cannot be switched off
    /// by implementing its trait for one's own extension.
    #[derive(Debug)]
    pub struct Token;

    /// A type no extension is, and no combo ever holds.
    #[derive(Debug)]
    pub struct Unreachable;

    /// The seal of the typestate's hidden helper traits: only the types the
    /// typestate itself computes with implement them.
    pub trait Machinery {}
}

impl sealed::Machinery for NotRelocated {}
impl sealed::Machinery for NoCallerLocal {}
impl sealed::Machinery for NoAuthorizer {}
impl<B: Extension> sealed::Machinery for B {}
impl sealed::Machinery for Zero {}
impl<N> sealed::Machinery for Succ<N> {}
impl sealed::Machinery for True {}
impl sealed::Machinery for False {}
impl sealed::Machinery for HNil {}
impl<X, Tail> sealed::Machinery for HCons<X, Tail> {}

// ---------------------------------------------------------------------------------
// The typestate: what a combo holds so far, as types.
// ---------------------------------------------------------------------------------

/// A combo's state: `Base` is the base tool whose hints the stack carries (or
/// [`NewTool`] once a transformer is in it), `Seen` lists the extensions of kinds
/// whose `multiple` is false, `Relocated` is the first relocating extension (or
/// [`NotRelocated`]), `CallerSide` the first that needs the caller's session (or
/// [`NoCallerLocal`]), `Depth` counts the layers since the last [`Segment`], and
/// `Checked` is the first authorization check (or [`NoAuthorizer`]).
#[derive(Debug)]
#[allow(clippy::type_complexity)] // One marker of the six, read by no code.
pub struct State<
    Base,
    Seen,
    Relocated,
    CallerSide = NoCallerLocal,
    Depth = Layers<0>,
    Checked = NoAuthorizer,
>(PhantomData<Marker<(Base, Seen, Relocated, CallerSide, Depth, Checked)>>);

/// A type carried for the compiler only: never held, always `Send + Sync`.
type Marker<T> = fn() -> T;

/// The state of a combo on the base tool `B`, with no extension yet.
pub type Start<B> = State<B, HNil, NotRelocated, NoCallerLocal, Layers<0>, NoAuthorizer>;

/// No extension of the kind in question sits in the combo (yet).
#[derive(Debug)]
pub struct Vacant;

/// The state after adding `E` to a combo in state `St`.
pub type Then<St, E> = <St as ComboState>::After<E>;

/// A typestate. Sealed: only [`State`] implements it.
pub trait ComboState: sealed::Sealed {
    /// The base tool whose hints the stack carries, or [`NewTool`].
    type Base: 'static;
    /// Extensions of non-`multiple` kinds so far.
    type Seen;
    /// The first relocating extension so far, or [`NotRelocated`].
    type Relocated: Relocator;
    /// The first extension so far that needs the caller's session, or [`NoCallerLocal`].
    type CallerSide: Relocator;
    /// Layers since the last segment.
    type Depth: Depth;
    /// The first authorization check so far, or [`NoAuthorizer`].
    type Checked: Relocator;
    /// The state once `E` is added.
    type After<E: Extension>;
    /// The state once the layers so far are closed into a segment.
    type Segmented;
}

impl<B, Seen, R, C, D, A> sealed::Sealed for State<B, Seen, R, C, D, A> {}

impl<B: 'static, Seen, R: Relocator, C: Relocator, D: Depth, A: Relocator> ComboState
    for State<B, Seen, R, C, D, A>
{
    type Base = B;
    type Seen = Seen;
    type Relocated = R;
    type CallerSide = C;
    type Depth = D;
    type Checked = A;
    type After<E: Extension> = State<
        // Rule `side-effects`: a wrapper's and a backend's branch carry their
        // layer's base (so its hints), a transformer's is a new tool.
        // A layer that answers repeats from what it kept makes them idempotent.
        <E::Locality as Locality>::Hinting<
            <<E::Kind as Kind>::Execution as Execution>::Hinting<
                B,
                <<E::Kind as Kind>::InputRule as InputRule>::Hinting<B, NewTool>,
            >,
            Repeated<B>,
        >,
        <<E::Kind as Kind>::Cardinality as Cardinality>::After<E, Seen>,
        <<E::Kind as Kind>::Execution as Execution>::After<E, R>,
        <E::Locality as Locality>::After<E, C>,
        D::Next,
        <E::Locality as Locality>::Checked<E, A>,
    >;
    type Segmented = State<B, Seen, R, C, Layers<0>, A>;
}

/// The stack `S` of a combo in state `St`, as its next extension receives it: `S`
/// itself, or `S` closed into a [`Segment`] that carries the state's base.
pub type Closed<St, S> = <<St as ComboState>::Depth as Depth>::Close<S, <St as ComboState>::Base>;

impl<B: Extension> property::sealed::Relocator for B {}

impl<B: Extension> Relocator for B {
    type First<E: Relocator> = B;
}

// Type-level booleans, to look a kind up in `Seen`.
#[doc(hidden)]
#[derive(Debug)]
pub struct True;
#[doc(hidden)]
#[derive(Debug)]
pub struct False;

#[doc(hidden)]
pub trait SameId<Other>: sealed::Machinery {
    type Is;
}
impl SameId<Zero> for Zero {
    type Is = True;
}
impl<N> SameId<Succ<N>> for Zero {
    type Is = False;
}
impl<N> SameId<Zero> for Succ<N> {
    type Is = False;
}
impl<A: SameId<B>, B> SameId<Succ<B>> for Succ<A> {
    type Is = A::Is;
}

#[doc(hidden)]
pub trait Pick<Yes, No>: sealed::Machinery {
    type Picked;
}
impl<Yes, No> Pick<Yes, No> for True {
    type Picked = Yes;
}
impl<Yes, No> Pick<Yes, No> for False {
    type Picked = No;
}

/// The extension of kind `K` in a `Seen` list, or [`Vacant`].
#[doc(hidden)]
pub trait HolderOf<K>: sealed::Machinery {
    type Holder;
}

impl<K> HolderOf<K> for HNil {
    type Holder = Vacant;
}

impl<K, X, Tail> HolderOf<K> for HCons<X, Tail>
where
    K: Kind,
    X: Extension,
    Tail: HolderOf<K>,
    K::Id: SameId<<X::Kind as Kind>::Id>,
    <K::Id as SameId<<X::Kind as Kind>::Id>>::Is: Pick<X, Tail::Holder>,
{
    type Holder = <<K::Id as SameId<<X::Kind as Kind>::Id>>::Is as Pick<X, Tail::Holder>>::Picked;
}

/// The extension already holding kind `K` in a combo, or [`Vacant`].
pub type HolderIn<St, K> = <<St as ComboState>::Seen as HolderOf<K>>::Holder;

// ---------------------------------------------------------------------------------
// Rule `cardinality`, typed: at most one extension of a non-`multiple` kind per combo.
//
// Why `Self` is the kind's word and the holder a parameter: when a leaf bound fails
// and its `Self` equals the `Self` of the bound the user's call asked for
// (`E: Joins<..>` in `Combo::with`), rustc reports that root bound, raw, instead of
// the leaf's message. With the holder as `Self`, the same backend type twice
// (`.with(pool.clone()).with(pool)`: holder `Pool`, `E = Pool`) lost the rule's
// words. A kind's word is never an extension, so the leaf always speaks.
// ---------------------------------------------------------------------------------

/// Rule `cardinality` at the type level: in a combo where `Holder` already holds the
/// kind `Self` (a kind's word, `backend`), or [`Vacant`] when none does, `E` may join.
#[diagnostic::on_unimplemented(
    message = "a combo holds at most one {Self}, and this combo already has `{Holder}`",
    label = "`{E}` would be a second {Self} in this combo",
    note = "the {Self} kind is not `multiple`: one combo may carry only one extension of that kind (rule `cardinality` in `toolgraft::rulebook`)",
    note = "to offer `{E}` too, put it in another combo of the tool: each combo mints its own branches, and may hold its own {Self}"
)]
pub trait OneOfKindPerCombo<Holder, E> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

#[diagnostic::do_not_recommend]
impl<K, E> OneOfKindPerCombo<Vacant, E> for K {
    fn sealed(_: sealed::Token) {}
}

// Never used: with a second impl, the compiler cannot pick the one above while the
// holder is still being computed (as it is behind a generic helper's bounds), so it
// computes the holder first and reports this trait's message, not a raw type mismatch
// against `Vacant`.
#[diagnostic::do_not_recommend]
impl<K, E> OneOfKindPerCombo<sealed::Unreachable, E> for K {
    fn sealed(_: sealed::Token) {}
}

// ---------------------------------------------------------------------------------
// Rule `locality-inside-relocation`, typed: an extension that needs body locality
// must sit inside every relocating one. `Self` is the locality `E` declares, not the
// first relocator, for the reason given at rule `cardinality`: a body-local backend
// added twice would make the relocator equal to `E`.
// ---------------------------------------------------------------------------------

/// Rule `locality-inside-relocation` at the type level: `E`, whose locality is `Self`,
/// may be added after `Relocated`, the first relocating extension of the combo (or
/// [`NotRelocated`]).
#[diagnostic::on_unimplemented(
    message = "`{E}` needs to run beside the tool body, but `{Relocated}` before it relocates execution",
    label = "`{E}` would sit outside `{Relocated}`",
    note = "everything after `{Relocated}` runs in the calling process, not where `{Relocated}` runs the body, so `{E}` would silently not apply to the body (rule `locality-inside-relocation` in `toolgraft::rulebook`)",
    note = "place `{E}` before `{Relocated}`: `.with({E}..).with({Relocated}..)`"
)]
pub trait InsideRelocation<Relocated, E> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

#[diagnostic::do_not_recommend]
impl<L, E> InsideRelocation<NotRelocated, E> for L {
    fn sealed(_: sealed::Token) {}
}

// Never used: as at rule `cardinality`, a second impl for every locality keeps the
// compiler from picking the one above while the relocator is still being computed
// (behind a generic helper's `Joins` bound), which reported a raw type mismatch
// against `NotRelocated` instead of this trait's message.
#[diagnostic::do_not_recommend]
impl<L, E> InsideRelocation<sealed::Unreachable, E> for L {
    fn sealed(_: sealed::Token) {}
}

#[diagnostic::do_not_recommend]
impl<E, B: Extension> InsideRelocation<B, E> for Anywhere {
    fn sealed(_: sealed::Token) {}
}

#[diagnostic::do_not_recommend]
impl<E, B: Extension> InsideRelocation<B, E> for CallerLocal {
    fn sealed(_: sealed::Token) {}
}

#[diagnostic::do_not_recommend]
impl<E, B: Extension> InsideRelocation<B, E> for Authorizing {
    fn sealed(_: sealed::Token) {}
}

#[diagnostic::do_not_recommend]
impl<E, B: Extension> InsideRelocation<B, E> for property::SharedAnswers {
    fn sealed(_: sealed::Token) {}
}

#[diagnostic::do_not_recommend]
impl<E, B: Extension> InsideRelocation<B, E> for property::AnswersRepeats {
    fn sealed(_: sealed::Token) {}
}

// ---------------------------------------------------------------------------------
// Rule `caller-outside-relocation`, typed: an extension that needs the caller's
// session must sit outside every relocating one. `Self` is the execution word of
// `E`'s kind (never an extension), for the reason given at rule `cardinality`.
// ---------------------------------------------------------------------------------

/// Rule `caller-outside-relocation` at the type level: `E`, whose kind executes by
/// `Self`, may be added over `CallerSide`, the first extension of the combo that
/// needs the caller's session (or [`NoCallerLocal`]).
#[diagnostic::on_unimplemented(
    message = "`{E}` relocates execution, but `{CallerSide}` before it needs the caller's session",
    label = "`{CallerSide}` would run where `{E}` sends the call, away from the caller",
    note = "everything before `{E}` runs where `{E}` runs the body (a worker thread or process), which has no caller to ask or report to, so `{CallerSide}` would silently not reach the caller (rule `caller-outside-relocation` in `toolgraft::rulebook`)",
    note = "place `{CallerSide}` after `{E}`: `.with({E}..).with({CallerSide}..)`"
)]
pub trait OutsideCallerLocal<CallerSide, E> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

#[diagnostic::do_not_recommend]
impl<X, E> OutsideCallerLocal<NoCallerLocal, E> for X {
    fn sealed(_: sealed::Token) {}
}

// Never used, for the reason given at rule `locality-inside-relocation`: the
// first extension that needs the caller's session is computed before an impl is
// picked, and a relocating kind's word reports this trait's message.
#[diagnostic::do_not_recommend]
impl<X, E> OutsideCallerLocal<sealed::Unreachable, E> for X {
    fn sealed(_: sealed::Token) {}
}

#[diagnostic::do_not_recommend]
impl<C: Extension, E> OutsideCallerLocal<C, E> for InPlace {
    fn sealed(_: sealed::Token) {}
}

// ---------------------------------------------------------------------------------
// Rule `caller-outside-relocation`, typed, for an authorization check: it must sit
// outside every relocating extension, so that it decides before a call is sent.
// Its own trait, not `OutsideCallerLocal`, for its own words: a check needs no
// caller's session (the identity travels), it needs to decide first. `Self` is
// the execution word of `E`'s kind, as there.
// ---------------------------------------------------------------------------------

/// Rule `caller-outside-relocation` at the type level, for authorization checks:
/// `E`, whose kind executes by `Self`, may be added over `Authorizer`, the first
/// authorization check of the combo (or [`NoAuthorizer`]).
#[diagnostic::on_unimplemented(
    message = "`{E}` relocates execution, but `{Authorizer}` before it decides who may call",
    label = "`{Authorizer}` would decide on the worker, after `{E}` sent the call there",
    note = "everything before `{E}` runs where `{E}` runs the body (a worker thread or process): `{Authorizer}` would check a caller only once its call was enqueued, so a caller it refuses would still have a job sent (rule `caller-outside-relocation` in `toolgraft::rulebook`)",
    note = "place `{Authorizer}` after `{E}`: `.with({E}..).with({Authorizer}..)`; it then decides in the caller's process, and a refused call is never enqueued"
)]
pub trait OutsideAuthorization<Authorizer, E> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

#[diagnostic::do_not_recommend]
impl<X, E> OutsideAuthorization<NoAuthorizer, E> for X {
    fn sealed(_: sealed::Token) {}
}

// Never used, for the reason given at rule `locality-inside-relocation`.
#[diagnostic::do_not_recommend]
impl<X, E> OutsideAuthorization<sealed::Unreachable, E> for X {
    fn sealed(_: sealed::Token) {}
}

#[diagnostic::do_not_recommend]
impl<A: Extension, E> OutsideAuthorization<A, E> for InPlace {
    fn sealed(_: sealed::Token) {}
}

// ---------------------------------------------------------------------------------
// Rule `shared-answers-inside-authorization`, typed: an extension that answers from
// what it kept must sit inside every authorization check. `Self` is the locality `E`
// declares (never an extension), for the reason given at rule `cardinality`.
// ---------------------------------------------------------------------------------

/// Rule `shared-answers-inside-authorization` at the type level: `E`, whose
/// locality is `Self`, may be added over `Authorizer`, the first authorization
/// check of the combo (or [`NoAuthorizer`]).
#[diagnostic::on_unimplemented(
    message = "`{E}` answers callers from what it kept, but `{Authorizer}` before it decides who may call",
    label = "`{E}` would answer callers before `{Authorizer}` checks them",
    note = "everything after `{Authorizer}` runs before it: `{E}` would hand a kept answer (another caller's, or one given under another token) to a caller `{Authorizer}` never saw (rule `shared-answers-inside-authorization` in `toolgraft::rulebook`)",
    note = "place `{E}` before `{Authorizer}`: `.with({E}..).with({Authorizer}..)`"
)]
pub trait InsideAuthorization<Authorizer, E> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

#[diagnostic::do_not_recommend]
impl<L, E> InsideAuthorization<NoAuthorizer, E> for L {
    fn sealed(_: sealed::Token) {}
}

// Never used, for the reason given at rule `locality-inside-relocation`.
#[diagnostic::do_not_recommend]
impl<L, E> InsideAuthorization<sealed::Unreachable, E> for L {
    fn sealed(_: sealed::Token) {}
}

macro_rules! answers_nothing_kept {
    ($($locality:ty),*) => {$(
        #[diagnostic::do_not_recommend]
        impl<E, A: Extension> InsideAuthorization<A, E> for $locality {
            fn sealed(_: sealed::Token) {}
        }
    )*};
}

answers_nothing_kept!(Anywhere, BodyLocal, CallerLocal, Authorizing);

// ---------------------------------------------------------------------------------
// Rules `wrapper-input-schema`, `transformer-input-schema` and
// `backend-input-schema`, typed: what the branch takes, keyed off the kind's input rule.
// ---------------------------------------------------------------------------------

/// Rule `wrapper-input-schema` at the type level: the branch input `Branch` of `E` fits the kind's input
/// rule over the layer input `Below`.
#[diagnostic::on_unimplemented(
    message = "`{E}` is a wrapper, so its branch must take the layer input unchanged",
    label = "this layer takes `{Below}`, but the branch of `{E}` takes `{Branch}`",
    note = "a wrapper presents its layer input's schema as is; it may only add reserved params, as `WithParams<Params, {Below}>` (rule `wrapper-input-schema` in `toolgraft::rulebook`)",
    note = "an extension that presents an input of its own is a transformer: declare `type Kind = Transformer;`"
)]
pub trait InputContract<E, Below, Branch> {
    /// The reserved params the branch adds, as a schema.
    #[doc(hidden)]
    fn reserved(_: sealed::Token) -> Option<Arc<Schema>>;
}

#[diagnostic::do_not_recommend]
impl<E, Below, Branch: Forwards<Below>> InputContract<E, Below, Branch> for Preserved {
    fn reserved(_: sealed::Token) -> Option<Arc<Schema>> {
        <Branch::Reserved as params::sealed::ReservedParams>::shared_schema()
    }
}

#[diagnostic::do_not_recommend]
impl<E, Below, Branch> InputContract<E, Below, Branch> for Declared {
    fn reserved(_: sealed::Token) -> Option<Arc<Schema>> {
        None
    }
}

#[diagnostic::do_not_recommend]
impl<E, Below, Branch> InputContract<E, Below, Branch> for Unconstrained {
    fn reserved(_: sealed::Token) -> Option<Arc<Schema>> {
        None
    }
}

// ---------------------------------------------------------------------------------
// Rule `output-schema`, typed: a kind that preserves output shape returns the layer's output.
// ---------------------------------------------------------------------------------

/// Rule `output-schema` at the type level: the branch output `Branch` fits the kind's output rule
/// over the layer output `Below`.
#[diagnostic::on_unimplemented(
    message = "`{E}` must return the layer's output unchanged, but its branch returns another type",
    label = "this layer returns `{Below}`, but the branch of `{E}` returns `{Branch}`",
    note = "wrappers and backends preserve output shape, which is what lets their branches inherit the tool's output schema (rule `output-schema` in `toolgraft::rulebook`)",
    note = "an extension that reshapes the result is a transformer: declare `type Kind = Transformer;`"
)]
pub trait OutputContract<E, Below, Branch> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

#[diagnostic::do_not_recommend]
impl<E, O> OutputContract<E, O, O> for SameShape {
    fn sealed(_: sealed::Token) {}
}

#[diagnostic::do_not_recommend]
impl<E, Below, Branch> OutputContract<E, Below, Branch> for Reshaped {
    fn sealed(_: sealed::Token) {}
}

/// The typestate's count of layers stacked by value: `Layers<N>` for `N` up to
/// [`SEGMENT`].
#[doc(hidden)]
pub trait Depth: sealed::Sealed {
    /// The count once one more layer is added.
    type Next: Depth;
    /// The stack `S` as the next layer receives it: `S` itself, or `S` closed into
    /// a [`Segment`] when it already holds [`SEGMENT`] layers by value.
    /// `Base` is the base tool the segment carries (see [`ComboState::Base`]).
    type Close<S: Stack, Base: 'static>: Stack<Input = S::Input, Output = S::Output>;
    /// Closes `stack` if it holds [`SEGMENT`] layers by value.
    fn close<S: Stack, Base: 'static>(stack: S) -> Self::Close<S, Base>;
}

/// `N` layers stacked by value since the base or the last [`Segment`].
#[doc(hidden)]
#[derive(Debug)]
pub struct Layers<const N: usize>;

macro_rules! open_layers {
    ($($n:literal => $next:literal),*) => {$(
        impl sealed::Sealed for Layers<$n> {}
        impl Depth for Layers<$n> {
            type Next = Layers<$next>;
            type Close<S: Stack, Base: 'static> = S;
            #[inline(always)]
            fn close<S: Stack, Base: 'static>(stack: S) -> S {
                stack
            }
        }
    )*};
}

open_layers!(0 => 1, 1 => 2, 2 => 3, 3 => 4, 4 => 5, 5 => 6, 6 => 7, 7 => 8);

impl sealed::Sealed for Layers<SEGMENT> {}
impl Depth for Layers<SEGMENT> {
    // The stack is closed, and the layer about to be added is the first above it.
    type Next = Layers<1>;
    type Close<S: Stack, Base: 'static> = Segment<S::Input, S::Output, Base>;
    fn close<S: Stack, Base: 'static>(stack: S) -> Self::Close<S, Base> {
        Segment::close(stack)
    }
}

/// Names the typestate's token, for the combo module's calls into sealed methods.
pub(crate) fn token() -> sealed::Token {
    sealed::Token
}

/// Every rule of [`Combo::with`](super::Combo::with) at once: `Self` may be added to a
/// combo over the stack `S` in the state `St`.
///
/// Implemented for every extension that passes all the rule traits
/// ([`OneOfKindPerCombo`], [`InsideRelocation`], [`OutsideCallerLocal`],
/// [`OutsideAuthorization`], [`InsideAuthorization`], [`InputContract`],
/// [`OutputContract`]); when one fails, the compiler reports that one, with its own
/// message; and a wrapper must fit the run-time stack too (`FitsDynStack`), since a
/// manifest runs the same wrapper. That a wrapper's branch is
/// [`Wrapped`](crate::extension::Wrapped) needs no rule trait: [`Mint`] only ever
/// mints that, and a wrapper has one locality, its `Extension` impl's.
pub trait Joins<S: Stack, St: ComboState>: Mint<Closed<St, S>> {
    /// The reserved params the branch adds, as a schema.
    #[doc(hidden)]
    fn reserved(_: sealed::Token) -> Option<Arc<Schema>>;
}

// No `do_not_recommend` here: the compiler looks through this impl and reports the
// rule trait that failed, with its own message.
impl<E, S, St> Joins<S, St> for E
where
    S: Stack,
    St: ComboState,
    E: Mint<Closed<St, S>>,
    St::Seen: HolderOf<E::Kind>,
    <E::Kind as Kind>::Word: OneOfKindPerCombo<HolderIn<St, E::Kind>, E>,
    E::Locality: InsideRelocation<St::Relocated, E>,
    <E::Kind as Kind>::Word: FitsDynStack<E>,
    <E::Kind as Kind>::InputRule: InputContract<E, S::Input, <E::Branch as Stack>::Input>,
    <E::Kind as Kind>::OutputRule: OutputContract<E, S::Output, <E::Branch as Stack>::Output>,
    <E::Kind as Kind>::Execution: OutsideCallerLocal<St::CallerSide, E>,
    <E::Kind as Kind>::Execution: OutsideAuthorization<St::Checked, E>,
    E::Locality: InsideAuthorization<St::Checked, E>,
{
    fn reserved(token: sealed::Token) -> Option<Arc<Schema>> {
        <<E::Kind as Kind>::InputRule as InputContract<E, S::Input, <E::Branch as Stack>::Input>>::reserved(token)
    }
}

/// The reserved params of a branch, as a schema (for the engine; the typestate
/// checked the contract already).
pub(crate) fn reserved_schema<E, Below, Branch, Rule>() -> Option<Arc<Schema>>
where
    Rule: InputContract<E, Below, Branch>,
{
    Rule::reserved(sealed::Token)
}
