//! Reserved params: control parameters a wrapper adds for itself ([reserved-params](crate::rulebook#reserved-params)).
//!
//! A wrapper with reserved params `P` presents `WithParams<P, I>` where its layer
//! input takes `I`: the branch's input schema is the layer's plus `P`'s properties,
//! and `P`'s fields are stripped from the arguments before the layer below sees them.

use std::sync::{Arc, OnceLock};

use schemars::{JsonSchema, Schema};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::ArgsError;
use crate::schema;
use crate::schema::Args;

/// A struct of reserved params. Implement it (it has no methods) for a
/// `Deserialize + Serialize + JsonSchema` struct whose fields are all optional, so
/// that a call without them still works.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
/// struct RetryParams {
///     /// How many attempts to make.
///     attempts: Option<u32>,
/// }
/// impl toolgraft::extension::Params for RetryParams {}
/// ```
pub trait Params: DeserializeOwned + Serialize + JsonSchema + Send + Sync + 'static {}

/// A wrapper branch's input: the layer input plus the wrapper's reserved params.
///
/// Serializes flat, as the JSON arguments look.
///
/// ```
/// use toolgraft::ext::cache::CacheParams;
/// use toolgraft::extension::WithParams;
///
/// #[derive(serde::Serialize)]
/// struct Shout { text: String }
///
/// let input = WithParams::new(CacheParams { exp: Some(10.0) }, Shout { text: "hi".into() });
/// assert_eq!(serde_json::to_value(&input)?, serde_json::json!({"text": "hi", "exp": 10.0}));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WithParams<P, I> {
    /// The layer input.
    #[serde(flatten)]
    pub input: I,
    /// The wrapper's reserved params.
    #[serde(flatten)]
    pub params: P,
}

impl<P, I> WithParams<P, I> {
    /// Pairs reserved params with a layer input.
    ///
    /// ```
    /// # use toolgraft::extension::WithParams;
    /// let with = WithParams::new((), 7);
    /// assert_eq!(with.input, 7);
    /// ```
    pub fn new(params: P, input: I) -> Self {
        Self { input, params }
    }
}

pub(crate) mod sealed {
    use std::sync::Arc;

    use schemars::Schema;

    /// The seal of [`ReservedParams`](super::ReservedParams), with what binding
    /// asks of them for every branch: computed once per type and shared.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a wrapper's reserved params: use `()` or a struct that implements `Params`",
        label = "not `()` and not `Params`",
        note = "implement `toolgraft::extension::Params` for a `Deserialize + Serialize + JsonSchema` struct whose fields are all optional"
    )]
    pub trait ReservedParams {
        /// [`ReservedParams::schema`](super::ReservedParams::schema), shared.
        fn shared_schema() -> Option<Arc<Schema>>;

        /// The names of the reserved params (the schema's properties).
        fn names() -> Arc<[String]>;
    }

    /// The seal of [`Forwards`](super::Forwards).
    #[diagnostic::on_unimplemented(
        message = "`{Self}` does not forward the layer input `{Below}` unchanged",
        label = "a wrapper's branch takes `{Below}` itself, or `WithParams<P, {Below}>`"
    )]
    pub trait Forwards<Below> {}
}

/// What a wrapper reserves: `()` for nothing, or a [`Params`] struct.
///
/// Sealed: the binding engine strips exactly the properties of the params' schema
/// from the arguments, and checks that none masks a parameter of the layer below;
/// a hand-written impl could take other arguments than it declares.
///
/// ```
/// use toolgraft::extension::ReservedParams;
/// // No reserved params: the branch input is the layer input itself.
/// let ((), input) = <() as ReservedParams>::split::<u8>(3);
/// assert_eq!(input, 3);
/// ```
pub trait ReservedParams: sealed::ReservedParams + Sized + Send + Sync + 'static {
    /// The branch input over a layer input `I`.
    type With<I: Send + 'static>: Send + 'static;

    /// The reserved params' object schema, or `None` when nothing is reserved.
    fn schema() -> Option<Schema>;

    /// Separates the reserved params from the layer input.
    fn split<I: Send + 'static>(with: Self::With<I>) -> (Self, I);

    /// Puts reserved params and a layer input together.
    fn join<I: Send + 'static>(self, input: I) -> Self::With<I>;

    /// Removes the reserved params (named `names`) from `args` and decodes them.
    fn take(args: &mut Args, names: &[String]) -> Result<Self, ArgsError>;
}

impl sealed::ReservedParams for () {
    fn shared_schema() -> Option<Arc<Schema>> {
        None
    }

    fn names() -> Arc<[String]> {
        // One empty list for every branch, rather than an allocation each.
        static NONE: OnceLock<Arc<[String]>> = OnceLock::new();
        NONE.get_or_init(|| Arc::new([])).clone()
    }
}

impl<P: Params> sealed::ReservedParams for P {
    fn shared_schema() -> Option<Arc<Schema>> {
        Some(schema::of_cached::<P>())
    }

    fn names() -> Arc<[String]> {
        schema::names_cached::<P>()
    }
}

impl ReservedParams for () {
    type With<I: Send + 'static> = I;

    fn schema() -> Option<Schema> {
        None
    }

    #[inline]
    fn split<I: Send + 'static>(with: I) -> ((), I) {
        ((), with)
    }

    fn join<I: Send + 'static>(self, input: I) -> I {
        input
    }

    fn take(_: &mut Args, _: &[String]) -> Result<(), ArgsError> {
        Ok(())
    }
}

impl<P: Params> ReservedParams for P {
    type With<I: Send + 'static> = WithParams<P, I>;

    fn schema() -> Option<Schema> {
        Some(Schema::clone(&schema::of_cached::<P>()))
    }

    #[inline]
    fn split<I: Send + 'static>(with: WithParams<P, I>) -> (P, I) {
        (with.params, with.input)
    }

    fn join<I: Send + 'static>(self, input: I) -> WithParams<P, I> {
        WithParams::new(self, input)
    }

    fn take(args: &mut Args, names: &[String]) -> Result<P, ArgsError> {
        let mut own = Args::new();
        // A call's few arguments are scanned faster than each reserved name is
        // hashed (with SipHash) to be looked up, and most calls give none.
        if args.len() > 8 || args.keys().any(|arg| names.contains(arg)) {
            for name in names {
                // Shifted, not swapped out: the rest keep the caller's order.
                if let Some(value) = args.shift_remove(name) {
                    own.insert(name.clone(), value);
                }
            }
        }
        // Most calls give no reserved param: decoding nothing needs none of the
        // error reporting (which the failure, if any, goes through below).
        if own.is_empty()
            && let Ok(params) =
                P::deserialize(
                    serde::de::value::MapDeserializer::<_, serde_json::Error>::new(
                        std::iter::empty::<(&str, serde_json::Value)>(),
                    ),
                )
        {
            return Ok(params);
        }
        crate::stack::decode_args(own)
    }
}

/// A branch input that forwards the layer input `Below` unchanged, possibly with
/// reserved params: `Below` itself, or `WithParams<P, Below>`.
///
/// The typestate requires it of every kind whose `preserves_schema` is true.
/// Sealed: the two impls below are the whole meaning of "unchanged"; another impl
/// would let a wrapper's branch take an input that its advertised schema does not
/// describe.
///
/// ```
/// use toolgraft::extension::{Forwards, WithParams};
/// use toolgraft::ext::cache::CacheParams;
/// fn forwards<B: Forwards<String>>() {}
/// forwards::<String>();
/// forwards::<WithParams<CacheParams, String>>();
/// ```
pub trait Forwards<Below>: sealed::Forwards<Below> + Send + 'static {
    /// The reserved params added on top of `Below` (`()` for none).
    type Reserved: ReservedParams;
}

impl<I> sealed::Forwards<I> for I {}
impl<P: Params, I> sealed::Forwards<I> for WithParams<P, I> {}

impl<I: Send + 'static> Forwards<I> for I {
    type Reserved = ();
}

impl<P: Params, I: Send + 'static> Forwards<I> for WithParams<P, I> {
    type Reserved = P;
}

/// Type-level positions for [`Assemble`] and [`ReservedIn`]: the compiler infers them,
/// so reserved params are found by type at any depth.
#[doc(hidden)]
#[derive(Debug)]
pub struct Here;

/// One layer further in (see [`Here`]).
#[doc(hidden)]
#[derive(Debug)]
pub struct There<Index>(std::marker::PhantomData<Index>);

/// Into the layer input a transformer's input carries (a batch's items, a
/// chain's first call), at `Index` from there (see [`Here`]).
#[doc(hidden)]
#[derive(Debug)]
pub struct Inside<Index>(std::marker::PhantomData<Index>);

/// Reserved params supplied by type, in any order: what
/// [`Branch::params`](crate::Branch::params) collects.
#[derive(Default)]
pub(crate) struct ParamBag {
    held: Vec<Held>,
    /// Why a copy for a batch item failed, reported when the call starts.
    failed: Option<String>,
}

/// One params value, and how to copy it for each item of a batch.
struct Held {
    value: Box<dyn std::any::Any + Send>,
    copy: fn(&(dyn std::any::Any + Send)) -> Result<Held, String>,
}

impl Held {
    fn new<P: Params>(params: P) -> Self {
        Self {
            value: Box::new(params),
            copy: copy_params::<P>,
        }
    }
}

/// A copy of params of type `P` as a call by name would give them to each batch
/// item: through their JSON. (`Params` need not be `Clone`; they always serialize.)
fn copy_params<P: Params>(held: &(dyn std::any::Any + Send)) -> Result<Held, String> {
    let params = held
        .downcast_ref::<P>()
        .ok_or_else(|| "a reserved param is not of its own type".to_owned())?;
    let copy = serde_json::to_value(params)
        .and_then(P::deserialize)
        .map_err(|error| {
            format!(
                "reserved params `{}` could not be copied for each item: {error}",
                std::any::type_name::<P>()
            )
        })?;
    Ok(Held::new(copy))
}

impl ParamBag {
    pub(crate) fn put<P: Params>(&mut self, params: P) {
        self.held.retain(|held| !held.value.is::<P>());
        self.held.push(Held::new(params));
    }

    fn take<P: Params>(&mut self) -> Option<P> {
        let at = self.held.iter().position(|held| held.value.is::<P>())?;
        self.held
            .swap_remove(at)
            .value
            .downcast()
            .ok()
            .map(|params| *params)
    }

    /// A bag holding a copy of every params value left in this one.
    fn copy(&mut self) -> ParamBag {
        let mut copy = ParamBag::default();
        for held in &self.held {
            match (held.copy)(&*held.value) {
                Ok(held) => copy.held.push(held),
                Err(problem) => {
                    self.failed.get_or_insert(problem);
                }
            }
        }
        copy
    }

    /// Builds one input per core input, each from its own copy of the params left
    /// here: what every item of a batch receives. With no params left (a call
    /// without any), nothing is copied.
    fn each<C, I, Index>(&mut self, cores: Vec<C>) -> Vec<I>
    where
        I: Assemble<C, Index>,
    {
        if self.held.is_empty() {
            return cores
                .into_iter()
                .map(|core| I::assemble(core, &mut ParamBagRef(None)))
                .collect();
        }
        let last = cores.len().saturating_sub(1);
        let mut inputs = Vec::with_capacity(cores.len());
        for (at, core) in cores.into_iter().enumerate() {
            if at == last {
                // The last item takes the originals, which leaves this bag as
                // every item's copy is left: what no layer below took.
                inputs.push(I::assemble(core, &mut ParamBagRef(Some(self))));
            } else {
                let mut copy = self.copy();
                inputs.push(I::assemble(core, &mut ParamBagRef(Some(&mut copy))));
            }
        }
        if inputs.is_empty() {
            // No item, so no layer below runs: its params are moot, not left over.
            self.held.clear();
        }
        inputs
    }
}

/// A branch input built from its core input (what the base, or the nearest
/// transformer, takes) and the reserved params of every wrapper above it, each
/// taken by type or, when not given, at its `Default`. Below a transformer whose
/// input carries the layer input ([`BatchInput`](crate::ext::BatchInput),
/// [`ChainInput`](crate::ext::chain::ChainInput)) the core is that
/// input with the layer's core inside, and the params flow on into it (each batch
/// item gets its own copy, made through the params' JSON, as a call by name gives
/// each item its own).
///
/// `Index` is inferred: it says how many wrappers sit above the core, and where it
/// goes inside a transformer's input.
// The compiler reports the innermost failing bound, whose `Self` is the core input
// (the impls peel one `WithParams` each): the messages name it as such.
#[diagnostic::on_unimplemented(
    message = "a typed call of this branch takes its core input `{Self}`, not `{Core}`",
    label = "expected `{Self}`, the input of the base tool (or of the transformer nearest the top)",
    note = "pass the core input, and set reserved params with `.params(..)`; those not set take their `Default`",
    note = "the branch's whole input (`WithParams<P, ..>` around `{Self}`, one per wrapper that reserves params) is accepted too"
)]
pub trait Assemble<Core, Index>: Sized {
    #[doc(hidden)]
    fn assemble(core: Core, bag: &mut ParamBagRef<'_>) -> Self;
}

/// The bag [`Assemble`] reads from (opaque).
#[doc(hidden)]
pub struct ParamBagRef<'a>(Option<&'a mut ParamBag>);

impl ParamBagRef<'_> {
    #[inline]
    fn take<P: Params>(&mut self) -> Option<P> {
        self.0.as_mut()?.take()
    }

    /// Assembles each of `cores`, each with its own copy of the params: what a
    /// transformer whose input carries many layer inputs (a batch's items) does.
    #[doc(hidden)]
    pub fn each<C, I: Assemble<C, Index>, Index>(&mut self, cores: Vec<C>) -> Vec<I> {
        match &mut self.0 {
            Some(bag) => bag.each(cores),
            None => cores
                .into_iter()
                .map(|core| I::assemble(core, &mut ParamBagRef(None)))
                .collect(),
        }
    }
}

impl std::fmt::Debug for ParamBagRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParamBag")
            .field("held", &self.0.as_ref().map_or(0, |bag| bag.held.len()))
            .finish()
    }
}

impl<C> Assemble<C, Here> for C {
    #[inline(always)]
    fn assemble(core: C, _: &mut ParamBagRef<'_>) -> C {
        core
    }
}

impl<P: Params + Default, I: Assemble<C, Index>, C, Index> Assemble<C, There<Index>>
    for WithParams<P, I>
{
    #[inline]
    fn assemble(core: C, bag: &mut ParamBagRef<'_>) -> Self {
        let params = bag.take::<P>().unwrap_or_default();
        WithParams::new(params, I::assemble(core, bag))
    }
}

// Transformers whose input carries the layer input (`batch`, `chain`) implement
// `Assemble` and `ReservedIn` for it at `Inside<..>`, in their own modules: the
// params given by type flow on into it, so a layer below the transformer gets
// them too. (A transformer whose input is the layer input itself,
// `output_schema`, needs nothing: its input is the layer's.)

/// Builds `Input` from `core` with every reserved param at its `Default`: for a
/// branch without reserved params, the input itself (no work at run time: no bag
/// is made, so none is dropped either).
#[inline(always)]
pub(crate) fn assemble_defaults<Input: Assemble<C, Index>, C, Index>(core: C) -> Input {
    Input::assemble(core, &mut ParamBagRef(None))
}

/// Builds `Input` from `core` and the params in `bag`, all of which must be taken.
pub(crate) fn assemble<Input: Assemble<C, Index>, C, Index>(
    core: C,
    bag: &mut ParamBag,
) -> Result<Input, ArgsError> {
    let input = Input::assemble(core, &mut ParamBagRef(Some(bag)));
    if let Some(problem) = bag.failed.take() {
        return Err(ArgsError::whole(problem));
    }
    match bag.held.len() {
        0 => Ok(input),
        // Only a params type that two layers reserve can be left over (the first
        // took one value): say so rather than drop it.
        left => Err(ArgsError::whole(format!(
            "{left} reserved params given by type were not taken by any layer"
        ))),
    }
}

/// `Self`, reserved params, are reserved by a wrapper of a branch whose input is
/// `Input`.
#[diagnostic::on_unimplemented(
    message = "no layer of this branch reserves `{Self}`",
    label = "not a reserved param of this branch",
    note = "the branch's whole input is `{Input}`: each `WithParams<P, ..>` in it is a wrapper that reserves `P`, around the core input",
    note = "`.params(..)` takes the reserved params of a wrapper in the branch's combo (`CacheParams` for a `cache`, say)"
)]
pub trait ReservedIn<Input, Index> {
    /// Sealed: a params type is reserved by the branch's wrappers, not by a claim.
    #[doc(hidden)]
    fn sealed(_: Token);
}

/// Names no one outside this module can write (see [`ReservedIn`]).
#[doc(hidden)]
#[derive(Debug)]
pub struct Token(());

#[diagnostic::do_not_recommend]
impl<P, I> ReservedIn<WithParams<P, I>, Here> for P {
    fn sealed(_: Token) {}
}

#[diagnostic::do_not_recommend]
impl<P: ReservedIn<I, Index>, Q, I, Index> ReservedIn<WithParams<Q, I>, There<Index>> for P {
    fn sealed(_: Token) {}
}
