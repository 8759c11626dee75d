//! [`Authenticated`]: who the caller is, as far as the guard learned it.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Map, Value};

/// Who sent a request the guard let through: put in the request's extensions by
/// [`GuardLayer`](crate::GuardLayer) when the guard knows identities (a
/// [`TokenTable`](crate::TokenTable), or an OAuth
/// `ResourceServer`, feature `oauth`), so the service behind reads it with
/// `request.extensions().get::<Authenticated>()`.
///
/// [`Guard::off`](crate::Guard::off) and [`Guard::bearer`](crate::Guard::bearer)
/// insert none: one token shared by every client names nobody, and the static path
/// stays as cheap as it was. No `Authenticated` therefore means "not known", never
/// "anonymous but allowed everything".
///
/// Cloning is cheap (one reference count): the layer clones it into every request.
///
/// ```
/// use toolgraft_guard::Authenticated;
/// let who = Authenticated::new("alice")
///     .with_issuer("https://auth.example.com")
///     .with_scopes(["tools:write", "tools:read", "tools:read"]);
/// assert_eq!(who.subject(), "alice");
/// assert_eq!(who.scopes(), ["tools:read", "tools:write"]); // sorted, deduplicated
/// assert!(who.has_scope("tools:read"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Authenticated(Arc<Identity>);

#[derive(Clone, Debug, PartialEq)]
struct Identity {
    subject: String,
    issuer: Option<String>,
    scopes: Vec<String>,
    claims: Map<String, Value>,
    expires_at: Option<SystemTime>,
}

impl Authenticated {
    /// An identity with a subject and nothing else: no issuer, no scopes, no
    /// claims, no expiry.
    ///
    /// ```
    /// let who = toolgraft_guard::Authenticated::new("ci-bot");
    /// assert!(who.scopes().is_empty() && who.issuer().is_none());
    /// ```
    pub fn new(subject: impl Into<String>) -> Self {
        Self(Arc::new(Identity {
            subject: subject.into(),
            issuer: None,
            scopes: Vec::new(),
            claims: Map::new(),
            expires_at: None,
        }))
    }

    fn edit(mut self, edit: impl FnOnce(&mut Identity)) -> Self {
        edit(Arc::make_mut(&mut self.0));
        self
    }

    /// Sets who vouched for the subject (a token's `iss`).
    ///
    /// ```
    /// let who = toolgraft_guard::Authenticated::new("a").with_issuer("https://as.example");
    /// assert_eq!(who.issuer(), Some("https://as.example"));
    /// ```
    pub fn with_issuer(self, issuer: impl Into<String>) -> Self {
        let issuer = issuer.into();
        self.edit(|identity| identity.issuer = Some(issuer))
    }

    /// Sets the scopes granted, kept sorted and without repeats (so
    /// [`has_scope`](Self::has_scope) is a binary search).
    ///
    /// ```
    /// let who = toolgraft_guard::Authenticated::new("a").with_scopes(["b", "a", "b"]);
    /// assert_eq!(who.scopes(), ["a", "b"]);
    /// ```
    pub fn with_scopes(self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut scopes: Vec<String> = scopes.into_iter().map(Into::into).collect();
        scopes.sort_unstable();
        scopes.dedup();
        self.edit(|identity| identity.scopes = scopes)
    }

    /// Sets the claims kept (for a resource server, only those named by
    /// `ResourceServer::with_kept_claims`).
    ///
    /// ```
    /// let mut claims = serde_json::Map::new();
    /// claims.insert("tenant".into(), "acme".into());
    /// let who = toolgraft_guard::Authenticated::new("a").with_claims(claims);
    /// assert_eq!(who.claims()["tenant"], "acme");
    /// ```
    pub fn with_claims(self, claims: Map<String, Value>) -> Self {
        self.edit(|identity| identity.claims = claims)
    }

    /// Sets when the credential stops being valid (a token's `exp`).
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// let at = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
    /// let who = toolgraft_guard::Authenticated::new("a").with_expires_at(at);
    /// assert_eq!(who.expires_at(), Some(at));
    /// ```
    pub fn with_expires_at(self, expires_at: SystemTime) -> Self {
        self.edit(|identity| identity.expires_at = Some(expires_at))
    }

    /// The subject: a token's `sub` (or, from introspection, its `client_id` when
    /// it has no `sub`), or the name a [`TokenTable`](crate::TokenTable) gives.
    ///
    /// ```
    /// assert_eq!(toolgraft_guard::Authenticated::new("alice").subject(), "alice");
    /// ```
    pub fn subject(&self) -> &str {
        &self.0.subject
    }

    /// Who issued the credential, when known.
    ///
    /// ```
    /// assert_eq!(toolgraft_guard::Authenticated::new("a").issuer(), None);
    /// ```
    pub fn issuer(&self) -> Option<&str> {
        self.0.issuer.as_deref()
    }

    /// The scopes granted, sorted, without repeats.
    ///
    /// ```
    /// let who = toolgraft_guard::Authenticated::new("a").with_scopes(["x"]);
    /// assert_eq!(who.scopes(), ["x"]);
    /// ```
    pub fn scopes(&self) -> &[String] {
        &self.0.scopes
    }

    /// Whether `scope` was granted.
    ///
    /// ```
    /// let who = toolgraft_guard::Authenticated::new("a").with_scopes(["read"]);
    /// assert!(who.has_scope("read") && !who.has_scope("write"));
    /// ```
    pub fn has_scope(&self, scope: &str) -> bool {
        self.0
            .scopes
            .binary_search_by(|granted| granted.as_str().cmp(scope))
            .is_ok()
    }

    /// The scopes of `required` that were not granted, in their order: what a
    /// `403 insufficient_scope` challenge asks for.
    ///
    /// ```
    /// let who = toolgraft_guard::Authenticated::new("a").with_scopes(["read"]);
    /// assert_eq!(who.missing_scopes(["read", "write"]), ["write"]);
    /// ```
    pub fn missing_scopes<'a>(&self, required: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
        required
            .into_iter()
            .filter(|scope| !self.has_scope(scope))
            .collect()
    }

    /// The claims kept, by name (bounded: a resource server keeps only the names
    /// it was told to, from a token of at most 8 KiB).
    ///
    /// ```
    /// assert!(toolgraft_guard::Authenticated::new("a").claims().is_empty());
    /// ```
    pub fn claims(&self) -> &Map<String, Value> {
        &self.0.claims
    }

    /// When the credential stops being valid, when known.
    ///
    /// ```
    /// assert_eq!(toolgraft_guard::Authenticated::new("a").expires_at(), None);
    /// ```
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.0.expires_at
    }
}
