//! The stacking rules of the [rulebook](crate::rulebook), each in one place.
//!
//! Rules 5 (cardinality), 6 (locality inside relocation), 8 (wrapper input) and 12
//! (output shape) exist twice here, on purpose side by side: as trait bounds that the
//! typestate combo puts on `.with(..)` (the typed path, checked by the compiler), and
//! as functions the binding engine runs on every combo (the run-time path; for typed
//! combos they can only pass). Both read the same kind properties.
//!
//! The type-level vocabulary mirrors [`ExtensionKind`]'s properties:
//!
//! ```
//! use toolgraft::rules::{AtMostOne, Cardinality, Execution, InPlace, Many, OutputRule,
//!     Relocating, Reshaped, SameShape};
//! use toolgraft::{Backend, Kind};
//!
//! assert!(Many::MULTIPLE && !AtMostOne::MULTIPLE);
//! assert!(Relocating::RELOCATES_EXECUTION && !InPlace::RELOCATES_EXECUTION);
//! assert!(SameShape::PRESERVES_OUTPUT_SHAPE && !Reshaped::PRESERVES_OUTPUT_SHAPE);
//! assert_eq!(<Backend as Kind>::MULTIPLE, <<Backend as Kind>::Cardinality as Cardinality>::MULTIPLE);
//! ```

use std::marker::PhantomData;
use std::sync::Arc;

use frunk::{HCons, HNil};
use schemars::Schema;

use crate::bind::{Element, Problem, Running};
use crate::error::BindError;
use crate::extension::Extension;
use crate::kind::{ExtensionKind, Kind, Succ, Zero};
use crate::name::Name;
use crate::params::{Forwards, ReservedParams};
use crate::schema::{self, ReservedConflict};
use crate::segment::{Depth, Layers};

mod sealed {
    pub trait Sealed {}

    /// Names no one outside this crate can write: a trait with a required method
    /// taking it cannot be implemented elsewhere, so a rule cannot be switched off
    /// by implementing its trait for one's own extension.
    #[derive(Debug)]
    pub struct Token;

    /// The seal of the typestate's hidden helper traits: only the types the
    /// typestate itself computes with implement them.
    pub trait Machinery {}
}

impl sealed::Machinery for NotRelocated {}
impl<B: Extension> sealed::Machinery for B {}
impl sealed::Machinery for Zero {}
impl<N> sealed::Machinery for Succ<N> {}
impl sealed::Machinery for True {}
impl sealed::Machinery for False {}
impl sealed::Machinery for HNil {}
impl<X, Tail> sealed::Machinery for HCons<X, Tail> {}
impl sealed::Machinery for Anywhere {}
impl sealed::Machinery for BodyLocal {}

// ---------------------------------------------------------------------------------
// Type-level vocabulary: the kind properties and extension locality as types.
// ---------------------------------------------------------------------------------

/// Type-level `multiple`.
pub trait Cardinality: sealed::Sealed {
    /// The property's value.
    const MULTIPLE: bool;
    #[doc(hidden)]
    type After<E, Seen>;
}

/// More than one extension of the kind may sit in a combo.
#[derive(Debug)]
pub struct Many;
/// At most one extension of the kind may sit in a combo.
#[derive(Debug)]
pub struct AtMostOne;

impl sealed::Sealed for Many {}
impl sealed::Sealed for AtMostOne {}

impl Cardinality for Many {
    const MULTIPLE: bool = true;
    type After<E, Seen> = Seen;
}

impl Cardinality for AtMostOne {
    const MULTIPLE: bool = false;
    // Remember the extension: a second one of its kind will be refused by name.
    type After<E, Seen> = HCons<E, Seen>;
}

/// Type-level `relocates_execution`.
pub trait Execution: sealed::Sealed {
    /// The property's value.
    const RELOCATES_EXECUTION: bool;
    #[doc(hidden)]
    type After<E: Extension, R: Relocator>: Relocator;
}

/// The body runs where the extension runs.
#[derive(Debug)]
pub struct InPlace;
/// The extension runs the layer below somewhere else.
#[derive(Debug)]
pub struct Relocating;

impl sealed::Sealed for InPlace {}
impl sealed::Sealed for Relocating {}

impl Execution for InPlace {
    const RELOCATES_EXECUTION: bool = false;
    type After<E: Extension, R: Relocator> = R;
}

impl Execution for Relocating {
    const RELOCATES_EXECUTION: bool = true;
    type After<E: Extension, R: Relocator> = R::First<E>;
}

/// Type-level `preserves_schema` and `declares_schema`.
pub trait InputRule: sealed::Sealed {
    /// `preserves_schema`.
    const PRESERVES_SCHEMA: bool;
    /// `declares_schema`.
    const DECLARES_SCHEMA: bool;
}

/// The branch takes the layer input unchanged, plus reserved params (wrappers).
#[derive(Debug)]
pub struct Preserved;
/// The branch presents its own concrete input (transformers).
#[derive(Debug)]
pub struct Declared;
/// No input rule (backends).
#[derive(Debug)]
pub struct Unconstrained;

impl sealed::Sealed for Preserved {}
impl sealed::Sealed for Declared {}
impl sealed::Sealed for Unconstrained {}

impl InputRule for Preserved {
    const PRESERVES_SCHEMA: bool = true;
    const DECLARES_SCHEMA: bool = false;
}

impl InputRule for Declared {
    const PRESERVES_SCHEMA: bool = false;
    const DECLARES_SCHEMA: bool = true;
}

impl InputRule for Unconstrained {
    const PRESERVES_SCHEMA: bool = false;
    const DECLARES_SCHEMA: bool = false;
}

/// Type-level `preserves_output_shape`.
pub trait OutputRule: sealed::Sealed {
    /// The property's value.
    const PRESERVES_OUTPUT_SHAPE: bool;
}

/// The branch returns the layer's output type.
#[derive(Debug)]
pub struct SameShape;
/// The branch returns an output of its own.
#[derive(Debug)]
pub struct Reshaped;

impl sealed::Sealed for SameShape {}
impl sealed::Sealed for Reshaped {}

impl OutputRule for SameShape {
    const PRESERVES_OUTPUT_SHAPE: bool = true;
}

impl OutputRule for Reshaped {
    const PRESERVES_OUTPUT_SHAPE: bool = false;
}

/// Whether an extension needs body locality: a property of one extension, not of
/// its kind.
///
/// ```
/// use toolgraft::{Anywhere, BodyLocal, Locality};
/// assert!(BodyLocal::REQUIRES_BODY_LOCALITY && !Anywhere::REQUIRES_BODY_LOCALITY);
/// ```
pub trait Locality: sealed::Sealed + Send + Sync + 'static {
    /// True when the extension only works in the thread/task that runs the body.
    const REQUIRES_BODY_LOCALITY: bool;
}

/// The extension works wherever it runs.
#[derive(Debug)]
pub struct Anywhere;
/// The extension only works beside the tool body (it sets a task-local, say), so it
/// must sit inside any relocating extension.
#[derive(Debug)]
pub struct BodyLocal;

impl sealed::Sealed for Anywhere {}
impl sealed::Sealed for BodyLocal {}

impl Locality for Anywhere {
    const REQUIRES_BODY_LOCALITY: bool = false;
}

impl Locality for BodyLocal {
    const REQUIRES_BODY_LOCALITY: bool = true;
}

// ---------------------------------------------------------------------------------
// The typestate: what a combo holds so far, as types.
// ---------------------------------------------------------------------------------

/// A combo's state: `Seen` lists the extensions of kinds whose `multiple` is false,
/// `Relocated` is the first relocating extension (or [`NotRelocated`]), `Depth`
/// counts the layers since the last [`Segment`](crate::Segment).
#[derive(Debug)]
pub struct State<Seen, Relocated, Depth = Layers<0>>(PhantomData<Marker<(Seen, Relocated, Depth)>>);

/// A type carried for the compiler only: never held, always `Send + Sync`.
type Marker<T> = fn() -> T;

/// The state of a combo with no extension yet.
pub type Start = State<HNil, NotRelocated, Layers<0>>;

/// No extension of the combo relocates execution (yet).
#[derive(Debug)]
pub struct NotRelocated;

/// No extension of the kind in question sits in the combo (yet).
#[derive(Debug)]
pub struct Vacant;

/// The state after adding `E` to a combo in state `St`.
pub type Then<St, E> = <St as ComboState>::After<E>;

/// A typestate. Sealed: only [`State`] implements it.
pub trait ComboState: sealed::Sealed {
    /// Extensions of non-`multiple` kinds so far.
    type Seen;
    /// The first relocating extension so far, or [`NotRelocated`].
    type Relocated: Relocator;
    /// Layers since the last segment.
    type Depth: Depth;
    /// The state once `E` is added.
    type After<E: Extension>;
    /// The state once the layers so far are closed into a segment.
    type Segmented;
}

impl<Seen, R, D> sealed::Sealed for State<Seen, R, D> {}

impl<Seen, R: Relocator, D: Depth> ComboState for State<Seen, R, D> {
    type Seen = Seen;
    type Relocated = R;
    type Depth = D;
    type After<E: Extension> = State<
        <<E::Kind as Kind>::Cardinality as Cardinality>::After<E, Seen>,
        <<E::Kind as Kind>::Execution as Execution>::After<E, R>,
        D::Next,
    >;
    type Segmented = State<Seen, R, Layers<0>>;
}

/// The stack `S` of a combo in state `St`, as its next extension receives it: `S`
/// itself, or `S` closed into a [`Segment`](crate::Segment).
pub type Closed<St, S> = <<St as ComboState>::Depth as Depth>::Close<S>;

/// What relocated a combo so far: [`NotRelocated`], or the first relocating
/// extension itself (so a diagnostic can name it).
#[doc(hidden)]
pub trait Relocator: sealed::Machinery {
    /// The first relocator once `E` (which relocates) is added.
    type First<E: Extension>: Relocator;
}

impl Relocator for NotRelocated {
    type First<E: Extension> = E;
}

impl<B: Extension> Relocator for B {
    type First<E: Extension> = B;
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
// Rule 5, typed: at most one extension of a non-`multiple` kind per combo.
// `Self` is the extension already holding kind `K`, or `Vacant`.
// ---------------------------------------------------------------------------------

/// Rule 5 at the type level: `Self` (the holder of kind `K` so far) lets `E` join.
#[diagnostic::on_unimplemented(
    message = "a combo holds at most one {K}, and this combo already has `{Self}`",
    label = "`{E}` would be a second {K} in this combo",
    note = "the {K} kind is not `multiple`: one combo may carry only one extension of that kind (rule `cardinality` in `toolgraft::rulebook`)",
    note = "to offer `{E}` too, put it in another combo of the tool: each combo mints its own branches, and may hold its own {K}"
)]
pub trait OneOfKindPerCombo<K, E> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

#[diagnostic::do_not_recommend]
impl<K, E> OneOfKindPerCombo<K, E> for Vacant {
    fn sealed(_: sealed::Token) {}
}

// ---------------------------------------------------------------------------------
// Rule 6, typed: an extension that needs body locality must sit inside every
// relocating one. `Self` is the first relocator, or `NotRelocated`.
// ---------------------------------------------------------------------------------

/// Rule 6 at the type level: `E` may be added after `Self`, the first relocating
/// extension of the combo (or [`NotRelocated`]).
#[diagnostic::on_unimplemented(
    message = "`{E}` needs to run beside the tool body, but `{Self}` before it relocates execution",
    label = "`{E}` would sit outside `{Self}`",
    note = "everything after `{Self}` runs in the calling process, not where `{Self}` runs the body, so `{E}` would silently not apply to the body (rule `locality-inside-relocation` in `toolgraft::rulebook`)",
    note = "place `{E}` before `{Self}`: `.with({E}..).with({Self}..)`"
)]
pub trait InsideRelocation<E> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

#[diagnostic::do_not_recommend]
impl<E> InsideRelocation<E> for NotRelocated {
    fn sealed(_: sealed::Token) {}
}

#[diagnostic::do_not_recommend]
impl<E: Extension, B: Extension> InsideRelocation<E> for B
where
    E::Locality: MayRunOutside,
{
    fn sealed(_: sealed::Token) {}
}

#[doc(hidden)]
pub trait MayRunOutside: sealed::Machinery {}
impl MayRunOutside for Anywhere {}

/// Rule 6 for branches minted on another's behalf: extension `Self` may mint a
/// branch that runs the wrapper `W` (a cache's store, say) only if `Self` is at
/// least as body-local as `W`; else the rules would place `W` by a locality it
/// does not have.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot mint a branch of `{W}`: `{W}` needs to run beside the tool body, and `{Self}` does not say so",
    label = "`{Self}` would be placed as if `{W}` could run anywhere",
    note = "the rules place an extension by its own `Locality`: a branch that runs `{W}` would be allowed outside a backend, where `{W}` silently does not apply to the body (rule `locality-inside-relocation` in `toolgraft::rulebook`)",
    note = "declare `type Locality = BodyLocal;` on `{Self}`, or use `{W}` itself as an extension of the combo"
)]
pub trait MintsBranchOf<W> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

#[diagnostic::do_not_recommend]
impl<E: Extension, W: Extension> MintsBranchOf<W> for E
where
    E::Locality: Covers<W::Locality>,
{
    fn sealed(_: sealed::Token) {}
}

/// `Self`, a locality, covers the locality `L`: body-local covers both.
#[doc(hidden)]
pub trait Covers<L>: sealed::Machinery {}
impl Covers<Anywhere> for Anywhere {}
impl<L> Covers<L> for BodyLocal {}

// ---------------------------------------------------------------------------------
// Rules 8, 10, 11, typed: what the branch takes, keyed off the kind's input rule.
// ---------------------------------------------------------------------------------

/// Rule 8 at the type level: the branch input `Branch` of `E` fits the kind's input
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
    fn reserved(_: sealed::Token) -> Option<Schema>;
}

#[diagnostic::do_not_recommend]
impl<E, Below, Branch: Forwards<Below>> InputContract<E, Below, Branch> for Preserved {
    fn reserved(_: sealed::Token) -> Option<Schema> {
        <Branch::Reserved as ReservedParams>::schema()
    }
}

#[diagnostic::do_not_recommend]
impl<E, Below, Branch> InputContract<E, Below, Branch> for Declared {
    fn reserved(_: sealed::Token) -> Option<Schema> {
        None
    }
}

#[diagnostic::do_not_recommend]
impl<E, Below, Branch> InputContract<E, Below, Branch> for Unconstrained {
    fn reserved(_: sealed::Token) -> Option<Schema> {
        None
    }
}

// ---------------------------------------------------------------------------------
// Rule 12, typed: a kind that preserves output shape returns the layer's output.
// ---------------------------------------------------------------------------------

/// Rule 12 at the type level: the branch output `Branch` fits the kind's output rule
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

// ---------------------------------------------------------------------------------
// The same rules at run time, on the engine's view of a combo.
// ---------------------------------------------------------------------------------

/// The reserved params of a branch, as a schema (for the engine; the typestate
/// checked the contract already).
pub(crate) fn reserved_schema<E, Below, Branch, Rule>() -> Option<Schema>
where
    Rule: InputContract<E, Below, Branch>,
{
    Rule::reserved(sealed::Token)
}

/// Rule 5: at most one element of a non-`multiple` kind per combo. Reports the
/// first such kind, with every element of that kind in combo order.
pub(crate) fn cardinality<'a>(
    tool: &Name,
    elements: impl Iterator<Item = (&'a Name, ExtensionKind)> + Clone,
) -> Result<(), BindError> {
    for kind in ExtensionKind::iter().filter(|kind| !kind.multiple()) {
        let of_kind: Vec<Name> = elements
            .clone()
            .filter(|(_, of)| *of == kind)
            .map(|(name, _)| name.clone())
            .collect();
        if of_kind.len() > 1 {
            return Err(BindError::MultipleOfKind {
                tool: tool.clone(),
                kind,
                extensions: of_kind,
            });
        }
    }
    Ok(())
}

/// Rule 6: a body-locality element must not follow a relocating one.
pub(crate) fn locality(below: &Running, element: &Element) -> Result<(), BindError> {
    if !element.body_local {
        return Ok(());
    }
    match below
        .chain
        .iter()
        .find(|link| link.kind.relocates_execution())
    {
        Some(relocating) => Err(BindError::LocalityOutsideRelocation {
            tool: below.base.clone(),
            extension: element.name.clone(),
            relocating: relocating.extension.clone(),
        }),
        None => Ok(()),
    }
}

/// Rule 7: config reaches only an extension that accepts it (empty config is fine),
/// and must be one the extension can work with.
pub(crate) fn config(below: &Running, element: &Element) -> Result<(), BindError> {
    let (tool, extension) = (below.base.clone(), element.name.clone());
    if element.written.is_some() && !element.accepts_config {
        return Err(BindError::ConfigNotAccepted { tool, extension });
    }
    match &element.problem {
        Some(Problem::Config(problem)) => Err(BindError::InvalidConfig {
            tool,
            extension,
            field: problem.field.clone(),
            problem: problem.problem.clone(),
        }),
        Some(Problem::Failed(problem)) => Err(BindError::ExtensionFailed {
            tool,
            extension,
            problem: problem.clone(),
        }),
        Some(Problem::BranchName(_)) | None => Ok(()),
    }
}

/// Rule 1: a branch needs a new name.
pub(crate) fn new_name(below: &Running, element: &Element) -> Result<(), BindError> {
    if let Some(Problem::BranchName(invalid)) = &element.problem {
        return Err(BindError::InvalidBranchName {
            tool: below.base.clone(),
            extension: element.name.clone(),
            name: invalid.name.clone(),
            problem: invalid.problem.clone(),
        });
    }
    if element.branch == below.base {
        return Err(BindError::SameName {
            tool: below.base.clone(),
            extension: element.name.clone(),
        });
    }
    Ok(())
}

/// Rules 8 to 11: the branch's input schema, by the kind's input rule.
pub(crate) fn input_schema(below: &Running, element: &Element) -> Result<Arc<Schema>, BindError> {
    let kind = element.kind;
    if kind.preserves_schema() {
        let expected = match &element.reserved {
            None => below.input_schema.clone(),
            Some(reserved) => schema::with_reserved(&below.input_schema, reserved)
                .map(Arc::new)
                .map_err(|conflict| reserved_conflict(below, element, conflict))?,
        };
        if let Some(presented) = &element.presented_input {
            let reserved = element
                .reserved
                .as_ref()
                .and_then(schema::property_names)
                .unwrap_or_default();
            let stripped = schema::without(presented, &reserved);
            if let Some(difference) = schema::difference(&below.input_schema, &stripped) {
                return Err(BindError::WrapperChangedSchema {
                    tool: below.base.clone(),
                    extension: element.name.clone(),
                    below: below.name.clone(),
                    difference,
                });
            }
        }
        Ok(expected)
    } else if let Some(param) = element.own_params.iter().find(|param| {
        schema::property_names(&below.input_schema).is_some_and(|names| names.contains(param))
    }) {
        // Rule 9 for the parameters a non-wrapper adds beside its layer input's:
        // one of the same name would be masked.
        Err(BindError::ReservedParamExists {
            tool: below.base.clone(),
            extension: element.name.clone(),
            below: below.name.clone(),
            param: param.clone(),
        })
    } else if kind.declares_schema() {
        let verdict = match &element.presented_input {
            Some(schema) => schema::concrete_object(schema).map(|()| Arc::new(schema.clone())),
            None => Err("no input schema".to_owned()),
        };
        verdict.map_err(|presented| BindError::TransformerSchemaNotConcrete {
            tool: below.base.clone(),
            extension: element.name.clone(),
            presented,
        })
    } else {
        Ok(element
            .presented_input
            .clone()
            .map(Arc::new)
            .unwrap_or_else(|| below.input_schema.clone()))
    }
}

/// Rule 9's errors, from what the schema plumbing found.
fn reserved_conflict(below: &Running, element: &Element, conflict: ReservedConflict) -> BindError {
    let (tool, extension) = (below.base.clone(), element.name.clone());
    match conflict {
        ReservedConflict::Exists(param) => BindError::ReservedParamExists {
            tool,
            extension,
            below: below.name.clone(),
            param,
        },
        ReservedConflict::NotInline(param) => BindError::ReservedParamNotInline {
            tool,
            extension,
            param,
        },
        ReservedConflict::Malformed(problem) => BindError::MalformedSchema {
            tool,
            extension,
            problem,
        },
    }
}

/// Rule 12: a branch carries its own declared output schema; without one, it keeps
/// the layer input's only if its kind preserves output shape. So the base's schema
/// reaches a branch exactly when no element of its prefix reshapes the output.
pub(crate) fn output_schema(below: &Running, element: &Element) -> Option<Arc<Schema>> {
    element.declared_output.clone().map(Arc::new).or_else(|| {
        element
            .kind
            .preserves_output_shape()
            .then(|| below.output_schema.clone())
            .flatten()
    })
}

/// Rule 13: the running description, replaced by an element that sets one.
pub(crate) fn description(below: &Running, element: &Element) -> String {
    element
        .description
        .clone()
        .unwrap_or_else(|| below.description.clone())
}
