//! Wrappers: one trait ([`Wrap`]), the branch binding mints for it ([`Wrapped`]),
//! and a closure helper for the simplest case ([`wrap_fn`]).

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future;
use serde_json::Value;
use tokio::sync::oneshot;

use super::{ConfigError, Extension, Layer, LayerInput};
use crate::error::{ArgsError, ToolError};
use crate::kind::Wrapper;
use crate::kind::property::{Anywhere, Locality};
use crate::name::Name;
use crate::schema::Args;
use crate::stack::params::{self, ReservedParams};
use crate::stack::{Next, Stack};

/// A wrapper, in one trait: its name and locality, its reserved params, and what it
/// does to a call: receive the layer input, call the layer below, return its output.
///
/// Implementing `Wrap` makes the type an [`Extension`] of kind
/// [`Wrapper`](crate::kind::Wrapper) and a [`Layer`] over every stack; binding mints
/// its branch, [`Wrapped`], which takes exactly the layer input (plus
/// [`Params`](Wrap::Params)) and returns exactly the layer's output, so a wrapper
/// cannot change the schema. `around` is generic over the stack below and inlined
/// into the call: a wrapper that only forwards costs nothing. For the simplest
/// wrappers, [`wrap_fn`] takes a closure instead.
///
/// ```
/// use std::time::Instant;
/// use toolgraft::extension::{Anywhere, Next, Stack};
/// use toolgraft::{ToolError, Wrap};
///
/// /// Logs how long each call took.
/// #[derive(Clone, Debug)]
/// struct Timed;
///
/// impl Wrap for Timed {
///     type Locality = Anywhere;
///     type Params = ();
///
///     fn name(&self) -> &str {
///         "timed"
///     }
///
///     async fn around<S: Stack>(&self, next: Next<'_, S, Self>, (): (), input: S::Input)
///         -> Result<S::Output, ToolError>
///     {
///         let started = Instant::now();
///         let result = next.call(input).await;
///         tracing::info!(tool = %next.name(), elapsed = ?started.elapsed(), ok = result.is_ok());
///         result
///     }
/// }
/// # use toolgraft::{Tool, Toolset};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
/// # let ping = Tool::builder().name("ping").description("Pong.").body(|_: Ping| async { Ok("pong") }).build()?;
/// # let toolset = Toolset::new();
/// # toolset.bind((ping.combo().with(Timed),))?;
/// # assert_eq!(toolset.names(), ["ping", "ping_timed"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A wrapper that works on some stacks only (one that reads a text output, say)
/// implements [`Around`] for those stacks instead.
pub trait Wrap: Clone + Send + Sync + 'static {
    /// [`Anywhere`], or [`BodyLocal`](crate::extension::BodyLocal) if the wrapper only
    /// works beside the tool body (it sets a task-local, say): then it must sit
    /// inside any backend (rule `locality-inside-relocation` in the
    /// [rulebook](crate::rulebook)).
    type Locality: Locality;

    /// The reserved params the branch adds to the layer input: `()` for none, or a
    /// [`Params`](crate::extension::Params) type.
    type Params: ReservedParams;

    /// The extension name, which is also the branch's suffix.
    fn name(&self) -> &str;

    /// Runs one call: `input` is the layer input with the params taken out, and
    /// `next` calls the layer below.
    fn around<S: Stack>(
        &self,
        next: Next<'_, S, Self>,
        params: Self::Params,
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send;

    /// As [`Extension::describe`].
    fn describe(&self, running: &str) -> Option<String> {
        let _ = running;
        None
    }

    /// As [`Extension::config`].
    fn config(&self) -> Option<Value> {
        None
    }

    /// As [`Extension::check_config`].
    fn check_config(&self) -> Result<(), ConfigError> {
        Ok(())
    }
}

impl<W: Wrap> Extension for W {
    type Kind = Wrapper;
    type Locality = W::Locality;

    fn name(&self) -> &str {
        Wrap::name(self)
    }

    fn describe(&self, running: &str) -> Option<String> {
        Wrap::describe(self, running)
    }

    fn config(&self) -> Option<Value> {
        Wrap::config(self)
    }

    fn check_config(&self) -> Result<(), ConfigError> {
        Wrap::check_config(self)
    }
}

/// A wrapper's behaviour over some stacks only: [`Wrap`] for wrappers that ask
/// something of the stack below (an output they can read, an input they inspect).
///
/// The wrapper is an [`Extension`] of kind [`Wrapper`], an `Around<S>` for the
/// stacks it applies to, and a one-line [`Layer`] over the same stacks that returns
/// [`Wrapped::new`]. Every [`Wrap`] is an `Around` over every stack.
///
/// ```
/// use toolgraft::extension::{Anywhere, Around, LayerInput, Next, Stack, Wrapped, Wrapper};
/// use toolgraft::{Extension, Layer, ToolError};
///
/// /// Upper-cases a text result.
/// #[derive(Clone, Debug)]
/// struct Loud;
///
/// impl Extension for Loud {
///     type Kind = Wrapper;
///     type Locality = Anywhere;
///     fn name(&self) -> &str { "loud" }
/// }
///
/// impl<S: Stack<Output = String>> Around<S> for Loud {
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
pub trait Around<S: Stack>: Extension<Kind = Wrapper> + Clone {
    /// The reserved params the branch adds to the layer input (as [`Wrap::Params`]).
    type Params: ReservedParams;

    /// Runs one call (as [`Wrap::around`]).
    fn around(
        &self,
        next: Next<'_, S, Self>,
        params: Self::Params,
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send;
}

impl<S: Stack, W: Wrap> Around<S> for W {
    type Params = W::Params;

    #[inline]
    fn around(
        &self,
        next: Next<'_, S, Self>,
        params: W::Params,
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send {
        Wrap::around(self, next, params, input)
    }
}

#[diagnostic::do_not_recommend]
impl<S: Stack, W: Wrap> Layer<S> for W {
    type Branch = Wrapped<W, S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Wrapped<W, S> {
        Wrapped::new(self, inner, below)
    }
}

/// The branch a [`Wrap`] mints: the wrapper and the layer below.
///
/// Made only for the wrapper being bound (so a wrapper's `around` runs only in its
/// own branch).
pub struct Wrapped<W, S> {
    wrapper: W,
    inner: S,
    below: Name,
    branch: Name,
    reserved: Arc<[String]>,
}

impl<W, S> fmt::Debug for Wrapped<W, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

impl<W: Around<S>, S: Stack> Wrapped<W, S> {
    /// The branch of `wrapper` over `inner`: what an [`Around`] wrapper's
    /// [`Layer`] returns. `below` is made by binding for `wrapper`'s own layer, so a
    /// wrapper's branch is only ever minted by the wrapper itself.
    pub fn new(wrapper: W, inner: S, below: &LayerInput<'_, W>) -> Self {
        Self {
            wrapper,
            inner,
            below: below.name.clone(),
            branch: below.branch.clone(),
            reserved: <W::Params as params::sealed::ReservedParams>::names(),
        }
    }

    /// The wrapper.
    pub fn wrapper(&self) -> &W {
        &self.wrapper
    }
}

impl<W: Around<S>, S: Stack> Stack for Wrapped<W, S> {
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
        let call = self.wrapper.around(
            Next::new(&self.inner, &self.below, &self.branch, self.wrapper.name()),
            params,
            input,
        );
        <W::Locality as Locality>::run_layer(self.wrapper.name(), &self.branch, call)
    }

    fn decode(&self, mut args: Args) -> Result<Self::Input, ArgsError> {
        let params = W::Params::take(&mut args, &self.reserved)?;
        Ok(params.join(self.inner.decode(args)?))
    }
}

/// A wrapper from a closure: the simple case of [`Wrap`], for wrappers that decide
/// whether and when the call runs, and look at its outcome, but not at its input or
/// output (timing, auditing, admission, retries).
///
/// The closure gets a [`Call`] and returns a future of `Result<Done, ToolError>`:
/// [`Call::run`] runs the layer below and is the only way to get a [`Done`], which
/// answers only its own call: the closure returns this call's result or an error,
/// never a made-up or replayed output. It runs
/// anywhere (no body locality) and reserves no params. A [`Wrap`] impl is the
/// zero-cost path; this one costs two small allocations per call.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use toolgraft::extension::wrap_fn;
/// use toolgraft::{Tool, Toolset};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ping = Tool::builder().name("ping").description("Pong.")
///     .body(|_: Ping| async { Ok("pong") }).build()?;
/// let calls = Arc::new(AtomicUsize::new(0));
/// let counted = calls.clone();
/// let count = wrap_fn("count", move |call| {
///     counted.fetch_add(1, Ordering::Relaxed);
///     call.run()
/// });
///
/// let toolset = Toolset::new();
/// toolset.bind((ping.combo().with(count),))?;
/// toolset.call("ping_count", serde_json::json!({})).await?;
/// assert_eq!(calls.load(Ordering::Relaxed), 1);
/// # Ok(()) }
/// ```
pub fn wrap_fn<F, Fut>(name: &'static str, around: F) -> WrapFn<F>
where
    F: Fn(Call) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Done, ToolError>> + Send + 'static,
{
    WrapFn { name, around }
}

/// The wrapper [`wrap_fn`] makes.
#[derive(Clone)]
pub struct WrapFn<F> {
    name: &'static str,
    around: F,
}

impl<F> fmt::Debug for WrapFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WrapFn").field("name", &self.name).finish()
    }
}

/// One call through a [`wrap_fn`] wrapper: who is called, and the means to run it.
pub struct Call {
    name: Name,
    start: oneshot::Sender<oneshot::Sender<Result<Done, ToolError>>>,
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call").field("name", &self.name).finish()
    }
}

impl Call {
    /// The name of the layer below (what the call runs).
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// Runs the layer below, once, and returns its outcome.
    pub async fn run(self) -> Result<Done, ToolError> {
        let (reply, outcome) = oneshot::channel();
        let cancelled = || ToolError::Reported {
            message: format!("the call to `{}` ended before it ran", self.name),
        };
        if self.start.send(reply).is_err() {
            return Err(cancelled());
        }
        outcome.await.unwrap_or_else(|_| Err(cancelled()))
    }
}

/// The successful outcome of [`Call::run`], carried back unopened. It answers only
/// the call it came from: a wrapper that returns another call's `Done` gets an error.
pub struct Done {
    call: u64,
    output: Box<dyn Any + Send>,
}

impl fmt::Debug for Done {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Done(..)")
    }
}

impl<F, Fut> Wrap for WrapFn<F>
where
    F: Fn(Call) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Done, ToolError>> + Send + 'static,
{
    type Locality = Anywhere;
    type Params = ();

    fn name(&self) -> &str {
        self.name
    }

    async fn around<S: Stack>(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        // The closure's future is 'static, the layer below borrows the stack: the
        // two run side by side in this task, and `Call::run` asks for the call.
        // Each call's `Done` is stamped, so a kept one cannot answer another call.
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let id = CALLS.fetch_add(1, Ordering::Relaxed);
        let (start, started) = oneshot::channel();
        let hook = (self.around)(Call {
            name: next.name().clone(),
            start,
        });
        let below = async move {
            if let Ok(reply) = started.await {
                let outcome = next.call(input).await.map(|output| Done {
                    call: id,
                    output: Box::new(output),
                });
                let _ = reply.send(outcome);
            }
        };
        let (outcome, ()) = future::join(hook, below).await;
        let done = outcome?;
        let output = (done.call == id).then_some(done.output);
        output
            .and_then(|output| output.downcast::<S::Output>().ok())
            .map(|output| *output)
            .ok_or_else(|| ToolError::Reported {
                message: format!(
                    "wrapper `{}` returned the outcome of another call",
                    self.name
                ),
            })
    }
}
