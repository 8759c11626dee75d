//! [`Guard`]: the configuration both servers take (the token, the two allow-lists),
//! and the check of one request against it.

use std::fmt;

use http::{HeaderMap, Request, Uri};

use crate::allow::{self, HostRule, LOOPBACK_HOSTS, LOOPBACK_ORIGINS, OriginRule};
use crate::error::GuardError;
use crate::refusal::Refusal;
use crate::token::Token;

/// What a request must show to reach a server: a `Host` on the host allow-list, no
/// `Origin` or one on the origin allow-list, and, unless [`off`](Guard::off), the
/// bearer token. Both lists name only the loopback addresses until replaced.
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
    token: Option<Token>,
    hosts: Vec<String>,
    host_rules: Vec<HostRule>,
    origins: Vec<String>,
    origin_rules: Vec<OriginRule>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("token", &self.token.as_ref().map(|_| ".."))
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
        Ok(Self::with_token(Some(Token::new(token.into())?)))
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
        Self::with_token(None)
    }

    fn with_token(token: Option<Token>) -> Self {
        Self {
            token,
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
        self.token.is_some()
    }

    /// Whether `given` is the token, compared in constant time (always `true` when
    /// [`off`](Guard::off)): for a sign-in form that takes the token in its body.
    ///
    /// ```
    /// let guard = toolgraft_guard::Guard::bearer("0123456789abcdef")?;
    /// assert!(guard.accepts_token("0123456789abcdef"));
    /// assert!(!guard.accepts_token("0123456789abcdeF"));
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn accepts_token(&self, given: &str) -> bool {
        self.token
            .as_ref()
            .is_none_or(|token| token.matches(given.as_bytes()))
    }

    /// Checks one request: its Host, its Origin, its token, in that order (a page
    /// on a foreign site learns nothing about the token). The layer does this for
    /// every request; this is for servers that are not tower services.
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
        self.check_parts(request.uri(), request.headers(), true, None)
    }

    /// [`check`](Self::check), the token looked for in `cookie` too, and not at all
    /// unless `token`.
    pub(crate) fn check_parts(
        &self,
        uri: &Uri,
        headers: &HeaderMap,
        token: bool,
        cookie: Option<&str>,
    ) -> Result<(), Refusal> {
        allow::check_host(&self.host_rules, uri, headers)
            .and_then(|()| allow::check_origin(&self.origin_rules, headers))
            .and_then(|()| match (&self.token, token) {
                (Some(expected), true) => expected.check(headers, cookie),
                _ => Ok(()),
            })
            .map_err(Refusal::new)
    }
}
