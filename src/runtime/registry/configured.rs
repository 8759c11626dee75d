//! [`Configured`]: a typed extension registered with author config.

use std::sync::Arc;

use super::error::RegistryError;
use super::factory::Factory;
use super::registrable::{Registrable, sealed};
use super::typed::{FromConfig, Typed, config_of, read_config};
use crate::extension::{ConfigError, Configurable};
use crate::name::Name;

/// A typed extension that takes author config, for [`Registry::register`](crate::Registry::register): an
/// element with config gets an instance built from it
/// ([`Configurable::from_config`]); one without (or with an empty one) gets a
/// clone of the default, or, for one [`named`](Configured::named), is built from
/// an empty config.
///
/// ```
/// use toolgraft::Registry;
/// use toolgraft::runtime::Configured;
/// use toolgraft::ext::{Batch, OutputSchema};
/// let mut registry = Registry::new();
/// registry
///     .register(Configured::new(Batch::default()))?
///     .register(Configured::<OutputSchema>::named("output_schema"))?;
/// assert_eq!(registry.catalogue().len(), 2);
/// # Ok::<(), toolgraft::runtime::RegistryError>(())
/// ```
pub struct Configured<E> {
    default: Option<E>,
    name: Option<String>,
    /// Taken where `E: Configurable` is checked (the constructors), so a type
    /// without config is named once there, not again at `register`.
    from_config: FromConfig<E>,
}

impl<E> std::fmt::Debug for Configured<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Configured")
            .field("extension", &std::any::type_name::<E>())
            .field("name", &self.name)
            .field("default", &self.default.is_some())
            .finish()
    }
}

impl<E: Configurable> Configured<E> {
    /// `default` under its own name, built from config when an element has one.
    ///
    /// ```
    /// use toolgraft::Registry;
    /// use toolgraft::runtime::Configured;
    /// use toolgraft::ext::Cache;
    /// let mut registry = Registry::new();
    /// registry.register(Configured::new(Cache::default()))?;
    /// assert_eq!(registry.catalogue()[0].name, "cache");
    /// # Ok::<(), toolgraft::runtime::RegistryError>(())
    /// ```
    pub fn new(default: E) -> Self {
        Self {
            default: Some(default),
            name: None,
            from_config: Arc::new(config_of::<E>),
        }
    }

    /// An extension that only exists with config, under `name`: each element
    /// is built from its config.
    ///
    /// ```
    /// use toolgraft::Registry;
    /// use toolgraft::runtime::Configured;
    /// use toolgraft::ext::OutputSchema;
    /// let mut registry = Registry::new();
    /// registry.register(Configured::<OutputSchema>::named("declared"))?;
    /// assert_eq!(registry.catalogue()[0].name, "declared");
    /// # Ok::<(), toolgraft::runtime::RegistryError>(())
    /// ```
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            default: None,
            name: Some(name.into()),
            from_config: Arc::new(config_of::<E>),
        }
    }
}

impl<E> Configured<E> {
    /// An extension built by `build` from each element's config, read as `C`
    /// (serde's reading: a config that does not fit is refused naming the field),
    /// under `name`; an element without config is built from an empty one. For
    /// an extension whose instances come from a closure rather than a
    /// [`Configurable`] impl: a generic one, or one configured per registry.
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolgraft::Registry;
    /// use toolgraft::extension::ConfigError;
    /// use toolgraft::ext::Timeout;
    /// use toolgraft::runtime::Configured;
    ///
    /// /// `{"name": "deadline", "config": {"secs": 2}}`
    /// #[derive(serde::Deserialize)]
    /// struct Secs { secs: u64 }
    /// let mut registry = Registry::new();
    /// registry.register(Configured::from_fn("deadline", |config: Secs| {
    ///     Ok::<_, ConfigError>(Timeout::new(Duration::from_secs(config.secs)))
    /// }))?;
    /// assert_eq!(registry.catalogue()[0].name, "deadline");
    /// # Ok::<(), toolgraft::runtime::RegistryError>(())
    /// ```
    pub fn from_fn<C, F>(name: impl Into<String>, build: F) -> Self
    where
        C: serde::de::DeserializeOwned,
        F: Fn(C) -> Result<E, ConfigError> + Send + Sync + 'static,
    {
        Self {
            default: None,
            name: Some(name.into()),
            from_config: Arc::new(move |config| build(read_config(config)?)),
        }
    }
}

impl<E: sealed::OverErased> sealed::Sealed for Configured<E> {
    #[allow(private_interfaces)]
    fn into_factory(self) -> Result<(Name, Arc<dyn Factory>), RegistryError> {
        match (self.default, self.name) {
            (Some(default), name) => {
                let name = Name::new(name.as_deref().unwrap_or(default.name()))?;
                Ok((
                    name,
                    E::factory(Typed::Configurable(default, self.from_config)),
                ))
            }
            (None, name) => {
                let name = Name::new(name.as_deref().unwrap_or_default())?;
                Ok((
                    name,
                    E::factory(Typed::<E>::FromConfigOnly(self.from_config)),
                ))
            }
        }
    }
}

impl<E: sealed::OverErased> Registrable for Configured<E> {}
