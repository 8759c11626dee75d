use std::fmt;

use thiserror::Error;

use crate::quote::shorten;

/// What kind of argument problem an [`ArgsError`] is.
///
/// ```
/// use toolgraft::error::{ArgsError, ArgsErrorKind};
/// assert_eq!(ArgsError::unknown("exp", &["text".into()]).kind, ArgsErrorKind::UnknownField);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ArgsErrorKind {
    /// An argument the input schema does not list.
    UnknownField,
    /// A required argument is absent.
    MissingField,
    /// An argument (or the arguments as a whole) has the wrong shape or value.
    InvalidValue,
    /// The arguments nest deeper than the toolset's
    /// [`Limits::max_depth`](crate::limits::Limits::max_depth).
    TooDeep,
}

/// Arguments that do not fit an input type, before the tool name is known.
///
/// Layers produce it while decoding JSON arguments; the toolset adds the called
/// name and turns it into [`ToolError::InvalidArguments`](super::ToolError::InvalidArguments).
///
/// ```
/// use toolgraft::error::ArgsError;
/// let err = ArgsError::field("exp", "expected a number");
/// assert_eq!(err.to_string(), "`exp`: expected a number");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub struct ArgsError {
    /// The offending argument, as a path, when known.
    pub field: Option<String>,
    /// What kind of problem it is.
    pub kind: ArgsErrorKind,
    /// What is wrong.
    pub problem: String,
}

impl ArgsError {
    /// An error about one argument.
    ///
    /// ```
    /// # use toolgraft::error::ArgsError;
    /// assert_eq!(ArgsError::field("text", "missing").field.as_deref(), Some("text"));
    /// ```
    pub fn field(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: Some(field.into()),
            kind: ArgsErrorKind::InvalidValue,
            problem: problem.into(),
        }
    }

    /// An argument the input schema does not list; `expected` are those it does.
    ///
    /// ```
    /// # use toolgraft::error::ArgsError;
    /// let err = ArgsError::unknown("exp", &["text".into()]);
    /// assert_eq!(err.problem, "unknown field `exp`, expected one of `text`");
    /// ```
    pub fn unknown(field: &str, expected: &[String]) -> Self {
        let field = shorten(field);
        let expected = if expected.is_empty() {
            "no arguments".to_owned()
        } else {
            let listed: Vec<String> = expected.iter().map(|name| format!("`{name}`")).collect();
            format!("one of {}", listed.join(", "))
        };
        Self {
            problem: format!("unknown field `{field}`, expected {expected}"),
            field: Some(field.into_owned()),
            kind: ArgsErrorKind::UnknownField,
        }
    }

    /// An error about the arguments as a whole.
    ///
    /// ```
    /// # use toolgraft::error::ArgsError;
    /// assert_eq!(ArgsError::whole("expected an object").field, None);
    /// ```
    pub fn whole(problem: impl Into<String>) -> Self {
        Self {
            field: None,
            kind: ArgsErrorKind::InvalidValue,
            problem: problem.into(),
        }
    }

    /// The same error, one level down: `field` becomes `outer.field`.
    ///
    /// ```
    /// # use toolgraft::error::ArgsError;
    /// let err = ArgsError::field("city", "missing").within("items[2]");
    /// assert_eq!(err.field.as_deref(), Some("items[2].city"));
    /// ```
    pub fn within(self, outer: &str) -> Self {
        let field = match self.field {
            Some(inner) => format!("{outer}.{inner}"),
            None => outer.to_owned(),
        };
        Self {
            field: Some(field),
            ..self
        }
    }
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "`{field}`: {}", self.problem),
            None => f.write_str(&self.problem),
        }
    }
}
