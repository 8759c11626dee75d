//! A typed extension run over the erased layer below: a default instance, a way
//! to build one from config, or both.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use std::panic::AssertUnwindSafe;

use super::factory::Factory;
use crate::bind::{Element, Problem, Running};
use crate::combo::apply_typed;
use crate::combo::typestate::{InputContract, reserved_schema};
use crate::error::panic_message;
use crate::error::shorten;
use crate::extension::{ConfigError, Configurable, Mint};
use crate::kind::property::Locality;
use crate::kind::{ExtensionKind, Kind};
use crate::name::Name;
use crate::stack::erased::DynStack;
use crate::stack::{DynInput, ErasedStack, Rebuilt, Stack, decode_args};

/// A typed extension: a default instance, a way to build one from config, or both.
pub(super) enum Typed<E> {
    Default(E),
    Configurable(E, FromConfig<E>),
    FromConfigOnly(FromConfig<E>),
    Refined(E, Refine<E>),
}

/// Builds an extension from an instance and an element's config mapping.
pub(super) type Refine<E> =
    Arc<dyn Fn(&E, Map<String, Value>) -> Result<E, ConfigError> + Send + Sync>;

/// Builds an extension from an element's config mapping.
pub(super) type FromConfig<E> =
    Arc<dyn Fn(Map<String, Value>) -> Result<E, ConfigError> + Send + Sync>;

pub(super) fn config_of<E: Configurable>(config: Map<String, Value>) -> Result<E, ConfigError> {
    E::from_config(read_config(config)?)
}

/// An element's config mapping as `C`, a problem naming the field.
pub(super) fn read_config<C: serde::de::DeserializeOwned>(
    config: Map<String, Value>,
) -> Result<C, ConfigError> {
    decode_args(config).map_err(|err| {
        ConfigError::new(
            err.field.unwrap_or_else(|| "config".to_owned()),
            err.problem,
        )
    })
}

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
        element.access = <E::Locality as Locality>::ACCESS;
        element.answers_repeats = <E::Locality as Locality>::ANSWERS_REPEATS;
        element.accepts_config = accepts_config;
        element.written = written;
        element.problem = Some(problem);
        (element, None)
    }
}
