//! The stacking rules as run-time functions over the engine's view of a combo: the
//! only place each rule is decided at bind, for typed and run-time combos alike
//! (for typed combos they can only pass: the typestate proved them). Each function
//! names its rule in the [rulebook](crate::rulebook).

use std::sync::Arc;

use schemars::Schema;

use super::info::Link;
use super::running::{Element, Problem, Running};
use crate::error::BindError;
use crate::extension::{AccessRole, Placement};
use crate::kind::ExtensionKind;
use crate::name::Name;
use crate::schema::{self, ReservedConflict};
use crate::tool::Presentation;

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
    if element.placement != Placement::BesideBody {
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

/// Rule `caller-outside-relocation`: a relocating element must not follow one that
/// needs the caller's session, nor an authorization check (which must decide
/// before anything is enqueued), whatever placement the check's extension says.
pub(crate) fn caller_side(below: &Running, element: &Element) -> Result<(), BindError> {
    if !element.kind.relocates_execution() {
        return Ok(());
    }
    match below.chain.iter().find(|link| {
        link.placement == Placement::BesideCaller || link.access == AccessRole::Authorizes
    }) {
        Some(authorizer) if authorizer.access == AccessRole::Authorizes => {
            Err(BindError::AuthorizationInsideRelocation {
                tool: below.base.clone(),
                authorizer: authorizer.extension.clone(),
                relocating: element.name.clone(),
            })
        }
        Some(caller_side) => Err(BindError::CallerLocalInsideRelocation {
            tool: below.base.clone(),
            extension: caller_side.extension.clone(),
            relocating: element.name.clone(),
        }),
        None => Ok(()),
    }
}

/// Rule `shared-answers-inside-authorization`: an element that answers from what
/// it kept must not follow an authorization check.
pub(crate) fn shared_answers(below: &Running, element: &Element) -> Result<(), BindError> {
    if element.access != AccessRole::SharesAnswers {
        return Ok(());
    }
    match below
        .chain
        .iter()
        .find(|link| link.access == AccessRole::Authorizes)
    {
        Some(authorizer) => Err(BindError::SharedAnswerOutsideAuthorization {
            tool: below.base.clone(),
            extension: element.name.clone(),
            authorizer: authorizer.extension.clone(),
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

/// Rule `side-effects`: an element that makes a call again, or answers without
/// making it, binds only where the running hints allow it.
pub(crate) fn side_effects(below: &Running, element: &Element) -> Result<(), BindError> {
    let Some(demand) = element.demand else {
        return Ok(());
    };
    if below.presentation.annotations.allow(demand) {
        return Ok(());
    }
    // A call made again under a layer that answers repeats does no more.
    if demand == crate::tool::Demand::Repeatable && below.answers_repeats {
        return Ok(());
    }
    let transformer = below
        .chain
        .iter()
        .rev()
        .find(|link| !keeps_hints(link.kind))
        .map(|link| link.extension.clone());
    Err(BindError::SideEffects {
        tool: below.base.clone(),
        extension: element.name.clone(),
        layer: below.name.clone(),
        demand,
        transformer,
    })
}

/// Rule `side-effects`, the hints a branch presents: a wrapper's and a backend's
/// are their layer's (they make its calls), a transformer's say nothing of side
/// effects (its branch is a new tool).
pub(crate) fn presentation(below: &Running, element: &Element) -> Arc<Presentation> {
    if keeps_hints(element.kind) {
        return below.presentation.clone();
    }
    let annotations = below.presentation.annotations.of_new_tool();
    if annotations == below.presentation.annotations {
        return below.presentation.clone();
    }
    Arc::new(Presentation {
        annotations,
        ..Presentation::clone(&below.presentation)
    })
}

/// Rule `side-effects`, what a branch's calls made again do: no more than once
/// when a layer that answers repeats sits in it since the nearest transformer
/// (whose branch makes new calls). Not a hint clients see: a call without a
/// key of its own is not answered from what was kept.
pub(crate) fn answers_repeats(below: &Running, element: &Element) -> bool {
    element.answers_repeats || (below.answers_repeats && keeps_hints(element.kind))
}

/// Whether a kind's branch makes its layer's calls (a wrapper's, a backend's).
fn keeps_hints(kind: ExtensionKind) -> bool {
    kind.preserves_schema() || kind.relocates_execution()
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

/// Rule `reserved-params` for pins and hidden params: an operator pins (to a
/// value its schema admits) or hides only reserved params of the element it
/// pins or hides them on. The one check of both: a hidden param is a pin
/// without a value.
pub(crate) fn pins(
    below: &Running,
    element: &Element,
    pins: &serde_json::Map<String, serde_json::Value>,
    hidden: &[String],
) -> Result<(), BindError> {
    let reserved = element
        .reserved
        .as_ref()
        .and_then(|reserved| schema::property_names(reserved))
        .unwrap_or_default();
    // Checked here, as operator config is: a pin of the wrong type would
    // otherwise refuse every call, as if the caller had sent it.
    if let Some(reserved_schema) = &element.reserved {
        for (param, value) in pins {
            if let Some(expected) = schema::misfit(reserved_schema, param, value) {
                return Err(BindError::PinMisfits {
                    tool: below.base.clone(),
                    extension: element.name.clone(),
                    param: crate::error::shorten(param).into_owned(),
                    value: crate::error::shorten_json(value),
                    expected,
                });
            }
        }
    }
    let listed = || {
        if reserved.is_empty() {
            "none".to_owned()
        } else {
            reserved.join(", ")
        }
    };
    if let Some(param) = pins.keys().find(|param| !reserved.contains(param)) {
        return Err(BindError::PinNotReserved {
            tool: below.base.clone(),
            extension: element.name.clone(),
            param: crate::error::shorten(param).into_owned(),
            reserved: listed(),
        });
    }
    match hidden.iter().find(|param| !reserved.contains(param)) {
        None => Ok(()),
        Some(param) => Err(BindError::HiddenNotReserved {
            tool: below.base.clone(),
            extension: element.name.clone(),
            param: crate::error::shorten(param).into_owned(),
            reserved: listed(),
        }),
    }
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
            // A param pinned or hidden below is the operator's, not the
            // model's: the branch below no longer presents it, though its
            // stack takes it.
            let reserved: Vec<String> = reserved
                .into_iter()
                .chain(below.withheld.iter().cloned())
                .collect();
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

/// Rule `depth`, by length: a combo has at most `limit` elements
/// ([`Limits::max_combo_len`](crate::limits::Limits::max_combo_len)).
pub(crate) fn combo_length(tool: &Name, len: usize, limit: usize) -> Result<(), BindError> {
    if len > limit {
        return Err(BindError::ComboTooLong {
            tool: tool.clone(),
            len,
            limit,
        });
    }
    Ok(())
}

/// Rule `depth`, by name: the bound name `name`, minted by the layers `chain` on
/// `tool`, has at most `limit` bytes
/// ([`Limits::max_name_len`](crate::limits::Limits::max_name_len)). The error says
/// how many of the layers fit, since each adds `_<extension>` to the name.
pub(crate) fn name_length(
    tool: &Name,
    name: &Name,
    chain: &[Link],
    limit: usize,
) -> Result<(), BindError> {
    if name.len() <= limit {
        return Ok(());
    }
    let mut len = tool.len();
    let fits = chain
        .iter()
        .take_while(|link| {
            len += 1 + link.extension.len();
            len <= limit
        })
        .count();
    Err(BindError::NameTooLong {
        tool: tool.clone(),
        name: crate::error::shorten(name).into_owned(),
        len: name.len(),
        limit,
        layers: chain.len(),
        fits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of the rulebook's depth table: tool name bytes, extension name
    /// bytes, the deepest combo that binds.
    fn table() -> Vec<(usize, usize, usize)> {
        let rulebook = include_str!("../rulebook.rs");
        let section = rulebook.split("//! # depth\n").nth(1).unwrap();
        let section = section.split("\n//! # ").next().unwrap();
        section
            .lines()
            .filter_map(|line| {
                let cells: Vec<usize> = line
                    .strip_prefix("//! |")?
                    .split('|')
                    .filter_map(|cell| cell.trim().split(' ').next()?.parse().ok())
                    .collect();
                (cells.len() == 3).then(|| (cells[0], cells[1], cells[2]))
            })
            .collect()
    }

    fn chain(depth: usize, extension: &str) -> (Name, Vec<Link>) {
        let links: Vec<Link> = (0..depth)
            .map(|_| Link {
                extension: Name::new(extension).unwrap(),
                kind: ExtensionKind::Wrapper,
                placement: Placement::Anywhere,
                access: AccessRole::Neutral,
                config: None,
            })
            .collect();
        let mut name = String::new();
        for link in &links {
            name.push('_');
            name.push_str(&link.extension);
        }
        (Name::unchecked(&name), links)
    }

    #[test]
    fn the_rulebook_table_is_what_binds() {
        let rows = table();
        assert!(rows.len() >= 5, "{rows:?}");
        for (tool_len, extension_len, deepest) in rows {
            let tool = Name::new("t".repeat(tool_len)).unwrap();
            let extension = "e".repeat(extension_len);
            let (fits, links) = chain(deepest, &extension);
            let fits = Name::unchecked(&format!("{tool}{fits}"));
            assert!(name_length(&tool, &fits, &links, 128).is_ok(), "{fits}");
            let (over, links) = chain(deepest + 1, &extension);
            let over = Name::unchecked(&format!("{tool}{over}"));
            match name_length(&tool, &over, &links, 128) {
                Err(BindError::NameTooLong {
                    fits, layers, len, ..
                }) => {
                    assert_eq!((fits, layers), (deepest, deepest + 1));
                    assert!(len > 128);
                }
                other => panic!("{over}: {other:?}"),
            }
        }
    }
}
