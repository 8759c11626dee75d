//! [`TokenTable`]: static tokens, each naming who holds it.

use std::collections::HashMap;
use std::fmt;

use sha2::{Digest as _, Sha256};

use crate::authenticated::Authenticated;
use crate::error::{GuardError, TokenProblem};
use crate::token::Token;

/// Static bearer tokens, each mapped to the [`Authenticated`] its holder is: for
/// a few known clients (a CI bot, a teammate's agent) without an authorization
/// server. [`Guard::tokens`](crate::Guard::tokens) checks requests against it.
///
/// The table holds the SHA-256 of each token, not the token, and a presented token
/// is hashed and then looked up: the time the lookup takes depends on the digest,
/// which tells an attacker nothing about the token's bytes (finding a token from
/// its digest is a preimage search), so there is no early exit on the secret.
///
/// ```
/// use toolgraft_guard::{Authenticated, Guard, TokenTable};
/// let table = TokenTable::new()
///     .grant("ci-0123456789abcdef", Authenticated::new("ci").with_scopes(["tools:read"]))?
///     .grant("alice-0123456789abcd", Authenticated::new("alice"))?;
/// assert_eq!(table.len(), 2);
/// assert_eq!(table.identify("ci-0123456789abcdef").map(|who| who.subject()), Some("ci"));
/// assert!(table.identify("ci-0123456789abcdeF").is_none());
/// let guard = Guard::tokens(table);
/// # Ok::<(), toolgraft_guard::GuardError>(())
/// ```
#[derive(Clone, Default)]
pub struct TokenTable {
    by_digest: HashMap<[u8; 32], Authenticated>,
}

impl fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenTable")
            .field("tokens", &self.by_digest.len())
            .finish()
    }
}

impl TokenTable {
    /// An empty table; a guard with an empty table refuses every token.
    ///
    /// ```
    /// assert!(toolgraft_guard::TokenTable::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one token and who holds it. The token is checked as
    /// [`Guard::bearer`](crate::Guard::bearer) checks its own, and may be in the
    /// table once only.
    ///
    /// ```
    /// use toolgraft_guard::{Authenticated, GuardError, TokenProblem, TokenTable};
    /// let table = TokenTable::new().grant("0123456789abcdef", Authenticated::new("a"))?;
    /// let again = table.grant("0123456789abcdef", Authenticated::new("b"));
    /// assert_eq!(again.unwrap_err(), GuardError::BadToken { problem: TokenProblem::Duplicate });
    /// # Ok::<(), GuardError>(())
    /// ```
    pub fn grant(
        mut self,
        token: impl Into<String>,
        identity: Authenticated,
    ) -> Result<Self, GuardError> {
        let token = Token::new(token.into())?;
        let digest = digest(token.as_str());
        if self.by_digest.insert(digest, identity).is_some() {
            return Err(GuardError::BadToken {
                problem: TokenProblem::Duplicate,
            });
        }
        Ok(self)
    }

    /// How many tokens it holds.
    ///
    /// ```
    /// assert_eq!(toolgraft_guard::TokenTable::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether it holds none.
    ///
    /// ```
    /// assert!(toolgraft_guard::TokenTable::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// Who holds `token`, if the table has it.
    ///
    /// ```
    /// use toolgraft_guard::{Authenticated, TokenTable};
    /// let table = TokenTable::new().grant("0123456789abcdef", Authenticated::new("a"))?;
    /// assert!(table.identify("0123456789abcdef").is_some());
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn identify(&self, token: &str) -> Option<&Authenticated> {
        self.by_digest.get(&digest(token))
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}
