//! What the traits a third party implements to plug a store or a channel in
//! answer with: [`LimitStore`](crate::ext::limit::LimitStore) (rate and
//! concurrency counts), [`Ledger`](crate::ext::approve::Ledger) (spent
//! approvals), [`Follow`](crate::relocation::Follow) (a backend's jobs) and
//! [`Ask`](crate::context::Ask) (the way to the caller's user). Each method
//! returns a [`StoreFuture`], and each failure is a [`StoreError`]: one shape for
//! every such trait, so an implementation written for one reads like one
//! written for another, and the library handles their failures one way (the
//! call is refused, naming the store's message).

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The boxed future a store trait's method answers with.
///
/// ```
/// use toolgraft::store::{StoreError, StoreFuture};
/// fn ready(answer: bool) -> StoreFuture<'static, bool> {
///     Box::pin(async move { Ok(answer) })
/// }
/// fn broken() -> StoreFuture<'static, bool> {
///     Box::pin(async { Err(StoreError::new("the store is away")) })
/// }
/// # let _ = (ready(true), broken());
/// ```
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A store (or channel) that could not answer. Its message reaches the caller
/// of the tool whose call it refuses, so it must not carry credentials (an URL
/// with a password, a token); the error it came from is kept as its
/// [`source`](Error::source), for logs.
///
/// ```
/// use std::error::Error;
/// use toolgraft::store::StoreError;
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
/// let error = StoreError::new("cannot reach the Redis at `cache:6379`").with_source(io);
/// assert_eq!(error.to_string(), "cannot reach the Redis at `cache:6379`");
/// assert_eq!(error.source().unwrap().to_string(), "refused");
/// ```
#[derive(Clone)]
pub struct StoreError {
    message: String,
    source: Option<Arc<dyn Error + Send + Sync>>,
    retry_after: Option<Duration>,
}

impl StoreError {
    /// An error saying `message`.
    pub fn new(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            source: None,
            retry_after: None,
        }
    }

    /// The same error, keeping `source` as what it came from.
    pub fn with_source(mut self, source: impl Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The same error, saying the store knows it can answer after `wait` (a
    /// store full of live keys knows when the first of them goes): the refused
    /// caller is told when to retry rather than left to guess.
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolgraft::store::StoreError;
    /// let full = StoreError::new("full").with_retry_after(Duration::from_secs(2));
    /// assert_eq!(full.retry_after(), Some(Duration::from_secs(2)));
    /// assert_eq!(StoreError::new("away").retry_after(), None);
    /// ```
    pub fn with_retry_after(mut self, wait: Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }

    /// What it says.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// When the store says a retry may be answered, if it knows.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Debug for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("StoreError");
        debug.field("message", &self.message);
        if let Some(wait) = self.retry_after {
            debug.field("retry_after", &wait);
        }
        if let Some(source) = &self.source {
            debug.field("source", &format_args!("{source}"));
        }
        debug.finish()
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for StoreError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn Error + 'static))
    }
}

/// Two errors are equal when they say the same thing (what a caller sees).
impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl Eq for StoreError {}
