//! Wrappers: one trait for what they do per stack ([`Wrap`]), the branch binding
//! mints for it ([`Wrapped`]), the view of a text output ([`Text`]), and a closure helper for the simplest
//! case ([`wrap_fn`]).

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future;
use serde_json::Value;
use tokio::sync::oneshot;

use super::{Extension, LayerInput};
use crate::error::{ArgsError, ToolError};
use crate::kind::Wrapper;
use crate::kind::property::{Anywhere, Locality};
use crate::name::Name;
use crate::schema::Args;
use crate::stack::params::{self, ReservedParams};
use crate::stack::{Next, Stack};

/// What a wrapper does to a call over the stacks `S` it fits: receive the layer
/// input, call the layer below (as often as the input allows), return the layer's
/// output. What it is (its name and locality, its description, config and output
/// schema) it says once, in its [`Extension`] impl with `type Kind = Wrapper;`, as
/// a transformer does beside its [`Transform`](super::Transform).
///
/// Binding mints its branch, [`Wrapped`], which takes exactly the layer input (plus
/// [`Params`](Wrap::Params)) and returns exactly the layer's output, so a wrapper
/// cannot change the schema. `around` is inlined into the call: a wrapper that only
/// forwards costs nothing.
///
/// A wrapper that fits every stack implements `Wrap<S>` for every `S: Stack`:
///
/// ```
/// use std::time::Instant;
/// use toolgraft::extension::{Anywhere, Next, Stack, Wrapper};
/// use toolgraft::{Extension, ToolError, Wrap};
///
/// /// Logs how long each call took.
/// #[derive(Clone, Debug)]
/// struct Timed;
///
/// impl Extension for Timed {
///     type Kind = Wrapper;
///     type Locality = Anywhere;
///     fn name(&self) -> &str {
///         "timed"
///     }
/// }
///
/// impl<S: Stack> Wrap<S> for Timed {
///     type Params = ();
///
///     async fn around(&self, next: Next<'_, S, Self>, (): (), input: S::Input)
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
/// One that asks something of the stack below bounds `S`: a retry needs an input
/// it can send again ([`S::Input: Resendable`](Resendable), that is `Clone`), a
/// wrapper that edits a text result an output it can read as text
/// ([`S::Output: Text`](Text)). The impl must cover the
/// run-time stack, [`DynStack`](crate::runtime::DynStack) (whose input is `Clone` and whose output is
/// [`Text`]), since that is what the same wrapper runs over when a
/// [manifest](crate::Manifest) names it: one impl serves typed combos and the
/// [`Registry`](crate::Registry), and a combo refuses a wrapper that does not.
///
/// ```
/// use toolgraft::extension::{Anywhere, Next, Resendable, Stack, Wrapper};
/// use toolgraft::{Extension, ToolError, Wrap};
///
/// /// Calls the layer below again when it fails, up to `attempts` times.
/// #[derive(Clone, Debug)]
/// struct Retry { attempts: u32 }
///
/// impl Extension for Retry {
///     type Kind = Wrapper;
///     type Locality = Anywhere;
///     fn name(&self) -> &str {
///         "retry"
///     }
/// }
///
/// impl<S: Stack<Input: Resendable>> Wrap<S> for Retry {
///     type Params = ();
///
///     async fn around(&self, next: Next<'_, S, Self>, (): (), input: S::Input)
///         -> Result<S::Output, ToolError>
///     {
///         let mut failed = 1;
///         loop {
///             match next.call(input.clone()).await {
///                 Err(error) if failed < self.attempts => {
///                     tracing::warn!(%error, attempt = failed, "retrying");
///                     failed += 1;
///                 }
///                 result => return result,
///             }
///         }
///     }
/// }
/// ```
///
/// A wrapper that looks into one tool's input reads it through a trait of its own,
/// implemented for that input and for [`DynInput`](crate::extension::DynInput)
/// (whose [`args`](crate::extension::DynInput::args) are the JSON arguments):
/// bounded by `Input = Query` alone, it would not fit `DynStack`, and no combo
/// takes it.
///
/// ```
/// use toolgraft::extension::{Anywhere, DynInput, Next, Stack, Wrapper};
/// use toolgraft::{Extension, ToolError, Wrap};
///
/// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
/// struct Query { text: String }
///
/// /// What `NonEmpty` reads: the query's text, typed or from the arguments.
/// trait QueryText { fn query_text(&self) -> Option<&str>; }
/// impl QueryText for Query {
///     fn query_text(&self) -> Option<&str> { Some(&self.text) }
/// }
/// impl QueryText for DynInput {
///     fn query_text(&self) -> Option<&str> { self.args().get("text")?.as_str() }
/// }
///
/// #[derive(Clone)]
/// struct NonEmpty;
/// impl Extension for NonEmpty {
///     type Kind = Wrapper;
///     type Locality = Anywhere;
///     fn name(&self) -> &str { "non_empty" }
/// }
/// impl<S: Stack<Input: QueryText>> Wrap<S> for NonEmpty {
///     type Params = ();
///     async fn around(&self, next: Next<'_, S, Self>, (): (), input: S::Input)
///         -> Result<S::Output, ToolError>
///     {
///         if input.query_text().is_some_and(str::is_empty) {
///             return Err(next.refuse("the query is empty"));
///         }
///         next.call(input).await
///     }
/// }
/// # fn fits<W: Wrap<toolgraft::runtime::DynStack>>() {}
/// # fits::<NonEmpty>();
/// ```
///
/// For the simplest wrappers, [`wrap_fn`] takes a closure instead.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not wrap `{S}`",
    label = "`{Self}`'s `Wrap` impl does not cover `{S}`",
    note = "a wrapper's `impl<S: Stack<..>> Wrap<S>` says which stacks it fits; `{S}` lacks what it asks (an input that is `Resendable`, an output that is `Text`, ..)",
    note = "every wrapper must fit `DynStack` too, the stack a manifest runs it over: bound `S` only by what `DynStack` has (`Input: Resendable + Serialize`, `Output: Text + Clone`)"
)]
pub trait Wrap<S: Stack>: Extension<Kind = Wrapper> + Clone {
    /// The reserved params the branch adds to the layer input: `()` for none, or a
    /// [`Params`](crate::extension::Params) type.
    type Params: ReservedParams;

    /// Runs one call: `input` is the layer input with the params taken out, and
    /// `next` calls the layer below (it is `Copy`: call it again with another
    /// input, or a clone of this one, to retry).
    fn around(
        &self,
        next: Next<'_, S, Self>,
        params: Self::Params,
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send;

    /// The wrapper as its branch over `S` keeps it, made once per branch when the
    /// combo is bound: per-branch state (a cache's store for `S::Output`) is made
    /// here. The default keeps the wrapper as it is.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use toolgraft::extension::{Anywhere, LayerInput, Next, Stack, Wrapper};
    /// use toolgraft::{Extension, ToolError, Wrap};
    ///
    /// /// Counts the calls of each branch apart.
    /// #[derive(Clone, Debug, Default)]
    /// struct Counted { calls: Arc<AtomicU64> }
    ///
    /// impl Extension for Counted {
    ///     type Kind = Wrapper;
    ///     type Locality = Anywhere;
    ///     fn name(&self) -> &str { "counted" }
    /// }
    ///
    /// impl<S: Stack> Wrap<S> for Counted {
    ///     type Params = ();
    ///     fn for_branch(self, _: &LayerInput<'_, Self>) -> Self {
    ///         Counted::default()
    ///     }
    ///     async fn around(&self, next: Next<'_, S, Self>, (): (), input: S::Input)
    ///         -> Result<S::Output, ToolError>
    ///     {
    ///         self.calls.fetch_add(1, Ordering::Relaxed);
    ///         next.call(input).await
    ///     }
    /// }
    /// ```
    fn for_branch(self, below: &LayerInput<'_, Self>) -> Self {
        let _ = below;
        self
    }
}

/// An output a wrapper can read and edit as text: a typed tool's `String`, and a
/// run-time layer's JSON [`Value`] when it is a string. What a wrapper over
/// text results bounds its stacks by (`impl<S: Stack<Output: Text>> Wrap<S>`), so
/// that it fits typed text tools and [`DynStack`](crate::runtime::DynStack) with one impl.
///
/// ```
/// use serde_json::json;
/// use toolgraft::extension::Text;
/// let mut typed = String::from("hi");
/// let mut erased = json!("hi");
/// typed.text_mut().unwrap().push('!');
/// erased.text_mut().unwrap().push('!');
/// assert_eq!((typed.text(), erased.text()), (Some("hi!"), Some("hi!")));
/// assert_eq!(json!(3).text(), None);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a text output",
    label = "a text output is a `String` (or, over `DynStack`, a JSON string)",
    note = "return a `String` from the tool's body, or bound the wrapper by what this output has"
)]
pub trait Text: Send + 'static {
    /// The text, if the output is text.
    fn text(&self) -> Option<&str>;
    /// The text to edit in place, if the output is text.
    fn text_mut(&mut self) -> Option<&mut String>;
}

impl Text for String {
    fn text(&self) -> Option<&str> {
        Some(self)
    }

    fn text_mut(&mut self) -> Option<&mut String> {
        Some(self)
    }
}

impl Text for Value {
    fn text(&self) -> Option<&str> {
        self.as_str()
    }

    fn text_mut(&mut self) -> Option<&mut String> {
        match self {
            Value::String(text) => Some(text),
            _ => None,
        }
    }
}

/// An input a wrapper can send to the layer below more than once (a retry): one
/// that is `Clone`. A typed tool's input is when it derives `Clone`; the run-time
/// input, [`DynInput`](crate::extension::DynInput), always is (a clone keeps the
/// arguments, which the layer below decodes again).
///
/// A trait of its own, bounded as `S: Stack<Input: Resendable>`, rather than
/// `Input: Clone`, so that a combo over an input that is not `Clone` says what
/// the wrapper needs and how to give it, instead of a bare `Clone` bound.
///
/// ```
/// use toolgraft::extension::{DynInput, Resendable};
/// fn resendable<I: Resendable>() {}
/// resendable::<String>();
/// resendable::<DynInput>();
/// ```
#[diagnostic::on_unimplemented(
    message = "this wrapper sends its input to the layer below more than once, but `{Self}` is not `Clone`",
    label = "the layer below takes `{Self}`, which cannot be sent twice",
    note = "add `#[derive(Clone)]` to `{Self}`: each attempt sends a clone of the input",
    note = "over `DynStack` (a manifest), the input is always `Clone`: a clone keeps the arguments, which the layer below decodes again"
)]
pub trait Resendable: Clone + Send + 'static {}

// `do_not_recommend`: the compiler reports this trait, with its message, instead of
// the bare `Clone` bound.
#[diagnostic::do_not_recommend]
impl<T: Clone + Send + 'static> Resendable for T {}

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

impl<W: Wrap<S>, S: Stack> Wrapped<W, S> {
    /// The branch of `wrapper` over `inner`. `below` is made by binding for
    /// `wrapper`'s own layer, so a wrapper's branch is only ever minted by the
    /// wrapper itself.
    pub fn new(wrapper: W, inner: S, below: &LayerInput<'_, W>) -> Self {
        Self {
            wrapper,
            inner,
            below: below.name.clone(),
            branch: below.branch.clone(),
            reserved: <<W as Wrap<S>>::Params as params::sealed::ReservedParams>::names(),
        }
    }

    /// The wrapper.
    pub fn wrapper(&self) -> &W {
        &self.wrapper
    }
}

// A wrapper forwards its layer's calls: its branch makes what its layer makes,
// and no more on a repeated call when it answers repeats from what it kept.
impl<W, S> crate::tool::Hinted for Wrapped<W, S>
where
    W: Wrap<S>,
    S: Stack,
    W::Locality: crate::tool::Grants<S>,
{
    type Hints = <W::Locality as crate::tool::Grants<S>>::Hints;
}

impl<W: Wrap<S>, S: Stack> Stack for Wrapped<W, S> {
    type Input = <<W as Wrap<S>>::Params as ReservedParams>::With<S::Input>;
    type Output = S::Output;

    // Inlined so a pass-through layer is nothing at all: at depth 8 the
    // compiler otherwise stops inlining and moves the future up through each return.
    #[inline]
    fn call(
        &self,
        input: Self::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send {
        let (params, input) = <W as Wrap<S>>::Params::split(input);
        let call = self.wrapper.around(
            Next::new(
                &self.inner,
                &self.below,
                &self.branch,
                Extension::name(&self.wrapper),
            ),
            params,
            input,
        );
        // The locality the rules checked: the wrapper's as an extension.
        let call = <<W as Extension>::Locality as Locality>::run_layer(
            Extension::name(&self.wrapper),
            &self.branch,
            call,
        );
        #[cfg(feature = "otel")]
        let call = crate::otel::in_layer(
            <W::Kind as crate::kind::Kind>::KIND,
            Extension::name(&self.wrapper),
            &self.branch,
            &self.below,
            call,
        );
        call
    }

    fn decode(&self, mut args: Args) -> Result<Self::Input, ArgsError> {
        let params = <W as Wrap<S>>::Params::take(&mut args, &self.reserved)?;
        Ok(params.join(self.inner.decode(args)?))
    }
}

/// A wrapper from a closure: the simple case of [`Wrap`], for wrappers that decide
/// whether and when the call runs, and look at its outcome, but not at its input or
/// output (timing, auditing, admission). [`Call::run`] runs the call once: a retry
/// needs the input again, so it is a [`Wrap`] over stacks whose input is `Clone`
/// (see [`Wrap`]'s second example).
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

impl<F: Send + Sync + 'static> Extension for WrapFn<F> {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        self.name
    }
}

impl<S: Stack, F, Fut> Wrap<S> for WrapFn<F>
where
    F: Fn(Call) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Done, ToolError>> + Send + 'static,
{
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        next.through(input, |call| (self.around)(call)).await
    }
}

impl<'a, S: Stack, W: ?Sized> Next<'a, S, W> {
    /// Calls the layer below through `hook`, which gets the call as a [`Call`]: a
    /// `'static` value that names none of the stack's types, to hand to code that
    /// cannot borrow the stack (a closure kept by [`wrap_fn`], a `tower::Service`).
    /// The layer below runs when the hook runs [`Call::run`], in this task, and not
    /// at all if the hook drops the call; the hook's [`Done`] must be this call's
    /// (one kept from another call is an error).
    ///
    /// ```
    /// use toolgraft::extension::{Anywhere, Next, Stack, Wrapper};
    /// use toolgraft::{Extension, ToolError, Wrap};
    ///
    /// /// Runs the call from a `'static` future, as a service would.
    /// #[derive(Clone, Debug)]
    /// struct Detached;
    /// impl Extension for Detached {
    ///     type Kind = Wrapper;
    ///     type Locality = Anywhere;
    ///     fn name(&self) -> &str { "detached" }
    /// }
    /// impl<S: Stack> Wrap<S> for Detached {
    ///     type Params = ();
    ///     async fn around(&self, next: Next<'_, S, Self>, (): (), input: S::Input)
    ///         -> Result<S::Output, ToolError>
    ///     {
    ///         next.through(input, |call| async move {
    ///             tracing::debug!(below = %call.name(), "running");
    ///             call.run().await
    ///         }).await
    ///     }
    /// }
    /// # use toolgraft::{Tool, Toolset};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let ping = Tool::builder().name("ping").description("Pong.").body(|_: Ping| async { Ok("pong") }).build()?;
    /// # let toolset = Toolset::new();
    /// # toolset.bind((ping.combo().with(Detached),))?;
    /// # assert_eq!(toolset.call("ping_detached", serde_json::json!({})).await?, "pong");
    /// # Ok(()) }
    /// ```
    pub async fn through<H, Fut>(self, input: S::Input, hook: H) -> Result<S::Output, ToolError>
    where
        H: FnOnce(Call) -> Fut,
        Fut: Future<Output = Result<Done, ToolError>>,
    {
        // The hook's future may be 'static, the layer below borrows the stack: the
        // two run side by side in this task, and `Call::run` asks for the call.
        // Each call's `Done` is stamped, so a kept one cannot answer another call.
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let id = CALLS.fetch_add(1, Ordering::Relaxed);
        let (start, started) = oneshot::channel();
        let hook = hook(Call {
            name: self.name().clone(),
            start,
        });
        let below = async move {
            if let Ok(reply) = started.await {
                let outcome = self.call(input).await.map(|output| Done {
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
                    self.extension()
                ),
            })
    }
}
