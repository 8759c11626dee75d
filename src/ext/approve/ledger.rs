//! Which approvals were used: each is good for one call. A fleet shares one
//! ledger (a store every replica reaches) the way it shares the key.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::store::{StoreError, StoreFuture};

/// Where used approvals are written down, until they expire.
///
/// ```
/// use toolgraft::ext::approve::{Ledger, MemoryLedger};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let ledger = MemoryLedger::new(100);
/// assert_eq!(ledger.redeem("a1", 60, 0).await, Ok(true));
/// assert_eq!(ledger.redeem("a1", 60, 1).await, Ok(false), "used once");
/// # }
/// ```
pub trait Ledger: Send + Sync + 'static {
    /// Writes approval `id` down as used until `expires` (unix seconds), at
    /// `now`: `Ok(true)` the first time, `Ok(false)` when it was used already,
    /// an error when the ledger cannot say (the call is refused then).
    fn redeem(&self, id: &str, expires: u64, now: u64) -> StoreFuture<'_, bool>;
}

/// A ledger in this process's memory, of at most `capacity` live approvals:
/// for one replica (a fleet needs a ledger every replica shares). Expired ones
/// are forgotten; when it is full of live ones, a redemption is refused.
#[derive(Debug)]
pub struct MemoryLedger {
    used: Mutex<HashMap<String, u64>>,
    capacity: usize,
}

impl MemoryLedger {
    /// A ledger of at most `capacity` live approvals.
    pub fn new(capacity: usize) -> Self {
        Self {
            used: Mutex::default(),
            capacity,
        }
    }
}

impl Default for MemoryLedger {
    /// 100,000 live approvals.
    fn default() -> Self {
        Self::new(100_000)
    }
}

impl Ledger for MemoryLedger {
    fn redeem(&self, id: &str, expires: u64, now: u64) -> StoreFuture<'_, bool> {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        let answer = if used.contains_key(id) {
            Ok(false)
        } else {
            if used.len() >= self.capacity {
                used.retain(|_, until| *until > now);
            }
            if used.len() >= self.capacity {
                Err(StoreError::new(format_args!(
                    "the approval ledger holds {} live approvals, its capacity",
                    self.capacity
                )))
            } else {
                used.insert(id.to_owned(), expires);
                Ok(true)
            }
        };
        Box::pin(std::future::ready(answer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_ledger_forgets_the_expired_and_refuses_when_all_are_live() {
        let ledger = MemoryLedger::new(2);
        assert_eq!(ledger.redeem("a", 10, 0).await, Ok(true));
        assert_eq!(ledger.redeem("b", 20, 0).await, Ok(true));
        assert!(
            ledger
                .redeem("c", 30, 5)
                .await
                .unwrap_err()
                .message()
                .contains("capacity")
        );
        // At 15 `a` has expired: its place is free, and `b` is still used.
        assert_eq!(ledger.redeem("c", 30, 15).await, Ok(true));
        assert_eq!(ledger.redeem("b", 20, 15).await, Ok(false));
    }
}
