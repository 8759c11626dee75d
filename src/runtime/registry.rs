//! The registry: extensions by name, for combos that exist only at run time.
//!
//! A typed extension registers as itself: its kind and locality come from its type,
//! and it runs at JSON values ([`DynStack`]) here. An extension that exists only at
//! run time registers as a [`DynExtension`]: declared kind and locality, and a
//! factory closure over the erased layer below.

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::Schema;
use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;
use typed_builder::TypedBuilder;

use std::panic::AssertUnwindSafe;

use crate::bind::rules;
use crate::bind::{Attached, ComboDraft, Element, Minted, Problem, Running, written_config};
use crate::combo::apply_typed;
use crate::combo::typestate::{InputContract, OutputContract, reserved_schema};
use crate::error::BindError;
use crate::error::panic_message;
use crate::error::shorten;
use crate::extension::{ConfigError, Configurable, LayerInput, Mint, Placement};
use crate::kind::property::Locality;
use crate::kind::{ExtensionKind, Kind};
use crate::limits::{Limits, deeper_than};
use crate::name::{InvalidName, Name};
use crate::runtime::manifest::ElementSpec;
use crate::stack::erased::DynStack;
use crate::stack::{DynInput, ErasedStack, Rebuilt, Stack, decode_args};

/// Extensions by name.
///
/// ```
/// use toolgraft::Registry;
/// use toolgraft::runtime::Configured;
/// use toolgraft::ext::{Batch, Pool, Trace};
///
/// let mut registry = Registry::new();
/// registry.register(Trace)?;
/// registry.register(Configured::new(Batch::default()))?;
/// registry.register(Pool::new(2)?)?;
/// assert_eq!(
///     serde_json::to_string(&registry.catalogue())?,
///     r#"[{"name":"batch","kind":"transformer"},{"name":"pool","kind":"backend"},{"name":"trace","kind":"wrapper"}]"#
/// );
/// assert!(registry.register(Trace).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct Registry {
    extensions: BTreeMap<Name, Arc<dyn Factory>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.catalogue()).finish()
    }
}

/// One line of the catalogue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CatalogueEntry {
    /// The registered name.
    pub name: Name,
    /// Its kind, lowercase on the wire.
    pub kind: ExtensionKind,
}

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

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers an extension under its name: what `extension` is says how a
    /// manifest element gets an instance ([`Registrable`] lists the cases).
    ///
    /// - a typed extension, as itself (`registry.register(Trace)`): each branch
    ///   gets a clone, and an element may not give it config;
    /// - [`Configured::new(default)`](Configured::new): a typed extension that
    ///   takes author config, `default` when an element has none;
    /// - [`Configured::<E>::named(name)`](Configured::named): one that only exists
    ///   with config;
    /// - [`Refined::new(default, refine)`](Refined::new): one whose config refines
    ///   an instance;
    /// - a [`DynExtension`]: one defined at run time.
    ///
    /// A typed extension's branch input must serialize (every built-in's does, and
    /// so does any [`Wrap`](crate::Wrap) wrapper's): that is how a run-time layer
    /// above sees the arguments as given without copying them at every layer, and
    /// what a retry above sends again, decoded anew. So its `Serialize` must write
    /// what its `Deserialize` reads: a field skipped when serialized (a secret,
    /// say) is missing from every retried call. A
    /// panic in the extension's own code while a combo is bound refuses that tool
    /// ([`BindError::ExtensionFailed`]). A name registered twice is refused.
    ///
    /// ```
    /// use toolgraft::Registry;
    /// use toolgraft::runtime::{Configured, RegistryError};
    /// use toolgraft::ext::{Cache, OutputSchema, Trace};
    /// let mut registry = Registry::new();
    /// registry
    ///     .register(Trace)?
    ///     .register(Configured::new(Cache::default()))?
    ///     .register(Configured::<OutputSchema>::named("output_schema"))?;
    /// let again = registry.register(Trace).unwrap_err();
    /// assert!(matches!(again, RegistryError::AlreadyRegistered { .. }));
    /// # Ok::<(), RegistryError>(())
    /// ```
    ///
    /// What cannot be registered does not compile, and the error says why:
    ///
    /// ```compile_fail
    /// let mut registry = toolgraft::Registry::new();
    /// registry.register("trace"); // `&str` is not an extension
    /// ```
    pub fn register<R: Registrable>(&mut self, extension: R) -> Result<&mut Self, RegistryError> {
        extension.register_into(self)?;
        Ok(self)
    }

    fn insert(&mut self, name: Name, factory: Arc<dyn Factory>) -> Result<(), RegistryError> {
        if self.extensions.contains_key(&name) {
            return Err(RegistryError::AlreadyRegistered { name });
        }
        self.extensions.insert(name, factory);
        Ok(())
    }

    /// Every registered name with its kind, sorted by name.
    pub fn catalogue(&self) -> Vec<CatalogueEntry> {
        self.extensions
            .iter()
            .map(|(name, factory)| CatalogueEntry {
                name: name.clone(),
                kind: factory.kind(),
            })
            .collect()
    }

    /// Builds one combo over `base`, in the [rulebook](crate::rulebook)'s order: unknown names, then
    /// cardinality (before any factory runs), then the engine's per-layer rules.
    /// Factories stop running at the first refused layer; a change that is retried
    /// runs them again.
    pub(crate) fn combo(
        &self,
        base: &Minted,
        spec: &[ElementSpec],
        limits: &Limits,
    ) -> Result<Attached, BindError> {
        let tool = &base.running.base;
        if spec.is_empty() {
            return Err(BindError::EmptyCombo { tool: tool.clone() });
        }
        // Before anything else: binding costs grow with the length, and so does
        // the nesting of a call through the combo.
        crate::bind::rules::combo_length(tool, spec.len(), limits.max_combo_len())?;
        let mut unknown: Vec<String> = spec
            .iter()
            .filter(|element| !self.extensions.contains_key(element.name.as_str()))
            .map(|element| element.name.clone())
            .collect();
        if !unknown.is_empty() {
            unknown.sort();
            unknown.dedup();
            return Err(BindError::UnknownExtensions {
                tool: tool.clone(),
                names: unknown,
                registered: self.extensions.keys().map(ToString::to_string).collect(),
            });
        }
        let resolved: Vec<(&Name, &Arc<dyn Factory>, &ElementSpec)> = spec
            .iter()
            .filter_map(|element| {
                let (name, factory) = self.extensions.get_key_value(element.name.as_str())?;
                Some((name, factory, element))
            })
            .collect();
        rules::cardinality(
            tool,
            resolved
                .iter()
                .map(|(name, factory, _)| (*name, factory.kind())),
        )?;
        // Config is cloned and decoded (both recurse) by the factories: a
        // config nested past any sane schema is refused before they run.
        if let Some(element) = spec.iter().find(|element| {
            element
                .config
                .as_ref()
                .is_some_and(|config| config.values().any(|v| deeper_than(v, CONFIG_DEPTH)))
        }) {
            return Err(BindError::InvalidConfig {
                tool: tool.clone(),
                extension: Name::unchecked(&shorten(&element.name)),
                field: "config".to_owned(),
                problem: format!("it nests deeper than {CONFIG_DEPTH} levels"),
            });
        }
        let mut draft = ComboDraft::new(&base.running);
        let mut below = base.dyn_stack();
        for (name, factory, spec) in resolved {
            if draft.is_refused() {
                break;
            }
            let written = written_config(spec.config.clone().map(Value::Object).as_ref());
            let (mut element, stack) =
                factory.apply(name, written.as_ref(), draft.running(), below.clone());
            element.pinned = spec.pin.clone().filter(|pins| !pins.is_empty());
            if let Some(stack) = &stack {
                below = DynStack::erased(element.branch.clone(), stack.clone());
            }
            draft.push(element, stack);
        }
        draft.finish()
    }
}

/// How deep an element's config may nest (what JSON and TOML parsers allow anyway).
const CONFIG_DEPTH: usize = 64;

/// What the registry does with a name.
trait Factory: Send + Sync + 'static {
    fn kind(&self) -> ExtensionKind;

    /// The element for `config` (as written, an empty one already dropped) over the
    /// layer input `below`, and its branch's stack (`None` when it could not be
    /// built; the element's problem says why).
    fn apply(
        &self,
        name: &Name,
        config: Option<&Map<String, Value>>,
        below: &Running,
        stack: DynStack,
    ) -> (Element, Option<Arc<dyn ErasedStack>>);
}

/// A typed extension: a default instance, a way to build one from config, or both.
enum Typed<E> {
    Default(E),
    Configurable(E, FromConfig<E>),
    FromConfigOnly(FromConfig<E>),
    Refined(E, Refine<E>),
}

/// Builds an extension from an instance and an element's config mapping.
type Refine<E> = Arc<dyn Fn(&E, Map<String, Value>) -> Result<E, ConfigError> + Send + Sync>;

/// Builds an extension from an element's config mapping.
type FromConfig<E> = Arc<dyn Fn(Map<String, Value>) -> Result<E, ConfigError> + Send + Sync>;

fn config_of<E: Configurable>(config: Map<String, Value>) -> Result<E, ConfigError> {
    E::from_config(read_config(config)?)
}

/// An element's config mapping as `C`, a problem naming the field.
fn read_config<C: serde::de::DeserializeOwned>(
    config: Map<String, Value>,
) -> Result<C, ConfigError> {
    decode_args(config).map_err(|err| {
        ConfigError::new(
            err.field.unwrap_or_else(|| "config".to_owned()),
            err.problem,
        )
    })
}

/// What [`Registry::register`] takes: a typed extension (as itself), a
/// [`Configured`], a [`Refined`], or a [`DynExtension`].
///
/// ```
/// use toolgraft::runtime::Registrable;
/// use toolgraft::ext::Trace;
/// fn registrable(_: impl Registrable) {}
/// registrable(Trace);
/// ```
///
/// Sealed: each case is one of the types above.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be registered as an extension",
    label = "not a registrable extension",
    note = "`Registry::register` takes a typed extension (`register(Trace)`), `Configured::new(ext)` for one that takes author config, `Configured::<E>::named(\"name\")` for one built from config only, `Refined::new(ext, refine)`, or a `DynExtension`",
    note = "a typed extension registers when it is `Clone` (each manifest element gets its own clone) and layers over `DynStack`, the run-time stack of JSON values (every `Wrap` does): the `help` above names what `{Self}` lacks"
)]
pub trait Registrable: sealed::Sealed {}

mod sealed {
    pub trait Sealed {
        /// Registers the extension's factory under its name.
        fn register_into(self, registry: &mut super::Registry) -> Result<(), super::RegistryError>;
    }

    /// A typed extension the registry can run over the erased layer below: the
    /// one bound every typed case shares, stated once.
    pub trait OverErased: super::Mint<super::DynStack> + Clone {
        /// The factory of `typed`, one of this extension's cases. Private types
        /// in a sealed trait: no one outside this module can name or call it.
        #[allow(private_interfaces)]
        fn factory(typed: super::Typed<Self>) -> super::Arc<dyn super::Factory>;
    }

    /// The input of `E`'s branch over the run-time stack, which a run-time layer
    /// around it may read as JSON. `Self` is that input, not `E`: a failing bound
    /// whose `Self` is the registered extension would be reported as the bare
    /// `Registrable`, without this message.
    #[diagnostic::on_unimplemented(
        message = "`{E}` cannot be registered: its branch takes `{Self}`, which is not `Serialize`",
        label = "the branch of `{E}` takes `{Self}`",
        note = "a registered extension runs among layers defined at run time, which read the arguments of the layer below as JSON: the registry rebuilds them from the typed input when asked",
        note = "derive `serde::Serialize` for `{Self}` (its `Deserialize` twin), or implement it"
    )]
    pub trait RunTimeInput<E>: serde::Serialize {}

    #[diagnostic::do_not_recommend]
    impl<I: serde::Serialize, E> RunTimeInput<E> for I {}
}

impl<E> sealed::OverErased for E
where
    E: Mint<DynStack> + Clone,
    <E::Kind as Kind>::InputRule: InputContract<E, DynInput, <E::Branch as Stack>::Input>,
    <E::Kind as Kind>::OutputRule: OutputContract<E, Value, <E::Branch as Stack>::Output>,
    <E::Branch as Stack>::Input: sealed::RunTimeInput<E>,
{
    #[allow(private_interfaces)]
    fn factory(typed: Typed<E>) -> Arc<dyn Factory> {
        Arc::new(typed)
    }
}

impl<E: sealed::OverErased> sealed::Sealed for E {
    fn register_into(self, registry: &mut Registry) -> Result<(), RegistryError> {
        let name = Name::new(self.name())?;
        registry.insert(name, E::factory(Typed::Default(self)))
    }
}

impl<E: sealed::OverErased> Registrable for E {}

/// A typed extension that takes author config, for [`Registry::register`]: an
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
    fn register_into(self, registry: &mut Registry) -> Result<(), RegistryError> {
        match (self.default, self.name) {
            (Some(default), name) => {
                let name = Name::new(name.as_deref().unwrap_or(default.name()))?;
                registry.insert(
                    name,
                    E::factory(Typed::Configurable(default, self.from_config)),
                )
            }
            (None, name) => {
                let name = Name::new(name.as_deref().unwrap_or_default())?;
                registry.insert(
                    name,
                    E::factory(Typed::<E>::FromConfigOnly(self.from_config)),
                )
            }
        }
    }
}

impl<E: sealed::OverErased> Registrable for Configured<E> {}

/// A typed extension whose config refines an instance, for
/// [`Registry::register`]: an element without config (or with an empty one)
/// gets a clone of the default; one with config gets `refine(&default, config)`.
/// For an extension built from something config cannot carry (a
/// [`Chain`](crate::ext::Chain) holds its toolset), where
/// [`Configurable::from_config`] has nothing to start from.
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
///     Ok(pool.clone().named(config.name))
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
    fn register_into(self, registry: &mut Registry) -> Result<(), RegistryError> {
        let name = Name::new(self.default.name())?;
        let refine = self.refine;
        let refine: Refine<E> = Arc::new(move |default: &E, config: Map<String, Value>| {
            refine(default, read_config(config)?)
        });
        registry.insert(name, E::factory(Typed::Refined(self.default, refine)))
    }
}

impl<E, C> Registrable for Refined<E, C>
where
    E: sealed::OverErased,
    C: serde::de::DeserializeOwned + 'static,
{
}

impl sealed::Sealed for DynExtension {
    fn register_into(self, registry: &mut Registry) -> Result<(), RegistryError> {
        let name = Name::new(&self.name)?;
        registry.insert(name, Arc::new(self))
    }
}

impl Registrable for DynExtension {}

impl<E> Factory for Typed<E>
where
    E: Mint<DynStack> + Clone,
    <E::Kind as Kind>::InputRule: InputContract<E, DynInput, <E::Branch as Stack>::Input>,
    <E::Branch as Stack>::Input: Serialize,
{
    fn kind(&self) -> ExtensionKind {
        <E::Kind as Kind>::KIND
    }

    fn apply(
        &self,
        name: &Name,
        config: Option<&Map<String, Value>>,
        below: &Running,
        stack: DynStack,
    ) -> (Element, Option<Arc<dyn ErasedStack>>) {
        let written = config.cloned();
        let accepts_config = !matches!(self, Typed::Default(_));
        // A panic in the extension's own code (its config, its schemas, its
        // `layer`) refuses the tool, as a run-time factory's does.
        let built = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let extension = match (self, &written) {
                (Typed::Configurable(_, from_config), Some(config)) => from_config(config.clone()),
                (Typed::Configurable(default, _), None) => Ok(default.clone()),
                (Typed::Refined(default, refine), Some(config)) => refine(default, config.clone()),
                (Typed::Refined(default, _), None) => Ok(default.clone()),
                (Typed::FromConfigOnly(from_config), written) => {
                    from_config(written.clone().unwrap_or_default())
                }
                // Config it does not take: rule `config` refuses it at its turn.
                (Typed::Default(default), _) => Ok(default.clone()),
            };
            let reserved = reserved_schema::<
                E,
                DynInput,
                <E::Branch as Stack>::Input,
                <E::Kind as Kind>::InputRule,
            >();
            extension.map(|extension| {
                apply_typed(
                    extension,
                    name.clone(),
                    below,
                    stack,
                    accepts_config,
                    reserved,
                )
            })
        }));
        let problem = match built {
            Ok(Ok((mut element, branch))) => {
                element.written = written;
                let stack: Arc<dyn ErasedStack> = Arc::new(Rebuilt(branch));
                return (element, Some(stack));
            }
            Ok(Err(problem)) => Problem::Config(problem),
            Err(panic) => Problem::Failed(format!(
                "it panicked: {}",
                shorten(&panic_message(panic.as_ref()))
            )),
        };
        let mut element = Element::bare(name, <E::Kind as Kind>::KIND, below);
        element.placement = <E::Locality as Locality>::PLACEMENT;
        element.accepts_config = accepts_config;
        element.written = written;
        element.problem = Some(problem);
        (element, None)
    }
}

/// An extension defined at run time: a declared kind, locality, reserved params and
/// config acceptance, and a factory over the erased layer below.
///
/// The factory runs when a combo is bound (again, if a concurrent change makes the
/// toolset retry); a panic in it refuses the tool. A factory or branch that holds a
/// strong [`Toolset`](crate::Toolset) keeps it alive: hold a
/// [`WeakToolset`](crate::toolset::WeakToolset) instead.
///
/// The factory presents whatever schema it likes, so the binding engine checks what
/// the typed path proves: a wrapper must present its layer input's schema (plus its
/// reserved params), a transformer a concrete one.
///
/// ```
/// use toolgraft::{Registry, Stack};
/// use toolgraft::kind::ExtensionKind;
/// use toolgraft::runtime::{DynBranch, DynExtension, DynStack};
///
/// let audit = DynExtension::builder()
///     .name("audit")
///     .kind(ExtensionKind::Wrapper)
///     .factory(|layer| {
///         let stack = DynStack::around(layer.input.branch.clone(), layer.below.clone(), |input, below| async move {
///             // Logged shortened: arguments can be megabytes.
///             tracing::info!(args = %toolgraft::error::shorten_json(input.args()), "audit");
///             below.call(input).await
///         });
///         Ok(DynBranch::builder().stack(stack).build())
///     })
///     .build();
/// let mut registry = Registry::new();
/// registry.register(audit)?;
/// # Ok::<(), toolgraft::runtime::RegistryError>(())
/// ```
#[derive(TypedBuilder)]
#[builder(doc)]
pub struct DynExtension {
    /// The registered name.
    #[builder(setter(into))]
    name: String,
    /// The kind.
    kind: ExtensionKind,
    /// Where it must run: [`Placement::BesideBody`] for one that only works beside
    /// the body, [`Placement::BesideCaller`] for one that needs the caller's session.
    #[builder(default)]
    placement: Placement,
    /// Its reserved params (wrappers), as an object schema.
    #[builder(default, setter(transform = |reserved: Schema| Some(Arc::new(reserved))))]
    reserved: Option<Arc<Schema>>,
    /// Whether an element may give it config.
    #[builder(default)]
    accepts_config: bool,
    /// Builds the branch over the layer below.
    #[builder(setter(
        fn transform<F>(factory: F) -> Arc<DynFactory>
        where
            F: Fn(DynLayer<'_>) -> Result<DynBranch, ConfigError> + Send + Sync + 'static,
        {
            Arc::new(factory)
        }
    ))]
    factory: Arc<DynFactory>,
}

impl std::fmt::Debug for DynExtension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynExtension")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

type DynFactory = dyn Fn(DynLayer<'_>) -> Result<DynBranch, ConfigError> + Send + Sync;

/// What a [`DynExtension`]'s factory receives.
pub struct DynLayer<'a> {
    /// The layer below, callable with JSON.
    pub below: DynStack,
    /// The layer input's name, description and schemas, and the branch's name.
    pub input: LayerInput<'a, DynExtension>,
    /// The element's config, if it carries one.
    pub config: Option<&'a Map<String, Value>>,
}

impl std::fmt::Debug for DynLayer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynLayer")
            .field("below", &self.below)
            .field("input", &self.input)
            .field("config", &self.config)
            .finish()
    }
}

/// What a [`DynExtension`]'s factory builds: the branch's stack, and what it
/// presents. Unset schemas and description mean "as the kind implies".
#[derive(TypedBuilder)]
#[builder(doc)]
pub struct DynBranch {
    /// Serves the branch.
    stack: DynStack,
    /// The input schema it presents.
    #[builder(default, setter(strip_option))]
    input_schema: Option<Schema>,
    /// The output schema it declares.
    #[builder(default, setter(strip_option))]
    output_schema: Option<Schema>,
    /// A new description.
    #[builder(default, setter(strip_option, into))]
    description: Option<String>,
    /// Another branch name than `<layer input>_<extension>`.
    #[builder(default, setter(strip_option, into))]
    name: Option<String>,
}

impl std::fmt::Debug for DynBranch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynBranch")
            .field("stack", &self.stack)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Factory for DynExtension {
    fn kind(&self) -> ExtensionKind {
        self.kind
    }

    fn apply(
        &self,
        name: &Name,
        config: Option<&Map<String, Value>>,
        below: &Running,
        stack: DynStack,
    ) -> (Element, Option<Arc<dyn ErasedStack>>) {
        let written = config.cloned();
        let mut element = Element::bare(name, self.kind, below);
        element.placement = self.placement;
        element.accepts_config = self.accepts_config;
        element.config = written.clone().map(Value::Object);
        element.written = written;
        element.reserved = self.reserved.clone();
        // Rule `reserved-params`: reserved params go no further than the wrapper that reserves them.
        let reserved = self
            .reserved
            .as_ref()
            .filter(|_| self.kind.preserves_schema())
            .and_then(|reserved| crate::schema::property_names(reserved))
            .unwrap_or_default();
        let below_stack = if reserved.is_empty() {
            stack
        } else {
            stack.without(reserved)
        };
        let conventional = element.branch.clone();
        let layer = DynLayer {
            below: below_stack,
            input: below.layer_input(&conventional),
            config: config.filter(|_| self.accepts_config),
        };
        let built = std::panic::catch_unwind(AssertUnwindSafe(|| (self.factory)(layer)));
        match built {
            Ok(Ok(branch)) => {
                if let Some(chosen) = branch.name {
                    match Name::new(&chosen) {
                        Ok(chosen) => element.branch = chosen,
                        Err(invalid) => element.problem = Some(Problem::BranchName(invalid)),
                    }
                }
                element.presented_input = branch.input_schema.map(Arc::new);
                element.declared_output = branch.output_schema.map(Arc::new);
                element.description = branch.description;
                let stack = if self.placement == Placement::BesideBody {
                    branch
                        .stack
                        .body_local(name.clone(), element.branch.clone())
                } else {
                    branch.stack
                };
                (element, Some(stack.into_erased()))
            }
            Ok(Err(problem)) if self.accepts_config => {
                element.problem = Some(Problem::Config(problem));
                (element, None)
            }
            Ok(Err(problem)) => {
                element.problem = Some(Problem::Failed(problem.to_string()));
                (element, None)
            }
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                element.problem = Some(Problem::Failed(format!("its factory panicked: {message}")));
                (element, None)
            }
        }
    }
}
