//! [`Guard`]: the configuration both servers take (the token, the two allow-lists),
//! and the check of one request against it.

use std::fmt;
#[cfg(feature = "oauth")]
use std::future::Future;
#[cfg(feature = "oauth")]
use std::pin::Pin;
use std::sync::Arc;

use http::{HeaderMap, Request, Uri};

use crate::allow::{self, HostRule, LOOPBACK_HOSTS, LOOPBACK_ORIGINS, OriginRule};
use crate::authenticated::Authenticated;
use crate::error::GuardError;
#[cfg(feature = "oauth")]
use crate::oauth::ResourceServer;
#[cfg(feature = "oauth")]
use crate::refusal::Reason;
use crate::refusal::Refusal;
use crate::table::TokenTable;
use crate::token::{Presented, Token};

/// What a request must present, beyond its Host and Origin.
#[derive(Clone)]
enum Credential {
    Off,
    Token(Token),
    Table(Arc<TokenTable>),
    #[cfg(feature = "oauth")]
    OAuth(ResourceServer),
}

/// A token check that has to wait (for keys, or introspection).
#[cfg(feature = "oauth")]
pub(crate) type Verification =
    Pin<Box<dyn Future<Output = Result<Authenticated, Refusal>> + Send + 'static>>;

/// What the guard decided about a request that passed the Host and Origin checks.
pub(crate) enum Outcome {
    /// Let through, with the caller when the guard knows identities.
    Pass(Option<Authenticated>),
    /// Let through if this resolves to a caller.
    #[cfg(feature = "oauth")]
    Verify(Verification),
}

/// What a request must show to reach a server: a `Host` on the host allow-list, no
/// `Origin` or one on the origin allow-list, and, unless [`off`](Guard::off), a
/// bearer token: [the one token](Guard::bearer), one of a
/// [table's](Guard::tokens), or an OAuth access token an
/// authorization server (`Guard::oauth`, feature `oauth`) issued for this resource. Both lists name
/// only the loopback addresses until replaced.
///
/// Serving without a token is a choice written out: there is no `Default`.
///
/// ```
/// use toolgraft_guard::Guard;
/// let guard = Guard::bearer("0123456789abcdef0123456789abcdef")?
///     .allow_hosts(["tools.example.com"])?
///     .allow_origins(["https://app.example.com"])?;
/// assert!(guard.requires_token());
/// assert_eq!(guard.hosts(), ["tools.example.com"]);
/// // The token is never printed.
/// assert!(!format!("{guard:?}").contains("0123"));
/// # Ok::<(), toolgraft_guard::GuardError>(())
/// ```
#[derive(Clone)]
pub struct Guard {
    credential: Credential,
    hosts: Vec<String>,
    host_rules: Vec<HostRule>,
    origins: Vec<String>,
    origin_rules: Vec<OriginRule>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field(
                "token",
                &match &self.credential {
                    Credential::Off => None,
                    Credential::Token(_) => Some(".."),
                    Credential::Table(_) => Some("table"),
                    #[cfg(feature = "oauth")]
                    Credential::OAuth(_) => Some("oauth"),
                },
            )
            .field("hosts", &self.hosts)
            .field("origins", &self.origins)
            .finish()
    }
}

impl Guard {
    /// Every request must carry `Authorization: Bearer <token>`.
    ///
    /// The token must be [`MIN_TOKEN_LEN`](crate::MIN_TOKEN_LEN) to
    /// [`MAX_TOKEN_LEN`](crate::MAX_TOKEN_LEN) bytes of the `token68` alphabet
    /// (`A-Z a-z 0-9 - . _ ~ + /`, then `=` padding): what a header carries as it is;
    /// `openssl rand -hex 16` makes one.
    ///
    /// ```
    /// use toolgraft_guard::{Guard, GuardError};
    /// assert!(Guard::bearer("tok-3n.v4lue~0123456").is_ok());
    /// assert!(matches!(Guard::bearer(""), Err(GuardError::BadToken { .. })));
    /// assert!(matches!(Guard::bearer("too short"), Err(GuardError::BadToken { .. })));
    /// ```
    pub fn bearer(token: impl Into<String>) -> Result<Self, GuardError> {
        Ok(Self::with_credential(Credential::Token(Token::new(
            token.into(),
        )?)))
    }

    /// Every request must carry one of the table's tokens; the layer puts the
    /// holder's [`Authenticated`] in the request's extensions.
    ///
    /// ```
    /// use toolgraft_guard::{Authenticated, Guard, TokenTable};
    /// let guard = Guard::tokens(TokenTable::new()
    ///     .grant("0123456789abcdef", Authenticated::new("ci").with_scopes(["tools:read"]))?);
    /// assert!(guard.requires_token());
    /// assert!(guard.accepts_token("0123456789abcdef"));
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn tokens(table: TokenTable) -> Self {
        Self::with_credential(Credential::Table(Arc::new(table)))
    }

    /// Every request must carry an access token `server` accepts (feature
    /// `oauth`); the layer puts the caller's [`Authenticated`] in the request's
    /// extensions. A request without one gets `401` with a challenge naming the
    /// resource's metadata, where a client finds the authorization server.
    ///
    /// ```
    /// use toolgraft_guard::{Guard, ResourceServer};
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// let guard = Guard::oauth(server);
    /// assert_eq!(guard.resource_server().map(|s| s.resource()), Some("http://127.0.0.1:8000/mcp"));
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    #[cfg(feature = "oauth")]
    pub fn oauth(server: ResourceServer) -> Self {
        Self::with_credential(Credential::OAuth(server))
    }

    /// The resource server of a guard made by [`oauth`](Guard::oauth): for its
    /// metadata route and its `403` challenges.
    ///
    /// ```
    /// assert!(toolgraft_guard::Guard::off().resource_server().is_none());
    /// ```
    #[cfg(feature = "oauth")]
    pub fn resource_server(&self) -> Option<&ResourceServer> {
        match &self.credential {
            Credential::OAuth(server) => Some(server),
            _ => None,
        }
    }

    /// No token: anyone who can reach the address, and passes the Host and Origin
    /// checks (which stay on), is let through. For a server on the loopback
    /// interface of a machine whose users are trusted, or behind a proxy that
    /// authenticates.
    ///
    /// ```
    /// let guard = toolgraft_guard::Guard::off();
    /// assert!(!guard.requires_token());
    /// assert_eq!(guard.hosts(), ["localhost", "127.0.0.1", "::1"]);
    /// ```
    pub fn off() -> Self {
        Self::with_credential(Credential::Off)
    }

    fn with_credential(credential: Credential) -> Self {
        Self {
            credential,
            hosts: LOOPBACK_HOSTS.map(String::from).to_vec(),
            host_rules: LOOPBACK_HOSTS
                .iter()
                .map(|entry| HostRule::parse(entry).expect("the loopback hosts parse"))
                .collect(),
            origins: LOOPBACK_ORIGINS.map(String::from).to_vec(),
            origin_rules: LOOPBACK_ORIGINS
                .iter()
                .map(|entry| OriginRule::parse(entry).expect("the loopback origins parse"))
                .collect(),
        }
    }

    /// Replaces the host allow-list: host names or addresses, with or without a
    /// port (`tools.example.com`, `tools.example.com:8443`, `10.0.0.7`, `::1`); an
    /// entry without a port allows any. Names compare without case. A request
    /// naming another host gets `403`.
    ///
    /// ```
    /// use toolgraft_guard::{AllowList, Guard, GuardError};
    /// assert!(Guard::off().allow_hosts(["localhost", "tools.example.com:8443"]).is_ok());
    /// assert!(matches!(Guard::off().allow_hosts(["http://tools.example.com"]),
    ///                  Err(GuardError::BadAllowListEntry { list: AllowList::Hosts, .. })));
    /// ```
    pub fn allow_hosts(
        mut self,
        hosts: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, GuardError> {
        let hosts: Vec<String> = hosts.into_iter().map(Into::into).collect();
        self.host_rules = hosts
            .iter()
            .map(|host| HostRule::parse(host))
            .collect::<Result<_, _>>()?;
        self.hosts = hosts;
        Ok(self)
    }

    /// Replaces the origin allow-list: `scheme://host` with `:port`, `:*` (any
    /// port) or no port (the scheme's default: 443 for `https`), or `null`. A
    /// request that carries another `Origin` gets `403`; requests without one
    /// (clients that are not browsers, and browsers' same-origin `GET`s) pass. An
    /// empty list refuses every request that has an `Origin`.
    ///
    /// ```
    /// use toolgraft_guard::{AllowList, Guard, GuardError};
    /// assert!(Guard::off().allow_origins(["https://app.example.com", "http://localhost:*"]).is_ok());
    /// assert!(matches!(Guard::off().allow_origins(["app.example.com"]),
    ///                  Err(GuardError::BadAllowListEntry { list: AllowList::Origins, .. })));
    /// ```
    pub fn allow_origins(
        mut self,
        origins: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, GuardError> {
        let origins: Vec<String> = origins.into_iter().map(Into::into).collect();
        self.origin_rules = origins
            .iter()
            .map(|origin| OriginRule::parse(origin))
            .collect::<Result<_, _>>()?;
        self.origins = origins;
        Ok(self)
    }

    /// The host allow-list, as written.
    ///
    /// ```
    /// assert!(toolgraft_guard::Guard::off().hosts().iter().any(|h| h == "localhost"));
    /// ```
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The origin allow-list, as written.
    ///
    /// ```
    /// let guard = toolgraft_guard::Guard::off();
    /// assert!(guard.origins().contains(&"http://localhost:*".to_owned()));
    /// ```
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// Whether a token is required (not [`off`](Guard::off)).
    ///
    /// ```
    /// assert!(toolgraft_guard::Guard::bearer("0123456789abcdef")?.requires_token());
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn requires_token(&self) -> bool {
        !matches!(self.credential, Credential::Off)
    }

    /// Whether `given` is the token, compared in constant time (always `true` when
    /// [`off`](Guard::off)), or one of the [table's](Guard::tokens): for a sign-in
    /// form that takes the token in its body. Always `false` for an OAuth
    /// guard (`Guard::oauth`), whose tokens come from the authorization
    /// server, not a form.
    ///
    /// ```
    /// let guard = toolgraft_guard::Guard::bearer("0123456789abcdef")?;
    /// assert!(guard.accepts_token("0123456789abcdef"));
    /// assert!(!guard.accepts_token("0123456789abcdeF"));
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn accepts_token(&self, given: &str) -> bool {
        match &self.credential {
            Credential::Off => true,
            Credential::Token(token) => token.matches(given.as_bytes()),
            Credential::Table(table) => table.identify(given).is_some(),
            #[cfg(feature = "oauth")]
            Credential::OAuth(_) => false,
        }
    }

    /// Checks one request: its Host, its Origin, its token, in that order (a page
    /// on a foreign site learns nothing about the token). The layer does this for
    /// every request; this is for servers that are not tower services.
    ///
    /// An OAuth guard (`Guard::oauth`) cannot wait here: it checks a JWT with the
    /// issuer's keys fetched already, and refuses with
    /// [`Reason::NotCheckedHere`](crate::Reason::NotCheckedHere) (`503`) a token
    /// that needs a fetch or introspection; use [`authenticate`](Guard::authenticate).
    ///
    /// ```
    /// use toolgraft_guard::{Guard, Reason};
    /// let guard = Guard::bearer("0123456789abcdef")?;
    /// let request = http::Request::post("/mcp")
    ///     .header("host", "127.0.0.1:8931")
    ///     .header("origin", "http://localhost:3000")
    ///     .header("authorization", "Bearer 0123456789abcdef")
    ///     .body(())
    ///     .unwrap();
    /// assert!(guard.check(&request).is_ok());
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn check<B>(&self, request: &Request<B>) -> Result<(), Refusal> {
        self.check_parts(request.uri(), request.headers(), true, None, false)
            .map(drop)
    }

    /// Checks one request as [`check`](Guard::check) does, waiting for the
    /// resource server when it must, and answers who the caller is (`None` when
    /// the guard knows no identities: [`off`](Guard::off), [`bearer`](Guard::bearer)).
    ///
    /// ```
    /// use toolgraft_guard::{Authenticated, Guard, TokenTable};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let guard = Guard::tokens(TokenTable::new().grant("0123456789abcdef", Authenticated::new("ci"))?);
    /// let request = http::Request::get("/").header("host", "localhost")
    ///     .header("authorization", "Bearer 0123456789abcdef").body(())?;
    /// let who = guard.authenticate(&request).await?;
    /// assert_eq!(who.map(|who| who.subject().to_owned()), Some("ci".to_owned()));
    /// # Ok(()) }
    /// ```
    pub async fn authenticate<B>(
        &self,
        request: &Request<B>,
    ) -> Result<Option<Authenticated>, Refusal> {
        match self.check_parts(request.uri(), request.headers(), true, None, true)? {
            Outcome::Pass(who) => Ok(who),
            #[cfg(feature = "oauth")]
            Outcome::Verify(verification) => verification.await.map(Some),
        }
    }

    /// [`check`](Self::check), the token looked for in `cookie` too, and not at all
    /// unless `token`; an OAuth token's check is handed back to be awaited when
    /// `wait`, done with the keys at hand otherwise.
    pub(crate) fn check_parts(
        &self,
        uri: &Uri,
        headers: &HeaderMap,
        token: bool,
        cookie: Option<&str>,
        wait: bool,
    ) -> Result<Outcome, Refusal> {
        allow::check_host(&self.host_rules, uri, headers)
            .and_then(|()| allow::check_origin(&self.origin_rules, headers))
            .map_err(Refusal::new)?;
        if !token {
            return Ok(Outcome::Pass(None));
        }
        #[cfg(not(feature = "oauth"))]
        let _ = wait; // only an OAuth guard can wait
        match &self.credential {
            Credential::Off => Ok(Outcome::Pass(None)),
            Credential::Token(expected) => expected
                .check(headers, cookie)
                .map(|()| Outcome::Pass(None))
                .map_err(Refusal::new),
            Credential::Table(table) => {
                let given = Presented::read(headers, cookie).map_err(Refusal::new)?;
                let mut holder = None;
                given.any(|token| {
                    holder = table.identify(token).cloned();
                    holder.is_some()
                });
                match holder {
                    Some(who) => Ok(Outcome::Pass(Some(who))),
                    None => Err(Refusal::new(given.refusal())),
                }
            }
            #[cfg(feature = "oauth")]
            Credential::OAuth(server) => {
                let given =
                    Presented::read(headers, cookie).map_err(|reason| server.refusal(reason))?;
                let Some(token) = given.first() else {
                    return Err(server.refusal(Reason::NoToken));
                };
                if !wait {
                    return server
                        .authenticate_now(token)
                        .map(|who| Outcome::Pass(Some(who)));
                }
                let server = server.clone();
                let token = token.to_owned();
                Ok(Outcome::Verify(Box::pin(async move {
                    server.authenticate(&token).await
                })))
            }
        }
    }
}
