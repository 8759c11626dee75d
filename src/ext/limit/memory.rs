//! The in-process [`LimitStore`]: governor's GCRA per key, and permit counts,
//! in this process's memory and bounded in keys.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use governor::clock::Clock;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use super::{Admission, Lease, LimitKey, LimitStore, Rate};
use crate::store::{StoreError, StoreFuture};

/// A store's key in memory: the first half of the key's digest.
type Slot = [u8; 16];

fn slot(key: &LimitKey) -> Slot {
    let digest = key.digest();
    let mut slot = [0; 16];
    slot.copy_from_slice(&digest[..16]);
    slot
}

/// governor's clock on tokio's: a paused test clock moves the limits too.
#[derive(Clone, Copy, Debug, Default)]
struct TokioClock;

impl Clock for TokioClock {
    type Instant = std::time::Instant;

    fn now(&self) -> std::time::Instant {
        tokio::time::Instant::now().into_std()
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock>;

/// One key's rate: its GCRA state, the rate it was made for, and its
/// theoretical arrival time (TAT), kept beside governor's (which it does not
/// show). Once the TAT is not after now the key's state is the same as a new
/// one's, whatever the burst, and the key may go: a burst only says how far
/// ahead of now a TAT may run, not how long a key is remembered.
#[derive(Debug)]
struct Tracked {
    limiter: Limiter,
    rate: Rate,
    tat: std::time::Instant,
}

/// The default [`LimitStore`]: this process's memory. Rates are governor's
/// GCRA, one state per key; permits are counts per key.
///
/// It tracks at most `max_keys` rate keys (10,000 unless
/// [`with_max_keys`](MemoryLimits::with_max_keys) says): a key whose state is the same as
/// a new one's (its theoretical arrival time has come: one interval after a
/// single call, whatever the burst) is forgotten first, and when every tracked
/// key is still live a new key is refused (`Overloaded`, with a `retry_after`
/// of when the first of them will be fresh), so a caller that makes up
/// principals cannot grow the process's memory. Permit counts exist only
/// while calls hold them.
///
/// ```
/// use std::time::Duration;
/// use toolgraft::Name;
/// use toolgraft::context::Principal;
/// use toolgraft::ext::limit::{Admission, LimitKey, LimitStore, MemoryLimits, Rate};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryLimits::new().with_max_keys(1);
/// let rate = Rate::new(1, Duration::from_secs(1))?;
/// let key = |who: &str| LimitKey::new(Name::new("x_rate_limit").unwrap(), Some(Principal::new(who)));
/// assert!(store.admit(&key("alice"), rate).await?.is_admitted());
/// assert!(store.admit(&key("mallory"), rate).await.is_err(), "full of live keys");
/// tokio::time::sleep(Duration::from_secs(1)).await;
/// assert!(store.admit(&key("mallory"), rate).await?.is_admitted(), "alice's was forgotten");
/// assert_eq!(store.tracked(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MemoryLimits {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    max_keys: usize,
    rates: Mutex<HashMap<Slot, Tracked>>,
    permits: Mutex<HashMap<Slot, u32>>,
    leases: AtomicU64,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryLimits {
    /// How many rate keys a store tracks unless told.
    pub const DEFAULT_MAX_KEYS: usize = 10_000;

    /// An empty store, of at most [`DEFAULT_MAX_KEYS`](Self::DEFAULT_MAX_KEYS)
    /// rate keys.
    ///
    /// ```
    /// assert_eq!(toolgraft::ext::limit::MemoryLimits::new().tracked(), 0);
    /// ```
    pub fn new() -> Self {
        Self::sized(Self::DEFAULT_MAX_KEYS)
    }

    fn sized(max_keys: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                max_keys: max_keys.clamp(1, super::MAX_KEYS),
                rates: Mutex::default(),
                permits: Mutex::default(),
                leases: AtomicU64::new(0),
            }),
        }
    }

    /// A new store of at most `max_keys` rate keys (1 to
    /// [`MAX_KEYS`](super::MAX_KEYS)).
    ///
    /// ```
    /// let store = toolgraft::ext::limit::MemoryLimits::new().with_max_keys(100);
    /// # let _ = store;
    /// ```
    pub fn with_max_keys(self, max_keys: usize) -> Self {
        Self::sized(max_keys)
    }

    /// How many rate keys it tracks now.
    pub fn tracked(&self) -> usize {
        self.inner
            .rates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn admit_now(&self, key: &LimitKey, rate: Rate) -> Result<Admission, StoreError> {
        let clock = TokioClock;
        let now = clock.now();
        let mut rates = self
            .inner
            .rates
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let slot = slot(key);
        if !rates.contains_key(&slot) && rates.len() >= self.inner.max_keys {
            rates.retain(|_, tracked| tracked.tat > now);
            if rates.len() >= self.inner.max_keys {
                rates.shrink_to_fit();
                // Every key left is live; the first to be fresh makes room.
                let room_at = rates.values().map(|tracked| tracked.tat).min();
                let error = StoreError::new(format!(
                    "{} distinct callers are being limited at once, the most this store tracks",
                    self.inner.max_keys
                ));
                return Err(match room_at {
                    Some(at) => error.with_retry_after(at.saturating_duration_since(now)),
                    None => error,
                });
            }
        }
        let tracked = rates
            .entry(slot)
            .and_modify(|tracked| {
                if tracked.rate != rate {
                    *tracked = Tracked::new(rate, now);
                }
            })
            .or_insert_with(|| Tracked::new(rate, now));
        match tracked.limiter.check() {
            Ok(()) => {
                // GCRA: an admitted call moves the TAT one interval on from
                // itself, or from now when the key was quiet.
                tracked.tat = tracked.tat.max(now) + rate.interval();
                Ok(Admission::Admitted)
            }
            Err(not_until) => Ok(Admission::Refused {
                retry_after: not_until.wait_time_from(now),
            }),
        }
    }

    fn acquire_now(&self, key: &LimitKey, max: u32) -> Option<Lease> {
        let mut permits = self
            .inner
            .permits
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let taken = permits.entry(slot(key)).or_insert(0);
        if *taken >= max {
            return None;
        }
        *taken += 1;
        let id = self.inner.leases.fetch_add(1, Ordering::Relaxed);
        Some(Lease::new(key.clone(), id.to_string()))
    }

    fn release_now(&self, lease: &Lease) {
        let mut permits = self
            .inner
            .permits
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let slot = slot(lease.key());
        if let Some(taken) = permits.get_mut(&slot) {
            *taken = taken.saturating_sub(1);
            if *taken == 0 {
                permits.remove(&slot);
            }
        }
    }

    /// How many permits of `key` are taken now.
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolgraft::Name;
    /// use toolgraft::ext::limit::{LimitKey, LimitStore, MemoryLimits};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = MemoryLimits::new();
    /// let key = LimitKey::new(Name::new("x_concurrency")?, None);
    /// let lease = store.acquire(&key, 2, Duration::from_secs(30)).await?.expect("a permit");
    /// assert_eq!(store.taken(&key), 1);
    /// store.release(lease).await?;
    /// assert_eq!(store.taken(&key), 0);
    /// # Ok(()) }
    /// ```
    pub fn taken(&self, key: &LimitKey) -> u32 {
        self.inner
            .permits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&slot(key))
            .copied()
            .unwrap_or(0)
    }
}

impl Tracked {
    fn new(rate: Rate, now: std::time::Instant) -> Self {
        // A `Rate` spaces calls at least 1 µs apart: never a zero period. This
        // quota is GCRA with the rate's interval and tolerance (`interval ×
        // (burst − 1)`), as a fleet's store runs it: the rate says the rule.
        let quota = Quota::with_period(rate.interval())
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
            .allow_burst(rate.burst_nonzero());
        Self {
            limiter: RateLimiter::new(quota, InMemoryState::default(), TokioClock),
            rate,
            tat: now,
        }
    }
}

impl LimitStore for MemoryLimits {
    fn admit<'a>(&'a self, key: &'a LimitKey, rate: Rate) -> StoreFuture<'a, Admission> {
        let answer = self.admit_now(key, rate);
        Box::pin(std::future::ready(answer))
    }

    fn acquire<'a>(
        &'a self,
        key: &'a LimitKey,
        max: u32,
        _ttl: Duration,
    ) -> StoreFuture<'a, Option<Lease>> {
        // A process's permits go with it: no lease outlives its call.
        let lease = self.acquire_now(key, max);
        Box::pin(std::future::ready(Ok(lease)))
    }

    fn renew<'a>(&'a self, _lease: &'a Lease, _ttl: Duration) -> StoreFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(true)))
    }

    fn release(&self, lease: Lease) -> StoreFuture<'static, ()> {
        self.release_now(&lease);
        Box::pin(std::future::ready(Ok(())))
    }
}
