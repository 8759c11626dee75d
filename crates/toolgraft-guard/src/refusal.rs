//! A refused request: why, the status it gets, and the answer sent by default.

use std::fmt;

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
            Self::NoToken | Self::WrongToken => StatusCode::UNAUTHORIZED,
        }
    }
}

impl Refusal {
    pub(crate) fn new(reason: Reason) -> Self {
        Self { reason }
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
        let challenge = match &self.reason {
            Reason::NoToken => r#"Bearer realm="toolgraft""#,
            Reason::WrongToken => r#"Bearer realm="toolgraft", error="invalid_token""#,
            Reason::Repeated(name) if name == AUTHORIZATION => {
                r#"Bearer realm="toolgraft", error="invalid_request""#
            }
            _ => return None,
        };
        Some(HeaderValue::from_static(challenge))
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
        response
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.status();
        let phrase = status.canonical_reason().unwrap_or("Refused");
        write!(f, "{phrase}: {}", self.message())
    }
}

impl std::error::Error for Refusal {}
