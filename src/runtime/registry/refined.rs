//! [`Refined`]: a typed extension whose config refines an instance.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::error::RegistryError;
use super::factory::Factory;
use super::registrable::{Registrable, sealed};
use super::typed::{Refine, Typed, read_config};
use crate::extension::ConfigError;
use crate::name::Name;

/// A typed extension whose config refines an instance, for
/// [`Registry::register`](crate::Registry::register): an element without config (or with an empty one)
/// gets a clone of the default; one with config gets `refine(&default, config)`.
/// For an extension built from something config cannot carry (a
/// [`Chain`](crate::ext::Chain) holds its toolset), where
/// [`Configurable::from_config`](crate::extension::Configurable::from_config) has nothing to start from.
///
/// ```
/// use toolgraft::Registry;
/// use toolgraft::runtime::Refined;
/// use toolgraft::extension::ConfigError;
/// use toolgraft::ext::Pool;
///
/// /// `{"name": "pool", "config": {"name": "gpu"}}`: the same threads, another name.
/// #[derive(serde::Deserialize)]
/// struct Renamed { name: String }
/// fn rename(pool: &Pool, config: Renamed) -> Result<Pool, ConfigError> {
///     Ok(pool.clone().with_name(config.name))
/// }
/// let mut registry = Registry::new();
/// registry.register(Refined::new(Pool::new(1)?, rename))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Refined<E, C> {
    default: E,
    refine: fn(&E, C) -> Result<E, ConfigError>,
}

impl<E: std::fmt::Debug, C> std::fmt::Debug for Refined<E, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Refined")
            .field("default", &self.default)
            .field("config", &std::any::type_name::<C>())
            .finish_non_exhaustive()
    }
}

impl<E, C> Refined<E, C> {
    /// `default`, refined by `refine` with an element's config.
    ///
    /// ```
    /// use toolgraft::Registry;
    /// use toolgraft::runtime::Refined;
    /// use toolgraft::extension::ConfigError;
    /// use toolgraft::ext::Trace;
    /// /// `{"name": "trace", "config": {"level": ..}}`: the level is read, the
    /// /// instance kept.
    /// #[derive(serde::Deserialize)]
    /// struct Level { level: String }
    /// fn leveled(trace: &Trace, config: Level) -> Result<Trace, ConfigError> {
    ///     tracing::debug!(level = %config.level, "trace refined");
    ///     Ok(trace.clone())
    /// }
    /// let mut registry = Registry::new();
    /// registry.register(Refined::new(Trace, leveled))?;
    /// # Ok::<(), toolgraft::runtime::RegistryError>(())
    /// ```
    pub fn new(default: E, refine: fn(&E, C) -> Result<E, ConfigError>) -> Self {
        Self { default, refine }
    }
}

impl<E, C> sealed::Sealed for Refined<E, C>
where
    E: sealed::OverErased,
    C: serde::de::DeserializeOwned + 'static,
{
    #[allow(private_interfaces)]
    fn into_factory(self) -> Result<(Name, Arc<dyn Factory>), RegistryError> {
        let name = Name::new(self.default.name())?;
        let refine = self.refine;
        let refine: Refine<E> = Arc::new(move |default: &E, config: Map<String, Value>| {
            refine(default, read_config(config)?)
        });
        Ok((name, E::factory(Typed::Refined(self.default, refine))))
    }
}

impl<E, C> Registrable for Refined<E, C>
where
    E: sealed::OverErased,
    C: serde::de::DeserializeOwned + 'static,
{
}
