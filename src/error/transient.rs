use std::fmt;

/// A body's or an extension's error that may not happen again: what a body
/// returns to let `retry` make the call again (a busy database, a dropped
/// connection). Its message is the error's own.
///
/// ```
/// use toolgraft::error::{BoxError, Transient};
/// async fn fetch(url: String) -> Result<String, BoxError> {
///     Err(Transient::new(format!("{url}: connection reset")).into())
/// }
/// # let _ = fetch;
/// let err = Transient::new(std::io::Error::other("connection reset"));
/// assert_eq!(err.to_string(), "connection reset");
/// ```
#[derive(Debug)]
pub struct Transient(Box<dyn std::error::Error + Send + Sync + 'static>);

impl Transient {
    /// Marks `error` transient.
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        Self(error.into())
    }

    /// The error marked: what a layer that answers for the error's kind (a
    /// server's protocol error, say) looks into.
    ///
    /// ```
    /// use toolgraft::error::Transient;
    /// let err = Transient::new(std::io::Error::other("connection reset"));
    /// assert!(err.error().downcast_ref::<std::io::Error>().is_some());
    /// ```
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Display for Transient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Transient {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
