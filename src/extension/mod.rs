//! Writing extensions: everything an extension author touches, in one place.
//!
//! Every extension says what it is with [`Extension`]: its kind, whether it needs
//! body locality, its name, and what it presents (description, schemas, config).
//! That is what the rules read. What it does to a call depends on its kind:
//!
//! * A **wrapper** implements [`Extension`] (`type Kind = Wrapper;`, its name and
//!   locality) and [`Wrap<S>`](Wrap) for the stacks it fits (every `S: Stack`, or
//!   those whose input is [`Resendable`], whose output is [`Text`], ..): its
//!   reserved [`Params`], and an `around` method that receives the layer input and
//!   returns the layer's output. Binding mints its branch
//!   ([`Wrapped`]), which forwards the same input and output types, so the wrapper
//!   rules hold by construction. The same impl serves typed combos and manifests.
//!   For the simplest wrappers, [`wrap_fn`] takes a closure. Every built-in
//!   wrapper (`trace`, `proxy`, `cache`, `timeout`, `metrics`) is written this way.
//! * A **transformer** implements [`Transform`] (one call: its own input to its own
//!   output, with the layer below at hand) and a one-line [`Layer`] returning
//!   [`Transformed`]. The built-in `output_schema` is written this way.
//! * A **backend**, or anything else that builds its own branch, implements
//!   [`Layer`] like `tower::Layer`: given the stack below, it returns a [`Stack`].
//! * [`Configurable`] lets a manifest build the extension from config.
//!
//! The stack vocabulary an author meets ([`Stack`], [`Next`], [`Args`],
//! [`WithParams`], [`Segment`]) and the [`Locality`] markers are re-exported here.

use std::marker::PhantomData;
use std::sync::Arc;

use schemars::Schema;
use serde_json::Value;

use crate::kind::{Kind, words};
use crate::name::Name;
use crate::stack::erased::DynStack;
use crate::tool::{Demand, Presentation};

mod transform;
mod wrap;

pub use crate::kind::property::{
    AccessRole, AnswersRepeats, Anywhere, Authorizing, BodyLocal, CallerLocal, Locality, Placement,
    SharedAnswers,
};
pub use crate::kind::{Backend, Transformer, Wrapper};
pub use crate::schema::Args;
pub use crate::stack::params::{Forwards, Params, ReservedParams, WithParams};
pub use crate::stack::segment::{SEGMENT, Segment};
pub use crate::stack::{DynInput, Next, Stack, decode_args, to_json};
pub use transform::{Transform, Transformed};
pub use wrap::{Call, Done, Resendable, Text, Wrap, WrapFn, Wrapped, wrap_fn};

/// What extension `E` receives about the layer below when it is applied.
///
/// Only the binding engine makes one, and only for the extension it is applying:
/// an extension cannot hand its `LayerInput` to another extension's [`Layer`]
/// (a `pool` inside a wrapper's branch, say), so what a combo's rules see is what
/// its branches do.
///
/// ```
/// use toolgraft::Extension;
/// use toolgraft::extension::{Anywhere, LayerInput};
/// use toolgraft::kind::Transformer;
///
/// /// Presents the layer input's schema under a new description.
/// struct Renamed;
/// impl Extension for Renamed {
///     type Kind = Transformer;
///     type Locality = Anywhere;
///     fn name(&self) -> &str { "renamed" }
///     fn input_schema(&self, below: &LayerInput<'_, Self>) -> Option<schemars::Schema> {
///         // `below.name` is the layer input, `below.branch` the branch being minted.
///         assert!(below.branch.as_str().starts_with(below.name.as_str()));
///         Some(below.input_schema.clone())
///     }
/// }
/// ```
pub struct LayerInput<'a, E: ?Sized> {
    /// The layer input's running name (the base, or the previous branch).
    pub name: &'a Name,
    /// The name of the branch being minted.
    pub branch: &'a Name,
    /// The base tool.
    pub base: &'a Name,
    /// The running description.
    pub description: &'a str,
    /// The layer input's input schema.
    pub input_schema: &'a Schema,
    /// The layer input's output schema, when it has one.
    pub output_schema: Option<&'a Schema>,
    /// The base tool's title, annotations and protocol fields (every branch
    /// presents them).
    pub presentation: &'a Presentation,
    /// The same, shared: what a derived schema is remembered by (only `batch`
    /// derives one among the built-ins).
    #[cfg_attr(not(feature = "batch"), allow(dead_code))]
    shared_output_schema: Option<&'a Arc<Schema>>,
    extension: PhantomData<fn() -> *const E>,
}

impl<'a, E: ?Sized> LayerInput<'a, E> {
    /// The binding engine's: the one place a `LayerInput` is made.
    pub(crate) fn new(
        name: &'a Name,
        branch: &'a Name,
        base: &'a Name,
        description: &'a str,
        input_schema: &'a Schema,
        output_schema: Option<&'a Arc<Schema>>,
        presentation: &'a Presentation,
    ) -> Self {
        Self {
            presentation,
            name,
            branch,
            base,
            description,
            input_schema,
            output_schema: output_schema.map(|schema| &**schema),
            shared_output_schema: output_schema,
            extension: PhantomData,
        }
    }

    /// The layer input's output schema as the engine shares it.
    #[cfg_attr(not(feature = "batch"), allow(dead_code))]
    pub(crate) fn shared_output_schema(&self) -> Option<&'a Arc<Schema>> {
        self.shared_output_schema
    }
}

impl<E: ?Sized> Clone for LayerInput<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E: ?Sized> Copy for LayerInput<'_, E> {}

impl<E: ?Sized> std::fmt::Debug for LayerInput<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerInput")
            .field("name", self.name)
            .field("branch", self.branch)
            .field("base", self.base)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// A config that an extension cannot work with.
///
/// ```
/// let err = toolgraft::extension::ConfigError::new("max_items", "must be at least 1");
/// assert_eq!(err.to_string(), "`max_items`: must be at least 1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {problem}")]
pub struct ConfigError {
    /// The offending field.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

impl ConfigError {
    /// A problem with `field`.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// An extension: a plug-in that extends one tool by minting a new-named branch.
///
/// Its kind and locality are types, so the typestate combo can check the stacking
/// rules at compile time; everything else is a value the binding engine reads.
///
/// Implementing it cannot weaken a rule for anyone else's extension: the rules read
/// only `Kind` and `Locality` (sealed sets of markers), and an extension's
/// [`Layer`] only receives the [`LayerInput`] made for itself, so it cannot mint
/// another extension's branch (a `pool`'s, say) under its own kind, and a wrapper's
/// branch is always [`Wrapped`]. What the types cannot see is what the extension's
/// own code does: one that runs the layer below somewhere else must declare
/// `type Kind = Backend;`, one that sets something only the body's task or
/// thread can see must declare `type Locality = BodyLocal;`, and one that needs
/// the caller's session (the MCP peer of the call, to ask its user) must declare
/// `type Locality = CallerLocal;`. Code that calls a bound
/// branch (a body calling a `pool` branch) is outside any combo's types; there the
/// built-in backends check the locality rule at run time.
///
/// ```
/// use toolgraft::Extension;
/// use toolgraft::extension::Anywhere;
/// use toolgraft::kind::Wrapper;
///
/// #[derive(Clone)]
/// struct Audit;
///
/// impl Extension for Audit {
///     type Kind = Wrapper;
///     type Locality = Anywhere;
///     fn name(&self) -> &str { "audit" }
///     fn describe(&self, running: &str) -> Option<String> {
///         Some(format!("{running} (audited)"))
///     }
/// }
/// assert_eq!(Audit.describe("Return the text.").unwrap(), "Return the text. (audited)");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an extension: it has no `impl Extension`",
    label = "no `impl Extension for {Self}`",
    note = "every extension says what it is once, in its `Extension` impl; for a wrapper, beside its `impl Wrap<S>`: `impl Extension for {Self} {{ type Kind = Wrapper; type Locality = Anywhere; fn name(&self) -> &str {{ \"..\" }} }}` (`Wrapper` and `Anywhere` are in `toolgraft::extension`)",
    note = "a transformer or a backend declares `type Kind = Transformer;` or `type Kind = Backend;` there, and its name, input and output schemas"
)]
pub trait Extension: Send + Sync + 'static {
    /// [`Wrapper`], [`Transformer`] or [`Backend`].
    type Kind: Kind;
    /// [`Anywhere`]; [`BodyLocal`] when the extension only works in the
    /// thread/task that runs the tool body; [`CallerLocal`] when it only works
    /// where the call arrived.
    type Locality: Locality;

    /// The extension's name: the suffix of the branches it mints.
    fn name(&self) -> &str;

    /// A new description for the branch, given the running one; `None` keeps it.
    fn describe(&self, running: &str) -> Option<String> {
        let _ = running;
        None
    }

    /// The author config this instance carries, as JSON; part of the element's
    /// identity (two combos with the same prefix but another config are two stacks).
    fn config(&self) -> Option<Value> {
        None
    }

    /// Checks the config this instance carries; an error refuses the combo when it
    /// is bound ([`BindError::InvalidConfig`](crate::BindError::InvalidConfig)),
    /// instead of failing every call later.
    ///
    /// ```
    /// use toolgraft::Extension;
    /// let err = toolgraft::ext::Proxy::allow(Vec::<String>::new()).check_config().unwrap_err();
    /// assert_eq!(err.field, "allow");
    /// ```
    fn check_config(&self) -> Result<(), ConfigError> {
        Ok(())
    }

    /// What the extension does with calls that relies on the tool's hints: it
    /// makes a call again ([`Demand::Repeatable`], a retry) or answers without
    /// making it ([`Demand::Skippable`], a cache). The combo is refused on a tool
    /// whose hints do not allow it (rule `side-effects` in the
    /// [rulebook](crate::rulebook)). An extension that does such a thing and says
    /// `None` is not checked: say it.
    ///
    /// ```
    /// use toolgraft::Extension;
    /// use toolgraft::ext::{Cache, Trace};
    /// use toolgraft::tool::Demand;
    /// assert_eq!(Cache::default().demands(), Some(Demand::Skippable));
    /// assert_eq!(Trace.demands(), None);
    /// ```
    fn demands(&self) -> Option<Demand> {
        None
    }

    /// Parameters a transformer or backend adds beside those of its layer input
    /// (for `chain`: `next_tool`, `select`). A layer input that already takes one
    /// is refused when binding, as a wrapper's reserved params are
    /// ([reserved-params](crate::rulebook#reserved-params)).
    fn own_params(&self) -> &[&'static str] {
        &[]
    }

    /// The branch's own input schema. Required of transformers (a concrete object
    /// schema); a backend may use it to add task options. A wrapper's schema is its
    /// layer input's plus its reserved params: typed wrappers present none here, and
    /// one that does must present exactly that
    /// ([wrapper-input-schema](crate::rulebook#wrapper-input-schema)).
    fn input_schema(&self, below: &LayerInput<'_, Self>) -> Option<Schema> {
        let _ = below;
        None
    }

    /// The branch's own output schema, if it declares one. A branch that declares
    /// none inherits its layer input's only if its kind preserves output shape.
    fn output_schema(&self, below: &LayerInput<'_, Self>) -> Option<Schema> {
        let _ = below;
        None
    }

    /// [`output_schema`](Extension::output_schema), as binding keeps it: a
    /// built-in whose output schema depends on its layer's alone shares one per
    /// layer schema.
    #[doc(hidden)]
    fn shared_output_schema(&self, below: &LayerInput<'_, Self>) -> Option<Arc<Schema>> {
        self.output_schema(below).map(Arc::new)
    }

    /// The policy of an authorization check (an extension of locality
    /// [`Authorizing`]): the toolset checks it before any layer of the branch
    /// (and of every branch above it) runs, and shows those names only to callers
    /// it lets through, so what is listed is what may be called. `None` for
    /// every other extension.
    ///
    /// ```
    /// use toolgraft::Extension;
    /// use toolgraft::ext::{Authorize, Trace};
    /// assert!(Authorize::default().policy().is_some() && Trace.policy().is_none());
    /// ```
    fn policy(&self) -> Option<Arc<dyn crate::access::Policy>> {
        None
    }

    /// A wrapper's reserved params' schema as this instance presents it, from
    /// its params type's: a built-in whose bounds are the operator's config
    /// (`cache`'s `exp` is at most its `max_ttl_secs`) says them here, so the
    /// schema the model reads and the check of a pin, when bound, say the bound
    /// the call enforces. Given and returned shared: an instance that changes
    /// nothing keeps the one schema every branch of its type holds.
    #[doc(hidden)]
    fn reserved_schema(&self, typed: Arc<Schema>) -> Arc<Schema> {
        typed
    }
}

/// An extension built from author config: what lets a manifest element carry
/// `{"name": .., "config": {..}}` for it.
///
/// ```
/// use toolgraft::extension::{Configurable, ConfigError};
/// use toolgraft::ext::{batch::BatchConfig, Batch};
/// let batch = Batch::from_config(BatchConfig { max_items: 5 })?;
/// # let _ = batch;
/// # Ok::<(), ConfigError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not built from author config, so it cannot be `Configured`",
    label = "no `Configurable` impl for `{Self}`",
    note = "register it as itself (`registry.register(ext)`): each element gets a clone, and none may carry config",
    note = "to build it from an element's config, implement `Configurable` for it; to adjust an instance from config, register `Refined::new(ext, refine)`"
)]
pub trait Configurable: Extension + Sized {
    /// The config, as serde reads it from the element's `config` mapping.
    type Config: serde::de::DeserializeOwned;

    /// Builds the extension; refuse a config it cannot work with.
    fn from_config(config: Self::Config) -> Result<Self, ConfigError>;
}

/// Applies a transformer or a backend to the stack `S` below it, building the
/// branch.
///
/// A [`Transform`] returns [`Transformed::new`] here; other transformers and
/// backends build their own branch. A wrapper has none: binding mints its branch
/// from its [`Wrap<S>`](Wrap) impl (see [`Mint`]), and a `Layer` of a type whose
/// kind is [`Wrapper`] is never used.
/// The typestate checks the branch against the kind's contract: a kind that
/// preserves the input schema must take `S::Input` (optionally
/// [`WithParams`]), one that preserves output shape must return
/// `S::Output`.
///
/// ```
/// use toolgraft::{Extension, Layer, Stack, ToolError};
/// use toolgraft::error::ArgsError;
/// use toolgraft::extension::{Anywhere, Args, LayerInput};
/// use toolgraft::kind::Transformer;
///
/// /// Answers with the length of the layer's text result.
/// #[derive(Clone)]
/// struct Length;
/// impl Extension for Length {
///     type Kind = Transformer;
///     type Locality = Anywhere;
///     fn name(&self) -> &str { "length" }
///     fn input_schema(&self, below: &LayerInput<'_, Self>) -> Option<schemars::Schema> {
///         Some(below.input_schema.clone())
///     }
/// }
///
/// #[derive(Clone)]
/// struct Measured<S>(S);
/// impl<S: Stack<Output = String>> Stack for Measured<S> {
///     type Input = S::Input;
///     type Output = usize;
///     async fn call(&self, input: S::Input) -> Result<usize, ToolError> {
///         Ok(self.0.call(input).await?.len())
///     }
///     fn decode(&self, args: Args) -> Result<S::Input, ArgsError> { self.0.decode(args) }
/// }
///
/// impl<S: Stack<Output = String>> Layer<S> for Length {
///     type Branch = Measured<S>;
///     fn layer(self, inner: S, _: &LayerInput<'_, Self>) -> Measured<S> { Measured(inner) }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be layered over `{S}`",
    label = "no `Layer<{S}>` impl for `{Self}`",
    note = "a transformer implements `Transform<S>` and a `Layer` returning `Transformed::new(self, inner, below)`; a backend a `Layer` returning a stack of its own",
    note = "a wrapper has no `Layer`: it implements `Wrap<S>` for the stacks it fits, and binding mints its branch"
)]
pub trait Layer<S: Stack>: Extension + Sized {
    /// The branch this extension mints over `S`.
    type Branch: Stack;

    /// Builds the branch over `inner`. Called once per branch, so per-branch state
    /// (a cache's store) is created here.
    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch;
}

/// How binding mints an extension's branch over the stack `S`, by its kind: a
/// wrapper's from its [`Wrap<S>`](Wrap) impl (the branch is always [`Wrapped`]), a
/// transformer's or a backend's from its [`Layer<S>`]. What
/// [`Combo::with`](crate::Combo::with) and the [`Registry`](crate::Registry) ask.
///
/// Implemented for every extension whose kind's way applies, and nothing else
/// (sealed through the kinds): a wrapper's branch cannot be minted by a `Layer` of
/// its own, so what it forwards is what its kind promises, by construction.
///
/// ```
/// use toolgraft::extension::Mint;
/// use toolgraft::ext::{Batch, Trace};
/// use toolgraft::Tool;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Ping {}
/// fn mints<E: Mint<S>, S: toolgraft::Stack>(_: &E, _: &S) {}
/// let ping = Tool::builder().name("ping").description("Pong.")
///     .body(|_: Ping| async { Ok("pong".to_owned()) }).build()?;
/// mints(&Trace, &ping);
/// mints(&Batch::default(), &ping);
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
pub trait Mint<S: Stack>: Extension + Sized {
    /// The branch this extension mints over `S`.
    type Branch: Stack;

    #[doc(hidden)]
    fn mint(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch;
}

impl<S: Stack, E: Extension> Mint<S> for E
where
    <E::Kind as Kind>::Word: MintedBy<E, S>,
{
    type Branch = <<E::Kind as Kind>::Word as MintedBy<E, S>>::Branch;

    #[inline]
    fn mint(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch {
        <<E::Kind as Kind>::Word as MintedBy<E, S>>::mint(self, inner, below)
    }
}

mod sealed {
    /// The kinds' words: the only implementors of [`MintedBy`](super::MintedBy).
    pub trait Word {}
    impl Word for crate::kind::words::wrapper {}
    impl Word for crate::kind::words::transformer {}
    impl Word for crate::kind::words::backend {}
}

/// A kind's way of minting `E`'s branch over `S` (see [`Mint`]). `Self` is the
/// kind's word (`wrapper`), so the three ways never overlap, and the compiler's
/// message says which kind `E` is. Sealed.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "the {Self} `{E}` cannot be layered over `{S}`",
    label = "no branch of `{E}` over `{S}`",
    note = "a wrapper implements `Wrap<S>` for the stacks it fits, and binding mints its branch (`Wrapped`): a wrapper never has a `Layer` of its own. If `{E}` is one, its `Wrap` impl asks something this stack lacks (an input that is `Resendable`, an output that is `Text`, ..), or it has no `Wrap` impl at all",
    note = "a transformer implements `Layer<S>` (returning `Transformed::new(self, inner, below)` for a `Transform`), a backend a `Layer<S>` returning a stack of its own; an extension with a branch of its own is one of those (`type Kind = Transformer;`)"
)]
pub trait MintedBy<E: Extension, S: Stack>: sealed::Word {
    /// The branch.
    type Branch: Stack;
    /// Mints it.
    fn mint(extension: E, inner: S, below: &LayerInput<'_, E>) -> Self::Branch;
}

/// What a combo asks of an extension beside its branch over the combo's stack, by
/// its kind: a wrapper must also fit [`DynStack`](crate::runtime::DynStack), since
/// a manifest runs the same wrapper over it, so that one impl serves typed combos
/// and the [`Registry`](crate::Registry); a transformer or a backend nothing more.
/// `Self` is the kind's word, not `E`, so that rustc prints this message. Sealed.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "the wrapper `{E}` does not fit `DynStack`, the stack a manifest runs it over",
    label = "`{E}`'s `Wrap` impl does not cover `DynStack`",
    note = "every wrapper must fit `DynStack` too, so that one impl serves typed combos and manifests: bound `S` only by what `DynStack` has (`Input: Resendable + Serialize`, `Output: Text + Clone`)",
    note = "to read one tool's input, bound `S::Input` by a trait of your own, implemented for that input and for `DynInput` (see the third example on `Wrap`)"
)]
pub trait FitsDynStack<E>: sealed::Word {}

// `do_not_recommend`: the compiler reports this trait, with its message, instead of
// the bound of the wrapper's impl that `DynStack` misses.
#[diagnostic::do_not_recommend]
impl<E: Wrap<DynStack>> FitsDynStack<E> for words::wrapper {}
#[diagnostic::do_not_recommend]
impl<E> FitsDynStack<E> for words::transformer {}
#[diagnostic::do_not_recommend]
impl<E> FitsDynStack<E> for words::backend {}

#[diagnostic::do_not_recommend]
impl<E: Wrap<S>, S: Stack> MintedBy<E, S> for words::wrapper {
    type Branch = Wrapped<E, S>;

    #[inline]
    fn mint(wrapper: E, inner: S, below: &LayerInput<'_, E>) -> Wrapped<E, S> {
        Wrapped::new(wrapper.for_branch(below), inner, below)
    }
}

#[diagnostic::do_not_recommend]
impl<E: Layer<S>, S: Stack> MintedBy<E, S> for words::transformer {
    type Branch = E::Branch;

    #[inline]
    fn mint(transformer: E, inner: S, below: &LayerInput<'_, E>) -> E::Branch {
        transformer.layer(inner, below)
    }
}

#[diagnostic::do_not_recommend]
impl<E: Layer<S>, S: Stack> MintedBy<E, S> for words::backend {
    type Branch = E::Branch;

    #[inline]
    fn mint(backend: E, inner: S, below: &LayerInput<'_, E>) -> E::Branch {
        backend.layer(inner, below)
    }
}
