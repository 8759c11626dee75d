//! Why a [`Guard`](crate::Guard) could not be configured.

use std::fmt;

/// The shortest token [`Guard::bearer`](crate::Guard::bearer) accepts: a token is a
/// random secret, not a password; 16 bytes of hex are 64 bits.
///
/// ```
/// assert_eq!(toolgraft_guard::MIN_TOKEN_LEN, 16);
/// ```
pub const MIN_TOKEN_LEN: usize = 16;

/// The longest token [`Guard::bearer`](crate::Guard::bearer) accepts, so that the
/// header carrying it stays well within what servers read.
///
/// ```
/// assert_eq!(toolgraft_guard::MAX_TOKEN_LEN, 4096);
/// ```
pub const MAX_TOKEN_LEN: usize = 4096;

/// A token or an allow-list entry the guard refuses when it is configured, so that
/// a mistake shows at start-up rather than as requests refused later.
///
/// ```
/// use toolgraft_guard::{Guard, GuardError, TokenProblem};
/// let error = Guard::bearer("short").unwrap_err();
/// assert_eq!(error, GuardError::BadToken { problem: TokenProblem::TooShort { len: 5 } });
/// assert_eq!(error.to_string(), "bad bearer token: it has 5 bytes, fewer than 16; \
///                                use 16 bytes or more of random text");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuardError {
    /// [`Guard::bearer`](crate::Guard::bearer) was given a token it cannot use.
    BadToken {
        /// What is wrong with it (the token itself is never quoted).
        problem: TokenProblem,
    },
    /// A setting of a `ResourceServer` (feature `oauth`)
    /// that cannot work: a URI that is not one, an algorithm that is refused.
    BadSetting {
        /// Which setting (`resource`, `issuer`, `algorithms`, ...).
        setting: &'static str,
        /// The value, shortened.
        value: String,
        /// What a value of that setting looks like.
        expected: &'static str,
    },
    /// `ResourceServer::warm` could not fetch the
    /// issuer's keys (or its metadata). For the operator: it names the URL and what
    /// went wrong, and never reaches a client.
    KeysUnavailable {
        /// What failed, in a sentence.
        detail: String,
    },
    /// An allow-list entry that can never match a request.
    BadAllowListEntry {
        /// Which list.
        list: AllowList,
        /// The entry, shortened.
        entry: String,
        /// What an entry of that list looks like.
        expected: &'static str,
    },
}

/// What is wrong with a bearer token.
///
/// ```
/// use toolgraft_guard::{Guard, GuardError, TokenProblem};
/// let problem = |token: &str| match Guard::bearer(token) {
///     Err(GuardError::BadToken { problem }) => Some(problem),
///     _ => None,
/// };
/// assert_eq!(problem(""), Some(TokenProblem::Empty));
/// assert_eq!(problem("has a space in it, sadly"), Some(TokenProblem::NotToken68));
/// assert_eq!(problem(&"x".repeat(5000)), Some(TokenProblem::TooLong { len: 5000 }));
/// assert_eq!(problem("0123456789abcdef"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenProblem {
    /// The token is empty.
    Empty,
    /// Shorter than [`MIN_TOKEN_LEN`].
    TooShort {
        /// Its length in bytes.
        len: usize,
    },
    /// Longer than [`MAX_TOKEN_LEN`].
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Characters outside `A-Z a-z 0-9 - . _ ~ + /` (then `=` padding): the
    /// `token68` alphabet, what a header (and a cookie) carries as it is.
    NotToken68,
    /// A [`TokenTable`](crate::TokenTable) already holds this token.
    Duplicate,
}

/// The two allow-lists of a [`Guard`](crate::Guard).
///
/// ```
/// assert_eq!(toolgraft_guard::AllowList::Origins.to_string(), "origin");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllowList {
    /// [`Guard::allow_hosts`](crate::Guard::allow_hosts): the `Host` header.
    Hosts,
    /// [`Guard::allow_origins`](crate::Guard::allow_origins): the `Origin` header.
    Origins,
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Hosts => "host",
            Self::Origins => "origin",
        })
    }
}

impl fmt::Display for TokenProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "it is empty"),
            Self::TooShort { len } => write!(
                f,
                "it has {len} bytes, fewer than {MIN_TOKEN_LEN}; use {MIN_TOKEN_LEN} bytes or more of random text"
            ),
            Self::TooLong { len } => write!(f, "it has {len} bytes, more than {MAX_TOKEN_LEN}"),
            Self::NotToken68 => write!(
                f,
                "it has characters outside `A-Z a-z 0-9 - . _ ~ + /` (and `=` at the end)"
            ),
            Self::Duplicate => write!(f, "the table already holds it"),
        }
    }
}

impl fmt::Display for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadToken { problem } => write!(f, "bad bearer token: {problem}"),
            Self::BadSetting {
                setting,
                value,
                expected,
            } => write!(f, "bad {setting} `{value}`: expected {expected}"),
            Self::KeysUnavailable { detail } => {
                write!(f, "the issuer's keys are unavailable: {detail}")
            }
            Self::BadAllowListEntry {
                list,
                entry,
                expected,
            } => write!(
                f,
                "bad {list} allow-list entry `{entry}`: expected {expected}"
            ),
        }
    }
}

impl std::error::Error for GuardError {}

/// An entry as an error quotes it: at most 60 characters, for a log line.
pub(crate) fn shorten(entry: &str) -> String {
    match entry.char_indices().nth(60) {
        Some((end, _)) => format!("{}...", &entry[..end]),
        None => entry.to_owned(),
    }
}
