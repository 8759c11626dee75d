//! The extension trait family.
//!
//! * [`Extension`] says what an extension is: its kind, whether it needs body
//!   locality, its name, and what it presents (description, schemas, config).
//! * [`Layer`] says what it does to one layer: given the stack below, it builds the
//!   branch, like `tower::Layer`. Transformers and backends implement it directly.
//! * [`Wrap`] is the short way to write a wrapper's branch: one `around` method that
//!   receives the layer input and must return the layer's output; its `Layer` impl
//!   returns [`Wrapped::new`]. `Wrapped` forwards the same input and output types,
//!   so schema preservation holds by construction.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use schemars::Schema;
use serde_json::Value;

use crate::error::{ArgsError, ToolError};
use crate::kind::{Kind, Wrapper};
use crate::name::Name;
use crate::params::ReservedParams;
use crate::rules::{Locality, MintsBranchOf};
use crate::schema;
use crate::stack::{Args, Next, Stack};

/// What extension `E` receives about the layer below when it is applied.
///
/// Only the binding engine makes one, and only for the extension it is applying:
/// an extension cannot hand its `LayerInput` to another extension's [`Layer`]
/// (a `pool` inside a wrapper's branch, say), so what a combo's rules see is what
/// its branches do.
///
/// ```
/// use toolgraft::{Anywhere, Extension, LayerInput, Transformer};
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
        output_schema: Option<&'a Schema>,
    ) -> Self {
        Self {
            name,
            branch,
            base,
            description,
            input_schema,
            output_schema,
            extension: PhantomData,
        }
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
/// let err = toolgraft::ConfigError::new("max_items", "must be at least 1");
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
/// another extension's branch (a `pool`'s, say) under its own kind. What the types
/// cannot see is what the extension's own code does: one that runs the layer below
/// somewhere else must declare `type Kind = Backend;`, and one that sets something
/// only the body's task or thread can see must declare `type Locality = BodyLocal;`.
///
/// ```
/// use toolgraft::{Anywhere, Extension, Wrapper};
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
pub trait Extension: Send + Sync + 'static {
    /// [`Wrapper`], [`Transformer`](crate::Transformer) or [`Backend`](crate::Backend).
    type Kind: Kind;
    /// [`Anywhere`](crate::Anywhere), or [`BodyLocal`](crate::BodyLocal) when the
    /// extension only works in the thread/task that runs the tool body.
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
}

/// An extension built from author config: what lets a manifest element carry
/// `{"name": .., "config": {..}}` for it.
///
/// ```
/// use toolgraft::{Configurable, ConfigError};
/// use toolgraft::ext::{batch::BatchConfig, Batch};
/// let batch = Batch::from_config(BatchConfig { max_items: 5 })?;
/// # let _ = batch;
/// # Ok::<(), ConfigError>(())
/// ```
pub trait Configurable: Extension + Sized {
    /// The config, as serde reads it from the element's `config` mapping.
    type Config: serde::de::DeserializeOwned;

    /// Builds the extension; refuse a config it cannot work with.
    fn from_config(config: Self::Config) -> Result<Self, ConfigError>;
}

/// Applies an extension to the stack `S` below it, building the branch.
///
/// A wrapper written with [`Wrap`] returns [`Wrapped::new`] here; transformers and
/// backends build their own branch.
/// The typestate checks the branch against the kind's contract: a kind that
/// preserves the input schema must take `S::Input` (optionally
/// [`WithParams`](crate::WithParams)), one that preserves output shape must return
/// `S::Output`.
///
/// ```
/// use toolgraft::{Anywhere, ArgsError, Args, Extension, Layer, LayerInput, Stack,
///     ToolError, Transformer};
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
pub trait Layer<S: Stack>: Extension + Sized {
    /// The branch this extension mints over `S`.
    type Branch: Stack;

    /// Builds the branch over `inner`. Called once per branch, so per-branch state
    /// (a cache's store) is created here.
    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch;
}

/// A wrapper in one method: receive the layer input, call the layer below, return
/// its output.
///
/// The branch ([`Wrapped`]) takes exactly the layer input (plus `Params`) and returns
/// exactly the layer's output, so a `Wrap` cannot change the schema. Its [`Layer`]
/// impl is one line, and states which layers the wrapper applies to.
///
/// ```
/// use toolgraft::{Anywhere, Extension, Layer, LayerInput, Next, Stack, ToolError, Wrap,
///     Wrapped, Wrapper};
///
/// /// Upper-cases a text result.
/// #[derive(Clone)]
/// struct Loud;
///
/// impl Extension for Loud {
///     type Kind = Wrapper;
///     type Locality = Anywhere;
///     fn name(&self) -> &str { "loud" }
/// }
///
/// impl<S: Stack<Output = String>> Wrap<S> for Loud {
///     type Params = ();
///     async fn around(&self, next: Next<'_, S, Self>, (): (), input: S::Input)
///         -> Result<String, ToolError>
///     {
///         Ok(next.call(input).await?.to_uppercase())
///     }
/// }
///
/// impl<S: Stack<Output = String>> Layer<S> for Loud {
///     type Branch = Wrapped<Self, S>;
///     fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch {
///         Wrapped::new(self, inner, below)
///     }
/// }
/// ```
pub trait Wrap<S: Stack>: Extension<Kind = Wrapper> + Clone {
    /// Reserved params this wrapper adds to the branch input: `()` for none, or a
    /// [`Params`](crate::Params) struct.
    type Params: ReservedParams;

    /// Runs around one call of the layer below.
    fn around(
        &self,
        next: Next<'_, S, Self>,
        params: Self::Params,
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send;
}

/// The branch a [`Wrap`] mints: the wrapper, the layer below, and the layer's name
/// (see [`Wrap`]'s example).
pub struct Wrapped<W, S> {
    wrapper: W,
    inner: S,
    below: Name,
    branch: Name,
    reserved: Arc<[String]>,
}

impl<W, S> std::fmt::Debug for Wrapped<W, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wrapped")
            .field("branch", &self.branch)
            .field("below", &self.below)
            .finish_non_exhaustive()
    }
}

impl<W: Clone, S: Clone> Clone for Wrapped<W, S> {
    fn clone(&self) -> Self {
        Self {
            wrapper: self.wrapper.clone(),
            inner: self.inner.clone(),
            below: self.below.clone(),
            branch: self.branch.clone(),
            reserved: self.reserved.clone(),
        }
    }
}

impl<W, S> Wrapped<W, S>
where
    W: Wrap<S>,
    S: Stack,
{
    /// The branch of `wrapper` over `inner`: what a wrapper's [`Layer::layer`]
    /// returns (see [`Wrap`]'s example).
    pub fn new<E>(wrapper: W, inner: S, below: &LayerInput<'_, E>) -> Self
    where
        // A wrapper's branch may be minted by another extension (a cache's store
        // by `Cache`), but one that needs body locality only by one that has it.
        E: MintsBranchOf<W>,
    {
        let reserved = W::Params::schema()
            .and_then(|schema| schema::property_names(&schema))
            .unwrap_or_default();
        Self {
            wrapper,
            inner,
            below: below.name.clone(),
            branch: below.branch.clone(),
            reserved: reserved.into(),
        }
    }

    /// The wrapper this branch runs (its per-branch state, for a stateful one).
    ///
    /// ```
    /// # use frunk::{hlist, hlist_pat}; use toolgraft::{BaseTool, Tool, Toolset};
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let hlist_pat![traced] = Toolset::new().bind(&shout, hlist![shout.combo().with(Trace)])?;
    /// let _trace: &Trace = traced.stack().wrapper();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wrapper(&self) -> &W {
        &self.wrapper
    }
}

impl<W: Wrap<S>, S: Stack> Stack for Wrapped<W, S> {
    type Input = <W::Params as ReservedParams>::With<S::Input>;
    type Output = S::Output;

    // Inlined so a pass-through layer is nothing at all: at depth 8 the
    // compiler otherwise stops inlining and moves the future up through each return.
    #[inline]
    fn call(
        &self,
        input: Self::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send {
        let (params, input) = W::Params::split(input);
        self.wrapper.around(
            Next::new(&self.inner, &self.below, &self.branch),
            params,
            input,
        )
    }

    fn decode(&self, mut args: Args) -> Result<Self::Input, ArgsError> {
        let params = W::Params::take(&mut args, &self.reserved)?;
        Ok(params.join(self.inner.decode(args)?))
    }
}
