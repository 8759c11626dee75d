//! A refused request: why, the status it gets, and the answer sent by default.

use std::fmt;
use std::sync::Arc;

use axum_core::body::Body;
use http::header::{self, AUTHORIZATION, HeaderName, HeaderValue};
use http::{Response, StatusCode};

/// Why the guard refused a request; what [`Guard::check`](crate::Guard::check)
/// returns and what a [`respond_with`](crate::GuardLayer::respond_with) function is
/// given.
///
/// ```
/// use http::{Request, StatusCode};
/// use toolgraft_guard::{Guard, Reason};
///
/// let guard = Guard::off();
/// let request = Request::get("/").header("host", "evil.example").body(()).unwrap();
/// let refusal = guard.check(&request).unwrap_err();
/// assert_eq!(refusal.reason(), &Reason::ForeignHost);
/// assert_eq!(refusal.status(), StatusCode::FORBIDDEN);
/// assert!(refusal.message().contains("Host"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    reason: Reason,
    /// What an OAuth resource server's challenges name; `None` for the static
    /// tokens, whose challenges stay `realm="toolgraft"`.
    oauth: Option<Arc<Challenge>>,
}

/// The parameters an OAuth resource server adds to its challenges, built once when
/// it is configured (both are checked to need no escaping then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// The URL of the protected resource metadata (RFC 9728 §5.1).
    pub(crate) resource_metadata: Box<str>,
    /// The scopes a client should ask for, space-separated; `None` when unknown.
    pub(crate) scope: Option<Box<str>>,
}

/// The reasons of a [`Refusal`], each with its status.
///
/// ```
/// use http::StatusCode;
/// use toolgraft_guard::Reason;
/// assert_eq!(Reason::NoToken.status(), StatusCode::UNAUTHORIZED);
/// assert_eq!(Reason::ForeignOrigin.status(), StatusCode::FORBIDDEN);
/// assert_eq!(Reason::Repeated(http::header::HOST).status(), StatusCode::BAD_REQUEST);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// No `Host` header and no authority in the URI: `400`.
    NoHost,
    /// A `Host` that is not UTF-8 or not `host[:port]`: `400`.
    UnreadableHost,
    /// A header the guard reads (`Host`, `Origin`, `Authorization`) appears more
    /// than once, so which one counts would be a guess: `400`.
    Repeated(HeaderName),
    /// The `Host` is not on the host allow-list (a DNS-rebinding attempt, or a name
    /// the list is missing): `403`.
    ForeignHost,
    /// The `Origin` is not on the origin allow-list, or is not an origin (`null`
    /// included, unless the list names it): `403`.
    ForeignOrigin,
    /// No `Authorization: Bearer` header (nor the token's cookie): `401`.
    NoToken,
    /// A bearer token that is not the server's: `401`.
    WrongToken,
    /// An OAuth access token the resource server refuses: `401` with
    /// `error="invalid_token"` and the problem's fixed description.
    InvalidToken(Invalid),
    /// The token could not be checked because the issuer's keys or its
    /// introspection endpoint could not be reached: `503` with `Retry-After`.
    ///
    /// Not `401`: a client told its token is invalid throws it away and runs the
    /// authorization flow again, gets a new token the server still cannot check,
    /// and loops; `503` says the server is at fault and the token may be kept.
    Unavailable,
    /// [`Guard::check`](crate::Guard::check) was asked about a token that only an
    /// asynchronous check can settle (it needs keys not fetched yet, or
    /// introspection): `503`, as [`Unavailable`](Reason::Unavailable). Use
    /// [`Guard::authenticate`](crate::Guard::authenticate) or the layer.
    NotCheckedHere,
}

/// Why an OAuth access token is refused. Each has a fixed description, the
/// `error_description` of the challenge: it never quotes the token, a key id or
/// the issuer's answer.
///
/// ```
/// use toolgraft_guard::Invalid;
/// assert_eq!(Invalid::Expired.description(), "the token has expired");
/// assert_eq!(Invalid::WrongAudience.description(), "the token is not valid for this resource");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Invalid {
    /// Longer than the resource server reads (8 KiB), or with too many claims.
    TooLarge,
    /// Not a JWT it can read, an algorithm it refuses, a key it does not know, or
    /// a signature that does not verify: all one answer, so a forger learns
    /// nothing from which.
    Unverifiable,
    /// `exp` is past (beyond the leeway).
    Expired,
    /// `nbf` or `iat` is in the future (beyond the leeway).
    NotYetValid,
    /// `aud` does not name this resource (RFC 8707).
    WrongAudience,
    /// `iss` is not the configured issuer.
    WrongIssuer,
    /// A claim the resource server requires (`exp`, `sub`, `iss`, `aud`) is absent.
    MissingClaim,
    /// The introspection endpoint answered `"active": false`.
    Inactive,
}

impl Invalid {
    /// The fixed sentence sent as `error_description`.
    ///
    /// ```
    /// assert_eq!(toolgraft_guard::Invalid::Unverifiable.description(),
    ///            "the token could not be verified");
    /// ```
    pub fn description(self) -> &'static str {
        match self {
            Self::TooLarge => "the token is too large",
            Self::Unverifiable => "the token could not be verified",
            Self::Expired => "the token has expired",
            Self::NotYetValid => "the token is not valid yet",
            Self::WrongAudience => "the token is not valid for this resource",
            Self::WrongIssuer => "the token is not from this resource's authorization server",
            Self::MissingClaim => "the token lacks a required claim",
            Self::Inactive => "the token is not active",
        }
    }
}

impl Reason {
    /// The status the request gets.
    ///
    /// ```
    /// assert_eq!(toolgraft_guard::Reason::WrongToken.status(), 401);
    /// ```
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NoHost | Self::UnreadableHost | Self::Repeated(_) => StatusCode::BAD_REQUEST,
            Self::ForeignHost | Self::ForeignOrigin => StatusCode::FORBIDDEN,
            Self::NoToken | Self::WrongToken | Self::InvalidToken(_) => StatusCode::UNAUTHORIZED,
            Self::Unavailable | Self::NotCheckedHere => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl Refusal {
    pub(crate) fn new(reason: Reason) -> Self {
        Self {
            reason,
            oauth: None,
        }
    }

    /// A refusal whose challenge names the resource server's metadata.
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))] // the resource server's
    pub(crate) fn with_challenge(mut self, challenge: Option<&Arc<Challenge>>) -> Self {
        self.oauth = challenge.cloned();
        self
    }

    /// Why.
    ///
    /// ```
    /// # use toolgraft_guard::{Guard, Reason};
    /// let request = http::Request::get("/").header("host", "localhost").body(()).unwrap();
    /// let refusal = Guard::bearer("0123456789abcdef")?.check(&request).unwrap_err();
    /// assert_eq!(refusal.reason(), &Reason::NoToken);
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn reason(&self) -> &Reason {
        &self.reason
    }

    /// The status: `400`, `401` or `403`.
    ///
    /// ```
    /// # use toolgraft_guard::Guard;
    /// let request = http::Request::get("/").body(()).unwrap(); // no Host at all
    /// assert_eq!(Guard::off().check(&request).unwrap_err().status(), 400);
    /// ```
    pub fn status(&self) -> StatusCode {
        self.reason.status()
    }

    /// What the client did wrong, in a sentence for a person (it quotes nothing
    /// from the request).
    ///
    /// ```
    /// # use toolgraft_guard::Guard;
    /// let request = http::Request::get("/").header("host", "localhost").body(()).unwrap();
    /// let refusal = Guard::bearer("0123456789abcdef")?.check(&request).unwrap_err();
    /// assert_eq!(refusal.message(),
    ///            "send `Authorization: Bearer <token>` with the server's token");
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn message(&self) -> &'static str {
        match &self.reason {
            Reason::NoHost => "the request names no host (`Host` header)",
            Reason::UnreadableHost => "the `Host` header is not `host[:port]`",
            Reason::Repeated(name) if name == header::HOST => "more than one `Host` header",
            Reason::Repeated(name) if name == header::ORIGIN => "more than one `Origin` header",
            Reason::Repeated(_) => "more than one `Authorization` header",
            Reason::ForeignHost => {
                "the `Host` header names a host this server does not answer for \
                 (it is not on the host allow-list)"
            }
            Reason::ForeignOrigin => {
                "requests from the page's origin are not allowed \
                 (the `Origin` is not on the origin allow-list)"
            }
            Reason::NoToken => "send `Authorization: Bearer <token>` with the server's token",
            Reason::WrongToken => "the bearer token is not the server's",
            Reason::InvalidToken(invalid) => invalid.description(),
            Reason::Unavailable | Reason::NotCheckedHere => {
                "the server cannot check tokens right now; try again later"
            }
        }
    }

    /// The `WWW-Authenticate` challenge (RFC 6750) a refusal about the token carries;
    /// [`GuardLayer`](crate::GuardLayer) always sends it.
    ///
    /// ```
    /// # use toolgraft_guard::Guard;
    /// let request = http::Request::get("/").header("host", "localhost")
    ///     .header("authorization", "Bearer not-the-token-at-all").body(()).unwrap();
    /// let refusal = Guard::bearer("0123456789abcdef")?.check(&request).unwrap_err();
    /// assert_eq!(refusal.challenge().unwrap(),
    ///            r#"Bearer realm="toolgraft", error="invalid_token""#);
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn challenge(&self) -> Option<HeaderValue> {
        let Some(oauth) = &self.oauth else {
            let challenge = match &self.reason {
                Reason::NoToken => r#"Bearer realm="toolgraft""#,
                Reason::WrongToken | Reason::InvalidToken(_) => {
                    r#"Bearer realm="toolgraft", error="invalid_token""#
                }
                Reason::Repeated(name) if name == AUTHORIZATION => {
                    r#"Bearer realm="toolgraft", error="invalid_request""#
                }
                _ => return None,
            };
            return Some(HeaderValue::from_static(challenge));
        };
        // RFC 6750 §3 and RFC 9728 §5.1: the metadata URL always, so a client that
        // knows nothing of this server can find its authorization server.
        let mut params = Vec::with_capacity(3);
        match &self.reason {
            Reason::NoToken => {
                if let Some(scope) = &oauth.scope {
                    params.push(("scope", &**scope));
                }
            }
            Reason::WrongToken => params.push(("error", "invalid_token")),
            Reason::InvalidToken(invalid) => {
                params.push(("error", "invalid_token"));
                params.push(("error_description", invalid.description()));
            }
            Reason::Repeated(name) if name == AUTHORIZATION => {
                params.push(("error", "invalid_request"));
            }
            _ => return None,
        }
        params.push(("resource_metadata", &oauth.resource_metadata));
        bearer_challenge(&params)
    }

    /// The `Retry-After` of a refusal the server is to blame for.
    pub(crate) fn retry_after(&self) -> Option<HeaderValue> {
        // Long enough for the JWKS refresh interval (30 s by default) to pass, so
        // the retry can trigger a new fetch rather than meet the same failure.
        matches!(self.reason, Reason::Unavailable | Reason::NotCheckedHere)
            .then(|| HeaderValue::from_static("30"))
    }

    /// The answer [`GuardLayer`](crate::GuardLayer) sends by default: the status,
    /// the challenge, and `"<status>: <message>"` as plain text.
    ///
    /// ```
    /// # use toolgraft_guard::Guard;
    /// let request = http::Request::get("/").header("host", "evil.example").body(()).unwrap();
    /// let response = Guard::off().check(&request).unwrap_err().into_response();
    /// assert_eq!(response.status(), 403);
    /// assert_eq!(response.headers()["content-type"], "text/plain; charset=utf-8");
    /// ```
    pub fn into_response(self) -> Response<Body> {
        let body = format!("{self}\n");
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if let Some(challenge) = self.challenge() {
            headers.insert(header::WWW_AUTHENTICATE, challenge);
        }
        if let Some(retry_after) = self.retry_after() {
            headers.insert(header::RETRY_AFTER, retry_after);
        }
        response
    }
}

/// `Bearer a="x", b="y"`: every value is one the crate wrote or checked when it was
/// configured (scope tokens, a serialized URL), so none holds a `"` or a `\`.
pub(crate) fn bearer_challenge(params: &[(&str, &str)]) -> Option<HeaderValue> {
    let mut challenge = String::from("Bearer");
    for (i, (name, value)) in params.iter().enumerate() {
        let separator = if i == 0 { " " } else { ", " };
        challenge.push_str(&format!(r#"{separator}{name}="{value}""#));
    }
    HeaderValue::from_str(&challenge).ok()
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.status();
        let phrase = status.canonical_reason().unwrap_or("Refused");
        write!(f, "{phrase}: {}", self.message())
    }
}

impl std::error::Error for Refusal {}
