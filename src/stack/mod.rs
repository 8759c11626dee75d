//! The callable at every level: a base tool, or a branch with its layers.

use std::any::{Any, TypeId};
use std::cell::OnceCell;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ArgsError, ArgsErrorKind, ToolError, shorten, shorten_json};
use crate::name::Name;
use crate::schema::Args;

pub(crate) mod erased;
pub(crate) mod params;
pub(crate) mod segment;

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

    /// Decodes, and gives the arguments back as they were: what a run-time layer
    /// over this stack keeps (a cache key, a run-time wrapper's view). The default
    /// decodes a copy; a typed tool decodes by reference and copies nothing.
    #[doc(hidden)]
    fn decode_keeping(&self, args: Args) -> Result<(Self::Input, Args), ArgsError> {
        let input = self.decode(args.clone())?;
        Ok((input, args))
    }
}

/// The layer below, as the wrapper `W` sees it: callable, and named.
///
/// Only a branch minted for `W` makes one, and hands it to `W`'s
/// [`Wrap::around`](crate::Wrap::around): a wrapper cannot run another wrapper's
/// `around` (a proxy's, say) as its own, so the rules see the locality of what
/// actually runs.
///
/// ```
/// use toolgraft::{Extension, Stack, ToolError, Wrap};
/// use toolgraft::extension::{Anywhere, Next, Wrapper};
///
/// #[derive(Clone)]
/// struct Audit;
/// impl Extension for Audit {
///     type Kind = Wrapper;
///     type Locality = Anywhere;
///     fn name(&self) -> &str { "audit" }
/// }
///
/// impl<S: Stack> Wrap<S> for Audit {
///     type Params = ();
///     async fn around(&self, next: Next<'_, S, Self>, (): (), input: S::Input)
///         -> Result<S::Output, ToolError>
///     {
///         // `next.name()` is the layer below, `next.branch()` the branch called.
///         tracing::info!(below = %next.name(), branch = %next.branch(), "audited");
///         next.call(input).await
///     }
/// }
/// ```
pub struct Next<'a, S, W: ?Sized> {
    stack: &'a S,
    name: &'a Name,
    branch: &'a Name,
    extension: &'a str,
    wrapper: PhantomData<fn() -> *const W>,
}

impl<S, W: ?Sized> Clone for Next<'_, S, W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S, W: ?Sized> Copy for Next<'_, S, W> {}

impl<S, W: ?Sized> std::fmt::Debug for Next<'_, S, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Next")
            .field("name", self.name)
            .field("branch", self.branch)
            .finish_non_exhaustive()
    }
}

impl<'a, S: Stack, W: ?Sized> Next<'a, S, W> {
    /// The layer below, named `name`, as seen from the branch `branch`.
    #[inline]
    pub(crate) fn new(stack: &'a S, name: &'a Name, branch: &'a Name, extension: &'a str) -> Self {
        Self {
            stack,
            name,
            branch,
            extension,
            wrapper: PhantomData,
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

    /// The name of the extension whose branch this is (`cache`).
    pub fn extension(&self) -> &'a str {
        self.extension
    }

    /// The error of the extension refusing the call before the layer below
    /// runs: [`ToolError::Refused`] naming the branch and the extension.
    ///
    /// ```
    /// use toolgraft::{Extension, Stack, ToolError, Wrap};
    /// use toolgraft::extension::{Anywhere, Next, Wrapper};
    ///
    /// #[derive(Clone)]
    /// struct Closed;
    /// impl Extension for Closed {
    ///     type Kind = Wrapper;
    ///     type Locality = Anywhere;
    ///     fn name(&self) -> &str { "closed" }
    /// }
    ///
    /// impl<S: Stack> Wrap<S> for Closed {
    ///     type Params = ();
    ///     async fn around(&self, next: Next<'_, S, Self>, (): (), _: S::Input)
    ///         -> Result<S::Output, ToolError>
    ///     {
    ///         Err(next.refuse("closed for maintenance"))
    ///     }
    /// }
    /// ```
    pub fn refuse(&self, reason: impl Into<String>) -> ToolError {
        ToolError::Refused {
            tool: self.branch.clone(),
            extension: Name::lossy(self.extension),
            reason: reason.into(),
        }
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
/// The field path and serde's message are shortened (see
/// [`shorten`](crate::error::shorten)): serde quotes the offending value whole.
///
/// ```
/// use toolgraft::extension::decode_args;
/// #[derive(serde::Deserialize, Debug)]
/// struct Shout { text: String }
/// let args = serde_json::json!({"text": 3}).as_object().unwrap().clone();
/// let err = decode_args::<Shout>(args).unwrap_err();
/// assert_eq!(err.field.as_deref(), Some("text"));
/// ```
pub fn decode_args<T: DeserializeOwned>(args: Args) -> Result<T, ArgsError> {
    decode_value(&Value::Object(args))
}

/// [`decode_args`], giving the arguments back as they were.
pub(crate) fn decode_args_keeping<T: DeserializeOwned>(args: Args) -> Result<(T, Args), ArgsError> {
    let args = Value::Object(args);
    let decoded = decode_value(&args)?;
    match args {
        Value::Object(args) => Ok((decoded, args)),
        _ => Err(ArgsError::whole("the arguments are not an object")),
    }
}

fn decode_value<T: DeserializeOwned>(args: &Value) -> Result<T, ArgsError> {
    // Tracking the path costs an allocation per field: only pay it to explain a
    // failure.
    T::deserialize(args)
        .or_else(|_| serde_path_to_error::deserialize(args))
        .map_err(|err| {
            let path = shorten(&err.path().to_string()).into_owned();
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
                problem: shorten(&problem).into_owned(),
            }
        })
}

/// serde reports a missing field at the parent's path; the field is in the message.
fn missing_field(problem: &str) -> Option<String> {
    let rest = problem.strip_prefix("missing field `")?;
    Some(shorten(&rest[..rest.find('`')?]).into_owned())
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

    /// Decodes, keeping the arguments as given (never copying them): the first
    /// half of a call through a layer.
    fn decode_erased(&self, args: Args) -> Result<DynInput, ArgsError>;

    /// Calls with what [`ErasedStack::decode_erased`] decoded.
    fn call_erased<'a>(
        &'a self,
        tool: &'a Name,
        input: DynInput,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;

    /// The typed stack behind this one, for [`DynStack::downcast_ref`](crate::DynStack::downcast_ref).
    fn as_any(&self) -> Option<&dyn Any>;
}

impl<S: Stack> ErasedStack for S {
    fn call_json<'a>(
        &'a self,
        tool: &'a Name,
        args: Args,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        call_json(self, tool, args)
    }

    fn decode_erased(&self, args: Args) -> Result<DynInput, ArgsError> {
        decode_shared(self, args).unwrap_or_else(|args| {
            // A typed input (a base tool's, or a stack of one's own under
            // `DynStack::new`): the arguments are kept as given, by reference for a
            // typed tool, copied only by a stack that cannot give them back.
            let (decoded, args) = self.decode_keeping(args)?;
            Ok(DynInput::kept(args, decoded))
        })
    }

    fn call_erased<'a>(
        &'a self,
        tool: &'a Name,
        input: DynInput,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        call_erased(self, tool, input)
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

fn call_json<'a, S: Stack>(
    stack: &'a S,
    tool: &'a Name,
    args: Args,
) -> BoxFuture<'a, Result<Value, ToolError>> {
    Box::pin(async move {
        let input = stack.decode(args).map_err(|err| err.for_tool(tool))?;
        output_json(tool, stack.call(input).await?)
    })
}

fn call_erased<'a, S: Stack>(
    stack: &'a S,
    tool: &'a Name,
    input: DynInput,
) -> BoxFuture<'a, Result<Value, ToolError>> {
    Box::pin(async move {
        let input = match input.into_input::<S::Input>() {
            Ok(input) => input,
            // A clone keeps the arguments, not the decoded input (whose type need
            // not be `Clone`): the stack decodes them again.
            Err(Undecoded::Clone(args)) => stack.decode(args).map_err(|err| err.for_tool(tool))?,
            Err(Undecoded::Foreign) => {
                return Err(
                    ArgsError::whole("these arguments were decoded for another tool")
                        .for_tool(tool),
                );
            }
        };
        output_json(tool, stack.call(input).await?)
    })
}

/// Decoding for stacks whose input already holds the arguments: one that takes
/// a [`DynInput`] (a run-time layer) passes the one below up unchanged, one that
/// takes [`Args`] keeps them as its input. `Err` gives the arguments back for any
/// other input.
fn decode_shared<S: Stack>(stack: &S, args: Args) -> Result<Result<DynInput, ArgsError>, Args> {
    let input = TypeId::of::<S::Input>();
    if input != TypeId::of::<DynInput>() && input != TypeId::of::<Args>() {
        return Err(args);
    }
    let decoded = match stack.decode(args) {
        Ok(decoded) => decoded,
        Err(err) => return Ok(Err(err)),
    };
    let decoded = match cast::<S::Input, DynInput>(decoded) {
        Ok(input) => return Ok(Ok(input)),
        Err(decoded) => decoded,
    };
    Ok(cast::<S::Input, Args>(decoded)
        .map(DynInput::raw)
        .map_err(|_| ArgsError::whole("a layer decoded into another type")))
}

/// `value` as a `U`, when `T` is `U`; `value` back otherwise. A move: downcasting
/// through a `Box<dyn Any>` would allocate, once per run-time layer per call.
pub(crate) fn cast<T: 'static, U: 'static>(value: T) -> Result<U, T> {
    let mut slot = Some(value);
    let as_u = (&mut slot as &mut dyn Any).downcast_mut::<Option<U>>();
    match (as_u.and_then(Option::take), slot) {
        (Some(value), _) => Ok(value),
        (None, Some(value)) => Err(value),
        // Taken only by the downcast, which then returned it.
        (None, None) => unreachable!("a value taken by a failed downcast"),
    }
}

/// A layer whose input serializes back into its arguments (every built-in
/// extension's branch over a run-time layer): decoding keeps no copy, and the
/// arguments are rebuilt only if something asks for them.
pub(crate) struct Rebuilt<S>(pub(crate) S);

impl<S> ErasedStack for Rebuilt<S>
where
    S: Stack<Input: Serialize>,
{
    fn call_json<'a>(
        &'a self,
        tool: &'a Name,
        args: Args,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        call_json(&self.0, tool, args)
    }

    fn decode_erased(&self, args: Args) -> Result<DynInput, ArgsError> {
        decode_shared(&self.0, args)
            .unwrap_or_else(|args| Ok(DynInput::rebuilt(self.0.decode(args)?)))
    }

    fn call_erased<'a>(
        &'a self,
        tool: &'a Name,
        input: DynInput,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        call_erased(&self.0, tool, input)
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(&self.0)
    }
}

fn output_json<O: Serialize + 'static>(tool: &Name, output: O) -> Result<Value, ToolError> {
    to_json(output).map_err(|source| ToolError::Output {
        tool: tool.clone(),
        source: source.into(),
    })
}

/// A result as JSON: moved when it already is JSON (every run-time layer's
/// result), serialized otherwise. `serde_json::to_value` would copy a `Value`
/// whole, once per layer.
///
/// ```
/// use serde_json::json;
/// assert_eq!(toolgraft::extension::to_json(json!({"a": 1}))?, json!({"a": 1}));
/// assert_eq!(toolgraft::extension::to_json("hi")?, json!("hi"));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn to_json<O: Serialize + 'static>(output: O) -> Result<Value, serde_json::Error> {
    cast::<O, Value>(output).or_else(|output| serde_json::to_value(output))
}

/// Arguments decoded by a stack seen through JSON: the JSON as given (what it
/// serializes as, say for a cache key), and the stack's own decoded input.
///
/// Decoding happens when the outermost layer decodes, so bad arguments are refused
/// before anything runs, naming the tool called, on the run-time path as on the
/// typed one. The arguments are never copied from layer to layer: each layer keeps
/// them as given, or turns its decoded input back into JSON the first time
/// [`DynInput::args`] is asked.
pub struct DynInput {
    /// Boxed, decoded input included: the input moves up through every run-time
    /// layer's decode and down through every call, and a pointer moves for free;
    /// one allocation per call, whatever the input's type.
    parts: Box<Parts<dyn Any + Send>>,
}

struct Parts<Decoded: ?Sized> {
    /// The arguments as given, once known.
    args: OnceCell<Args>,
    /// Reserved params a run-time wrapper took out before the layer below decoded
    /// (they belong to the arguments as the wrapper was given them), while `args`
    /// is not known yet.
    reserved: Args,
    /// The reserved params put back into `args` once it was known: a stack that
    /// takes the arguments themselves must not see them.
    restored: Vec<String>,
    /// Whether the layer took the arguments themselves (a stack over raw JSON):
    /// then they are in `args`, and `decoded` holds nothing.
    raw: bool,
    /// Whether this is a clone: then `decoded` holds nothing, and the stack decodes
    /// `args` again when it is called.
    cloned: bool,
    /// Turns `decoded` back into the arguments when they were not kept.
    rebuild: Option<fn(&(dyn Any + Send)) -> Args>,
    /// What the layer decoded the arguments into, as an `Option<Input>` (taken
    /// when the layer is called).
    decoded: Decoded,
}

impl DynInput {
    fn of<I: Send + 'static>(
        args: OnceCell<Args>,
        decoded: Option<I>,
        rebuild: Option<fn(&(dyn Any + Send)) -> Args>,
    ) -> Self {
        Self {
            parts: Box::new(Parts {
                args,
                reserved: Args::new(),
                restored: Vec::new(),
                raw: decoded.is_none(),
                cloned: false,
                rebuild,
                decoded,
            }),
        }
    }

    fn kept<I: Send + 'static>(args: Args, decoded: I) -> Self {
        Self::of(OnceCell::from(args), Some(decoded), None)
    }

    fn raw(args: Args) -> Self {
        Self::of::<()>(OnceCell::from(args), None, None)
    }

    fn rebuilt<I: Serialize + Send + 'static>(decoded: I) -> Self {
        fn rebuild<I: Serialize + 'static>(decoded: &(dyn Any + Send)) -> Args {
            let decoded = decoded.downcast_ref::<Option<I>>().and_then(Option::as_ref);
            match decoded.map(serde_json::to_value) {
                Some(Ok(Value::Object(args))) => args,
                _ => Args::new(),
            }
        }
        Self::of(OnceCell::new(), Some(decoded), Some(rebuild::<I>))
    }

    /// The arguments as given.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgraft::{Name, Stack};
    /// use toolgraft::runtime::DynStack;
    /// let echo = DynStack::from_fn(Name::new("echo")?, |args| async move { Ok(serde_json::Value::Object(args)) });
    /// let input = echo.decode(json!({"a": 1}).as_object().unwrap().clone())?;
    /// assert_eq!(input.args()["a"], 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn args(&self) -> &Args {
        let parts = &*self.parts;
        parts.args.get_or_init(|| {
            let mut args = match parts.rebuild {
                Some(rebuild) => rebuild(&parts.decoded),
                None => Args::new(),
            };
            args.extend(parts.reserved.iter().map(|(k, v)| (k.clone(), v.clone())));
            args
        })
    }

    /// Puts back reserved params a run-time wrapper took out before the layer below
    /// decoded, so the wrapper sees its arguments as given.
    pub(crate) fn restore(&mut self, reserved: Args) {
        let parts = &mut *self.parts;
        match parts.args.get_mut() {
            Some(args) => {
                parts.restored.extend(reserved.keys().cloned());
                args.extend(reserved);
            }
            None => parts.reserved.extend(reserved),
        }
    }

    /// Takes reserved params put back by [`DynInput::restore`] out again, as the
    /// wrapper that reserves them passes the input down.
    pub(crate) fn take_back(&mut self, names: &[String]) {
        let parts = &mut *self.parts;
        for name in names {
            let held = parts.reserved.shift_remove(name).is_some();
            let at = parts.restored.iter().position(|restored| restored == name);
            if let Some(at) = at {
                parts.restored.remove(at);
            }
            if (held || at.is_some())
                && let Some(args) = parts.args.get_mut()
            {
                args.shift_remove(name);
            }
        }
    }

    /// The decoded input of a stack taking `T`: this very input, for a stack that
    /// takes a `DynInput`.
    fn into_input<T: 'static>(self) -> Result<T, Undecoded> {
        let mut parts = match cast::<Self, T>(self) {
            Ok(whole) => return Ok(whole),
            Err(this) => this.parts,
        };
        if parts.raw || parts.cloned {
            let mut args = parts.args.take().unwrap_or_default();
            // Put back last, so taking them out last-first keeps the order.
            for name in parts.restored.iter().rev() {
                args.remove(name);
            }
            if parts.cloned && !parts.raw {
                return Err(Undecoded::Clone(args));
            }
            return cast::<Args, T>(args).map_err(|_| Undecoded::Foreign);
        }
        let decoded: &mut (dyn Any + Send) = &mut parts.decoded;
        decoded
            .downcast_mut::<Option<T>>()
            .and_then(Option::take)
            .ok_or(Undecoded::Foreign)
    }
}

/// Why [`DynInput::into_input`] has no decoded input to give.
enum Undecoded {
    /// A clone: the arguments, for the stack to decode again.
    Clone(Args),
    /// The input was decoded by a stack of another type.
    Foreign,
}

/// A copy of the arguments as given, which the layer below decodes again when it
/// is called: the decoded input itself need not be `Clone`. What lets a wrapper
/// over [`DynStack`](crate::runtime::DynStack) call the layer below more than once
/// (a retry), as a typed one does with an input that is `Clone`. The arguments of
/// an input a registered typed extension's branch decoded are that input
/// serialized ([`args`](DynInput::args)), so its clone is decoded from what the
/// input's `Serialize` writes.
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Name, Stack};
/// use toolgraft::runtime::DynStack;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let echo = DynStack::from_fn(Name::new("echo")?, |args| async move { Ok(serde_json::Value::Object(args)) });
/// let input = echo.decode(json!({"a": 1}).as_object().unwrap().clone())?;
/// let again = input.clone();
/// assert_eq!(echo.call(input).await?, echo.call(again).await?);
/// # Ok(()) }
/// ```
impl Clone for DynInput {
    fn clone(&self) -> Self {
        let parts = &*self.parts;
        // The reserved params a wrapper above took out are in `args()`: the clone
        // takes them out again on the way down, as `restored` ones.
        let mut restored = parts.restored.clone();
        restored.extend(parts.reserved.keys().cloned());
        Self {
            parts: Box::new(Parts {
                args: OnceCell::from(self.args().clone()),
                reserved: Args::new(),
                restored,
                raw: parts.raw,
                cloned: true,
                rebuild: None,
                decoded: None::<()>,
            }),
        }
    }
}

impl std::fmt::Debug for DynInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DynInput")
            .field(&shorten_json(self.args()))
            .finish()
    }
}

impl Serialize for DynInput {
    fn serialize<Ser: serde::Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        self.args().serialize(serializer)
    }
}

/// A boxed call future: what a stack seen through JSON, or a segment, returns.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
