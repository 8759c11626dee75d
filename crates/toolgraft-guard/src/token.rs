//! The bearer token: what a valid one is, where a request carries it, and the one
//! constant-time comparison of both servers.

use std::fmt;
use subtle::ConstantTimeEq as _;

use http::HeaderMap;
use http::header::{AUTHORIZATION, COOKIE};

use crate::error::{GuardError, MAX_TOKEN_LEN, MIN_TOKEN_LEN, TokenProblem};
use crate::refusal::Reason;

/// A checked token; never printed.
#[derive(Clone)]
pub(crate) struct Token(Box<str>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// The token if it fits in a header as it is: `token68` (RFC 9110 §11.2), which
    /// is also a valid cookie value, so the page's cookie can carry it unencoded.
    pub(crate) fn new(token: String) -> Result<Self, GuardError> {
        let body = token.trim_end_matches('=');
        let problem = if token.is_empty() {
            Some(TokenProblem::Empty)
        } else if !body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
            || body.is_empty()
        {
            Some(TokenProblem::NotToken68)
        } else if token.len() < MIN_TOKEN_LEN {
            Some(TokenProblem::TooShort { len: token.len() })
        } else if token.len() > MAX_TOKEN_LEN {
            Some(TokenProblem::TooLong { len: token.len() })
        } else {
            None
        };
        match problem {
            Some(problem) => Err(GuardError::BadToken { problem }),
            None => Ok(Self(token.into())),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token, in time that depends on the lengths only.
    pub(crate) fn matches(&self, given: &[u8]) -> bool {
        same(given, self.0.as_bytes())
    }

    /// Lets the request through when it carries the token: in its one
    /// `Authorization: Bearer` header, or (when `cookie` names one) in that cookie.
    pub(crate) fn check(&self, headers: &HeaderMap, cookie: Option<&str>) -> Result<(), Reason> {
        let given = Presented::read(headers, cookie)?;
        if given.any(|given| self.matches(given.as_bytes())) {
            return Ok(());
        }
        Err(given.refusal())
    }
}

/// The tokens a request presents: its one `Authorization: Bearer` token, and the
/// named cookie's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Presented<'h> {
    pub(crate) bearer: Option<&'h str>,
    pub(crate) cookie: Option<&'h str>,
}

impl<'h> Presented<'h> {
    pub(crate) fn read(headers: &'h HeaderMap, cookie: Option<&str>) -> Result<Self, Reason> {
        let mut authorizations = headers.get_all(AUTHORIZATION).iter();
        let authorization = authorizations.next();
        if authorizations.next().is_some() {
            // Two credentials: which one counts would be the guess of each server.
            return Err(Reason::Repeated(AUTHORIZATION));
        }
        let bearer = authorization.and_then(|value| {
            let (scheme, credentials) = value.to_str().ok()?.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| credentials.trim())
        });
        let cookie = cookie.and_then(|name| cookie_value(headers, name));
        Ok(Self { bearer, cookie })
    }

    /// Whether either token passes `accept`, the header's tried first.
    pub(crate) fn any(self, mut accept: impl FnMut(&str) -> bool) -> bool {
        self.bearer.is_some_and(&mut accept) || self.cookie.is_some_and(accept)
    }

    /// The first token presented: the header's, else the cookie's.
    pub(crate) fn first(self) -> Option<&'h str> {
        self.bearer.or(self.cookie)
    }

    /// Why a request whose tokens all failed is refused.
    pub(crate) fn refusal(self) -> Reason {
        match self.first() {
            None => Reason::NoToken,
            Some(_) => Reason::WrongToken,
        }
    }
}

/// The value of the cookie `name`, in any `Cookie` header (HTTP/2 may send several).
fn cookie_value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(name)?.strip_prefix('='))
}

/// Equality whose time depends on the lengths only, not on where the bytes differ:
/// the lengths are not the secret (tokens are long and random), their bytes are.
/// `subtle` answers unequal lengths at once and compares equal ones byte by byte
/// behind an optimisation barrier (`core::hint::black_box`, its feature).
fn same(a: &[u8], b: &[u8]) -> bool {
    bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_whole_tokens() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
        assert!(!same(b"", b"x"));
    }

    #[test]
    fn finds_the_named_cookie_only() {
        let mut headers = HeaderMap::new();
        headers.append(COOKIE, "a=1; tok=abc".parse().unwrap());
        headers.append(COOKIE, "tokx=no".parse().unwrap());
        assert_eq!(cookie_value(&headers, "tok"), Some("abc"));
        assert_eq!(cookie_value(&headers, "b"), None);
    }
}
