//! Where `once` keeps what it claimed and what each call answered: the
//! [`OutcomeStore`] trait, its key, and the store in this process's memory.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::Name;
use crate::context::Principal;
use crate::store::{StoreError, StoreFuture};

/// What a call is remembered by: its caller, the layer it calls and its key.
/// Two calls with the same three are the same call, answered once.
///
/// ```
/// use toolgraft::Name;
/// use toolgraft::context::Principal;
/// use toolgraft::ext::once::OutcomeKey;
/// let alice = OutcomeKey::new(Some(Principal::new("alice")), Name::new("pay")?, "key:order-7");
/// let bob = OutcomeKey::new(Some(Principal::new("bob")), Name::new("pay")?, "key:order-7");
/// assert_ne!(alice.digest(), bob.digest(), "one caller's key never answers another");
/// assert_eq!(alice.digest().len(), 64);
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug)]
pub struct OutcomeKey {
    principal: Option<Principal>,
    tool: Name,
    key: String,
    /// Made once, when a store first asks: every store operation of a call
    /// keys by it (the memory store by the three parts themselves).
    digest: OnceLock<String>,
}

impl PartialEq for OutcomeKey {
    fn eq(&self, other: &Self) -> bool {
        (&self.principal, &self.tool, &self.key) == (&other.principal, &other.tool, &other.key)
    }
}

impl Eq for OutcomeKey {}

impl std::hash::Hash for OutcomeKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.principal, &self.tool, &self.key).hash(state);
    }
}

impl OutcomeKey {
    /// The call of `tool` by `principal` (`None`: a caller nothing in front
    /// named, and every such caller shares one namespace) with `key`.
    pub fn new(principal: Option<Principal>, tool: Name, key: impl Into<String>) -> Self {
        Self {
            principal,
            tool,
            key: key.into(),
            digest: OnceLock::new(),
        }
    }

    /// The caller.
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    /// The layer called.
    pub fn tool(&self) -> &Name {
        &self.tool
    }

    /// The key, with where it came from as its prefix (`key:`, `retry:`, `job:`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// SHA-256 of the three, as 64 hex digits: what a store keys by, whatever
    /// their lengths. Each part is length-prefixed, so no two keys share one.
    pub fn digest(&self) -> &str {
        self.digest
            .get_or_init(|| digest_of(self.principal.as_ref(), &self.tool, &self.key))
    }
}

fn digest_of(principal: Option<&Principal>, tool: &Name, key: &str) -> String {
    let mut hash = Sha256::new();
    // A caller nothing named is not the caller named "".
    hash.update([u8::from(principal.is_some())]);
    for part in [principal.map_or("", Principal::as_str), tool.as_str(), key] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    crate::hex::hex(&hash.finalize())
}

/// What a store answers when `once` claims a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// No call with the key is known: this one runs, and its outcome is
    /// recorded (or the claim released).
    Granted,
    /// A call with the key answered this (what [`OutcomeStore::record`] was given).
    Answered(String),
    /// A call with the key is running; its claim lasts `left` more.
    Running {
        /// How long its claim lasts.
        left: Duration,
    },
    /// A call with the key started and its claim passed with no outcome
    /// recorded: its process died, or it never finished.
    Lapsed,
}

/// Where [`OncePerKey`](super::OncePerKey) keeps its claims and outcomes: this process's
/// memory ([`MemoryOutcomes`], the default), or a store a fleet's workers share
/// (`toolgraft_jobs::JobOutcomes`, in the job engine's own database), so that a
/// job run again on another worker finds the outcome of the first run.
///
/// Every answer must be atomic in the store: two calls claiming one key at once
/// never both get [`Claim::Granted`]. An `Err` refuses the call: `once` never
/// runs a call it could not claim.
///
/// ```
/// use std::time::Duration;
/// use toolgraft::Name;
/// use toolgraft::ext::once::{Claim, MemoryOutcomes, OutcomeKey, OutcomeStore};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryOutcomes::default();
/// let key = OutcomeKey::new(None, Name::new("pay")?, "key:order-7");
/// let (lease, keep) = (Duration::from_secs(60), Duration::from_secs(3600));
/// assert_eq!(store.claim(&key, lease, keep).await?, Claim::Granted);
/// assert_eq!(store.claim(&key, lease, keep).await?, Claim::Running { left: lease });
/// store.record(&key, r#"{"ok":"paid"}"#, keep).await?;
/// assert_eq!(store.claim(&key, lease, keep).await?, Claim::Answered(r#"{"ok":"paid"}"#.into()));
/// # Ok(()) }
/// ```
pub trait OutcomeStore: fmt::Debug + Send + Sync + 'static {
    /// Claims `key` for a call about to run, for `lease`: [`Claim::Granted`]
    /// when nothing is known of it, otherwise what is. A granted claim, its
    /// outcome and a lapsed one are kept for `keep` from now; after that the
    /// key is forgotten.
    fn claim<'a>(
        &'a self,
        key: &'a OutcomeKey,
        lease: Duration,
        keep: Duration,
    ) -> StoreFuture<'a, Claim>;

    /// Records `outcome` as the answer of the call that claimed `key`, kept for
    /// `keep` from now: every later claim of the key answers it.
    fn record<'a>(
        &'a self,
        key: &'a OutcomeKey,
        outcome: &'a str,
        keep: Duration,
    ) -> StoreFuture<'a, ()>;

    /// Forgets the claim of `key`: the call failed in a way that says trying
    /// again is safe, so the next claim is granted.
    fn release<'a>(&'a self, key: &'a OutcomeKey) -> StoreFuture<'a, ()>;
}

impl<T: OutcomeStore + ?Sized> OutcomeStore for std::sync::Arc<T> {
    fn claim<'a>(
        &'a self,
        key: &'a OutcomeKey,
        lease: Duration,
        keep: Duration,
    ) -> StoreFuture<'a, Claim> {
        (**self).claim(key, lease, keep)
    }

    fn record<'a>(
        &'a self,
        key: &'a OutcomeKey,
        outcome: &'a str,
        keep: Duration,
    ) -> StoreFuture<'a, ()> {
        (**self).record(key, outcome, keep)
    }

    fn release<'a>(&'a self, key: &'a OutcomeKey) -> StoreFuture<'a, ()> {
        (**self).release(key)
    }
}

/// `now` plus `wait`, or a century from now when that overflows (a caller's
/// `Duration::MAX`).
fn later(now: Instant, wait: Duration) -> Instant {
    now.checked_add(wait)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}

/// One key's state in memory.
#[derive(Debug)]
enum Held {
    Claimed { until: Instant },
    Answered(String),
}

#[derive(Debug)]
struct Entry {
    held: Held,
    expires: Instant,
}

/// The default [`OutcomeStore`]: this process's memory, at most `capacity`
/// keys (100,000 unless [`new`](MemoryOutcomes::new) says) and at most
/// `max_bytes` of keys and answers (256 MiB unless
/// [`with_max_bytes`](MemoryOutcomes::with_max_bytes) says). Expired keys go
/// first when it is full; full of live ones, a claim is refused (the call is
/// refused, transiently, never run unclaimed) and an answer is not kept (the
/// call's caller has it; a repeat is refused as unfinished). Put a
/// `rate_limit` per caller outside `once` where callers may mint keys without
/// end. For one process: a fleet whose workers may run a job again needs a
/// store they share.
#[derive(Debug)]
pub struct MemoryOutcomes {
    book: Mutex<Book>,
    capacity: usize,
    max_bytes: usize,
}

/// What the store holds, and what it knows without looking at every key.
#[derive(Debug, Default)]
struct Book {
    held: HashMap<OutcomeKey, Entry>,
    /// The bytes of the keys and answers held.
    bytes: usize,
    /// No key expires before this: a full store of live keys refuses without
    /// looking at each (a caller filling it makes no claim slower).
    soonest: Option<Instant>,
}

/// What a key costs beyond its strings: the map's and the entry's own.
const ENTRY_OVERHEAD: usize = 128;

fn cost(key: &OutcomeKey, held: &Held) -> usize {
    let answer = match held {
        Held::Answered(outcome) => outcome.len(),
        Held::Claimed { .. } => 0,
    };
    let principal = key
        .principal()
        .map_or(0, |principal| principal.as_str().len());
    ENTRY_OVERHEAD + principal + key.tool().as_str().len() + key.key().len() + answer
}

impl Book {
    /// Makes room for `more` bytes and one more key, purging expired keys if
    /// that is what it takes; `Err` with when the first live one goes when no
    /// purge can.
    fn room(
        &mut self,
        now: Instant,
        more: usize,
        capacity: usize,
        max_bytes: usize,
    ) -> Result<(), Option<Instant>> {
        let fits = |book: &Book| book.held.len() < capacity && book.bytes + more <= max_bytes;
        if fits(self) {
            return Ok(());
        }
        if self.soonest.is_some_and(|soonest| soonest > now) {
            return Err(self.soonest);
        }
        let mut bytes = 0;
        self.held.retain(|key, entry| {
            let live = entry.expires > now;
            if live {
                bytes += cost(key, &entry.held);
            }
            live
        });
        self.bytes = bytes;
        self.soonest = self.held.values().map(|entry| entry.expires).min();
        if fits(self) {
            Ok(())
        } else {
            Err(self.soonest)
        }
    }

    fn put(&mut self, key: &OutcomeKey, entry: Entry) {
        self.bytes += cost(key, &entry.held);
        self.soonest = Some(
            self.soonest
                .map_or(entry.expires, |soonest| soonest.min(entry.expires)),
        );
        if let Some(old) = self.held.insert(key.clone(), entry) {
            self.bytes = self.bytes.saturating_sub(cost(key, &old.held));
        }
    }
}

impl MemoryOutcomes {
    /// A store of at most `capacity` keys.
    ///
    /// ```
    /// let store = toolgraft::ext::once::MemoryOutcomes::new(1_000);
    /// assert_eq!(store.len(), 0);
    /// ```
    pub fn new(capacity: usize) -> Self {
        Self {
            book: Mutex::default(),
            capacity,
            max_bytes: 256 << 20,
        }
    }

    /// This store, holding at most `max_bytes` of keys and answers.
    ///
    /// ```
    /// let store = toolgraft::ext::once::MemoryOutcomes::new(1_000).with_max_bytes(16 << 20);
    /// # let _ = store;
    /// ```
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// How many keys it holds now, expired ones not yet purged included.
    pub fn len(&self) -> usize {
        self.book().held.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn full(&self, now: Instant, first: Option<Instant>) -> StoreError {
        let error = StoreError::new(format_args!(
            "the outcome store is full of live keys (at most {} keys, {} bytes)",
            self.capacity, self.max_bytes
        ));
        match first {
            Some(first) => error.with_retry_after(first.saturating_duration_since(now)),
            None => error,
        }
    }

    fn claim_now(
        &self,
        key: &OutcomeKey,
        lease: Duration,
        keep: Duration,
    ) -> Result<Claim, StoreError> {
        let now = Instant::now();
        let mut book = self.book();
        if let Some(entry) = book.held.get(key).filter(|entry| entry.expires > now) {
            return Ok(match &entry.held {
                Held::Answered(outcome) => Claim::Answered(outcome.clone()),
                Held::Claimed { until } if *until > now => Claim::Running { left: *until - now },
                Held::Claimed { .. } => Claim::Lapsed,
            });
        }
        let claimed = Held::Claimed {
            until: later(now, lease),
        };
        if !book.held.contains_key(key) {
            book.room(now, cost(key, &claimed), self.capacity, self.max_bytes)
                .map_err(|first| self.full(now, first))?;
        }
        book.put(
            key,
            Entry {
                held: claimed,
                expires: later(now, keep.max(lease)),
            },
        );
        Ok(Claim::Granted)
    }

    fn record_now(
        &self,
        key: &OutcomeKey,
        outcome: &str,
        keep: Duration,
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut book = self.book();
        let answered = Held::Answered(outcome.to_owned());
        let more = cost(key, &answered)
            .saturating_sub(book.held.get(key).map_or(0, |entry| cost(key, &entry.held)));
        book.room(now, more, self.capacity.saturating_add(1), self.max_bytes)
            .map_err(|first| self.full(now, first))?;
        book.put(
            key,
            Entry {
                held: answered,
                expires: later(now, keep),
            },
        );
        Ok(())
    }
}

impl Default for MemoryOutcomes {
    /// 100,000 keys, 256 MiB.
    fn default() -> Self {
        Self::new(100_000)
    }
}

impl OutcomeStore for MemoryOutcomes {
    fn claim<'a>(
        &'a self,
        key: &'a OutcomeKey,
        lease: Duration,
        keep: Duration,
    ) -> StoreFuture<'a, Claim> {
        let answer = self.claim_now(key, lease, keep);
        Box::pin(async move { answer })
    }

    fn record<'a>(
        &'a self,
        key: &'a OutcomeKey,
        outcome: &'a str,
        keep: Duration,
    ) -> StoreFuture<'a, ()> {
        let answer = self.record_now(key, outcome, keep);
        Box::pin(async move { answer })
    }

    fn release<'a>(&'a self, key: &'a OutcomeKey) -> StoreFuture<'a, ()> {
        let mut book = self.book();
        if let Some(entry) = book.held.get(key)
            && matches!(entry.held, Held::Claimed { .. })
        {
            let gone = cost(key, &entry.held);
            book.held.remove(key);
            book.bytes = book.bytes.saturating_sub(gone);
        }
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> OutcomeKey {
        OutcomeKey::new(None, Name::unchecked("pay"), name)
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_lapses_after_its_lease_and_the_key_goes_after_keep() {
        let store = MemoryOutcomes::default();
        let (lease, keep) = (Duration::from_secs(10), Duration::from_secs(100));
        assert_eq!(
            store.claim(&key("a"), lease, keep).await.unwrap(),
            Claim::Granted
        );
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(
            store.claim(&key("a"), lease, keep).await.unwrap(),
            Claim::Lapsed
        );
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(
            store.claim(&key("a"), lease, keep).await.unwrap(),
            Claim::Granted
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_released_claim_is_granted_again_but_an_answer_is_not_released() {
        let store = MemoryOutcomes::default();
        let (lease, keep) = (Duration::from_secs(10), Duration::from_secs(100));
        store.claim(&key("a"), lease, keep).await.unwrap();
        store.release(&key("a")).await.unwrap();
        assert_eq!(
            store.claim(&key("a"), lease, keep).await.unwrap(),
            Claim::Granted
        );
        store.record(&key("a"), "done", keep).await.unwrap();
        store.release(&key("a")).await.unwrap();
        assert_eq!(
            store.claim(&key("a"), lease, keep).await.unwrap(),
            Claim::Answered("done".into())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn full_of_live_keys_it_refuses_and_says_when_one_goes() {
        let store = MemoryOutcomes::new(2);
        let (lease, keep) = (Duration::from_secs(10), Duration::from_secs(100));
        store.claim(&key("a"), lease, keep).await.unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        store.claim(&key("b"), lease, keep).await.unwrap();
        let refused = store.claim(&key("c"), lease, keep).await.unwrap_err();
        assert_eq!(refused.retry_after(), Some(Duration::from_secs(99)));
        tokio::time::advance(Duration::from_secs(99)).await;
        assert_eq!(
            store.claim(&key("c"), lease, keep).await.unwrap(),
            Claim::Granted
        );
        assert_eq!(store.len(), 2, "the expired key was purged");
    }

    #[tokio::test(start_paused = true)]
    async fn answers_beyond_its_bytes_are_not_kept_and_expired_ones_make_room() {
        let store = MemoryOutcomes::new(100).with_max_bytes(4 * ENTRY_OVERHEAD + 3_000);
        let (lease, keep) = (Duration::from_secs(10), Duration::from_secs(100));
        let big = "x".repeat(2_000);
        store.claim(&key("a"), lease, keep).await.unwrap();
        store.record(&key("a"), &big, keep).await.unwrap();
        store.claim(&key("b"), lease, keep).await.unwrap();
        let refused = store.record(&key("b"), &big, keep).await.unwrap_err();
        assert!(refused.message().contains("full"), "{}", refused.message());
        tokio::time::advance(Duration::from_secs(101)).await;
        store.claim(&key("c"), lease, keep).await.unwrap();
        store.record(&key("c"), &big, keep).await.unwrap();
    }
}
