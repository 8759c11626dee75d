//! The erased stack: a bound name seen through JSON values, what the run-time
//! path layers and what the typed built-ins run over when a manifest names them.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;

use crate::error::{ArgsError, BoxError, ToolError, panic_message};
use crate::name::Name;
use crate::schema::Args;
use crate::stack::{BoxFuture, DynInput, ErasedStack, Stack};

/// A bound name seen through JSON: JSON arguments in, a JSON value out.
///
/// Any [`Stack`] becomes one with [`DynStack::new`]; a run-time extension builds one
/// from a closure with [`DynStack::from_fn`]. Cloning is cheap.
///
/// As a [`Stack`], its input is a [`DynInput`]: decoding checks the arguments
/// against the stack it wraps right away. [`DynStack::call_json`] decodes and calls
/// in one go. A run-time wrapper builds its branch with [`DynStack::around`], so the
/// layer below decodes the arguments up front.
///
/// ```
/// use serde_json::json;
/// use toolgraft::Name;
/// use toolgraft::runtime::DynStack;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let echo = DynStack::from_fn(Name::new("echo")?, |args| async move { Ok(serde_json::Value::Object(args)) });
/// let args = json!({"a": 1}).as_object().unwrap().clone();
/// assert_eq!(echo.call_json(args).await?, json!({"a": 1}));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DynStack {
    name: Name,
    stack: Arc<dyn ErasedStack>,
}

impl std::fmt::Debug for DynStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DynStack").field(&self.name).finish()
    }
}

impl DynStack {
    /// `stack` through JSON, under the name its errors carry.
    pub fn new<S: Stack>(name: Name, stack: S) -> Self {
        Self {
            name,
            stack: Arc::new(stack),
        }
    }

    pub(crate) fn erased(name: Name, stack: Arc<dyn ErasedStack>) -> Self {
        Self { name, stack }
    }

    /// A branch around `below`: decoding is `below`'s (so bad arguments are refused
    /// before anything runs, naming the tool called), and a call runs `around` with
    /// the decoded input and `below`. What a run-time wrapper's factory returns.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgraft::{Name, Stack};
    /// use toolgraft::runtime::DynStack;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let base = DynStack::from_fn(Name::new("echo")?, |args| async move { Ok(serde_json::Value::Object(args)) });
    /// let counted = DynStack::around(Name::new("echo_counted")?, base, |input, below| async move {
    ///     let keys = input.args().len();
    ///     Ok(json!({"keys": keys, "result": below.call(input).await?}))
    /// });
    /// let args = json!({"a": 1}).as_object().unwrap().clone();
    /// assert_eq!(counted.call_json(args).await?, json!({"keys": 1, "result": {"a": 1}}));
    /// # Ok(()) }
    /// ```
    pub fn around<F, Fut>(name: Name, below: DynStack, around: F) -> Self
    where
        F: Fn(DynInput, DynStack) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        Self::new(
            name.clone(),
            Around {
                name,
                below,
                around: Arc::new(around),
            },
        )
    }

    /// This stack, with `names` taken out of the arguments before it decodes them:
    /// how a run-time wrapper's reserved params stop at the wrapper.
    pub(crate) fn without(self, names: Vec<String>) -> Self {
        Self::new(
            self.name.clone(),
            Without {
                below: self,
                names: names.into(),
            },
        )
    }

    /// A stack from an async closure over the JSON arguments, for a leaf (a
    /// transformer's own work): it takes its arguments as they come. A panic in it
    /// becomes [`ToolError::Panicked`].
    pub fn from_fn<F, Fut>(name: Name, body: F) -> Self
    where
        F: Fn(Args) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, BoxError>> + Send + 'static,
    {
        Self::new(
            name.clone(),
            FnStack {
                name,
                body: Arc::new(body),
            },
        )
    }

    pub(crate) fn into_erased(self) -> Arc<dyn ErasedStack> {
        self.stack
    }

    /// This stack as a body-local layer's branch: its calls run marked as inside
    /// that layer, so a backend reached from there refuses to relocate (as a typed
    /// body-local wrapper's do).
    pub(crate) fn body_local(self, extension: Name, branch: Name) -> DynStack {
        let scope = crate::context::BodyLocalCall { extension, branch };
        DynStack {
            name: self.name,
            stack: Arc::new(BodyLocal {
                inner: self.stack,
                scope,
            }),
        }
    }

    /// The name the stack's errors carry.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The typed stack this one erases, if it is a `T`: how a run-time
    /// extension learns what the layer below is (a job backend's branch, say)
    /// when it can only sit over some. A run-time layer's own stack (made with
    /// [`DynStack::around`] or [`DynStack::from_fn`]) is none of the caller's types.
    ///
    /// ```
    /// use toolgraft::{Name, Tool};
    /// use toolgraft::runtime::DynStack;
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Ping {}
    /// let ping = Tool::builder().name("ping").description("Answer pong.")
    ///     .body(|_: Ping| async { Ok("pong".to_owned()) }).build()?;
    /// let erased = DynStack::new(Name::new("ping")?, ping);
    /// assert!(erased.downcast_ref::<DynStack>().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn downcast_ref<T: Stack>(&self) -> Option<&T> {
        self.stack.as_any()?.downcast_ref::<T>()
    }
}

impl DynStack {
    /// Decodes `args` and calls the stack: what a run-time extension's branch does
    /// with the layer below.
    pub fn call_json(
        &self,
        args: Args,
    ) -> impl Future<Output = Result<Value, ToolError>> + Send + '_ {
        self.stack.call_json(&self.name, args)
    }
}

impl Stack for DynStack {
    type Input = DynInput;
    type Output = Value;

    fn call(&self, input: DynInput) -> impl Future<Output = Result<Value, ToolError>> + Send {
        self.stack.call_erased(&self.name, input)
    }

    fn decode(&self, args: Args) -> Result<DynInput, ArgsError> {
        self.stack.decode_erased(args)
    }
}

/// A closure as a stack.
struct FnStack<F> {
    name: Name,
    body: Arc<F>,
}

impl<F> Clone for FnStack<F> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            body: self.body.clone(),
        }
    }
}

impl<F, Fut> Stack for FnStack<F>
where
    F: Fn(Args) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, BoxError>> + Send + 'static,
{
    type Input = Args;
    type Output = Value;

    fn call(&self, input: Args) -> impl Future<Output = Result<Value, ToolError>> + Send {
        let body = self.body.clone();
        let name = self.name.clone();
        Box::pin(async move {
            let run = std::panic::AssertUnwindSafe(async move { body(input).await });
            match futures_util::FutureExt::catch_unwind(run).await {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(source)) => Err(match source.into_inner().downcast::<ArgsError>() {
                    // The body refused its arguments: what a typed tool's decode says.
                    Ok(refused) => refused.for_tool(&name),
                    Err(source) => ToolError::Body {
                        tool: name,
                        source: source.into(),
                    },
                }),
                Err(panic) => Err(ToolError::Panicked {
                    tool: name,
                    message: panic_message(panic.as_ref()),
                }),
            }
        })
    }

    fn decode(&self, args: Args) -> Result<Args, ArgsError> {
        Ok(args)
    }
}

/// A closure around a layer below.
struct Around<F> {
    name: Name,
    below: DynStack,
    around: Arc<F>,
}

impl<F> Clone for Around<F> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            below: self.below.clone(),
            around: self.around.clone(),
        }
    }
}

impl<F, Fut> Stack for Around<F>
where
    F: Fn(DynInput, DynStack) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    type Input = DynInput;
    type Output = Value;

    fn call(&self, input: DynInput) -> impl Future<Output = Result<Value, ToolError>> + Send {
        let (around, below, name) = (self.around.clone(), self.below.clone(), self.name.clone());
        Box::pin(async move {
            let run = std::panic::AssertUnwindSafe(async move { around(input, below).await });
            match futures_util::FutureExt::catch_unwind(run).await {
                Ok(result) => result,
                Err(panic) => Err(ToolError::Panicked {
                    tool: name,
                    message: panic_message(panic.as_ref()),
                }),
            }
        })
    }

    fn decode(&self, args: Args) -> Result<DynInput, ArgsError> {
        self.below.decode(args)
    }
}

/// A stack that drops some arguments before decoding.
#[derive(Clone)]
struct Without {
    below: DynStack,
    names: Arc<[String]>,
}

impl Stack for Without {
    type Input = DynInput;
    type Output = Value;

    fn call(&self, mut input: DynInput) -> impl Future<Output = Result<Value, ToolError>> + Send {
        // The layers below see the arguments as they were given them: the input
        // is theirs too when they take it whole (a run-time layer does).
        input.take_back(&self.names);
        self.below.call(input)
    }

    fn decode(&self, mut args: Args) -> Result<DynInput, ArgsError> {
        let mut reserved = Args::new();
        for name in self.names.iter() {
            // Shifted, not swapped out: the rest keep the caller's order.
            if let Some((name, value)) = args.shift_remove_entry(name) {
                reserved.insert(name, value);
            }
        }
        let mut input = self.below.decode(args)?;
        // The wrapper above sees its arguments as it was given them.
        input.restore(reserved);
        Ok(input)
    }
}

/// A run-time body-local layer's branch (see [`DynStack::body_local`]).
struct BodyLocal {
    inner: Arc<dyn ErasedStack>,
    scope: crate::context::BodyLocalCall,
}

impl ErasedStack for BodyLocal {
    fn call_json<'a>(
        &'a self,
        tool: &'a Name,
        args: Args,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        let call = self.inner.call_json(tool, args);
        Box::pin(crate::context::with(self.scope.clone(), call))
    }

    fn decode_erased(&self, args: Args) -> Result<DynInput, ArgsError> {
        self.inner.decode_erased(args)
    }

    fn call_erased<'a>(
        &'a self,
        tool: &'a Name,
        input: DynInput,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        let call = self.inner.call_erased(tool, input);
        Box::pin(crate::context::with(self.scope.clone(), call))
    }

    // Not the stack inside: called directly, it would run outside the scope.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// A layer's branch with the reserved params the operator pins or hides on it
/// (rule `reserved-params`): the one place both are applied, where the layer
/// decodes its arguments, so they reach it wherever its params live (the
/// arguments of a call by name, or each item of a batch above it). A caller
/// who sends one is refused as if the param did not exist; a pinned one is
/// then passed with the operator's value, a hidden one left out (the layer
/// uses its default).
pub(crate) struct Withheld {
    inner: Arc<dyn ErasedStack>,
    pinned: serde_json::Map<String, Value>,
    hidden: Vec<String>,
}

impl Withheld {
    /// `inner` with `pinned` and `hidden` withheld from callers; `inner` as it
    /// is when nothing is.
    pub(crate) fn around(
        inner: Arc<dyn ErasedStack>,
        pinned: Option<serde_json::Map<String, Value>>,
        hidden: Option<Vec<String>>,
    ) -> Arc<dyn ErasedStack> {
        let pinned = pinned.unwrap_or_default();
        let hidden = hidden.unwrap_or_default();
        if pinned.is_empty() && hidden.is_empty() {
            return inner;
        }
        Arc::new(Self {
            inner,
            pinned,
            hidden,
        })
    }

    /// The caller's arguments as the layer takes them. A pinned param that
    /// comes with exactly the pinned value is taken: it changes nothing, and it
    /// is how a relocated call arrives (its arguments were filled where it was
    /// made, and a worker calls the layer by name with them).
    fn fill(&self, mut args: Args) -> Result<Args, ArgsError> {
        if let Some(param) = args.iter().find_map(|(param, value)| {
            let pinned = self.pinned.get(param).is_some_and(|pin| pin != value);
            let hidden = self.hidden.iter().any(|hidden| hidden == param);
            (pinned || hidden).then_some(param)
        }) {
            let how = if self.pinned.contains_key(param) {
                "pins"
            } else {
                "hides"
            };
            return Err(ArgsError {
                field: Some(param.clone()),
                kind: crate::error::ArgsErrorKind::UnknownField,
                problem: format!("unknown field `{param}`: the operator {how} it"),
            });
        }
        args.extend(self.pinned.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(args)
    }
}

impl ErasedStack for Withheld {
    fn call_json<'a>(
        &'a self,
        tool: &'a Name,
        args: Args,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        match self.fill(args) {
            Ok(args) => self.inner.call_json(tool, args),
            Err(err) => Box::pin(std::future::ready(Err(err.for_tool(tool)))),
        }
    }

    fn decode_erased(&self, args: Args) -> Result<DynInput, ArgsError> {
        self.inner.decode_erased(self.fill(args)?)
    }

    // The input was filled when it was decoded: a clone sent again (a retry
    // above) carries the pinned values, and is not the caller's.
    fn call_erased<'a>(
        &'a self,
        tool: &'a Name,
        input: DynInput,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        self.inner.call_erased(tool, input)
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        self.inner.as_any()
    }
}
