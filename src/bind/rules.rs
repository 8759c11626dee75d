//! The stacking rules as run-time functions over the engine's view of a combo: the
//! only place each rule is decided at bind, for typed and run-time combos alike
//! (for typed combos they can only pass: the typestate proved them). Each function
//! names its rule in the [rulebook](crate::rulebook).

use std::sync::Arc;

use schemars::Schema;

use crate::bind::{Element, Problem, Running};
use crate::error::BindError;
use crate::kind::ExtensionKind;
use crate::name::Name;
use crate::schema::{self, ReservedConflict};

/// Rule `cardinality`: at most one element of a non-`multiple` kind per combo. Reports the
/// first such kind, with every element of that kind in combo order.
pub(crate) fn cardinality<'a>(
    tool: &Name,
    elements: impl Iterator<Item = (&'a Name, ExtensionKind)> + Clone,
) -> Result<(), BindError> {
    for kind in ExtensionKind::iter().filter(|kind| !kind.multiple()) {
        let of_kind = elements.clone().filter(|(_, of)| *of == kind);
        // Counted before anything is collected: every combo passes through here.
        if of_kind.clone().nth(1).is_some() {
            return Err(BindError::MultipleOfKind {
                tool: tool.clone(),
                kind,
                extensions: of_kind.map(|(name, _)| name.clone()).collect(),
            });
        }
    }
    Ok(())
}

/// Rule `locality-inside-relocation`: a body-locality element must not follow a relocating one.
pub(crate) fn locality(below: &Running, element: &Element) -> Result<(), BindError> {
    if !element.body_local {
        return Ok(());
    }
    match below
        .chain
        .iter()
        .find(|link| link.kind.relocates_execution())
    {
        Some(relocating) => Err(BindError::LocalityOutsideRelocation {
            tool: below.base.clone(),
            extension: element.name.clone(),
            relocating: relocating.extension.clone(),
        }),
        None => Ok(()),
    }
}

/// Rule `config`: config reaches only an extension that accepts it (empty config is fine),
/// and must be one the extension can work with.
pub(crate) fn config(below: &Running, element: &Element) -> Result<(), BindError> {
    let (tool, extension) = (below.base.clone(), element.name.clone());
    if element.written.is_some() && !element.accepts_config {
        return Err(BindError::ConfigNotAccepted { tool, extension });
    }
    match &element.problem {
        Some(Problem::Config(problem)) => Err(BindError::InvalidConfig {
            tool,
            extension,
            field: problem.field.clone(),
            problem: problem.problem.clone(),
        }),
        Some(Problem::Failed(problem)) => Err(BindError::ExtensionFailed {
            tool,
            extension,
            problem: problem.clone(),
        }),
        Some(Problem::BranchName(_)) | None => Ok(()),
    }
}

/// Rule `branch-by-rename`: a branch needs a new name.
pub(crate) fn new_name(below: &Running, element: &Element) -> Result<(), BindError> {
    if let Some(Problem::BranchName(invalid)) = &element.problem {
        return Err(BindError::InvalidBranchName {
            tool: below.base.clone(),
            extension: element.name.clone(),
            name: invalid.name.clone(),
            problem: invalid.problem.clone(),
        });
    }
    if element.branch == below.base {
        return Err(BindError::SameName {
            tool: below.base.clone(),
            extension: element.name.clone(),
        });
    }
    Ok(())
}

/// Rules `wrapper-input-schema`, `reserved-params`, `transformer-input-schema` and
/// `backend-input-schema`: the branch's input schema, by the kind's input rule.
pub(crate) fn input_schema(below: &Running, element: &Element) -> Result<Arc<Schema>, BindError> {
    let kind = element.kind;
    if kind.preserves_schema() {
        let expected = match &element.reserved {
            None => below.input_schema.clone(),
            Some(reserved) => schema::with_reserved_shared(&below.input_schema, reserved)
                .map_err(|conflict| reserved_conflict(below, element, conflict))?,
        };
        if let Some(presented) = &element.presented_input {
            let reserved = element
                .reserved
                .as_ref()
                .and_then(|reserved| schema::property_names(reserved))
                .unwrap_or_default();
            let stripped = schema::without(presented, &reserved);
            if let Some(difference) = schema::difference(&below.input_schema, &stripped) {
                return Err(BindError::WrapperChangedSchema {
                    tool: below.base.clone(),
                    extension: element.name.clone(),
                    below: below.name.clone(),
                    difference,
                });
            }
        }
        Ok(expected)
    } else if let Some(param) = element.own_params.iter().find(|param| {
        schema::property_names(&below.input_schema).is_some_and(|names| names.contains(param))
    }) {
        // Rule `reserved-params` for the parameters a non-wrapper adds beside its layer input's:
        // one of the same name would be masked.
        Err(BindError::ReservedParamExists {
            tool: below.base.clone(),
            extension: element.name.clone(),
            below: below.name.clone(),
            param: param.clone(),
        })
    } else if kind.declares_schema() {
        let verdict = match &element.presented_input {
            Some(schema) => schema::concrete_object(schema).map(|()| schema.clone()),
            None => Err("no input schema".to_owned()),
        };
        verdict.map_err(|presented| BindError::TransformerSchemaNotConcrete {
            tool: below.base.clone(),
            extension: element.name.clone(),
            presented,
        })
    } else {
        Ok(element
            .presented_input
            .clone()
            .unwrap_or_else(|| below.input_schema.clone()))
    }
}

/// Rule `reserved-params`' errors, from what the schema plumbing found.
fn reserved_conflict(below: &Running, element: &Element, conflict: ReservedConflict) -> BindError {
    let (tool, extension) = (below.base.clone(), element.name.clone());
    match conflict {
        ReservedConflict::Exists(param) => BindError::ReservedParamExists {
            tool,
            extension,
            below: below.name.clone(),
            param,
        },
        ReservedConflict::NotInline(param) => BindError::ReservedParamNotInline {
            tool,
            extension,
            param,
        },
        ReservedConflict::Malformed(problem) => BindError::MalformedSchema {
            tool,
            extension,
            problem,
        },
    }
}

/// Rule `output-schema`: a branch carries its own declared output schema; without one, it keeps
/// the layer input's only if its kind preserves output shape. So the base's schema
/// reaches a branch exactly when no element of its prefix reshapes the output.
///
/// A kind that preserves output shape returns the layer's output as is: it may
/// declare a schema where the layer has none, but not one that contradicts the
/// layer's.
pub(crate) fn output_schema(
    below: &Running,
    element: &Element,
) -> Result<Option<Arc<Schema>>, BindError> {
    let preserves = element.kind.preserves_output_shape();
    match (&element.declared_output, &below.output_schema) {
        (Some(declared), Some(layer))
            if preserves && !Arc::ptr_eq(declared, layer) && declared != layer =>
        {
            Err(BindError::OutputSchemaContradicts {
                tool: below.base.clone(),
                extension: element.name.clone(),
                below: below.name.clone(),
            })
        }
        (Some(declared), _) => Ok(Some(declared.clone())),
        (None, layer) => Ok(layer.clone().filter(|_| preserves)),
    }
}

/// Rule `description-carry-forward`: the running description, replaced by an element that sets one.
pub(crate) fn description(below: &Running, element: &Element) -> Arc<str> {
    element
        .description
        .as_deref()
        .map_or_else(|| below.description.clone(), Arc::from)
}
