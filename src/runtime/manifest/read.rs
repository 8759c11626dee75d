//! Reading a manifest's JSON: each key's reader, with the shape errors that
//! name the tool (or `match` entry) and say what to write instead.

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::access::PolicySpec;
use crate::bind::Publish;
use crate::error::{shorten, shorten_json};
use crate::name::{MAX_NAME_LEN, Name};
use crate::tool::Annotations;

use super::{ComboSpec, ElementSpec, ManifestError, MatchEntry};

fn shape(tool: &str, problem: String) -> ManifestError {
    ManifestError::Shape {
        tool: shorten(tool).into_owned(),
        problem,
    }
}

/// A tool's entry in the object form: its combos (none is its base alone), what
/// it publishes and the hints the operator sets, if it says.
pub(super) struct EntrySpec {
    pub(super) combos: Vec<ComboSpec>,
    pub(super) publish: Option<Publish>,
    pub(super) annotations: Option<Annotations>,
    pub(super) access: Vec<(String, PolicySpec)>,
    pub(super) publish_to: Option<Vec<(String, Publish)>>,
}

/// A tool's `{"combos": [...], "publish": ..., "annotations": {..}, "access": {..}, "publish_to": {..}}`.
pub(super) fn entry_of(
    tool: &str,
    fields: &Map<String, Value>,
) -> Result<EntrySpec, ManifestError> {
    const FORM: &str = r#"write {"combos": [["a", "b"]], "publish": "all" | "outermost" | "in_place" | {"published": "bound"}, "annotations": {"readOnlyHint": true}, "access": {"name": {"scopes": ["s"]}}, "publish_to": {"audience": "in_place"}}"#;
    const KEYS: [&str; 5] = ["combos", "publish", "annotations", "access", "publish_to"];
    if let Some(extra) = fields.keys().find(|key| !KEYS.contains(&key.as_str())) {
        return Err(shape(
            tool,
            format!("has an unexpected key `{}`; {FORM}", shorten(extra)),
        ));
    }
    let combos = match fields.get("combos") {
        None => return Err(shape(tool, format!("has no `combos`; {FORM}"))),
        Some(Value::Array(combos)) if combos.is_empty() => Vec::new(),
        Some(combos) => combos_of(tool, combos)?,
    };
    let publish = fields
        .get("publish")
        .map(|publish| publish_of(tool, publish, FORM))
        .transpose()?;
    let annotations = fields
        .get("annotations")
        .map(|hints| annotations_of(tool, hints))
        .transpose()?;
    let access = match fields.get("access") {
        None => Vec::new(),
        Some(access) => access_of(tool, access)?,
    };
    let publish_to = fields
        .get("publish_to")
        .map(|publish_to| publish_to_of(tool, publish_to, FORM))
        .transpose()?;
    Ok(EntrySpec {
        combos,
        publish,
        annotations,
        access,
        publish_to,
    })
}

/// A tool's `"publish_to"`: each audience with what the tool publishes to it,
/// in the form of `"publish"`.
fn publish_to_of(
    tool: &str,
    value: &Value,
    form: &str,
) -> Result<Vec<(String, Publish)>, ManifestError> {
    let audiences = value.as_object().ok_or_else(|| {
        shape(
            tool,
            format!(
                "has `publish_to` of {}; write \"publish_to\": {{\"audience\": <what it publishes to that audience, as in `publish`>}}",
                shown(value)
            ),
        )
    })?;
    audiences
        .iter()
        .map(|(audience, publish)| Ok((audience.clone(), publish_of(tool, publish, form)?)))
        .collect()
}

/// The top level's `"audiences"`: each audience's name with the policy that
/// decides who is in it, in order.
pub(super) fn audiences_of(value: &Value) -> Result<Vec<(String, PolicySpec)>, ManifestError> {
    const FORM: &str = r#"write "audiences": [{"name": "pro", "access": {"claims": {"plan": "pro"}}}], the first audience whose access allows a caller being its audience"#;
    let problem = |problem: String| ManifestError::TopLevel {
        problem: format!("{problem}; {FORM}"),
    };
    let Value::Array(audiences) = value else {
        return Err(problem(format!("`audiences` is {}", shown(value))));
    };
    let mut seen = std::collections::HashSet::new();
    audiences
        .iter()
        .enumerate()
        .map(|(at, audience)| {
            let at = at + 1;
            let fields = audience
                .as_object()
                .filter(|fields| fields.keys().all(|key| key == "name" || key == "access"))
                .ok_or_else(|| problem(format!("audience {at} is {}", shown(audience))))?;
            let name = match fields.get("name") {
                Some(Value::String(name)) => name.clone(),
                _ => return Err(problem(format!("audience {at} has no `name` string"))),
            };
            if !seen.insert(name.clone()) {
                return Err(problem(format!(
                    "the audience `{}` is named twice",
                    shorten(&name)
                )));
            }
            let access = fields
                .get("access")
                .ok_or_else(|| problem(format!("audience `{}` has no `access`", shorten(&name))))?;
            let policy = PolicySpec::deserialize(access).map_err(|error| {
                problem(format!(
                    "audience `{}` has an `access` that cannot be read ({})",
                    shorten(&name),
                    shorten(&error.to_string())
                ))
            })?;
            Ok((name, policy))
        })
        .collect()
}

/// The top level's `"match"`: each entry's conditions and combos, in order.
pub(super) fn matches_of(value: &Value) -> Result<Vec<MatchEntry>, ManifestError> {
    const FORM: &str = r#"write "match": [{"prefix": "fs_", "annotations": {"readOnlyHint": false}, "combos": [["approve"]]}], `prefix` and `annotations` optional"#;
    let Value::Array(entries) = value else {
        return Err(ManifestError::TopLevel {
            problem: format!("`match` is {}; {FORM}", shown(value)),
        });
    };
    entries
        .iter()
        .enumerate()
        .map(|(entry, value)| {
            let problem = |problem: String| ManifestError::Match { entry, problem };
            // The tool entries' readers name a tool: here, the entry.
            let in_entry = |error: ManifestError| match error {
                ManifestError::Shape { problem: said, .. } => problem(said),
                other => other,
            };
            let label = format!("match[{entry}]");
            let Value::Object(fields) = value else {
                return Err(problem(format!("is {}; {FORM}", shown(value))));
            };
            if let Some(extra) = fields
                .keys()
                .find(|key| !["prefix", "annotations", "combos"].contains(&key.as_str()))
            {
                return Err(problem(format!(
                    "has an unexpected key `{}`; {FORM}",
                    shorten(extra)
                )));
            }
            let prefix = match fields.get("prefix") {
                None => None,
                Some(Value::String(prefix)) if prefix.is_empty() => {
                    return Err(problem(
                        "has an empty `prefix`, which every name starts with; leave `prefix` out to match every tool".to_owned(),
                    ));
                }
                Some(Value::String(prefix)) if prefix.len() > MAX_NAME_LEN => {
                    return Err(problem(format!(
                        "has a `prefix` longer than {MAX_NAME_LEN} bytes, which no tool name is; shorten it"
                    )));
                }
                Some(Value::String(prefix)) => Some(prefix.clone()),
                Some(other) => {
                    return Err(problem(format!(
                        "has a `prefix` of {}, not a string; {FORM}",
                        shown(other)
                    )));
                }
            };
            let annotations = match fields.get("annotations") {
                None => Annotations::default(),
                Some(hints) => annotations_of(&label, hints).map_err(in_entry)?,
            };
            if annotations.title.is_some() {
                return Err(problem(
                    "has a `title` among its `annotations`, which is not a condition; match on readOnlyHint, destructiveHint, idempotentHint or openWorldHint".to_owned(),
                ));
            }
            let combos = match fields.get("combos") {
                None => return Err(problem(format!("has no `combos`; {FORM}"))),
                Some(Value::Array(combos)) if combos.is_empty() => {
                    return Err(problem(
                        "has no combos; write at least one, like [\"trace\"], or remove the entry".to_owned(),
                    ));
                }
                Some(combos) => combos_of(&label, combos).map_err(in_entry)?,
            };
            Ok(MatchEntry {
                prefix,
                annotations,
                combos,
            })
        })
        .collect()
}

/// A tool's `"access"`: each of its names with the policy on it.
fn access_of(tool: &str, value: &Value) -> Result<Vec<(String, PolicySpec)>, ManifestError> {
    const ACCESS: &str = r#"write "access": {"name": {"scopes": ["a"], "any_scope": ["b", "c"], "claims": {"tenant": "acme"}, "when": "<CEL>", "step_up": true}}, each field optional"#;
    let names = value
        .as_object()
        .ok_or_else(|| shape(tool, format!("has `access` of {}; {ACCESS}", shown(value))))?;
    names
        .iter()
        .map(|(name, spec)| {
            let policy = PolicySpec::deserialize(spec).map_err(|problem| {
                shape(
                    tool,
                    format!(
                        "has an `access` policy for `{}` that cannot be read ({}); {ACCESS}",
                        shorten(name),
                        shorten(&problem.to_string())
                    ),
                )
            })?;
            Ok((name.clone(), policy))
        })
        .collect()
}

/// A tool's `"annotations"`: MCP's hints by their names there, each a boolean
/// (`title` a string).
fn annotations_of(tool: &str, value: &Value) -> Result<Annotations, ManifestError> {
    const HINTS: &str = r#"write "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false, "title": "..."}, each optional"#;
    let Value::Object(hints) = value else {
        return Err(shape(
            tool,
            format!("has `annotations` of {}; {HINTS}", shown(value)),
        ));
    };
    let mut annotations = Annotations::default();
    for (hint, said) in hints {
        let slot = match hint.as_str() {
            "readOnlyHint" => &mut annotations.read_only,
            "destructiveHint" => &mut annotations.destructive,
            "idempotentHint" => &mut annotations.idempotent,
            "openWorldHint" => &mut annotations.open_world,
            "title" => {
                let Value::String(title) = said else {
                    return Err(shape(
                        tool,
                        format!("has an annotation `title` of {}; {HINTS}", shown(said)),
                    ));
                };
                annotations.title = Some(title.clone());
                continue;
            }
            other => {
                return Err(shape(
                    tool,
                    format!("has an unknown annotation `{}`; {HINTS}", shorten(other)),
                ));
            }
        };
        let Value::Bool(said) = said else {
            return Err(shape(
                tool,
                format!(
                    "has an annotation `{hint}` of {}, not a boolean; {HINTS}",
                    shown(said)
                ),
            ));
        };
        *slot = Some(*said);
    }
    Ok(annotations)
}

fn publish_of(tool: &str, value: &Value, form: &str) -> Result<Publish, ManifestError> {
    match value {
        Value::String(scope) if scope == "all" => Ok(Publish::All),
        Value::String(scope) if scope == "outermost" => Ok(Publish::Outermost),
        Value::String(scope) if scope == "in_place" => Ok(Publish::InPlace),
        Value::Object(names) => {
            let name = |name: &str| {
                Name::new(name).map_err(|err| {
                    shape(
                        tool,
                        format!("publishes `{}`, which is not a name: {err}", shorten(name)),
                    )
                })
            };
            let pairs = names
                .iter()
                .map(|(published, bound)| match bound {
                    Value::String(bound) => Ok((name(published)?, name(bound)?)),
                    other => Err(shape(
                        tool,
                        format!(
                            "publishes `{}` as {}, not a bound name; {form}",
                            shorten(published),
                            shown(other)
                        ),
                    )),
                })
                .collect::<Result<_, _>>()?;
            Ok(Publish::Only(pairs))
        }
        other => Err(shape(
            tool,
            format!("has a `publish` of {}; {form}", shown(other)),
        )),
    }
}

pub(super) fn combos_of(tool: &str, value: &Value) -> Result<Vec<ComboSpec>, ManifestError> {
    let Value::Array(entries) = value else {
        let one = match value {
            Value::String(_) => shown(value),
            _ => "\"trace\"".to_owned(),
        };
        return Err(shape(
            tool,
            format!(
                "expected a list of combos, found {}; write [{one}] for one combo, or [[\"a\", \"b\"], [\"c\"]] for several",
                shown(value)
            ),
        ));
    };
    if entries.is_empty() {
        return Err(shape(
            tool,
            "has no combos; write at least one, like [\"trace\"], or remove the key".to_owned(),
        ));
    }
    let nested = entries.iter().filter(|entry| entry.is_array()).count();
    if nested == 0 {
        return Ok(vec![combo_of(tool, 1, entries)?]);
    }
    if nested != entries.len() {
        return Err(shape(
            tool,
            "mixes extensions and combos in one list; write [\"a\", \"b\"] for one combo, or [[\"a\"], [\"b\"]] for several".to_owned(),
        ));
    }
    entries
        .iter()
        .enumerate()
        .map(|(at, combo)| {
            combo_of(
                tool,
                at + 1,
                combo.as_array().map_or(&[][..], Vec::as_slice),
            )
        })
        .collect()
}

fn combo_of(tool: &str, number: usize, elements: &[Value]) -> Result<ComboSpec, ManifestError> {
    if elements.is_empty() {
        return Err(shape(
            tool,
            format!("combo {number} is empty; list at least one extension, like [\"trace\"]"),
        ));
    }
    elements
        .iter()
        .enumerate()
        .map(|(at, element)| element_of(tool, number, at + 1, element))
        .collect()
}

const ELEMENT_FORMS: &str = r#"an element is an extension name, like "cache", or {"name": "cache", "config": {...}} (and "pin": {"exp": 60} to pin a reserved param, "hide": ["exp"] to hide one)"#;

fn element_of(
    tool: &str,
    combo: usize,
    at: usize,
    value: &Value,
) -> Result<ElementSpec, ManifestError> {
    let fail = |problem: String| {
        shape(
            tool,
            format!("element {at} of combo {combo} {problem}; {ELEMENT_FORMS}"),
        )
    };
    match value {
        Value::String(name) if !name.is_empty() => Ok(ElementSpec::named(name.clone())),
        Value::String(_) => Err(fail("is an empty name".to_owned())),
        Value::Object(fields) => {
            if let Some(extra) = fields
                .keys()
                .find(|key| !matches!(key.as_str(), "name" | "config" | "pin" | "hide"))
            {
                return Err(fail(format!("has an unexpected key `{}`", shorten(extra))));
            }
            let name = match fields.get("name") {
                Some(Value::String(name)) if !name.is_empty() => name.clone(),
                Some(other) => {
                    return Err(fail(format!(
                        "has a `name` that is not an extension name: {}",
                        shown(other)
                    )));
                }
                None => return Err(fail("has no `name`".to_owned())),
            };
            let pin = match fields.get("pin") {
                Some(Value::Object(pins)) => Some(pins.clone()),
                Some(other) => {
                    return Err(fail(format!(
                        "has a `pin` that is not a mapping of reserved params to values: {}",
                        shown(other)
                    )));
                }
                None => None,
            };
            let hide = match fields.get("hide") {
                Some(Value::Array(params)) if params.iter().all(Value::is_string) => Some(
                    params
                        .iter()
                        .filter_map(|param| param.as_str().map(str::to_owned))
                        .collect(),
                ),
                Some(other) => {
                    return Err(fail(format!(
                        "has a `hide` that is not a list of reserved param names: {}",
                        shown(other)
                    )));
                }
                None => None,
            };
            match fields.get("config") {
                Some(Value::Object(config)) => Ok(ElementSpec {
                    name,
                    config: Some(config.clone()),
                    pin,
                    hide,
                }),
                Some(other) => Err(fail(format!(
                    "has a `config` that is not a mapping: {}",
                    shown(other)
                ))),
                None if pin.is_some() || hide.is_some() => Ok(ElementSpec {
                    name,
                    config: None,
                    pin,
                    hide,
                }),
                None => Err(fail(format!(
                    "has no `config` mapping (write \"{}\" alone, or add \"config\": {{}})",
                    shorten(&name)
                ))),
            }
        }
        other => Err(fail(format!("is {}", shown(other)))),
    }
}

/// A value as it appears in JSON, shortened.
pub(super) fn shown(value: &Value) -> String {
    shorten_json(value)
}

/// A JSON value, refusing a key written twice in one object.
pub(super) struct StrictValue;

impl<'de> serde::de::DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "the key `{key}` is written twice in one object; write it once (for a tool, list all its combos under one key)"
                )));
            }
            let value = map.next_value_seed(StrictValue)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}
