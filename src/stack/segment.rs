//! Segments: what keeps a deep typed combo within the compiler's limits.
//!
//! Each layer of a typed combo holds the layer below by value, and its call future
//! holds the future below. The compiler walks those nestings (the future's layout,
//! the stack's `Send`) one query inside another, and stops at the crate's
//! `recursion_limit`: without help, a typed call through a dozen-odd layers would
//! not compile. So once [`SEGMENT`] layers are stacked by value, the next
//! [`Combo::with`](crate::Combo::with) first closes them into a [`Segment`]: one
//! type-erased, shared stack whose call is one boxed future. Each walk then stops
//! at the last segment, and a typed call at any depth compiles with the default
//! limit. Combos of up to [`SEGMENT`] layers are not touched: their calls stay
//! static dispatch with no allocation; deeper ones pay one allocation per
//! [`SEGMENT`] layers. Wrappers with heavy futures of their own can close a
//! segment early with [`Combo::segment`](crate::Combo::segment).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;

use crate::error::{ArgsError, ToolError};
use crate::schema::Args;
use crate::stack::{BoxFuture, Stack};

/// How many layers a combo stacks by value before it closes them into a
/// [`Segment`].
///
/// Deep enough that the stacks people write (and benchmark) stay fully static;
/// shallow enough that layers with heavy futures of their own (a timeout around a
/// `catch_unwind` around a span, say) still nest within the compiler's default
/// limits.
pub const SEGMENT: usize = 8;

type CallFuture<'a, O> = BoxFuture<'a, Result<O, ToolError>>;

/// A stack seen through its input and output types only.
trait ErasedLayers<I, O>: Send + Sync + 'static {
    fn call(&self, input: I) -> CallFuture<'_, O>;
    fn decode(&self, args: Args) -> Result<I, ArgsError>;
}

impl<S: Stack> ErasedLayers<S::Input, S::Output> for S {
    fn call(&self, input: S::Input) -> CallFuture<'_, S::Output> {
        Box::pin(Stack::call(self, input))
    }

    fn decode(&self, args: Args) -> Result<S::Input, ArgsError> {
        Stack::decode(self, args)
    }
}

/// The layers of a combo closed into one type-erased stack (see the module docs);
/// clones share them.
///
/// A deep combo's stack holds its first layers as a `Segment`, so its type stays
/// short too. `Base` is the base tool's type, carried for the compiler only (never
/// held), so that what a layer above reads of the base tool, its
/// [hints](crate::tool::Hinted), is not lost where the layers are closed; it is
/// [`NewTool`](crate::tool::NewTool) when a transformer sits among them, whose
/// branch is a new tool (rule `side-effects` in the [rulebook](crate::rulebook)):
///
/// ```
/// use toolgraft::{Stack, Tool};
/// use toolgraft::extension::{Segment, Wrapped};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::Trace;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shout = Tool::builder().name("shout").description("Return the text.")
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let combo = shout.combo()
///     .with(Trace).with(Trace).with(Trace).with(Trace)
///     .with(Trace).with(Trace).with(Trace).with(Trace) // `SEGMENT` layers: all static
///     .with(Trace);                                    // closes them, then wraps
/// let _ninth: &Wrapped<Trace, Segment<Shout, String, _>> = combo.stack();
/// assert_eq!(combo.stack().call(Shout { text: "hi".into() }).await?, "hi");
/// # Ok(()) }
/// ```
pub struct Segment<I, O, Base> {
    layers: Arc<dyn ErasedLayers<I, O>>,
    base: PhantomData<fn() -> Base>,
}

impl<I, O, Base> Segment<I, O, Base>
where
    I: Send + 'static,
    O: Serialize + Send + 'static,
{
    pub(crate) fn close<S: Stack<Input = I, Output = O>>(stack: S) -> Self {
        Self {
            layers: Arc::new(stack),
            base: PhantomData,
        }
    }
}

impl<I, O, Base> Clone for Segment<I, O, Base> {
    fn clone(&self) -> Self {
        Self {
            layers: self.layers.clone(),
            base: PhantomData,
        }
    }
}

impl<I, O, Base> fmt::Debug for Segment<I, O, Base> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Segment")
    }
}

impl<I, O, Base> Stack for Segment<I, O, Base>
where
    I: Send + 'static,
    O: Serialize + Send + 'static,
    Base: 'static,
{
    type Input = I;
    type Output = O;

    fn call(&self, input: I) -> impl Future<Output = Result<O, ToolError>> + Send {
        self.layers.call(input)
    }

    fn decode(&self, args: Args) -> Result<I, ArgsError> {
        self.layers.decode(args)
    }
}
