//! Typed branches: what binding a combo hands back, called with the input of the
//! tool and reserved params set by type.

use std::fmt;
use std::future::Future;

use super::Combo;
use crate::error::{ArgsError, ToolError};
use crate::name::Name;
use crate::schema::Args;
use crate::stack::Stack;
use crate::stack::params::{Assemble, ParamBag, Params, ReservedIn, assemble, assemble_defaults};
use crate::tool::BaseTool;

/// A bound combo's outermost branch, for typed calls: its name and its stack. A
/// typed call is static dispatch through every layer.
///
/// [`call`](Branch::call) takes the input of the base tool (or of the transformer
/// nearest the top); the reserved params of the wrappers in between are set by type,
/// in any order, with [`params`](Branch::params), and take their defaults when not
/// set. Reordering the layers of the combo changes no call site.
///
/// Params set by type reach below a transformer whose input carries the layer's
/// (a [`BatchInput`](crate::ext::BatchInput), a
/// [`ChainInput`](crate::ext::chain::ChainInput)): pass that input with the
/// layer's own input inside, and each batch item gets its own copy of the params,
/// as each item of a call by name carries its own.
///
/// ```
/// use toolgraft::ext::{Batch, BatchInput, Cache, CacheParams};
/// use toolgraft::{Tool, Toolset};
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
/// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let (batch,) = Toolset::new().bind((shout.combo().with(Cache::default()).with(Batch::default()),))?;
/// let items = BatchInput::sequential(vec![Shout { text: "a".into() }, Shout { text: "b".into() }]);
/// // Every item's cache sees `exp: 300` (5 minutes).
/// let out = batch.params(CacheParams { exp: Some(300.0) }).call(items).await?;
/// assert_eq!(out.len(), 2);
/// # Ok(()) }
/// ```
///
/// ```
/// use toolgraft::ext::{Cache, CacheParams, Proxy, ProxyParams, Trace};
/// use toolgraft::{Tool, Toolset};
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let (traced, cached) = Toolset::new().bind((
///     shout.combo().with(Trace),
///     shout.combo().with(Proxy::allow(["eu"])).with(Cache::default()),
/// ))?;
/// assert_eq!(traced.name(), "shout_trace");
/// assert_eq!(traced.call(Shout { text: "hi".into() }).await?, "hi");
///
/// let answer = cached
///     .params(ProxyParams { proxies: Some(vec!["eu".into()]) })
///     .params(CacheParams { exp: Some(60.0) })
///     .call(Shout { text: "hi".into() })
///     .await?;
/// assert_eq!(answer, "hi");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Branch<S> {
    pub(super) name: Name,
    pub(super) stack: S,
}

impl<S> fmt::Debug for Branch<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Branch").field(&self.name).finish()
    }
}

impl<S: Stack> Branch<S> {
    /// Calls the branch with `input`, the input of the base tool (or of the
    /// transformer nearest the top), every reserved param at its `Default`. The
    /// branch's whole input (`WithParams<.., ..>`) is accepted too. The call is the
    /// stack's own: static dispatch, nothing added.
    ///
    /// See the type's example.
    pub fn call<Core, Index>(
        &self,
        input: Core,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send + '_
    where
        S::Input: Assemble<Core, Index>,
    {
        // The stack's own future: nothing is added to the call.
        self.stack.call(assemble_defaults::<S::Input, _, _>(input))
    }

    /// Starts a call with the reserved params `params`, found by type among the
    /// branch's wrappers; chain more `.params(..)` and end with `.call(input)`.
    ///
    /// See the type's example. A type that no wrapper of the branch reserves does not
    /// compile.
    pub fn params<P, Index>(&self, params: P) -> TypedCall<'_, S>
    where
        P: Params + ReservedIn<S::Input, Index>,
    {
        self.calling().params(params)
    }

    fn calling(&self) -> TypedCall<'_, S> {
        TypedCall {
            branch: self,
            params: ParamBag::default(),
        }
    }

    /// Not available: a branch is never the target of a combo. Present so that
    /// `.combo()` on a branch explains why, instead of "no method named `combo`".
    #[doc(hidden)]
    pub fn combo(&self) -> Combo<Self>
    where
        Self: BaseTool,
    {
        Combo::new(self.clone())
    }
}

impl<S> Branch<S> {
    /// The branch's bound name (see the type's example).
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The typed stack, e.g. to inspect a cache's store.
    pub fn stack(&self) -> &S {
        &self.stack
    }
}

impl<S: Stack> Stack for Branch<S> {
    type Input = S::Input;
    type Output = S::Output;

    fn call(&self, input: S::Input) -> impl Future<Output = Result<S::Output, ToolError>> + Send {
        self.stack.call(input)
    }

    fn decode(&self, args: Args) -> Result<S::Input, ArgsError> {
        self.stack.decode(args)
    }
}

/// A typed call being set up: reserved params so far (see [`Branch::params`]).
pub struct TypedCall<'a, S> {
    branch: &'a Branch<S>,
    params: ParamBag,
}

impl<S> fmt::Debug for TypedCall<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TypedCall").field(&self.branch.name).finish()
    }
}

impl<S: Stack> TypedCall<'_, S> {
    /// Sets the reserved params `params` (replacing ones of the same type).
    pub fn params<P, Index>(mut self, params: P) -> Self
    where
        P: Params + ReservedIn<S::Input, Index>,
    {
        self.params.put(params);
        self
    }

    /// Runs the call with `input` (see [`Branch::call`]).
    pub async fn call<Core, Index>(mut self, input: Core) -> Result<S::Output, ToolError>
    where
        S::Input: Assemble<Core, Index>,
    {
        let input = assemble::<S::Input, _, _>(input, &mut self.params)
            .map_err(|error| error.for_tool(&self.branch.name))?;
        self.branch.stack.call(input).await
    }
}
