//! The call context: what a call carries besides its input, as entries found by
//! type (like `http::Extensions`), read by bodies and extensions and extended by
//! the layers a call passes through.
//!
//! Each [`Entry`] declares two things beside its name:
//!
//! - how it crosses a relocation ([`Entry::Travel`]): it [`Stays`] with the
//!   caller, reaches worker threads as it is ([`InProcess`]), reaches worker
//!   processes too, serialized ([`Serialized`]), or makes any relocation from
//!   inside it a refusal ([`Pinned`]: what a body-local layer's call is);
//! - whether a [`Cache`](crate::ext::Cache) inside it keys on it
//!   ([`Entry::Key`]: [`Keyed`] or [`Unkeyed`]): an entry that changes the answer
//!   without changing the input (an egress route, a caller's identity) is keyed.
//!
//! Bodies and extensions read it with [`get`]; a layer adds an entry for the
//! layers below with [`with`]. A backend carries what travels through a
//! [`Departure`](crate::relocation::Departure) (see [`relocation`](crate::relocation)).
//!
//! ```
//! use toolgraft::context::{self, Entry, InProcess, Unkeyed};
//!
//! /// Which tenant a call is for.
//! #[derive(Clone, Debug, PartialEq)]
//! struct Tenant(&'static str);
//!
//! impl Entry for Tenant {
//!     const NAME: &'static str = "example.tenant";
//!     type Travel = InProcess;
//!     type Key = Unkeyed;
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! assert_eq!(context::get::<Tenant>(), None);
//! let seen = context::with(Tenant("acme"), async { context::get::<Tenant>() }).await;
//! assert_eq!(seen, Some(Tenant("acme")));
//! # }
//! ```
//!
//! The context is the task's: a task or a thread a body starts itself
//! (`tokio::spawn`, `std::thread::spawn`) starts outside the call, without its
//! entries (the chain depth among them, so a cycle through it would not end).
//! Carry it with [`Context::current`] and [`Context::scope`] (carried whole, a
//! [`Pinned`] entry pins the spawned work too):
//!
//! ```
//! # use toolgraft::context::{self, Context, Entry, InProcess, Unkeyed};
//! # #[derive(Clone, Debug, PartialEq)] struct Tenant(&'static str);
//! # impl Entry for Tenant { const NAME: &'static str = "example.tenant"; type Travel = InProcess; type Key = Unkeyed; }
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! context::with(Tenant("acme"), async {
//!     let lost = tokio::spawn(async { context::get::<Tenant>() });
//!     assert_eq!(lost.await.unwrap(), None);
//!     let carried = tokio::spawn(Context::current().scope(async { context::get::<Tenant>() }));
//!     assert_eq!(carried.await.unwrap(), Some(Tenant("acme")));
//! })
//! .await;
//! # }
//! ```

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

mod ask;
mod caller;
mod entries;
mod identity;
mod trace;

pub use ask::{Answer, Answered, Ask, Asker, InputRequest, InputRequired, Question, Reach};
pub use caller::{
    LOG_BACKLOG, LogLevel, LogMessage, LogQueue, LogSink, PROGRESS_EVERY, Principal, Progress,
    ProgressFold, ProgressSink, log, report_progress,
};
pub(crate) use entries::Occurrences;
pub use entries::{BodyLocalCall, CallName, ChainDepth};
pub use identity::Identity;
pub use trace::{MAX_TRACESTATE_LEN, MAX_TRACESTATE_MEMBERS, TraceContext, ZeroSpanId};

mod sealed {
    pub trait Travel {}
    pub trait Key {}
}

/// An entry of the call context: a value found by its type.
///
/// `NAME` is the entry's identity where types are not: on the wire to a worker
/// process, in cache keys and in errors. Make it unique (prefix it with your
/// crate's name, as the built-ins use `toolgraft.`).
///
/// See the [module docs](self) for an example.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a call-context entry",
    label = "not an `Entry`",
    note = "implement `toolgraft::context::Entry` for `{Self}`: its `NAME`, how it crosses a relocation (`Travel`) and whether a cache keys on it (`Key`)"
)]
pub trait Entry: Clone + Send + Sync + fmt::Debug + 'static {
    /// The entry's name: unique, stable, what a worker process finds it by.
    const NAME: &'static str;
    /// How the entry crosses a relocation: [`Stays`], [`InProcess`],
    /// [`Serialized`] or [`Pinned`].
    type Travel: Travel<Self>;
    /// Whether a cache inside it keys on it: [`Keyed`] or [`Unkeyed`].
    type Key: Key<Self>;
}

/// How an entry crosses a relocation, as a value (see [`Entry::Travel`]).
///
/// ```
/// use toolgraft::context::{Carried, InProcess, Travel};
/// assert_eq!(<InProcess as Travel<u8>>::CARRIED, Carried::InProcess);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Carried {
    /// Not carried: the relocated body does not see it.
    Stays,
    /// As it is, to worker threads; not to worker processes.
    InProcess,
    /// As it is to worker threads, serialized to worker processes.
    Serialized,
    /// Never: a relocation from inside it is refused.
    Pinned,
}

/// How an entry of type `E` crosses a relocation: one of [`Stays`],
/// [`InProcess`], [`Serialized`], [`Pinned`] (sealed).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot carry `{E}` across a relocation",
    label = "`{E}`'s `Travel`",
    note = "an entry that travels `Serialized` to worker processes must be `serde::Serialize + serde::de::DeserializeOwned`; derive both, or choose `InProcess` (worker threads only) or `Stays`"
)]
pub trait Travel<E>: sealed::Travel + Send + Sync + 'static {
    /// The same, as a value.
    const CARRIED: Carried;
    #[doc(hidden)]
    fn encode(_entry: &E) -> Option<Result<Value, serde_json::Error>> {
        None
    }
    #[doc(hidden)]
    fn decode(_value: &Value) -> Option<E> {
        None
    }
}

/// The entry stays with the caller: a relocated body does not see it.
#[derive(Debug)]
pub struct Stays;
/// The entry reaches worker threads as it is, and stays behind at a process
/// boundary.
#[derive(Debug)]
pub struct InProcess;
/// The entry reaches worker threads as it is and worker processes serialized
/// (it must be `Serialize + DeserializeOwned`).
#[derive(Debug)]
pub struct Serialized;
/// The entry pins the call where it is: a backend reached from inside it refuses
/// to relocate the body (rule `locality-inside-relocation` in the
/// [rulebook](crate::rulebook), at run time). What a body-local layer's call is.
#[derive(Debug)]
pub struct Pinned;

impl sealed::Travel for Stays {}
impl sealed::Travel for InProcess {}
impl sealed::Travel for Serialized {}
impl sealed::Travel for Pinned {}

impl<E> Travel<E> for Stays {
    const CARRIED: Carried = Carried::Stays;
}

impl<E> Travel<E> for InProcess {
    const CARRIED: Carried = Carried::InProcess;
}

impl<E> Travel<E> for Pinned {
    const CARRIED: Carried = Carried::Pinned;
}

// Not recommended: a missing `Serialize` is reported as `Travel`'s own
// message (what to derive, what else to choose), not as serde's.
#[diagnostic::do_not_recommend]
impl<E: Serialize + DeserializeOwned> Travel<E> for Serialized {
    const CARRIED: Carried = Carried::Serialized;

    fn encode(entry: &E) -> Option<Result<Value, serde_json::Error>> {
        Some(serde_json::to_value(entry))
    }

    fn decode(value: &Value) -> Option<E> {
        E::deserialize(value).ok()
    }
}

/// Whether a cache keys on an entry of type `E`: [`Keyed`] or [`Unkeyed`]
/// (sealed).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot key a cache on `{E}`",
    label = "`{E}`'s `Key`",
    note = "a `Keyed` entry is written into cache keys, so it must be `serde::Serialize`; derive it, or choose `Unkeyed`"
)]
pub trait Key<E>: sealed::Key + Send + Sync + 'static {
    /// Whether a cache keys on it.
    const KEYED: bool;
    #[doc(hidden)]
    fn write(_entry: &E, _key: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        Ok(())
    }
}

/// A cache inside the entry keys on it: the entry changes the answer.
#[derive(Debug)]
pub struct Keyed;
/// A cache ignores the entry.
#[derive(Debug)]
pub struct Unkeyed;

impl sealed::Key for Keyed {}
impl sealed::Key for Unkeyed {}

#[diagnostic::do_not_recommend]
impl<E: Serialize> Key<E> for Keyed {
    const KEYED: bool = true;

    fn write(entry: &E, key: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        serde_json::to_writer(key, entry)
    }
}

impl<E> Key<E> for Unkeyed {
    const KEYED: bool = false;
}

/// A call's context: its entries, newest first. Cloning shares them.
///
/// Most code reads the current call's context through [`get`] and extends it
/// with [`with`]; a `Context` value is what crosses to where a call runs.
///
/// ```
/// use toolgraft::context::{self, CallName, Context};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let context = Context::current().with(CallName(toolgraft::Name::new("fetch")?));
/// let name = context.scope(async { context::get::<CallName>() }).await;
/// assert_eq!(name.unwrap().0.as_str(), "fetch");
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Context {
    head: Option<Arc<dyn Link>>,
}

tokio::task_local! {
    static CURRENT: Context;
}

impl Context {
    /// An empty context.
    ///
    /// ```
    /// assert!(toolgraft::context::Context::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The current call's context (empty outside any).
    ///
    /// ```
    /// use toolgraft::context::{self, ChainDepth, Context};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// assert!(Context::current().is_empty());
    /// let inside = context::with(ChainDepth(1), async { Context::current() }).await;
    /// assert_eq!(inside.get::<ChainDepth>(), Some(ChainDepth(1)));
    /// # }
    /// ```
    pub fn current() -> Self {
        CURRENT.try_with(Clone::clone).unwrap_or_default()
    }

    /// This context with `entry` added (replacing an entry of its type, for
    /// [`get`](Self::get)).
    ///
    /// ```
    /// use toolgraft::context::{ChainDepth, Context};
    /// let context = Context::new().with(ChainDepth(1)).with(ChainDepth(2));
    /// assert_eq!(context.get::<ChainDepth>(), Some(ChainDepth(2)));
    /// ```
    pub fn with<E: Entry>(&self, entry: E) -> Self {
        Self {
            head: Some(Arc::new(Node {
                entry,
                parent: self.head.clone(),
            })),
        }
    }

    /// The entry of type `E`, if the context has one: one set in this process,
    /// or one that arrived serialized from the caller's process (`None` for one
    /// that arrived and does not read as an `E`).
    ///
    /// ```
    /// use toolgraft::context::{ChainDepth, Context};
    /// use toolgraft::ext::proxy::Route;
    /// let context = Context::new().with(Route("eu".into()));
    /// assert_eq!(context.get::<Route>(), Some(Route("eu".into())));
    /// assert_eq!(context.get::<ChainDepth>(), None);
    /// ```
    pub fn get<E: Entry>(&self) -> Option<E> {
        self.find::<E>().flatten()
    }

    /// The newest entry of type `E`: `Some(None)` for one that arrived from a
    /// caller's process and does not read as an `E`.
    fn find<E: Entry>(&self) -> Option<Option<E>> {
        // Only an entry that travels serialized can have arrived: an arrived one
        // under the name of one that cannot (set in the worker's process, around
        // its calls) does not hide it.
        let can_arrive = E::Travel::CARRIED == Carried::Serialized;
        for node in self.links() {
            if node.entry_type() == TypeId::of::<E>() {
                return Some(node.as_any().downcast_ref::<E>().cloned());
            }
            if can_arrive
                && let Some(arrived) = node.as_any().downcast_ref::<Arrived>()
                && arrived.entry.name == E::NAME
            {
                return Some(E::Travel::decode(&arrived.entry.value));
            }
        }
        None
    }

    /// Runs `future` with this context as the current one (in place of the
    /// current one, not added to it).
    ///
    /// ```
    /// use toolgraft::context::{self, ChainDepth, Context};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let depth = context::with(ChainDepth(3), Context::new().scope(async { ChainDepth::current() }));
    /// assert_eq!(depth.await, 0);
    /// # }
    /// ```
    pub fn scope<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        CURRENT.scope(self, future)
    }

    /// Each entry (what [`get`](Self::get) finds of each type, and of each name
    /// among the arrived ones), newest first. Linear in the links: a context that
    /// arrived with many entries costs a relocation no more than reading it once.
    fn entries(&self) -> impl Iterator<Item = &dyn Link> {
        let mut types: HashSet<TypeId> = HashSet::new();
        // The names of the newer entries, and of the newer arrived ones.
        let mut names: HashSet<&str> = HashSet::new();
        let mut arrived: HashSet<&str> = HashSet::new();
        let mut link = self.head.as_deref();
        std::iter::from_fn(move || {
            while let Some(node) = link {
                link = node.parent();
                let (ty, name) = (node.entry_type(), node.name());
                let newest = if ty == TypeId::of::<Arrived>() {
                    // Arrived entries share one type: they are told apart by
                    // name, and what a newer entry of the name hides.
                    arrived.insert(name);
                    names.insert(name)
                } else {
                    // An entry of another type under the same name hides nothing
                    // (it would hide the chain depth from a worker, or unpin a
                    // call); a newer arrived one is what `get` reads.
                    names.insert(name);
                    let can_arrive = node.carried() == Carried::Serialized;
                    types.insert(ty) && !(can_arrive && arrived.contains(name))
                };
                if newest {
                    return Some(node);
                }
            }
            None
        })
    }

    /// Whether the context has no entry.
    ///
    /// ```
    /// use toolgraft::context::{ChainDepth, Context};
    /// assert!(!Context::new().with(ChainDepth(0)).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// The names of the entries in this context, newest first.
    ///
    /// ```
    /// use toolgraft::context::{ChainDepth, Context};
    /// let context = Context::new().with(ChainDepth(1));
    /// assert_eq!(context.names(), ["toolgraft.chain_depth"]);
    /// ```
    pub fn names(&self) -> Vec<&str> {
        self.entries().map(Link::name).collect()
    }

    /// The name of the innermost entry that pins the call (see [`Pinned`]).
    pub(crate) fn pinned(&self) -> Option<String> {
        // Any link, shadowed or not: a call inside a pinned scope stays pinned
        // whatever is set inside it.
        self.links()
            .find(|entry| entry.carried() == Carried::Pinned)
            .map(|entry| entry.name().to_owned())
    }

    /// The entries that cross to a worker thread.
    pub(crate) fn for_threads(&self) -> Context {
        self.filtered(|carried| matches!(carried, Carried::InProcess | Carried::Serialized))
    }

    fn filtered(&self, keep: impl Fn(Carried) -> bool) -> Context {
        if self.is_empty() {
            return Context::new();
        }
        let kept: Vec<&dyn Link> = self.entries().filter(|e| keep(e.carried())).collect();
        let mut context = Context::new();
        for entry in kept.into_iter().rev() {
            context.head = Some(entry.relink(context.head.take()));
        }
        context
    }

    /// The entries that cross to a worker process, serialized, by name.
    pub(crate) fn for_processes(&self) -> Result<Vec<WireEntry>, (String, String)> {
        // A worker finds entries by name: two types under one name would arrive
        // as one, read as the other's type.
        let mut named: HashMap<&str, TypeId> = HashMap::new();
        for link in self
            .links()
            .filter(|link| link.entry_type() != TypeId::of::<Arrived>())
        {
            let (name, ty) = (link.name(), link.entry_type());
            if *named.entry(name).or_insert(ty) != ty {
                return Err((
                    name.to_owned(),
                    "two entries of different types have this name; give each type a `NAME` of its own".to_owned(),
                ));
            }
        }
        let mut wire = Vec::new();
        for entry in self.entries() {
            if entry.carried() != Carried::Serialized {
                continue;
            }
            if let Some(value) = entry.encode() {
                let value = value.map_err(|error| (entry.name().to_owned(), error.to_string()))?;
                wire.push(WireEntry {
                    name: entry.name().to_owned(),
                    value,
                    keyed: entry.keyed(),
                });
            }
        }
        // Oldest first, so that arriving adds them in the order they were set.
        wire.reverse();
        Ok(wire)
    }

    /// This context with the entries that arrived serialized from a caller's
    /// process added, in their order.
    pub(crate) fn with_arrived(&self, wire: Vec<WireEntry>) -> Context {
        let mut context = self.clone();
        for entry in wire {
            context.head = Some(Arc::new(Arrived {
                entry,
                parent: context.head.take(),
            }));
        }
        context
    }

    /// Writes the [`Keyed`] entries for a cache key, each as `\0"name":value`
    /// (the name and the value in JSON, so no entry can pass for another, nor
    /// for arguments, which never hold a raw NUL), sorted by name; nothing when
    /// there are none. An entry whose name an entry of another type has too is
    /// written `\0"name"/"type":value`, its type as this process knows it: the
    /// key is for a store in this process. What [`Cache`](crate::ext::Cache)
    /// appends to its keys; a cache of one's own does the same.
    ///
    /// ```
    /// use toolgraft::context::Context;
    /// use toolgraft::ext::proxy::Route;
    /// let mut key = b"{}".to_vec();
    /// Context::new().with(Route("eu".into())).write_keyed(&mut key)?;
    /// assert_eq!(key, b"{}\0\"toolgraft.proxy.route\":\"eu\"");
    /// # Ok::<(), toolgraft::context::EntryError>(())
    /// ```
    pub fn write_keyed(&self, key: &mut Vec<u8>) -> Result<(), EntryError> {
        self.write_keyed_except(key, None)
    }

    /// [`write_keyed`](Self::write_keyed) without the entries of one type.
    fn write_keyed_except(
        &self,
        key: &mut Vec<u8>,
        except: Option<TypeId>,
    ) -> Result<(), EntryError> {
        // Every keyed entry, shadowed ones too: an entry of another type under
        // the same name must not hide one that changes the answer. Extra parts
        // only cost hits, never a wrong answer.
        let mut keyed: Vec<&dyn Link> = self
            .links()
            .filter(|e| e.keyed() && Some(e.entry_type()) != except)
            .collect();
        keyed.sort_by(|a, b| a.name().cmp(b.name()));
        // Two types under one name: each says which it is, or `A` = 1 beside
        // `B` = 2 would pass for `A` = 2 beside `B` = 1, another answer.
        let mut types: HashMap<&str, TypeId> = HashMap::new();
        let mut shared: HashSet<&str> = HashSet::new();
        for entry in &keyed {
            if *types.entry(entry.name()).or_insert(entry.entry_type()) != entry.entry_type() {
                shared.insert(entry.name());
            }
        }
        for entry in keyed {
            key.push(0);
            serde_json::to_writer(&mut *key, entry.name())
                .and_then(|()| {
                    if shared.contains(entry.name()) {
                        key.push(b'/');
                        serde_json::to_writer(&mut *key, &format!("{:?}", entry.entry_type()))?;
                    }
                    key.push(b':');
                    entry.write_key(key)
                })
                .map_err(|error| EntryError {
                    entry: entry.name().to_owned(),
                    problem: error.to_string(),
                })?;
        }
        Ok(())
    }

    /// Whether a cache keys on any entry of this context.
    ///
    /// ```
    /// use toolgraft::context::{ChainDepth, Context};
    /// use toolgraft::ext::proxy::Route;
    /// assert!(!Context::new().with(ChainDepth(1)).has_keyed());
    /// assert!(Context::new().with(Route("eu".into())).has_keyed());
    /// ```
    pub fn has_keyed(&self) -> bool {
        self.links().any(|entry| entry.keyed())
    }

    /// Every link, shadowed ones too, newest first.
    fn links(&self) -> impl Iterator<Item = &dyn Link> {
        let mut link = self.head.as_deref();
        std::iter::from_fn(move || {
            let node = link?;
            link = node.parent();
            Some(node)
        })
    }
}

/// An entry that could not be written (for a cache key, or to a worker
/// process).
///
/// ```
/// let error = toolgraft::context::EntryError { entry: "my.entry".into(), problem: "no".into() };
/// assert_eq!(error.to_string(), "the context entry `my.entry` cannot be written: no");
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("the context entry `{entry}` cannot be written: {problem}")]
pub struct EntryError {
    /// The entry's name.
    pub entry: String,
    /// Why.
    pub problem: String,
}

/// Shows the entries' names only: an entry may be a secret (a caller's
/// identity), and a context is what a backend's `Debug` shows.
impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries().map(|entry| entry.name()))
            .finish()
    }
}

/// The entry of type `E` in the current call's context (see the
/// [module docs](self)).
///
/// ```
/// use toolgraft::context::{self, ChainDepth};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// assert_eq!(context::get::<ChainDepth>(), None);
/// assert_eq!(context::with(ChainDepth(2), async { context::get::<ChainDepth>() }).await, Some(ChainDepth(2)));
/// # }
/// ```
pub fn get<E: Entry>() -> Option<E> {
    CURRENT
        .try_with(|context| context.get::<E>())
        .ok()
        .flatten()
}

/// [`Context::write_keyed`] for the current call's context.
///
/// ```
/// use toolgraft::context;
/// use toolgraft::ext::proxy::Route;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), context::EntryError> {
/// let mut key = b"{}".to_vec();
/// context::with(Route("eu".into()), async { context::write_keyed(&mut key) }).await?;
/// assert_eq!(key, b"{}\0\"toolgraft.proxy.route\":\"eu\"");
/// # Ok(()) }
/// ```
pub fn write_keyed(key: &mut Vec<u8>) -> Result<(), EntryError> {
    CURRENT
        .try_with(|context| context.write_keyed(key))
        .unwrap_or(Ok(()))
}

/// [`write_keyed`] without the entries of type `E`: what a cache whose operator
/// says its tool answers every caller alike writes (`E` is
/// [`Principal`]).
///
/// ```
/// use toolgraft::context::{self, Principal};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (mut all, mut public) = (Vec::new(), Vec::new());
/// context::with(Principal::new("alice"), async {
///     context::write_keyed(&mut all)?;
///     context::write_keyed_but::<Principal>(&mut public)
/// }).await?;
/// assert!(!all.is_empty() && public.is_empty());
/// # Ok(()) }
/// ```
pub fn write_keyed_but<E: Entry>(key: &mut Vec<u8>) -> Result<(), EntryError> {
    CURRENT
        .try_with(|context| context.write_keyed_except(key, Some(TypeId::of::<E>())))
        .unwrap_or(Ok(()))
}

/// Whether a cache keys on any entry of the current call's context.
///
/// ```
/// use toolgraft::context;
/// use toolgraft::ext::proxy::Route;
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// assert!(!context::has_keyed());
/// assert!(context::with(Route("eu".into()), async { context::has_keyed() }).await);
/// # }
/// ```
pub fn has_keyed() -> bool {
    CURRENT.try_with(Context::has_keyed).unwrap_or(false)
}

/// Runs `future` with `entry` added to the current call's context (see the
/// [module docs](self)).
///
/// The context is read when the future first runs, not when it is made: a layer
/// makes the future of the layer below before its own scope is entered.
///
/// ```
/// use toolgraft::context::{self, ChainDepth};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let inner = async { ChainDepth::current() };
/// assert_eq!(context::with(ChainDepth(1), context::with(ChainDepth(2), inner)).await, 2);
/// # }
/// ```
pub async fn with<E: Entry, F: Future>(entry: E, future: F) -> F::Output {
    Context::current().with(entry).scope(future).await
}

/// One entry and the rest of the context behind it.
trait Link: Send + Sync + 'static {
    fn entry_type(&self) -> TypeId;
    fn name(&self) -> &str;
    fn carried(&self) -> Carried;
    fn keyed(&self) -> bool;
    fn encode(&self) -> Option<Result<Value, serde_json::Error>>;
    fn write_key(&self, key: &mut Vec<u8>) -> Result<(), serde_json::Error>;
    fn as_any(&self) -> &dyn Any;
    fn parent(&self) -> Option<&dyn Link>;
    /// The rest of the context, taken out (so this link drops alone).
    fn take_parent(&mut self) -> Option<Arc<dyn Link>>;
    /// The same entry in front of `parent`.
    fn relink(&self, parent: Option<Arc<dyn Link>>) -> Arc<dyn Link>;
}

struct Node<E> {
    entry: E,
    parent: Option<Arc<dyn Link>>,
}

/// Drops the links behind one, one by one: dropped as nested `Arc`s, a context
/// of many entries (one that arrived so from a caller's process, say) would
/// overflow the stack and abort the process.
fn unlink(mut next: Option<Arc<dyn Link>>) {
    while let Some(mut link) = next {
        // Only what no other context shares: the rest is theirs to drop (and the
        // last to drop a link unlinks what is behind it, on its own thread).
        next = Arc::get_mut(&mut link).and_then(|unique| unique.take_parent());
    }
}

impl<E> Drop for Node<E> {
    fn drop(&mut self) {
        unlink(self.parent.take());
    }
}

impl<E: Entry> Link for Node<E> {
    fn entry_type(&self) -> TypeId {
        TypeId::of::<E>()
    }

    fn name(&self) -> &str {
        E::NAME
    }

    fn carried(&self) -> Carried {
        E::Travel::CARRIED
    }

    fn keyed(&self) -> bool {
        E::Key::KEYED
    }

    fn encode(&self) -> Option<Result<Value, serde_json::Error>> {
        E::Travel::encode(&self.entry)
    }

    fn write_key(&self, key: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        E::Key::write(&self.entry, key)
    }

    fn as_any(&self) -> &dyn Any {
        &self.entry
    }

    fn parent(&self) -> Option<&dyn Link> {
        self.parent.as_deref()
    }

    fn take_parent(&mut self) -> Option<Arc<dyn Link>> {
        self.parent.take()
    }

    fn relink(&self, parent: Option<Arc<dyn Link>>) -> Arc<dyn Link> {
        Arc::new(Node {
            entry: self.entry.clone(),
            parent,
        })
    }
}

/// An entry that arrived serialized from the caller's process, found by name
/// until someone asks for it by type. It travels on as it came.
struct Arrived {
    entry: WireEntry,
    parent: Option<Arc<dyn Link>>,
}

impl Drop for Arrived {
    fn drop(&mut self) {
        unlink(self.parent.take());
    }
}

impl Link for Arrived {
    fn entry_type(&self) -> TypeId {
        TypeId::of::<Arrived>()
    }

    fn name(&self) -> &str {
        &self.entry.name
    }

    fn carried(&self) -> Carried {
        Carried::Serialized
    }

    fn keyed(&self) -> bool {
        self.entry.keyed
    }

    fn encode(&self) -> Option<Result<Value, serde_json::Error>> {
        Some(Ok(self.entry.value.clone()))
    }

    fn write_key(&self, key: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        serde_json::to_writer(key, &self.entry.value)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn parent(&self) -> Option<&dyn Link> {
        self.parent.as_deref()
    }

    fn take_parent(&mut self) -> Option<Arc<dyn Link>> {
        self.parent.take()
    }

    fn relink(&self, parent: Option<Arc<dyn Link>>) -> Arc<dyn Link> {
        Arc::new(Arrived {
            entry: self.entry.clone(),
            parent,
        })
    }
}

/// One entry on the wire to a worker process (see
/// [`WireContext`](crate::relocation::WireContext)).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct WireEntry {
    pub(crate) name: String,
    pub(crate) value: Value,
    /// Whether a cache keys on it, in the worker as in the caller.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) keyed: bool,
}
