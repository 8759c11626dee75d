use std::fmt;

use serde_json::Value;

/// A body's error that reads the same wherever the body ran: its message, and
/// `data` for the server in front to answer with. Any other body error crosses
/// a process boundary as its message with the worker's name added; this one
/// crosses whole (toolgraft-jobs' `remote` gives the caller an equal
/// `Detailed`), so the caller's server answers it alike in process and from a
/// worker. toolgraft-mcp makes one of an imported rmcp tool's failures (its
/// JSON-RPC error in `data`, or an `isError` result's text with `data` null).
///
/// ```
/// use serde_json::json;
/// use toolgraft::error::{BoxError, Detailed};
/// let err = Detailed::new("the index is gone", json!({"code": 404}));
/// assert_eq!(err.to_string(), "the index is gone");
/// assert_eq!(err.data()["code"], 404);
/// let boxed: BoxError = err.into();
/// assert_eq!(boxed.to_string(), "the index is gone");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Detailed {
    message: String,
    data: Value,
}

impl Detailed {
    /// An error saying `message`, with `data` for the server in front (`null`
    /// for none).
    pub fn new(message: impl Into<String>, data: Value) -> Self {
        Self {
            message: message.into(),
            data,
        }
    }

    /// The message, for people.
    ///
    /// ```
    /// let err = toolgraft::error::Detailed::new("gone", serde_json::Value::Null);
    /// assert_eq!(err.message(), "gone");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The data, for the server in front.
    ///
    /// ```
    /// let err = toolgraft::error::Detailed::new("gone", serde_json::json!([1]));
    /// assert_eq!(err.data(), &serde_json::json!([1]));
    /// ```
    pub fn data(&self) -> &Value {
        &self.data
    }
}

impl fmt::Display for Detailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Detailed {}
