//! An extension defined at run time: [`DynExtension`], what its factory receives
//! ([`DynLayer`]) and builds ([`DynBranch`]).

use std::sync::Arc;

use schemars::Schema;
use serde_json::{Map, Value};
use typed_builder::TypedBuilder;

use std::panic::AssertUnwindSafe;

use super::error::RegistryError;
use super::factory::Factory;
use super::registrable::{Registrable, sealed};
use crate::bind::{Element, Problem, Running};
use crate::error::panic_message;
use crate::extension::{AccessRole, ConfigError, LayerInput, Placement};
use crate::kind::ExtensionKind;
use crate::name::Name;
use crate::stack::ErasedStack;
use crate::stack::erased::DynStack;

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
    /// [`AccessRole::Authorizes`] for an authorization check,
    /// [`AccessRole::SharesAnswers`] for one that answers from what it kept (a
    /// cache): rule `shared-answers-inside-authorization` keeps the second kind
    /// inside the first. An authorization check stays outside every relocating
    /// extension (rule `caller-outside-relocation`), whatever its `placement`.
    #[builder(default)]
    access: AccessRole,
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
        element.access = self.access;
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

impl sealed::Sealed for DynExtension {
    #[allow(private_interfaces)]
    fn into_factory(self) -> Result<(Name, Arc<dyn Factory>), RegistryError> {
        let name = Name::new(&self.name)?;
        Ok((name, Arc::new(self)))
    }
}

impl Registrable for DynExtension {}
