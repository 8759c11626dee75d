//! `rate_limit` and `concurrency`: limits on how often and how many calls of a
//! branch run, kept in this process or for a whole fleet in a shared
//! [`LimitStore`].
//!
//! Both wrappers key every call by its branch and, when they are
//! `per_principal`, by the caller's [`Principal`] from the call context: each
//! caller gets a limit of its own. A call that carries no principal (nothing in
//! front set one) is counted under one shared anonymous key: anonymous callers
//! share one limit, never escape it.
//!
//! Over the limit, the caller gets [`ToolError::Overloaded`]
//! naming the branch, the extension and the limit; a `rate_limit` says exactly
//! when a retry may be admitted (`retry_after`, from GCRA). It is transient
//! ([`ToolError::is_transient`]), so a retry
//! outside may make the call again.
//!
//! # Fleet-wide
//!
//! A limit kept per process is no limit for a fleet: N replicas admit N times
//! as much. Give both wrappers a store every replica reaches (the fleet's Redis:
//! `toolgraft_jobs::RedisLimits`) with `.with_store(..)`, and the replicas hold one
//! limit together. The default store, [`MemoryLimits`], is this process's.
//!
//! A store that cannot answer **fails closed**: the call is refused with
//! `Overloaded` (the reason names the store's error, and `retry_after` is the
//! store's [`StoreError::retry_after`] when it knows one), never run unlimited.
//!
//! From a manifest, register the built-ins from config:
//!
//! ```
//! use toolgraft::Registry;
//! use toolgraft::ext::{Concurrency, RateLimit};
//! use toolgraft::ext::limit::MemoryLimits;
//! use toolgraft::runtime::{Configured, Refined};
//! let mut registry = Registry::new();
//! // `{"name": "rate_limit", "config": {"calls": 5, "burst": 10, "per_principal": true}}`
//! registry.register(Configured::<RateLimit>::named("rate_limit"))?;
//! // One store for every element (a fleet's, say): the config refines an instance
//! // that holds it.
//! let store = MemoryLimits::new();
//! registry.register(Refined::new(Concurrency::at_most(1).with_store(store), Concurrency::configured))?;
//! # Ok::<(), toolgraft::runtime::RegistryError>(())
//! ```

use std::fmt;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::Name;
use crate::context::Principal;
use crate::error::ToolError;
use crate::store::{StoreError, StoreFuture};

mod concurrency;
mod memory;
mod rate;

pub use concurrency::{Concurrency, ConcurrencyConfig};
pub use memory::MemoryLimits;
pub use rate::{Rate, RateLimit, RateLimitConfig};

/// The longest wait for admission an operator may configure (10 minutes): a
/// caller kept longer is better told to come back.
///
/// ```
/// assert_eq!(toolgraft::ext::limit::MAX_WAIT.as_secs(), 600);
/// ```
pub const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// The most distinct keys (callers, with `per_principal`) one in-process store
/// may be configured to track at once.
///
/// ```
/// assert_eq!(toolgraft::ext::limit::MAX_KEYS, 10_000_000);
/// ```
pub const MAX_KEYS: usize = 10_000_000;

/// What a limit counts under: the branch, and the caller's principal when the
/// limit is per principal (`None` is the shared anonymous key, or a limit for
/// every caller together).
///
/// A store keys by [`digest`](LimitKey::digest): 32 bytes whatever the
/// principal's length, the same in every process, so a hostile principal cannot
/// make a huge key.
///
/// ```
/// use toolgraft::Name;
/// use toolgraft::context::Principal;
/// use toolgraft::ext::limit::LimitKey;
/// let branch = Name::new("search_rate_limit")?;
/// let alice = LimitKey::new(branch.clone(), Some(Principal::new("alice")));
/// let anyone = LimitKey::new(branch, None);
/// assert_ne!(alice.digest(), anyone.digest());
/// assert_eq!(alice.hex().len(), 64);
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug)]
pub struct LimitKey {
    branch: Name,
    principal: Option<Principal>,
    /// The digest, worked out once: a call's acquire and release both key by
    /// it (the lease carries a clone of the key).
    digest: std::sync::OnceLock<[u8; 32]>,
}

impl PartialEq for LimitKey {
    fn eq(&self, other: &Self) -> bool {
        (&self.branch, &self.principal) == (&other.branch, &other.principal)
    }
}

impl Eq for LimitKey {}

impl std::hash::Hash for LimitKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.branch, &self.principal).hash(state);
    }
}

impl LimitKey {
    /// The key of `branch` for `principal`.
    pub fn new(branch: Name, principal: Option<Principal>) -> Self {
        Self {
            branch,
            principal,
            digest: std::sync::OnceLock::new(),
        }
    }

    /// The branch.
    pub fn branch(&self) -> &Name {
        &self.branch
    }

    /// The principal, when the limit is per principal and the call had one.
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    /// SHA-256 over the branch and the principal (tagged, so no principal
    /// collides with the anonymous key): what stores key by.
    pub fn digest(&self) -> [u8; 32] {
        *self.digest.get_or_init(|| {
            let mut hash = Sha256::new();
            hash.update(self.branch.as_str().as_bytes());
            match &self.principal {
                None => hash.update([0]),
                Some(principal) => {
                    hash.update([1]);
                    hash.update(principal.as_str().as_bytes());
                }
            }
            hash.finalize().into()
        })
    }

    /// The digest in lowercase hex (64 characters): a store key's suffix.
    pub fn hex(&self) -> String {
        crate::hex::hex(&self.digest())
    }

    /// The principal as logs and errors show it.
    fn caller(&self) -> String {
        match &self.principal {
            Some(principal) => format!("caller `{}`", crate::error::shorten(principal.as_str())),
            None => "the anonymous caller".to_owned(),
        }
    }
}

/// A store's answer to a rate limit: admitted, or refused until `retry_after`
/// has passed.
///
/// ```
/// use std::time::Duration;
/// use toolgraft::ext::limit::Admission;
/// let refused = Admission::Refused { retry_after: Duration::from_millis(200) };
/// assert!(!refused.is_admitted());
/// assert!(Admission::Admitted.is_admitted());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The call may run; it was counted.
    Admitted,
    /// Over the limit; not counted.
    Refused {
        /// How long until a call would be admitted.
        retry_after: Duration,
    },
}

impl Admission {
    /// Whether the call was admitted.
    pub fn is_admitted(&self) -> bool {
        matches!(self, Self::Admitted)
    }
}

/// One of a concurrency limit's permits, held by a running call: given back
/// with [`LimitStore::release`] when the call ends (or is dropped).
///
/// ```
/// use toolgraft::Name;
/// use toolgraft::ext::limit::{Lease, LimitKey};
/// let lease = Lease::new(LimitKey::new(Name::new("x_concurrency")?, None), "7");
/// assert_eq!(lease.id(), "7");
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    key: LimitKey,
    id: String,
}

impl Lease {
    /// The lease `id` (unique in the store) on `key`.
    pub fn new(key: LimitKey, id: impl Into<String>) -> Self {
        Self { key, id: id.into() }
    }

    /// The key it counts under.
    pub fn key(&self) -> &LimitKey {
        &self.key
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// Where `rate_limit` and `concurrency` keep their counts: [`MemoryLimits`]
/// in this process (the default), or a store a fleet shares
/// (`toolgraft_jobs::RedisLimits`), so that N replicas hold one limit.
///
/// Every answer must be atomic in the store: two replicas asking at once never
/// both take the last call or permit. An `Err` refuses the call (the wrapper
/// never takes a store error for admission).
///
/// ```
/// use std::time::Duration;
/// use toolgraft::Name;
/// use toolgraft::ext::limit::{Admission, LimitKey, LimitStore, MemoryLimits, Rate};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryLimits::new();
/// let key = LimitKey::new(Name::new("search_rate_limit")?, None);
/// let rate = Rate::new(2, Duration::from_secs(1))?;
/// assert_eq!(store.admit(&key, rate).await?, Admission::Admitted);
/// assert_eq!(store.admit(&key, rate).await?, Admission::Admitted);
/// assert_eq!(store.admit(&key, rate).await?, Admission::Refused { retry_after: Duration::from_millis(500) });
///
/// let lease = store.acquire(&key, 1, Duration::from_secs(30)).await?.expect("a permit");
/// assert!(store.acquire(&key, 1, Duration::from_secs(30)).await?.is_none(), "one at a time");
/// store.release(lease).await?;
/// assert!(store.acquire(&key, 1, Duration::from_secs(30)).await?.is_some());
/// # Ok(()) }
/// ```
pub trait LimitStore: fmt::Debug + Send + Sync + 'static {
    /// Counts one call of `key` against `rate` (GCRA with the rate's
    /// [`interval`](Rate::interval) and [`tolerance`](Rate::tolerance), which say
    /// the rule: a store only keeps the count): [`Admission::Admitted`] if it
    /// fits, or how long until one would.
    fn admit<'a>(&'a self, key: &'a LimitKey, rate: Rate) -> StoreFuture<'a, Admission>;

    /// Takes one of `max` permits of `key`, for `ttl`: `None` when all are
    /// taken. A permit not renewed within `ttl` is given back by the store (a
    /// replica that crashed holding it), so the wrapper renews it while the call
    /// runs. The future may be dropped before it answers (its caller gave up): a
    /// store that takes the permit elsewhere, on a server, gives it back then.
    fn acquire<'a>(
        &'a self,
        key: &'a LimitKey,
        max: u32,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Lease>>;

    /// Extends `lease` by `ttl` from now; `false` when the store no longer has
    /// it (it expired).
    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> StoreFuture<'a, bool>;

    /// Gives `lease` back. Called when a call ends, from a drop when the call
    /// is cancelled: do at once what can be done without waiting (the returned
    /// future is spawned on the current runtime, when there is one).
    fn release(&self, lease: Lease) -> StoreFuture<'static, ()>;
}

impl<T: LimitStore + ?Sized> LimitStore for std::sync::Arc<T> {
    fn admit<'a>(&'a self, key: &'a LimitKey, rate: Rate) -> StoreFuture<'a, Admission> {
        (**self).admit(key, rate)
    }

    fn acquire<'a>(
        &'a self,
        key: &'a LimitKey,
        max: u32,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Lease>> {
        (**self).acquire(key, max, ttl)
    }

    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> StoreFuture<'a, bool> {
        (**self).renew(lease, ttl)
    }

    fn release(&self, lease: Lease) -> StoreFuture<'static, ()> {
        (**self).release(lease)
    }
}

/// The key of the current call of `branch`.
fn key_of(branch: &Name, per_principal: bool) -> LimitKey {
    let principal = per_principal
        .then(crate::context::get::<Principal>)
        .flatten();
    LimitKey::new(branch.clone(), principal)
}

/// A store that failed: the call is refused, fail closed.
fn store_failed(tool: &Name, extension: &str, error: &StoreError) -> ToolError {
    ToolError::store_failed(tool, extension, "limit store", "unlimited", error)
}

/// A wait in milliseconds, as configs write it.
fn millis(wait: Duration) -> u64 {
    u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)
}

/// How long a call waited for its turn since `arrived`, on its layer's span
/// (see [`otel`](crate::otel)): inside `around`, the current span is the layer's.
#[cfg(feature = "otel")]
fn record_wait(arrived: tokio::time::Instant) {
    tracing::Span::current().record(crate::otel::LIMIT_WAIT, arrived.elapsed().as_secs_f64());
}
