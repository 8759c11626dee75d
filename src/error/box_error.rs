use std::fmt;

/// The error type of tool bodies: any `std::error::Error` converts into it with
/// `?`, and so does a `&str` or `String` with `.into()`.
///
/// ```
/// use toolgraft::error::BoxError;
/// let err: BoxError = "city not found".into();
/// assert_eq!(err.to_string(), "city not found");
/// let io: BoxError = std::io::Error::other("disk full").into();
/// assert_eq!(io.to_string(), "disk full");
/// ```
///
/// It is a struct around `Box<dyn Error + Send + Sync>` rather than that type
/// itself, and (like `anyhow::Error`) does not implement `Error`, which is what lets
/// every error convert into it. Why not the plain box: its `'static` would sit in
/// the type of every closure body, and a lifetime in a type keeps the compiler from
/// reusing what it proved about a stack, so type-checking a deep combo over a
/// closure body would grow with the square of its depth.
pub struct BoxError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl BoxError {
    /// The boxed error inside.
    ///
    /// ```
    /// let err = toolgraft::error::BoxError::from("no").into_inner();
    /// assert_eq!(err.to_string(), "no");
    /// ```
    pub fn into_inner(self) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self.0
    }
}

impl<E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>> From<E> for BoxError {
    fn from(error: E) -> Self {
        Self(error.into())
    }
}

impl fmt::Debug for BoxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for BoxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
