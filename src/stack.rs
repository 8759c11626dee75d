//! The callable at every level: a base tool, or a branch with its layers.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ArgsError, ArgsErrorKind, ToolError};
use crate::name::Name;

/// JSON arguments of a call: always an object (MCP's `arguments`).
///
/// ```
/// let args: toolgraft::Args = serde_json::from_str(r#"{"text": "hi"}"#)?;
/// assert_eq!(args["text"], "hi");
/// # Ok::<(), serde_json::Error>(())
/// ```
pub type Args = serde_json::Map<String, Value>;

/// A base tool or a branch: an async function from `Input` to `Output`.
///
/// Every layer of a typed combo is a `Stack` that holds the layer below by value, so
/// a typed call through a whole combo is static dispatch with no boxing, and
/// `decode` composes the same way: each layer decodes its own part of the JSON
/// arguments and hands the rest down.
///
/// `Clone` must share state (a cache's store, a pool's threads): the toolset keeps a
/// clone of every prefix to serve it by name.
///
/// ```
/// use toolgraft::{Stack, Tool};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Shout { text: String }
///
/// let shout = Tool::builder()
///     .name("shout")
///     .description("Return the text.")
///     .body(|input: Shout| async move { Ok(input.text) })
///     .build()?;
/// assert_eq!(shout.call(Shout { text: "hi".into() }).await?, "hi");
/// # Ok(()) }
/// ```
pub trait Stack: Clone + Send + Sync + 'static {
    /// What a typed call takes.
    type Input: Send + 'static;
    /// What a call returns.
    type Output: Serialize + Send + 'static;

    /// Runs the stack.
    fn call(
        &self,
        input: Self::Input,
    ) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;

    /// Decodes JSON arguments into `Input`.
    fn decode(&self, args: Args) -> Result<Self::Input, ArgsError>;
}

/// The layer below, as a wrapper sees it: callable, and named.
///
/// ```
/// use toolgraft::{Next, Name, Stack};
/// # fn demo<S: Stack>(stack: &S) -> Result<(), toolgraft::InvalidName> {
/// let (name, branch) = (Name::new("shout")?, Name::new("shout_cache")?);
/// let next = Next::new(stack, &name, &branch);
/// assert_eq!((next.name().as_str(), next.branch().as_str()), ("shout", "shout_cache"));
/// # Ok(()) }
/// ```
pub struct Next<'a, S> {
    stack: &'a S,
    name: &'a Name,
    branch: &'a Name,
}

impl<S> Clone for Next<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Next<'_, S> {}

impl<'a, S: Stack> Next<'a, S> {
    /// The layer below, named `name`, as seen from the branch `branch` (see
    /// [`Next`]'s example).
    #[inline]
    pub fn new(stack: &'a S, name: &'a Name, branch: &'a Name) -> Self {
        Self {
            stack,
            name,
            branch,
        }
    }

    /// The layer input's running name (see [`Next`]'s example).
    pub fn name(&self) -> &'a Name {
        self.name
    }

    /// The branch being called: the name errors of the wrapper should carry (see
    /// [`Next`]'s example).
    pub fn branch(&self) -> &'a Name {
        self.branch
    }

    /// The layer below itself (see [`Next`]'s example).
    pub fn stack(&self) -> &'a S {
        self.stack
    }

    /// Calls the layer below (see [`Next`]'s example).
    #[inline]
    pub fn call(
        self,
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send + 'a {
        self.stack.call(input)
    }
}

/// Decodes arguments with serde, naming the offending field on error.
///
/// ```
/// use toolgraft::decode_args;
/// #[derive(serde::Deserialize, Debug)]
/// struct Shout { text: String }
/// let args = serde_json::json!({"text": 3}).as_object().unwrap().clone();
/// let err = decode_args::<Shout>(args).unwrap_err();
/// assert_eq!(err.field.as_deref(), Some("text"));
/// ```
pub fn decode_args<T: DeserializeOwned>(args: Args) -> Result<T, ArgsError> {
    let args = Value::Object(args);
    // Tracking the path costs an allocation per field: only pay it to explain a
    // failure.
    T::deserialize(&args)
        .or_else(|_| serde_path_to_error::deserialize(&args))
        .map_err(|err| {
            let path = err.path().to_string();
            let problem = err.inner().to_string();
            let missing = missing_field(&problem);
            let kind = if missing.is_some() {
                ArgsErrorKind::MissingField
            } else {
                ArgsErrorKind::InvalidValue
            };
            let field = if path == "." { missing } else { Some(path) };
            ArgsError {
                field,
                kind,
                problem,
            }
        })
}

/// serde reports a missing field at the parent's path; the field is in the message.
fn missing_field(problem: &str) -> Option<String> {
    let rest = problem.strip_prefix("missing field `")?;
    Some(rest[..rest.find('`')?].to_owned())
}

/// A stack seen through JSON: what the toolset stores for every bound name, and
/// what [`DynStack`](crate::DynStack) layers over.
pub(crate) trait ErasedStack: Send + Sync + 'static {
    /// Decodes and calls: a by-name call.
    fn call_json<'a>(
        &'a self,
        tool: &'a Name,
        args: Args,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;

    /// Decodes, keeping the arguments: the first half of a call through a layer.
    fn decode_erased(&self, args: Args) -> Result<DynInput, ArgsError>;

    /// Calls with what [`ErasedStack::decode_erased`] decoded.
    fn call_erased<'a>(
        &'a self,
        tool: &'a Name,
        input: DynInput,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
}

impl<S: Stack> ErasedStack for S {
    fn call_json<'a>(
        &'a self,
        tool: &'a Name,
        args: Args,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let input = self.decode(args).map_err(|err| err.for_tool(tool))?;
            output_json(tool, self.call(input).await?)
        })
    }

    fn decode_erased(&self, args: Args) -> Result<DynInput, ArgsError> {
        let decoded = self.decode(args.clone())?;
        Ok(DynInput {
            args,
            decoded: Box::new(decoded),
        })
    }

    fn call_erased<'a>(
        &'a self,
        tool: &'a Name,
        input: DynInput,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let input = input.decoded.downcast::<S::Input>().map_err(|_| {
                ArgsError::whole("these arguments were decoded for another tool").for_tool(tool)
            })?;
            output_json(tool, self.call(*input).await?)
        })
    }
}

fn output_json<O: Serialize>(tool: &Name, output: O) -> Result<Value, ToolError> {
    serde_json::to_value(output).map_err(|source| ToolError::Output {
        tool: tool.clone(),
        source: source.into(),
    })
}

/// Arguments decoded by a stack seen through JSON: the JSON as given (what it
/// serializes as, say for a cache key), and the stack's own decoded input.
///
/// Decoding happens when the outermost layer decodes, so bad arguments are refused
/// before anything runs, naming the tool called, on the run-time path as on the
/// typed one.
pub struct DynInput {
    args: Args,
    decoded: Box<dyn std::any::Any + Send>,
}

impl DynInput {
    /// The arguments as given.
    pub fn args(&self) -> &Args {
        &self.args
    }
}

impl std::fmt::Debug for DynInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DynInput").field(&self.args).finish()
    }
}

impl Serialize for DynInput {
    fn serialize<Ser: serde::Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        self.args.serialize(serializer)
    }
}

/// A boxed call future: what a stack seen through JSON, or a segment, returns.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
