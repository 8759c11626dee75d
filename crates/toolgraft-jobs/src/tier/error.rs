//! What a tier's operation fails with: the engine's own error, kept as the
//! source (as apalis 1.0's capability traits keep theirs), so a caller can tell
//! a lost connection from a refused write and the message stays the engine's.

use apalis::prelude::BoxDynError;

/// A [`Tier`](super::Tier) operation's failure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TierError {
    /// The Redis server's (or the connection's) error.
    #[cfg(feature = "redis")]
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    /// The SQLite file's or the PostgreSQL server's (sqlx's) error.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    /// apalis refused the job (its storage's push).
    #[error(transparent)]
    Engine(BoxDynError),
    /// No connection to the engine could be made (the message names the
    /// server, without its credentials, and why).
    #[error("{0}")]
    Connect(String),
    /// A message that does not encode (or a stored one that does not decode).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl TierError {
    /// apalis's error, whatever its storage's type.
    pub(crate) fn engine(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Engine(Box::new(error))
    }
}
