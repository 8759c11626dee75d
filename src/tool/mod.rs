//! Base tools: a name, a description and an async body from a typed input to a
//! typed output.

use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use schemars::{JsonSchema, Schema};
use serde::Serialize;

use crate::error::{ArgsError, BoxError, ToolError, panic_message};
use crate::name::Name;
use crate::schema::ArgNames;
use crate::schema::Args;
use crate::stack::Stack;

mod builder;
mod hints;
mod presentation;

pub use crate::annotations::{Annotations, Demand};
pub use builder::{
    BodyFuture, BodyResult, BodySet, DescriptionSet, NameSet, NoBody, NoDescription, NoName,
    ToolBuilder, ToolInput, ToolOutput, TypedBody,
};
pub use hints::{
    AtBind, Grants, Hinted, Hints, Idempotent, NewTool, ReadOnly, Repeatable, Repeated, Unsaid,
};
pub use presentation::Presentation;

pub(crate) mod sealed {
    /// The seal of [`BaseTool`](super::BaseTool).
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a base tool: only `Tool` and `DynTool` are",
        label = "base tools are built, not implemented",
        note = "build a base tool with `Tool::builder()` (typed) or `DynTool::builder()` (JSON, at run time)",
        note = "a combo's rules start counting at its base: a type that wraps a bound branch (a `pool` branch, say) and claims to be a base would hide that branch's layers from them"
    )]
    pub trait BaseTool {}

    /// The seal of [`Body`](super::Body).
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a tool body",
        label = "expected an async function from the input to `Result<output, BoxError>`",
        note = "a body is a closure or function: `|input: I| async move {{ Ok(output) }}`, whose future is `Send`"
    )]
    pub trait Body<I, O> {}

    /// Names no one outside this crate can write: the builder's traits have a
    /// method taking it, so only this crate implements them.
    #[derive(Debug)]
    pub struct Token;
}

/// What clients see of a base tool: name, description and the two schemas.
///
/// ```
/// # use toolgraft::Tool;
/// # use toolgraft::tool::BaseTool;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
/// let ping = Tool::builder().name("ping").description("Answer pong.")
///     .body(|_: Ping| async { Ok("pong".to_owned()) }).build()?;
/// assert_eq!(ping.spec().name, "ping");
/// assert_eq!(ping.spec().output_schema.as_ref().unwrap().get("type").unwrap(), "string");
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: Name,
    /// What the tool does, for a model or a person.
    pub description: String,
    /// The JSON Schema of the arguments (shared: every tool of one input type holds
    /// the same one, and so does every branch that presents it).
    pub input_schema: Arc<Schema>,
    /// The JSON Schema of the result, when the tool declares one.
    pub output_schema: Option<Arc<Schema>>,
    /// Its title, annotations and protocol fields (shared with its branches).
    pub presentation: Arc<Presentation>,
}

/// A tool that no extension produced: the start of every combo.
///
/// ```
/// use toolgraft::Tool;
/// use toolgraft::tool::BaseTool;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
/// let ping = Tool::builder().name("ping").description("Answer pong.")
///     .body(|_: Ping| async { Ok("pong".to_owned()) }).build()?;
/// let combo = ping.combo(); // add extensions with `.with(..)`
/// # let _ = combo;
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
///
/// Sealed: toolgraft implements it for [`Tool`] and [`DynTool`](crate::runtime::DynTool)
/// only. A base is where a combo's rules start counting, so a type that could claim
/// to be one (a newtype around a bound branch, say) could hide a backend from the
/// rules of the combos built on it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a base tool, so it cannot be bound or start a combo",
    label = "not a base tool",
    note = "a branch is never the target of a combo: to extend a branch, add the extension to the combo that minted it (rule `branch-bookkeeping` in `toolgraft::rulebook`)",
    note = "base tools are built with `Tool::builder()` (or `DynTool::builder()` at run time)"
)]
pub trait BaseTool: Stack + sealed::BaseTool + std::fmt::Debug {
    /// The tool's name, description and schemas.
    fn spec(&self) -> &ToolSpec;
}

/// A tool body: an async function from `I` to `Result<O, BoxError>`.
///
/// ```
/// use toolgraft::error::BoxError;
/// use toolgraft::tool::Body;
/// async fn double(n: i64) -> Result<i64, BoxError> { Ok(2 * n) }
/// fn is_body<B: Body<i64, i64>>(_: &B) {}
/// is_body(&double);
/// is_body(&|n: i64| async move { Ok(n + 1) });
/// ```
///
/// Implemented for every `Fn(I) -> impl Future<Output = Result<O, BoxError>> + Send`
/// that is `Clone + Send + Sync` (closures over `Arc`s are), and sealed: a body is a
/// function, and clones must share state.
pub trait Body<I, O>: sealed::Body<I, O> + Clone + Send + Sync + 'static {
    /// The future a call returns.
    type Future: Future<Output = Result<O, BoxError>> + Send;
    /// Starts a call.
    fn run(&self, input: I) -> Self::Future;
}

impl<I, O, F, Fut> sealed::Body<I, O> for F
where
    F: Fn(I) -> Fut,
    Fut: Future<Output = Result<O, BoxError>> + Send,
{
}

impl<I, O, F, Fut> Body<I, O> for F
where
    F: Fn(I) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<O, BoxError>> + Send,
{
    type Future = Fut;
    fn run(&self, input: I) -> Fut {
        self(input)
    }
}

/// A typed base tool. Build one with [`Tool::builder`]; every field is required, and
/// forgetting one is a compile error.
///
/// A panic in the body becomes [`ToolError::Panicked`]: the caller keeps running.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
/// use toolgraft::{Stack, Tool, ToolError};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Report { text: String }
/// #[derive(Debug, Serialize, JsonSchema)]
/// struct Summary { title: String, score: i64 }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let report = Tool::builder()
///     .name("report")
///     .description("Summarise a text.")
///     .body(|input: Report| async move {
///         if input.text.is_empty() {
///             return Err("nothing to report".into());
///         }
///         Ok(Summary { title: input.text.to_uppercase(), score: input.text.len() as i64 })
///     })
///     .build()?;
///
/// assert_eq!(report.call(Report { text: "ok".into() }).await?.score, 2);
/// let err = report.call(Report { text: String::new() }).await.unwrap_err();
/// assert!(matches!(err, ToolError::Body { .. }));
/// # Ok(()) }
/// ```
///
/// Its last parameter is what its hints promise about a second call, as a type
/// ([`Unsaid`] unless the builder said [`read_only`](ToolBuilder::read_only) or
/// [`idempotent`](ToolBuilder::idempotent)): what a typed `retry` asks.
pub struct Tool<I, O, F, H = Unsaid> {
    spec: Arc<ToolSpec>,
    args: ArgNames,
    body: F,
    // `I: DeserializeOwned` is proven once, when the tool is built, and kept as this
    // function: a `Stack` impl requiring it would make every layer's `Stack` proof
    // depend on regions (`for<'de> Deserialize<'de>`), proven again in each query.
    decode: fn(Args) -> Result<I, ArgsError>,
    decode_keeping: fn(Args) -> Result<(I, Args), ArgsError>,
    types: PhantomData<fn(I) -> (O, H)>,
}

impl<I, O, F, H> std::fmt::Debug for Tool<I, O, F, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Tool").field(&self.spec.name).finish()
    }
}

impl<I, O, F: Clone, H> Clone for Tool<I, O, F, H> {
    fn clone(&self) -> Self {
        Self {
            spec: self.spec.clone(),
            args: self.args.clone(),
            body: self.body.clone(),
            decode: self.decode,
            decode_keeping: self.decode_keeping,
            types: PhantomData,
        }
    }
}

impl<I, O, F, H> Tool<I, O, F, H> {
    /// The tool's name, description and schemas.
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// # let ping = Tool::builder().name("ping").description("Answer pong.")
    /// #     .body(|_: Ping| async { Ok("pong".to_owned()) }).build()?;
    /// assert_eq!(ping.spec().description, "Answer pong.");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

impl<I, O, F, H> Stack for Tool<I, O, F, H>
where
    I: JsonSchema + Send + 'static,
    O: Serialize + JsonSchema + Send + 'static,
    F: Body<I, O>,
    H: Hints,
{
    type Input = I;
    type Output = O;

    async fn call(&self, input: I) -> Result<O, ToolError> {
        // The body is started inside `catch_unwind` too: a panic before its first
        // await is still the body's panic. And it is started inside this future: a
        // future made outside and awaited inside is stored twice.
        let run = AssertUnwindSafe(async move { self.body.run(input).await }).catch_unwind();
        match run.await {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(source)) => Err(ToolError::Body {
                tool: self.spec.name.clone(),
                source: source.into_inner().into(),
            }),
            Err(panic) => Err(ToolError::Panicked {
                tool: self.spec.name.clone(),
                message: panic_message(panic.as_ref()),
            }),
        }
    }

    fn decode(&self, args: Args) -> Result<I, ArgsError> {
        // serde would ignore an unknown argument; the schema says it is not one.
        self.args.check(&args)?;
        (self.decode)(args)
    }

    fn decode_keeping(&self, args: Args) -> Result<(I, Args), ArgsError> {
        self.args.check(&args)?;
        (self.decode_keeping)(args)
    }
}

impl<I, O, F, H> sealed::BaseTool for Tool<I, O, F, H> {}

impl<I, O, F, H> BaseTool for Tool<I, O, F, H>
where
    Tool<I, O, F, H>: Stack,
{
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

impl<I, O, F, H: Hints> Hinted for Tool<I, O, F, H>
where
    Tool<I, O, F, H>: Stack,
{
    type Hints = H;
}
