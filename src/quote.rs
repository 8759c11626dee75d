//! Quoting hostile values: errors and logs show at most [`QUOTE_LEN`] characters
//! of anything a caller or an operator wrote.

use std::borrow::Cow;

/// How many characters of a caller's or an operator's value an error or a log
/// quotes (see [`shorten`]).
///
/// ```
/// let long = "é".repeat(1_000);
/// assert!(toolgraft::error::shorten(&long).starts_with(&"é".repeat(toolgraft::error::QUOTE_LEN)));
/// ```
pub const QUOTE_LEN: usize = 200;

/// `text` as errors and logs quote it: at most [`QUOTE_LEN`] characters, then an
/// ellipsis and the original length, so a 10 MB argument makes a short message.
///
/// ```
/// use toolgraft::error::shorten;
/// assert_eq!(shorten("short"), "short");
/// let long = "x".repeat(10_000);
/// assert_eq!(shorten(&long), format!("{}… (10000 bytes)", "x".repeat(200)));
/// ```
pub fn shorten(text: &str) -> Cow<'_, str> {
    if text.len() <= QUOTE_LEN {
        return Cow::Borrowed(text);
    }
    match text.char_indices().nth(QUOTE_LEN) {
        Some((cut, _)) => Cow::Owned(format!("{}… ({} bytes)", &text[..cut], text.len())),
        None => Cow::Borrowed(text),
    }
}

/// A JSON value (or anything that serializes) as errors and logs quote it: its
/// JSON text, shortened like [`shorten`]. Only the quoted part is kept in memory.
///
/// ```
/// use serde_json::json;
/// use toolgraft::error::shorten_json;
/// assert_eq!(shorten_json(&json!({"a": 1})), r#"{"a":1}"#);
/// let long = json!("y".repeat(1_000));
/// assert!(shorten_json(&long).ends_with("… (1002 bytes)"));
/// ```
pub fn shorten_json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    /// Keeps the first bytes written, counts the rest.
    struct Head {
        kept: Vec<u8>,
        total: usize,
    }
    impl std::io::Write for Head {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            // Four bytes per character at most: enough to cut at `QUOTE_LEN` chars.
            let room = (QUOTE_LEN * 4 + 4).saturating_sub(self.kept.len());
            self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
            self.total += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut head = Head {
        kept: Vec::new(),
        total: 0,
    };
    if serde_json::to_writer(&mut head, value).is_err() {
        return "(a value that does not serialize)".to_owned();
    }
    let text = String::from_utf8_lossy(&head.kept);
    match text.char_indices().nth(QUOTE_LEN) {
        Some((cut, _)) if head.total > QUOTE_LEN => {
            format!("{}… ({} bytes)", &text[..cut], head.total)
        }
        _ => text.into_owned(),
    }
}
