//! Tool and extension names.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// The longest name [`Name::new`] accepts, in bytes (MCP recommends at most 128).
///
/// ```
/// use toolgraft::Name;
/// use toolgraft::limits::MAX_NAME_LEN;
/// assert!(Name::new("x".repeat(MAX_NAME_LEN)).is_ok());
/// assert!(Name::new("x".repeat(MAX_NAME_LEN + 1)).is_err());
/// ```
pub const MAX_NAME_LEN: usize = 128;

/// A validated tool or extension name: 1 to [`MAX_NAME_LEN`] characters from
/// `A-Z a-z 0-9 _ - .` (the MCP tool-name alphabet).
///
/// Branch names are minted as `<layer input>_<extension>`, so they use the same
/// alphabet by construction; their length is the toolset's
/// [`Limits::max_name_len`](crate::limits::Limits::max_name_len), checked when they are
/// bound, because a deep combo's names grow with its depth.
///
/// Cloning is cheap (a reference count).
///
/// ```
/// use toolgraft::Name;
///
/// let name = Name::new("get_weather")?;
/// assert_eq!(name, "get_weather");
/// assert!(Name::new("").is_err());
/// assert!(Name::new("get weather").is_err());
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Arc<str>);

/// A string that is not a valid [`Name`].
///
/// ```
/// use toolgraft::Name;
/// let err = Name::new("a/b").unwrap_err();
/// assert_eq!(err.to_string(),
///     "invalid name `a/b`: `/` is not allowed (use A-Z, a-z, 0-9, `_`, `-` or `.`)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("invalid name `{name}`: {problem}")]
pub struct InvalidName {
    /// The rejected string (shortened, see [`shorten`](crate::error::shorten)).
    pub name: String,
    /// What is wrong with it.
    pub problem: String,
}

impl Name {
    /// Validates `name`.
    ///
    /// ```
    /// # use toolgraft::Name;
    /// assert!(Name::new("v1.search-web").is_ok());
    /// ```
    pub fn new(name: impl AsRef<str>) -> Result<Self, InvalidName> {
        let name = name.as_ref();
        let problem = if name.is_empty() {
            Some("a name must not be empty".to_owned())
        } else if name.len() > MAX_NAME_LEN {
            Some(format!("longer than {MAX_NAME_LEN} bytes"))
        } else {
            name.chars()
                .find(|c| !Self::allowed(*c))
                .map(|c| format!("`{c}` is not allowed (use A-Z, a-z, 0-9, `_`, `-` or `.`)"))
        };
        match problem {
            None => Ok(Self(name.into())),
            Some(problem) => Err(InvalidName {
                name: crate::quote::shorten(name).into_owned(),
                problem,
            }),
        }
    }

    /// A name from text that should be one but comes from elsewhere (a name a
    /// worker process sends back, one read from a job store): each character a
    /// name does not allow becomes `_`, an empty text `_`, a long one is cut to
    /// the limit. A name that was valid comes back as it was.
    ///
    /// ```
    /// # use toolgraft::Name;
    /// assert_eq!(Name::lossy("fetch_proxy"), "fetch_proxy");
    /// assert_eq!(Name::lossy("a b/c"), "a_b_c");
    /// assert_eq!(Name::lossy(""), "_");
    /// assert_eq!(Name::lossy(&"x".repeat(500)).as_str().len(), 128);
    /// ```
    pub fn lossy(text: &str) -> Name {
        if let Ok(name) = Self::new(text) {
            return name;
        }
        let mut name: String = text
            .chars()
            .map(|c| if Self::allowed(c) { c } else { '_' })
            .take(MAX_NAME_LEN)
            .collect();
        if name.is_empty() {
            name.push('_');
        }
        Name(name.into())
    }

    /// The conventional branch name `<self>_<extension>`.
    ///
    /// ```
    /// # use toolgraft::Name;
    /// let shout = Name::new("shout")?;
    /// assert_eq!(shout.branch(&Name::new("cache")?), "shout_cache");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn branch(&self, extension: &Name) -> Name {
        // Joined on the stack, so the name costs one allocation (its own), not two:
        // binding mints one per element of every combo.
        let (left, right) = (self.0.as_bytes(), extension.0.as_bytes());
        let mut joined = [0; 256];
        if let Some(buffer) = joined.get_mut(..left.len() + 1 + right.len()) {
            buffer[..left.len()].copy_from_slice(left);
            buffer[left.len()] = b'_';
            buffer[left.len() + 1..].copy_from_slice(right);
            if let Ok(joined) = std::str::from_utf8(buffer) {
                return Name(joined.into());
            }
        }
        Name(format!("{self}_{extension}").into())
    }

    /// A name that skipped validation: only for stand-ins in a combo that is already
    /// refused, so its error can still mention what the user wrote.
    pub(crate) fn unchecked(name: &str) -> Name {
        Name(name.into())
    }

    /// The name as a string slice.
    ///
    /// ```
    /// # use toolgraft::Name;
    /// assert_eq!(Name::new("ping")?.as_str(), "ping");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name's shared text (a reference count, no copy): for a label that
    /// outlives the name (a metric's, say).
    ///
    /// ```
    /// let name = toolgraft::Name::new("ping")?;
    /// assert_eq!(&*name.shared(), "ping");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn shared(&self) -> Arc<str> {
        self.0.clone()
    }

    fn allowed(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl TryFrom<&str> for Name {
    type Error = InvalidName;
    fn try_from(name: &str) -> Result<Self, Self::Error> {
        Self::new(name)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Name::new(raw).map_err(serde::de::Error::custom)
    }
}
