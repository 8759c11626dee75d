//! The seal of an approval: what was approved (the tool, a digest of its
//! arguments, the principal), until when, under which id, signed with HMAC-SHA256
//! under the operator's key. Every replica with the same key opens what any of
//! them sealed; a seal is readable (base64url JSON), not secret.

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::ApprovalError;
use crate::store::StoreError;

/// The seal's version, the first part of every seal: another one is refused.
const VERSION: &str = "tg1";

/// The operator's key for approvals: at least 32 bytes, the same on every
/// replica of a fleet. Its `Debug` shows no byte of it.
///
/// ```
/// use toolgraft::ext::approve::SealKey;
/// assert!(SealKey::new(vec![7; 32]).is_ok());
/// assert!(SealKey::new(b"short".to_vec()).is_err());
/// assert_eq!(format!("{:?}", SealKey::new(vec![7; 32])?), "SealKey(..)");
/// # Ok::<(), toolgraft::ext::approve::KeyTooShort>(())
/// ```
#[derive(Clone)]
pub struct SealKey(Arc<[u8]>);

/// A key of fewer than 32 bytes.
#[derive(Debug, thiserror::Error)]
#[error("an approval key needs at least {min} bytes, this one has {len}")]
pub struct KeyTooShort {
    /// The key's length.
    pub len: usize,
    /// The least.
    pub min: usize,
}

impl SealKey {
    /// The fewest bytes a key has.
    pub const MIN_LEN: usize = 32;

    /// A key of these bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, KeyTooShort> {
        let bytes = bytes.into();
        if bytes.len() < Self::MIN_LEN {
            return Err(KeyTooShort {
                len: bytes.len(),
                min: Self::MIN_LEN,
            });
        }
        Ok(Self(bytes.into()))
    }

    /// A key of 32 random bytes: for one process (replicas of a fleet need one
    /// key, given to each with [`SealKey::new`]).
    ///
    /// ```
    /// let key = toolgraft::ext::approve::SealKey::random()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn random() -> Result<Self, std::io::Error> {
        let mut bytes = vec![0u8; Self::MIN_LEN];
        getrandom::fill(&mut bytes).map_err(|error| std::io::Error::other(error.to_string()))?;
        Ok(Self(bytes.into()))
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes any key length")
    }

    /// Seals `approval` as a string to send to the caller.
    pub(crate) fn seal(&self, approval: &Sealed) -> String {
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(approval).unwrap_or_default());
        let signed = format!("{VERSION}.{payload}");
        let mut mac = self.mac();
        mac.update(signed.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{signed}.{tag}")
    }

    /// Opens a seal the caller sent back, for `subject` at `now`: its approval,
    /// or why not (tampered, for another call, expired). Not whether it was used.
    pub(crate) fn open(
        &self,
        seal: &str,
        subject: &Subject,
        now: u64,
    ) -> Result<Sealed, ApprovalError> {
        let tampered = |why: &str| ApprovalError::Tampered(why.to_owned());
        let mut parts = seal.splitn(3, '.');
        let (Some(version), Some(payload), Some(tag)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(tampered("not a seal"));
        };
        if version != VERSION {
            return Err(tampered("not a seal of this version"));
        }
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| tampered("its tag is not base64url"))?;
        let mut mac = self.mac();
        mac.update(version.as_bytes());
        mac.update(b".");
        mac.update(payload.as_bytes());
        // Constant time: the comparison tells nothing of the right tag.
        mac.verify_slice(&tag)
            .map_err(|_| tampered("its signature does not match"))?;
        let bytes = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| tampered("its payload is not base64url"))?;
        let sealed: Sealed = serde_json::from_slice(&bytes)
            .map_err(|_| tampered("its payload is not an approval"))?;
        if sealed.subject.tool != subject.tool {
            return Err(ApprovalError::Mismatched("another tool".to_owned()));
        }
        if sealed.subject.digest != subject.digest {
            return Err(ApprovalError::Mismatched("other arguments".to_owned()));
        }
        if sealed.subject.principal != subject.principal {
            return Err(ApprovalError::Mismatched("another caller".to_owned()));
        }
        if now >= sealed.expires {
            return Err(ApprovalError::Expired {
                ago: now - sealed.expires,
            });
        }
        Ok(sealed)
    }
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealKey(..)")
    }
}

/// What one approval is for: a tool, its arguments (by digest), a caller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Subject {
    pub tool: String,
    pub digest: String,
    pub principal: Option<String>,
}

impl Subject {
    /// The subject of a call of `tool` with `arguments` by `principal`. The
    /// digest is of the arguments with every object's keys sorted: the same
    /// arguments in another order are the same call.
    pub(crate) fn new(tool: &str, arguments: &Value, principal: Option<&str>) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(serde_json::to_vec(&canonical(arguments)).unwrap_or_default());
        let digest = crate::hex::hex(&hasher.finalize());
        Self {
            tool: tool.to_owned(),
            digest,
            principal: principal.map(str::to_owned),
        }
    }
}

fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            let sorted: Map<String, Value> = keys
                .into_iter()
                .map(|key| (key.clone(), canonical(&fields[key])))
                .collect();
            Value::Object(sorted)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// What a seal carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Sealed {
    pub id: String,
    #[serde(flatten)]
    pub subject: Subject,
    /// Unix seconds.
    pub expires: u64,
    /// Set on a continuation: the approval (its id) the user gave already, for
    /// a call whose inner layers asked their caller after it (see `rounds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<String>,
}

/// Unix seconds now.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// A new approval id: 128 random bits, hex.
pub(crate) fn new_id() -> Result<String, ApprovalError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| {
        ApprovalError::Ledger(StoreError::new(format_args!(
            "no randomness for an approval id: {error}"
        )))
    })?;
    Ok(crate::hex::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> SealKey {
        SealKey::new(*b"0123456789abcdef0123456789abcdef").unwrap()
    }

    fn sealed(subject: &Subject) -> Sealed {
        Sealed {
            granted: None,
            id: "a1".into(),
            subject: subject.clone(),
            expires: 1_000,
        }
    }

    #[test]
    fn a_seal_opens_for_its_subject_until_it_expires() {
        let subject = Subject::new(
            "delete",
            &json!({"path": "/a", "force": true}),
            Some("alice"),
        );
        let seal = key().seal(&sealed(&subject));
        assert_eq!(key().open(&seal, &subject, 999).unwrap(), sealed(&subject));
        // The same arguments in another order are the same call.
        let reordered = Subject::new(
            "delete",
            &json!({"force": true, "path": "/a"}),
            Some("alice"),
        );
        assert!(key().open(&seal, &reordered, 999).is_ok());
        assert!(matches!(
            key().open(&seal, &subject, 1_000),
            Err(ApprovalError::Expired { ago: 0 })
        ));
    }

    #[test]
    fn a_seal_for_another_call_or_under_another_key_is_refused() {
        let subject = Subject::new("delete", &json!({"path": "/a"}), Some("alice"));
        let seal = key().seal(&sealed(&subject));
        let other = |tool: &str, args: Value, principal: Option<&str>| {
            key()
                .open(&seal, &Subject::new(tool, &args, principal), 1)
                .unwrap_err()
                .to_string()
        };
        assert!(other("move", json!({"path": "/a"}), Some("alice")).contains("another tool"));
        assert!(other("delete", json!({"path": "/b"}), Some("alice")).contains("other arguments"));
        assert!(other("delete", json!({"path": "/a"}), Some("bob")).contains("another caller"));
        assert!(other("delete", json!({"path": "/a"}), None).contains("another caller"));
        let stranger = SealKey::new(vec![9; 32]).unwrap();
        assert!(matches!(
            stranger.open(&seal, &subject, 1),
            Err(ApprovalError::Tampered(_))
        ));
    }

    #[test]
    fn every_changed_byte_is_tampering() {
        let subject = Subject::new("delete", &json!({"path": "/a"}), None);
        let seal = key().seal(&sealed(&subject));
        for at in 0..seal.len() {
            let mut bytes = seal.clone().into_bytes();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            let changed = String::from_utf8(bytes).unwrap();
            assert!(
                key().open(&changed, &subject, 1).is_err(),
                "byte {at} changed: {changed}"
            );
        }
        // A seal re-signed for an expiry of the caller's choosing needs the key.
        let forged = Sealed {
            granted: None,
            expires: u64::MAX,
            ..sealed(&subject)
        };
        let mine = SealKey::new(vec![1; 32]).unwrap().seal(&forged);
        assert!(matches!(
            key().open(&mine, &subject, 1),
            Err(ApprovalError::Tampered(_))
        ));
        for junk in ["", "tg1", "tg1..", "tg2.e30.AAAA", "tg1.e30.!!!!"] {
            assert!(
                matches!(
                    key().open(junk, &subject, 1),
                    Err(ApprovalError::Tampered(_))
                ),
                "{junk}"
            );
        }
    }
}
