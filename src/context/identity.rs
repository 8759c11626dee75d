//! [`Identity`]: who the caller is, as the server in front proved it (a checked
//! OAuth access token, an entry of a table of static tokens): richer than the
//! [`Principal`](super::Principal) name, and what access policies read.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Entry, Serialized, Unkeyed};

/// Who a call is for, as the server in front authenticated it: the subject, the
/// issuer that vouched for it, the scopes granted, and the claims the operator
/// chose to keep (a tenant, roles). What [policies](crate::access) decide on.
///
/// It travels to worker processes, serialized, as the principal does, so a check
/// made there sees the same caller. A cache does not key on it (it keys on the
/// [`Principal`](super::Principal) the server sets beside it): two tokens of one
/// caller share answers, and the rule `shared-answers-inside-authorization` keeps
/// every cache inside the checks that decide who may have them.
///
/// ```
/// use toolgraft::context::{self, Identity};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let alice = Identity::new("alice")
///     .with_issuer("https://auth.example.com")
///     .with_scopes(["notes:write", "tools:read", "tools:read"])
///     .with_claim("tenant", "acme");
/// assert_eq!(alice.scopes(), ["notes:write", "tools:read"]);
/// assert!(alice.has_scope("tools:read") && !alice.has_scope("admin"));
/// assert_eq!(alice.claim("tenant"), Some(&serde_json::json!("acme")));
///
/// let seen = context::with(alice, async { context::get::<Identity>() }).await;
/// assert_eq!(seen.unwrap().subject(), "alice");
/// # }
/// ```
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    subject: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    issuer: Option<Arc<str>>,
    /// Sorted and without repeats: looked up by binary search (sorted again
    /// when read, whoever wrote it).
    #[serde(
        default,
        skip_serializing_if = "<[_]>::is_empty",
        deserialize_with = "sorted_scopes"
    )]
    scopes: Arc<[Arc<str>]>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    claims: Arc<Map<String, Value>>,
}

impl Identity {
    /// The caller `subject` (a token's `sub`, a static token's name), with no
    /// issuer, scope or claim yet.
    pub fn new(subject: impl Into<Arc<str>>) -> Self {
        Self {
            subject: subject.into(),
            issuer: None,
            scopes: Arc::from([]),
            claims: Arc::default(),
        }
    }

    /// Who vouched for the subject (a token's `iss`).
    pub fn with_issuer(mut self, issuer: impl Into<Arc<str>>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// The scopes granted (a token's `scope`, split on spaces), kept sorted and
    /// without repeats.
    pub fn with_scopes<S: Into<Arc<str>>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        let mut scopes: Vec<Arc<str>> = scopes.into_iter().map(Into::into).collect();
        scopes.sort_unstable();
        scopes.dedup();
        self.scopes = scopes.into();
        self
    }

    /// One more claim the operator keeps (`tenant`, `roles`).
    pub fn with_claim(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        Arc::make_mut(&mut self.claims).insert(name.into(), value.into());
        self
    }

    /// The subject.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The issuer, when known.
    pub fn issuer(&self) -> Option<&str> {
        self.issuer.as_deref()
    }

    /// The scopes granted, sorted.
    pub fn scopes(&self) -> Vec<&str> {
        self.scopes.iter().map(|scope| &**scope).collect()
    }

    /// Whether `scope` was granted.
    ///
    /// ```
    /// # use toolgraft::context::Identity;
    /// assert!(Identity::new("a").with_scopes(["x"]).has_scope("x"));
    /// ```
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes
            .binary_search_by(|held| (**held).cmp(scope))
            .is_ok()
    }

    /// The claim `name`, when kept.
    pub fn claim(&self, name: &str) -> Option<&Value> {
        self.claims.get(name)
    }

    /// Every claim kept.
    pub fn claims(&self) -> &Map<String, Value> {
        &self.claims
    }
}

/// Scopes as [`Identity::with_scopes`] keeps them, from the wire.
fn sorted_scopes<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Arc<[Arc<str>]>, D::Error> {
    let scopes = Vec::<Arc<str>>::deserialize(deserializer)?;
    Ok(Identity::new("").with_scopes(scopes).scopes)
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("subject", &self.subject)
            .field("issuer", &self.issuer)
            .field("scopes", &self.scopes)
            .field("claims", &self.claims.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Entry for Identity {
    const NAME: &'static str = "toolgraft.identity";
    type Travel = Serialized;
    type Key = Unkeyed;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_crosses_a_process_as_it_was() {
        let alice = Identity::new("alice")
            .with_issuer("https://as")
            .with_scopes(["b", "a"])
            .with_claim("roles", serde_json::json!(["admin"]));
        let wire = serde_json::to_string(&alice).unwrap();
        let back: Identity = serde_json::from_str(&wire).unwrap();
        assert_eq!(back, alice);
        assert!(back.has_scope("a") && back.has_scope("b") && !back.has_scope("c"));
        let unsorted: Identity =
            serde_json::from_str(r#"{"subject":"c","scopes":["z","a","z"]}"#).unwrap();
        assert_eq!(unsorted.scopes(), ["a", "z"]);
        assert!(unsorted.has_scope("z"));
        let bare: Identity = serde_json::from_str(r#"{"subject":"bob"}"#).unwrap();
        assert_eq!(bare, Identity::new("bob"));
    }
}
