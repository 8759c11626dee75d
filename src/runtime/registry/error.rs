//! Why an extension could not be registered.

use thiserror::Error;

use crate::name::{InvalidName, Name};

/// Why an extension could not be registered.
///
/// ```
/// let mut registry = toolgraft::Registry::new();
/// registry.register(toolgraft::ext::Trace)?;
/// let err = registry.register(toolgraft::ext::Trace).unwrap_err();
/// assert_eq!(err.to_string(), "extension `trace` is already registered; register it under another name");
/// # Ok::<(), toolgraft::runtime::RegistryError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Rule `registry`: a name registered twice.
    #[error("extension `{name}` is already registered; register it under another name")]
    AlreadyRegistered {
        /// The name.
        name: Name,
    },
    /// The name is not a valid [`Name`].
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
}

impl RegistryError {
    /// The section of the [rulebook](crate::rulebook) this refusal enforces:
    /// [`Rule::Registry`](crate::rulebook::Rule::Registry) for a name registered
    /// twice.
    ///
    /// ```
    /// use toolgraft::rulebook::Rule;
    /// let mut registry = toolgraft::Registry::new();
    /// registry.register(toolgraft::ext::Trace)?;
    /// let err = registry.register(toolgraft::ext::Trace).unwrap_err();
    /// assert_eq!(err.rule(), Some(Rule::Registry));
    /// # Ok::<(), toolgraft::runtime::RegistryError>(())
    /// ```
    pub fn rule(&self) -> Option<crate::rulebook::Rule> {
        match self {
            Self::AlreadyRegistered { .. } => Some(crate::rulebook::Rule::Registry),
            Self::InvalidName(_) => None,
        }
    }
}
