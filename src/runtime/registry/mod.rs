//! The registry: extensions by name, for combos that exist only at run time.
//!
//! A typed extension registers as itself: its kind and locality come from its type,
//! and it runs at JSON values ([`DynStack`]) here. An extension that exists only at
//! run time registers as a [`DynExtension`]: declared kind and locality, and a
//! factory closure over the erased layer below.

// Bottom to top: a file imports only from the ones above it.
mod factory;
mod error;
mod typed;
mod registrable;
mod dynamic;
mod configured;
mod refined;

pub use configured::Configured;
pub use dynamic::{DynBranch, DynExtension, DynLayer};
pub use error::RegistryError;
pub use refined::Refined;
pub use registrable::Registrable;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::bind::rules;
use crate::bind::{Attached, ComboDraft, Minted, written_config};
use crate::error::BindError;
use crate::error::shorten;
use crate::kind::ExtensionKind;
use crate::limits::{Limits, deeper_than};
use crate::name::Name;
use crate::runtime::manifest::ElementSpec;
use crate::stack::erased::{DynStack, Withheld};
use factory::Factory;

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
        let (name, factory) = extension.into_factory()?;
        self.insert(name, factory)?;
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
            element.hidden = spec.hide.clone().filter(|hidden| !hidden.is_empty());
            let stack = stack.map(|stack| {
                Withheld::around(stack, element.pinned.clone(), element.hidden.clone())
            });
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
