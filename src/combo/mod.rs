//! Typed combos: a typestate builder whose `.with(..)` only compiles when the
//! stacking rules hold.
//!
//! Each `.with(ext)` wraps the stack built so far (nesting on the outer side, so
//! compile time grows linearly with depth), folds the element into the binding
//! engine's view, and keeps an erased clone of the new prefix so every branch can be
//! served by name.

use std::marker::PhantomData;
use std::sync::Arc;

use schemars::Schema;

use crate::bind::{ComboDraft, Element, Problem, Running, written_config};
use crate::extension::Mint;
use crate::kind::Kind;
use crate::kind::property::Locality;
use crate::name::Name;
use crate::stack::Stack;
use crate::stack::segment::Segment;
use crate::tool::Tool;

mod branch;
pub mod typestate;

pub use branch::{Branch, TypedCall};

use crate::tool::BaseTool;
use typestate::{ComboState, Depth, Joins, Start, Then};

/// A combo under construction: the typed stack `S` and the typestate `St`.
///
/// Start one with [`StartCombo::combo`], add extensions with [`Combo::with`], and bind
/// the tool with its combos with [`Toolset::bind`](crate::Toolset::bind), which takes
/// a tuple of combos ([`Combos`]).
///
/// ```
/// use toolgraft::Tool;
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::{Batch, Cache, Pool, Proxy, Trace};
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Fetch { url: String }
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let fetch = Tool::builder().name("fetch").description("Fetch a page.").read_only()
///     .body(|input: Fetch| async move { Ok(input.url.len()) }).build()?;
/// let pool = Pool::new(2)?;
///
/// // The proxy sits inside the pool, so it runs beside the body: this compiles.
/// let combo = fetch.combo().with(Proxy::allow(["http://egress-a:3128"])).with(pool.clone())
///     .with(Cache::default()).with(Trace).with(Batch::default());
/// assert_eq!(combo.name(), "fetch_proxy_pool_cache_trace_batch");
/// # Ok(()) }
/// ```
///
/// The same extensions the other way round do not compile:
///
/// ```compile_fail
/// # use toolgraft::Tool;
/// # use toolgraft::tool::BaseTool;
/// # use toolgraft::ext::{Pool, Proxy};
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Fetch { url: String }
/// # let fetch = Tool::builder().name("fetch").description("Fetch a page.").read_only()
/// #     .body(|input: Fetch| async move { Ok(input.url.len()) }).build().unwrap();
/// let combo = fetch.combo().with(Pool::new(2).unwrap()).with(Proxy::allow(["http://egress-a:3128"]));
/// ```
#[must_use = "a combo does nothing until it is bound with `Toolset::bind`"]
pub struct Combo<S, St = Start<S>> {
    stack: S,
    draft: ComboDraft,
    state: PhantomData<fn() -> St>,
}

impl<S, St> std::fmt::Debug for Combo<S, St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Combo").field(&self.draft).finish()
    }
}

impl<I, O, F, H> Tool<I, O, F, H>
where
    Self: BaseTool,
{
    /// Starts a combo on this tool: add extensions with [`Combo::with`].
    ///
    /// ```
    /// use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// let ping = Tool::builder().name("ping").description("Answer pong.").read_only()
    ///     .body(|_: Ping| async { Ok("pong".to_owned()) }).build()?;
    /// let combo = ping.combo();
    /// assert_eq!(combo.name(), "ping");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn combo(&self) -> Combo<Self> {
        Combo::new(self.clone())
    }
}

/// `.combo()` on any base tool, for code that holds one as `impl BaseTool` (a
/// [`Tool`] or a [`DynTool`](crate::runtime::DynTool) has it as its own method). In
/// the [prelude](crate::prelude).
///
/// ```
/// use toolgraft::combo::StartCombo;
/// use toolgraft::tool::BaseTool;
/// use toolgraft::Tool;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
/// fn ping() -> impl BaseTool {
///     Tool::builder().name("ping").description("Answer pong.").read_only()
///         .body(|_: Ping| async { Ok("pong") }).build().unwrap()
/// }
/// assert_eq!(ping().combo().name(), "ping");
/// ```
pub trait StartCombo: BaseTool {
    /// Starts a combo on this tool: add extensions with [`Combo::with`].
    fn combo(&self) -> Combo<Self>;
}

impl<B: BaseTool> StartCombo for B {
    fn combo(&self) -> Combo<Self> {
        Combo::on(self)
    }
}

impl<B: BaseTool> Combo<B, Start<B>> {
    /// A combo on `base`, with no extension yet: what `.combo()` on a tool does, for
    /// code generic over [`BaseTool`].
    pub fn on(base: &B) -> Self {
        Self::new(base.clone())
    }

    pub(crate) fn new(base: B) -> Self {
        Self {
            draft: ComboDraft::typed(&base),
            stack: base,
            state: PhantomData,
        }
    }
}

impl<S: Stack, St: ComboState> Combo<S, St> {
    /// Adds `extension` as the new outermost layer, minting the branch
    /// `<current name>_<extension name>`.
    ///
    /// Compiles only if the stacking rules hold: at most one extension of a
    /// non-`multiple` kind, nothing that needs body locality after a relocating
    /// extension, and the branch's input and output types fit its kind. In code
    /// generic over combos, the same `.with` is [`Takes::with`].
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let combo = shout.combo().with(Trace).with(Trace);
    /// assert_eq!(combo.name(), "shout_trace_trace");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn with<E: Joins<S, St>>(mut self, extension: E) -> Combo<E::Branch, Then<St, E>> {
        let name = match Name::new(extension.name()) {
            Ok(name) => name,
            Err(invalid) => {
                self.draft.refuse(invalid.into());
                Name::unchecked(extension.name())
            }
        };
        let inner = <St::Depth as Depth>::close::<S, St::Base>(self.stack);
        let reserved = E::reserved(typestate::token());
        let below = self.draft.running();
        let (element, stack) = apply_typed(extension, name, below, inner, true, reserved);
        self.draft.push(element, Some(Arc::new(stack.clone())));
        Combo {
            stack,
            draft: self.draft,
            state: PhantomData,
        }
    }

    /// Closes the layers added so far into one [`Segment`] now, instead of after
    /// [`SEGMENT`](crate::extension::SEGMENT) layers: for wrappers whose own futures are heavy
    /// (several nested `async` blocks, a timeout, a `catch_unwind` each), a few of
    /// which already nest past what the compiler walks by default ("queries
    /// overflow the depth limit"). Calls then pay one allocation more; the rules and
    /// the bound names are unchanged.
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let combo = shout.combo().with(Trace).with(Trace).segment().with(Trace);
    /// assert_eq!(combo.name(), "shout_trace_trace_trace");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    #[allow(clippy::type_complexity)] // The segment's three parameters, as they are.
    pub fn segment(self) -> Combo<Segment<S::Input, S::Output, St::Base>, St::Segmented> {
        Combo {
            stack: Segment::close(self.stack),
            draft: self.draft,
            state: PhantomData,
        }
    }

    /// The name of the combo's outermost branch (the base's name before any `.with`).
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// assert_eq!(shout.combo().name(), "shout");
    /// assert_eq!(shout.combo().with(Trace).name(), "shout_trace");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn name(&self) -> &Name {
        self.draft.name()
    }

    /// The typed stack built so far.
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let combo = shout.combo().with(Trace);
    /// let _outermost: &toolgraft::extension::Wrapped<Trace, _> = combo.stack();
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn stack(&self) -> &S {
        &self.stack
    }
}

/// Applies a typed extension over `inner`, the layer input `below`: the engine's
/// element for it, and the branch. Both paths go through here: `Combo::with`, and
/// the registry for typed extensions a manifest names.
pub(crate) fn apply_typed<E, S>(
    extension: E,
    name: Name,
    below: &Running,
    inner: S,
    accepts_config: bool,
    reserved: Option<Arc<Schema>>,
) -> (Element, E::Branch)
where
    S: Stack,
    E: Mint<S>,
{
    let branch = below.name.branch(&name);
    let layer_input = below.layer_input(&branch);
    let element = Element {
        kind: <E::Kind as Kind>::KIND,
        placement: <E::Locality as Locality>::PLACEMENT,
        access: <E::Locality as Locality>::ACCESS,
        answers_repeats: <E::Locality as Locality>::ANSWERS_REPEATS,
        policy: extension.policy(),
        accepts_config,
        demand: extension.demands(),
        written: written_config(extension.config().as_ref()),
        pinned: None,
        hidden: None,
        config: extension.config(),
        problem: extension.check_config().err().map(Problem::Config),
        own_params: extension
            .own_params()
            .iter()
            .map(|param| (*param).to_owned())
            .collect(),
        reserved: reserved.map(|typed| extension.reserved_schema(typed)),
        presented_input: extension.input_schema(&layer_input).map(Arc::new),
        declared_output: extension.shared_output_schema(&layer_input),
        description: extension.describe(&below.description),
        branch: branch.clone(),
        name,
    };
    let stack = extension.mint(inner, &layer_input);
    (element, stack)
}

/// A combo that can take the extension `E` as its next layer: the bound a generic
/// helper over combos states, with [`With<C, E>`](With) for the combo it returns.
///
/// Implemented for every [`Combo`] that `E` may join under the stacking rules, at
/// any depth (past [`SEGMENT`](crate::extension::SEGMENT) layers too, where the stack
/// the next layer receives is closed into a [`Segment`]): the helper names neither
/// the typestate nor the stack, and its `.with(..)` is [`Combo::with`]'s.
///
/// ```
/// use toolgraft::combo::{Takes, With};
/// use toolgraft::ext::{Cache, Trace};
/// use toolgraft::{Tool, Toolset};
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
///
/// fn traced<C: Takes<Trace>>(combo: C) -> With<C, Trace> {
///     combo.with(Trace)
/// }
///
/// // Helpers compose: each step states what the combo so far must take.
/// fn cached_and_traced<C>(combo: C) -> With<With<C, Cache>, Trace>
/// where
///     C: Takes<Cache>,
///     With<C, Cache>: Takes<Trace>,
/// {
///     traced(combo.with(Cache::default()))
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let combo = cached_and_traced(traced(shout.combo()));
/// assert_eq!(combo.name(), "shout_trace_cache_trace");
/// let (branch,) = Toolset::new().bind((combo,))?;
/// assert_eq!(branch.call(Shout { text: "hi".into() }).await?, "hi");
/// # Ok(()) }
/// ```
///
/// A combo that `E` may not join does not take it, and the compiler names the
/// rule, as for [`Combo::with`]:
///
/// ```compile_fail,E0277
/// # use toolgraft::combo::{Takes, With};
/// # use toolgraft::ext::{Pool, Proxy};
/// # use toolgraft::Tool;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Fetch { url: String }
/// fn proxied<C: Takes<Proxy>>(combo: C) -> With<C, Proxy> {
///     combo.with(Proxy::allow(["http://egress-a:3128"]))
/// }
/// # let fetch = Tool::builder().name("fetch").description("Fetch a page.").read_only()
/// #     .body(|input: Fetch| async move { Ok(input.url.len()) }).build().unwrap();
/// // rule `locality-inside-relocation`: the proxy would sit outside the pool
/// let _ = proxied(fetch.combo().with(Pool::new(2).unwrap()));
/// ```
///
/// Sealed: implemented for [`Combo`] only.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot take `{E}` as its next layer",
    label = "this does not take `{E}`",
    note = "`Takes<E>` holds for every combo (`tool.combo()..`) that `E` may join by the stacking rules; a tool or a branch is no combo: pass `tool.combo()`",
    note = "where a combo breaks a rule, the compiler names that rule instead, as `.with({E})` on the combo would (see `toolgraft::rulebook`)"
)]
pub trait Takes<E>: sealed::Sealed + Sized {
    /// The combo once `E` is its outermost layer.
    type With: TypedCombo;

    /// Adds `extension` as the new outermost layer: what [`Combo::with`] does.
    fn with(self, extension: E) -> Self::With;
}

/// The combo `C` becomes once it takes `E` (see [`Takes`]): `With<With<C, A>, B>`
/// is `C` with `A`, then `B`.
pub type With<C, E> = <C as Takes<E>>::With;

// No `do_not_recommend`: with it, a failing `Takes` bound would report `Takes`
// itself (the trait's message, a fallback only); without it, the compiler looks
// through this impl and `Joins`' and reports the rule trait that failed. Blanket
// over `Parts` rather than on `Combo<S, St>`, so the report does not add "`Takes`
// is implemented for `Combo<S, St>`" beside the rule.
impl<C: sealed::Parts, E: Joins<C::Stack, C::State>> Takes<E> for C {
    type With = Combo<E::Branch, Then<C::State, E>>;

    fn with(self, extension: E) -> Self::With {
        // The inherent method: one body for both.
        self.into_combo().with(extension)
    }
}

/// What [`Toolset::bind`](crate::Toolset::bind) takes: a tuple of 0 to 16 typed
/// combos, of one base tool or of several (more bind as nested tuples, each a
/// [`TypedCombo`] too: `((a, .., p), (q, r))`).
///
/// Binding hands back a tuple of the same shape with each combo's [`Branch`], so
/// every typed stack keeps its own type: destructure it with `let (a, b) = ..`.
/// Each combo brings its base tool, so no base is passed beside them; a combo
/// with no extension yet (`tool.combo()`) is its base alone, and binds the
/// base's name only.
///
/// ```
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::ext::Trace;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let toolset = Toolset::new();
/// let (base, traced) = toolset.bind((shout.combo(), shout.combo().with(Trace)))?;
/// assert_eq!((base.name().as_str(), traced.name().as_str()), ("shout", "shout_trace"));
/// let () = toolset.bind(())?; // nothing to bind
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Sealed: implemented for tuples of [`TypedCombo`]s.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tuple of combos",
    label = "`Toolset::bind` takes a tuple of up to 16 combos",
    note = "pass the combos as a tuple: `toolset.bind((tool.combo().with(..), tool.combo()))`; one combo is `(combo,)`, with the trailing comma",
    note = "a tool alone is bound as its combo with no extension: `toolset.bind((tool.combo(),))`"
)]
pub trait Combos: sealed::Sealed {
    /// The typed branches, one per combo, in order.
    type Branches;

    #[doc(hidden)]
    fn into_drafts(self, drafts: &mut Vec<ComboDraft>) -> Self::Branches;
}

/// One element of the tuple [`Toolset::bind`](crate::Toolset::bind) takes: a
/// [`Combo`], of any base tool, at any depth; or a tuple of them, for more combos
/// than one tuple holds.
///
/// ```
/// use toolgraft::combo::TypedCombo;
/// use toolgraft::Tool;
/// use toolgraft::ext::Trace;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// fn is_combo<C: TypedCombo>(_: &C) {}
/// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// is_combo(&shout.combo().with(Trace));
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
///
/// Sealed: implemented for [`Combo`] and tuples of `TypedCombo`s.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a combo, so `Toolset::bind` cannot bind it",
    label = "not a combo",
    note = "every element of the tuple `Toolset::bind` takes is a combo: start one with `tool.combo()` and add extensions with `.with(..)`",
    note = "a base tool alone is bound as its combo with no extension: `tool.combo()`",
    note = "a branch is bound already, and is never the target of a combo: to extend a branch, add the extension to the combo that minted it (rule `branch-bookkeeping` in `toolgraft::rulebook`)"
)]
pub trait TypedCombo: sealed::Sealed {
    /// The combo's outermost branch, once bound.
    type Branch;

    #[doc(hidden)]
    fn into_draft(self, drafts: &mut Vec<ComboDraft>) -> Self::Branch;
}

mod sealed {
    use super::Combo;
    use crate::combo::typestate::ComboState;
    use crate::stack::Stack;

    pub trait Sealed {}

    /// A combo's stack and state, for [`Takes`](super::Takes)' blanket impl.
    pub trait Parts: Sealed + Sized {
        type Stack: Stack;
        type State: ComboState;
        fn into_combo(self) -> Combo<Self::Stack, Self::State>;
    }

    impl<S: Stack, St: ComboState> Parts for Combo<S, St> {
        type Stack = S;
        type State = St;
        #[inline(always)]
        fn into_combo(self) -> Self {
            self
        }
    }
}

impl<S: Stack, St> sealed::Sealed for Combo<S, St> {}

impl<S: Stack, St> TypedCombo for Combo<S, St> {
    type Branch = Branch<S>;

    fn into_draft(self, drafts: &mut Vec<ComboDraft>) -> Branch<S> {
        let bound = Branch {
            name: self.draft.name().clone(),
            stack: self.stack,
        };
        drafts.push(self.draft);
        bound
    }
}

impl sealed::Sealed for () {}

impl Combos for () {
    type Branches = ();

    fn into_drafts(self, _: &mut Vec<ComboDraft>) {}
}

impl<C: TypedCombo> sealed::Sealed for Vec<C> {}

/// Combos of one type, as many as there are: what binds tools made at run time
/// (a `DynTool` each) with the same extensions, in one call.
///
/// ```
/// use toolgraft::{Toolset, ext::Trace, runtime::DynTool};
/// # fn tool(name: &str) -> DynTool {
/// #     DynTool::builder().name(name).description("Echo.")
/// #         .input_schema(schemars::json_schema!({"type": "object"}))
/// #         .body(|args| async move { Ok(serde_json::Value::Object(args)) }).build().unwrap()
/// # }
/// let tools = [tool("a"), tool("b")];
/// let toolset = Toolset::new();
/// let branches = toolset.bind(tools.iter().map(|t| t.combo().with(Trace)).collect::<Vec<_>>())?;
/// assert_eq!(branches.len(), 2);
/// assert_eq!(toolset.names(), ["a", "a_trace", "b", "b_trace"]);
/// # Ok::<(), toolgraft::BindError>(())
/// ```
impl<C: TypedCombo> Combos for Vec<C> {
    type Branches = Vec<C::Branch>;

    fn into_drafts(self, drafts: &mut Vec<ComboDraft>) -> Self::Branches {
        self.into_iter()
            .map(|combo| combo.into_draft(drafts))
            .collect()
    }
}

// A tuple of combos is an element too, so more than 16 combos bind in one call
// as nested tuples. (Not offered as a fix when an element is no combo.)
#[diagnostic::do_not_recommend]
impl TypedCombo for () {
    type Branch = ();

    fn into_draft(self, _: &mut Vec<ComboDraft>) {}
}

macro_rules! combo_tuples {
    ($(($($combo:ident $ty:ident),+)),+ $(,)?) => {$(
        impl<$($ty: TypedCombo),+> sealed::Sealed for ($($ty,)+) {}

        impl<$($ty: TypedCombo),+> Combos for ($($ty,)+) {
            type Branches = ($($ty::Branch,)+);

            fn into_drafts(self, drafts: &mut Vec<ComboDraft>) -> Self::Branches {
                let ($($combo,)+) = self;
                ($($combo.into_draft(drafts),)+)
            }
        }

        #[diagnostic::do_not_recommend]
        impl<$($ty: TypedCombo),+> TypedCombo for ($($ty,)+) {
            type Branch = ($($ty::Branch,)+);

            fn into_draft(self, drafts: &mut Vec<ComboDraft>) -> Self::Branch {
                self.into_drafts(drafts)
            }
        }
    )+};
}

combo_tuples!(
    (a A),
    (a A, b B),
    (a A, b B, c C),
    (a A, b B, c C, d D),
    (a A, b B, c C, d D, e E),
    (a A, b B, c C, d D, e E, f F),
    (a A, b B, c C, d D, e E, f F, g G),
    (a A, b B, c C, d D, e E, f F, g G, h H),
    (a A, b B, c C, d D, e E, f F, g G, h H, i I),
    (a A, b B, c C, d D, e E, f F, g G, h H, i I, j J),
    (a A, b B, c C, d D, e E, f F, g G, h H, i I, j J, k K),
    (a A, b B, c C, d D, e E, f F, g G, h H, i I, j J, k K, l L),
    (a A, b B, c C, d D, e E, f F, g G, h H, i I, j J, k K, l L, m M),
    (a A, b B, c C, d D, e E, f F, g G, h H, i I, j J, k K, l L, m M, n N),
    (a A, b B, c C, d D, e E, f F, g G, h H, i I, j J, k K, l L, m M, n N, o O),
    (a A, b B, c C, d D, e E, f F, g G, h H, i I, j J, k K, l L, m M, n N, o O, p P),
);
