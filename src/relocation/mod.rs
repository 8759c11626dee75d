//! Relocation, for backend authors: what a backend does to run the layer below
//! somewhere else with the same guarantees as the built-in ones.
//!
//! A backend ships no code ([relocation](crate::rulebook#relocation)): it names its
//! layer input ([`LayerInput::name`](crate::extension::LayerInput)) to a worker that
//! has the same tools bound, or, in process, hands a worker thread the bound layer
//! itself. Either way the call's [context](crate::context) must go with the body,
//! and some of it must not:
//!
//! 1. [`Departure::new`] when a call arrives: it refuses a call made from inside a
//!    [`Pinned`](crate::context::Pinned) entry (a body-local layer's call, rule
//!    `locality-inside-relocation` at run time), and takes the entries that travel.
//! 2. To a worker thread: run the layer below inside
//!    [`Departure::in_process`], which carries the entries that travel as they are
//!    (the chain depth, a proxy's route, an entry of the user's own).
//! 3. To a worker process: send [`Departure::to_wire`] with the job, and on the
//!    worker run the call inside [`WireContext::arrive`]; entries that do not cross
//!    processes stay behind.
//! 4. Errors of the hop: [`Departure::failed`], [`Departure::panicked`].
//!
//! ```
//! use std::thread;
//! use toolgraft::{Stack, ToolError};
//! use toolgraft::relocation::Departure;
//!
//! /// Runs a stack's call on a thread of its own, with its own runtime.
//! async fn on_a_thread<S: Stack>(stack: S, below: &toolgraft::Name, input: S::Input)
//!     -> Result<S::Output, ToolError>
//! {
//!     let departure = Departure::new("thread", below)?;
//!     let call = departure.in_process(async move { stack.call(input).await });
//!     let (tx, rx) = tokio::sync::oneshot::channel();
//!     thread::spawn(move || {
//!         let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//!         let _ = tx.send(runtime.block_on(call));
//!     });
//!     rx.await.map_err(|_| departure.failed("the thread stopped"))?
//! }
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let ping = toolgraft::Tool::builder().name("ping").description("Pong.")
//! #     .body(|_: Ping| async { Ok("pong".to_owned()) }).build()?;
//! # let name = toolgraft::Name::new("ping")?;
//! assert_eq!(on_a_thread(ping, &name, Ping {}).await?, "pong");
//! # Ok(()) }
//! ```

use std::future::Future;

use serde::{Deserialize, Serialize};

use crate::context::{BodyLocalCall, Context, Entry, WireEntry};
use crate::error::{ToolError, panic_message};
use crate::name::Name;
use crate::rulebook::Rule;

mod defer;
mod job;

pub use defer::{Deferral, Deferred, Follow, Followed, Phase};
pub use job::JobRun;

/// A call on its way to where a backend runs the layer below: the backend, the
/// layer, and the part of the caller's context that travels (see the
/// [module docs](self)).
#[derive(Clone, Debug)]
pub struct Departure {
    backend: Name,
    below: Name,
    context: Context,
    /// The backend layer's span (feature `otel`): from the departure to the
    /// last clone's end, the body elsewhere its child.
    #[cfg(feature = "otel")]
    span: tracing::Span,
}

impl Departure {
    /// Leaves the current call for `backend` to run the layer `below`.
    ///
    /// Refused with [`ToolError::Refused`] from inside a
    /// [`Pinned`](crate::context::Pinned) entry: a body-local layer would not apply
    /// to the body run elsewhere.
    ///
    /// ```
    /// use toolgraft::context::{self, BodyLocalCall};
    /// use toolgraft::relocation::Departure;
    /// use toolgraft::Name;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let below = Name::new("fetch")?;
    /// assert!(Departure::new("pool", &below).is_ok());
    /// let inside = BodyLocalCall { extension: Name::new("proxy")?, branch: Name::new("fetch_proxy")? };
    /// let refused = context::with(inside, async { Departure::new("pool", &below) }).await;
    /// assert!(refused.unwrap_err().to_string().contains("place `proxy` inside `pool`"));
    /// # Ok(()) }
    /// ```
    pub fn new(backend: &str, below: &Name) -> Result<Self, ToolError> {
        let context = Context::current();
        if let Some(pinned) = context.pinned() {
            return Err(refusal(&context, &pinned, below, backend));
        }
        #[cfg(feature = "otel")]
        let (context, span) = {
            let span =
                crate::otel::layer_span(crate::kind::ExtensionKind::Backend, backend, None, below);
            // The one place every backend, every tier, passes: what leaves
            // carries this span's trace context, not the caller's, so the body
            // elsewhere is the backend span's child.
            let context = match crate::context::TraceContext::of_span(&span) {
                Some(trace) => context.with(trace),
                None => context,
            };
            (context, span)
        };
        Ok(Self {
            backend: Name::lossy(backend),
            below: below.clone(),
            context,
            #[cfg(feature = "otel")]
            span,
        })
    }

    /// The name of the branch the backend is (on its layer's span, with the
    /// `otel` feature: the backend knows it from its
    /// [`LayerInput`](crate::extension::LayerInput); [`Departure::new`] does not).
    ///
    /// ```
    /// use toolgraft::relocation::Departure;
    /// let below = toolgraft::Name::new("fetch")?;
    /// let departure = Departure::new("pool", &below)?.with_branch(&toolgraft::Name::new("fetch_pool")?);
    /// assert_eq!(departure.below().as_str(), "fetch");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_branch(self, branch: &Name) -> Self {
        #[cfg(feature = "otel")]
        self.span
            .record(crate::otel::BRANCH_NAME, tracing::field::display(branch));
        let _ = branch;
        self
    }

    /// The backend's outcome, as it returns it: with the `otel` feature, an
    /// error is recorded on the backend layer's span first (its
    /// [`code`](ToolError::code) as `error.type`, the rule it cites), as a
    /// wrapper's layer records its own.
    ///
    /// ```
    /// # let departure = toolgraft::relocation::Departure::new("pool", &toolgraft::Name::new("fetch")?)?;
    /// let failed: Result<(), _> = departure.settle(Err(departure.failed("the pool shut down")));
    /// assert!(failed.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle<T>(&self, outcome: Result<T, ToolError>) -> Result<T, ToolError> {
        #[cfg(feature = "otel")]
        if let Err(error) = &outcome {
            crate::otel::record_error(&self.span, error);
        }
        outcome
    }

    /// The backend's name.
    ///
    /// ```
    /// use toolgraft::relocation::Departure;
    /// let departure = Departure::new("pool", &toolgraft::Name::new("fetch")?)?;
    /// assert_eq!((departure.backend().as_str(), departure.below().as_str()), ("pool", "fetch"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn backend(&self) -> &Name {
        &self.backend
    }

    /// The layer the backend runs (see [`Departure::backend`]).
    pub fn below(&self) -> &Name {
        &self.below
    }

    /// `future` with the context that crosses to a worker thread: run it there
    /// (see the [module docs](self)). Entries that [`Stays`](crate::context::Stays)
    /// are left behind.
    ///
    /// ```
    /// use toolgraft::context::{self, ChainDepth};
    /// use toolgraft::relocation::Departure;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let below = toolgraft::Name::new("fetch")?;
    /// let departure = context::with(ChainDepth(4), async { Departure::new("pool", &below) }).await?;
    /// // Run where the worker thread is: the entries go with the future.
    /// assert_eq!(departure.in_process(async { ChainDepth::current() }).await, 4);
    /// # Ok(()) }
    /// ```
    pub fn in_process<F: Future>(&self, future: F) -> impl Future<Output = F::Output> + use<F> {
        let future = self.context.for_threads().scope(future);
        // The body's spans are the backend span's children, recorded by the
        // caller's subscriber (a scoped one too: the worker thread has none of
        // its own).
        #[cfg(feature = "otel")]
        let future = {
            use tracing::Instrument as _;
            use tracing::instrument::WithSubscriber as _;
            future
                .instrument(self.span.clone())
                .with_current_subscriber()
        };
        future
    }

    /// The context that crosses to a worker process, serialized: send it with
    /// the job and run the call inside [`WireContext::arrive`]. An entry that
    /// travels [`Serialized`](crate::context::Serialized) and fails to serialize
    /// refuses the relocation, naming it.
    ///
    /// ```
    /// use toolgraft::context::{self, ChainDepth};
    /// use toolgraft::relocation::Departure;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let below = toolgraft::Name::new("fetch")?;
    /// let wire = context::with(ChainDepth(2), async { Departure::new("remote", &below)?.to_wire() }).await?;
    /// assert_eq!(serde_json::to_value(&wire)?, serde_json::json!([{"name": "toolgraft.chain_depth", "value": 2}]));
    /// // In the worker:
    /// assert_eq!(wire.arrive(async { ChainDepth::current() }).await, 2);
    /// # Ok(()) }
    /// ```
    pub fn to_wire(&self) -> Result<WireContext, ToolError> {
        self.context
            .for_processes()
            .map(WireContext)
            .map_err(|(entry, error)| {
                self.failed(format!(
                    "the context entry `{entry}` cannot cross to a worker process: {error}"
                ))
            })
    }

    /// The error of a hop that failed (a lost connection, a stopped pool):
    /// [`ToolError::Relocation`] naming the layer and the backend.
    ///
    /// ```
    /// # let departure = toolgraft::relocation::Departure::new("pool", &toolgraft::Name::new("fetch")?)?;
    /// let error = departure.failed("the pool shut down");
    /// assert!(matches!(error, toolgraft::ToolError::Relocation { .. }));
    /// assert!(error.to_string().contains("the pool shut down"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn failed(&self, reason: impl Into<String>) -> ToolError {
        ToolError::Relocation {
            tool: self.below.clone(),
            backend: self.backend.clone(),
            reason: reason.into(),
        }
    }

    /// The error of a layer that panicked where it ran: [`ToolError::Panicked`]
    /// naming the layer, with the panic's message.
    ///
    /// ```
    /// # let departure = toolgraft::relocation::Departure::new("pool", &toolgraft::Name::new("fetch")?)?;
    /// let payload = std::panic::catch_unwind(|| panic!("boom")).unwrap_err();
    /// assert!(departure.panicked(payload).to_string().contains("boom"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn panicked(&self, payload: Box<dyn std::any::Any + Send>) -> ToolError {
        ToolError::Panicked {
            tool: self.below.clone(),
            message: panic_message(payload.as_ref()),
        }
    }
}

/// The part of a call's context that crosses to a worker process: what a
/// backend sends with a job (see [`Departure::to_wire`]).
///
/// Entries arrive by name and are read by type in the worker, as where they were
/// set; the worker's process needs only the entry's type, not a registry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WireContext(Vec<WireEntry>);

impl WireContext {
    /// Runs `future` (the worker's call of the layer) with the entries that
    /// arrived added to the current context (see [`Departure::to_wire`]).
    pub async fn arrive<F: Future>(self, future: F) -> F::Output {
        Context::current().with_arrived(self.0).scope(future).await
    }

    /// The names of the entries, in the order they were set.
    ///
    /// ```
    /// let wire: toolgraft::relocation::WireContext = serde_json::from_str("[]")?;
    /// assert!(wire.names().next().is_none() && wire.is_empty());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|entry| entry.name.as_str())
    }

    /// Whether no entry travels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The refusal of a backend reached from inside a pinned entry: what pins the
/// call would not apply to the body it relocates. Combos cannot be written so
/// (the typestate and the engine refuse them); code can, when a tool body or an
/// extension calls a branch that relocates.
fn refusal(context: &Context, pinned: &str, below: &Name, backend: &str) -> ToolError {
    let rule = Rule::LocalityInsideRelocation.cited();
    let reason = match context.get::<BodyLocalCall>() {
        Some(BodyLocalCall { extension, branch }) if pinned == <BodyLocalCall as Entry>::NAME => {
            format!(
                "`{extension}` (in `{branch}`) needs to run beside the tool body, but this call would run the body of `{below}` elsewhere from inside it, where `{extension}` does not apply; place `{extension}` inside `{backend}` in one combo ({rule})"
            )
        }
        _ => format!(
            "the call context entry `{pinned}` pins this call where it runs, but this call would run the body of `{below}` elsewhere from inside it; call `{below}` from outside it ({rule})"
        ),
    };
    ToolError::Refused {
        tool: below.clone(),
        extension: Name::lossy(backend),
        reason,
    }
}
