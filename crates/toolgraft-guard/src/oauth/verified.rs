//! The tokens already verified, so that a client's next request with the same
//! token (every request of a session carries it) costs a lookup, not a
//! signature check: an RSA signature takes tens of microseconds, an ECDSA one
//! hundreds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use super::keys::{Key, KeyCache};
use crate::authenticated::Authenticated;

/// The most tokens kept: about 4 MiB of tokens at their largest.
const CAPACITY: usize = 512;

/// The longest a verified token is taken without a fresh check: a key the
/// issuer withdraws (a compromised one) stops serving within this, as a
/// refresh of the key set would notice it.
const MAX_KEPT: Duration = Duration::from_secs(60);

/// Verified tokens, each until the earlier of its expiry and [`MAX_KEPT`], and
/// while the key that verified it is still among the issuer's.
#[derive(Default)]
pub(super) struct VerifiedCache {
    // Keyed by the whole token: an entry is found only by the token itself,
    // with the map's own keyed hash.
    tokens: Mutex<HashMap<Box<str>, Verified>>,
}

/// One verified token: as whom, until when, and by which key.
struct Verified {
    who: Authenticated,
    until: Instant,
    kid: Option<Box<str>>,
    key: Arc<Key>,
}

impl VerifiedCache {
    /// What `token` was verified as, if it was, is still good, and the key that
    /// verified it is still the one `keys` holds for its id (a rotated-out key's
    /// tokens go with it).
    pub(super) fn get(&self, token: &str, keys: &KeyCache) -> Option<Authenticated> {
        let tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        let verified = tokens.get(token)?;
        let current = keys.cached(verified.kid.as_deref())?;
        (Instant::now() < verified.until && Arc::ptr_eq(&current, &verified.key))
            .then(|| verified.who.clone())
    }

    /// Keeps `token` as verified as `who` by `key` (named `kid`).
    pub(super) fn put(&self, token: &str, who: &Authenticated, kid: Option<&str>, key: Arc<Key>) {
        let left = who.expires_at().map_or(MAX_KEPT, |at| {
            at.duration_since(SystemTime::now()).unwrap_or_default()
        });
        let now = Instant::now();
        let until = now + left.min(MAX_KEPT);
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        if tokens.len() >= CAPACITY {
            tokens.retain(|_, verified| now < verified.until);
            if tokens.len() >= CAPACITY {
                // Full of live tokens: start over rather than grow (a flood of
                // valid tokens is rare, and each costs one check again).
                tokens.clear();
            }
        }
        let verified = Verified {
            who: who.clone(),
            until,
            kid: kid.map(Into::into),
            key,
        };
        tokens.insert(token.into(), verified);
    }
}
