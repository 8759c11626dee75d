//! JSON Schema plumbing: generating, merging and comparing schemas.
//!
//! Policy (which kind must present what) lives in the binding engine; this module
//! only knows JSON Schema.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};

pub use schemars::Schema;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value};

use crate::error::ArgsError;

/// JSON arguments of a call: always an object (MCP's `arguments`).
///
/// ```
/// let args: toolgraft::extension::Args = serde_json::from_str(r#"{"text": "hi"}"#)?;
/// assert_eq!(args["text"], "hi");
/// # Ok::<(), serde_json::Error>(())
/// ```
pub type Args = serde_json::Map<String, Value>;

/// The root schema of `T`, as toolgraft advertises it (JSON Schema 2020-12, the
/// draft MCP uses).
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Shout { text: String }
/// let schema = toolgraft::schema::of::<Shout>();
/// assert_eq!(schema.get("required").unwrap(), &serde_json::json!(["text"]));
/// ```
pub fn of<T: JsonSchema>() -> Schema {
    SchemaGenerator::default().into_root_schema_for::<T>()
}

/// [`of`], computed once per type and shared: every tool of one input type, and
/// every wrapper reserving one params type, holds the same schema, which is also
/// what lets [`with_reserved_shared`] find what it derived from it.
pub(crate) fn of_cached<T: JsonSchema + 'static>() -> Arc<Schema> {
    static CACHE: OnceLock<RwLock<HashMap<TypeId, Arc<Schema>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let id = TypeId::of::<T>();
    if let Some(schema) = cache
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&id)
    {
        return schema.clone();
    }
    let schema = Arc::new(of::<T>());
    let mut cache = cache.write().unwrap_or_else(PoisonError::into_inner);
    cache.entry(id).or_insert(schema).clone()
}

/// The top-level property names of [`of_cached`]'s schema for `T`, computed once
/// per type: what a wrapper strips from the arguments, asked again by every branch.
pub(crate) fn names_cached<T: JsonSchema + 'static>() -> Arc<[String]> {
    static CACHE: OnceLock<RwLock<HashMap<TypeId, Arc<[String]>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let id = TypeId::of::<T>();
    if let Some(names) = cache
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&id)
    {
        return names.clone();
    }
    let names: Arc<[String]> = property_names(&of_cached::<T>()).unwrap_or_default().into();
    let mut cache = cache.write().unwrap_or_else(PoisonError::into_inner);
    cache.entry(id).or_insert(names).clone()
}

/// The top-level property names of an object schema (`None` for other schemas).
///
/// ```
/// let schema = schemars::json_schema!({"type": "object", "properties": {"a": {}, "b": {}}});
/// assert_eq!(toolgraft::schema::property_names(&schema).unwrap(), ["a", "b"]);
/// ```
pub fn property_names(schema: &Schema) -> Option<Vec<String>> {
    Some(
        schema
            .get("properties")?
            .as_object()?
            .keys()
            .cloned()
            .collect(),
    )
}

/// The argument names an input schema admits, as JSON Schema reads it: a schema
/// that says `"additionalProperties": false` (what `#[serde(deny_unknown_fields)]`
/// makes schemars say) admits only the properties it names, and a call naming
/// anything else is refused; any other schema admits more, and a call may carry
/// a property it does not name (rmcp's tools take one, and so do toolgraft's).
///
/// Properties of `oneOf` / `anyOf` / `allOf` alternatives count, so enum inputs work.
///
/// ```
/// use toolgraft::schema::ArgNames;
/// let args = serde_json::json!({"text": "hi", "exp": 1}).as_object().unwrap().clone();
/// let closed = ArgNames::of(&schemars::json_schema!({
///     "type": "object", "properties": {"text": {"type": "string"}}, "additionalProperties": false
/// }));
/// assert_eq!(closed.check(&args).unwrap_err().problem, "unknown field `exp`, expected one of `text`");
/// let open = ArgNames::of(&schemars::json_schema!({
///     "type": "object", "properties": {"text": {"type": "string"}}
/// }));
/// assert!(open.check(&args).is_ok(), "`exp` is not forbidden");
/// ```
#[derive(Clone, Debug, Default)]
pub struct ArgNames(Option<Arc<[String]>>);

impl ArgNames {
    /// The names `schema` admits.
    pub fn of(schema: &Schema) -> Self {
        // A closed schema whose names this cannot all see (behind a `$ref`)
        // is left to the tool's own decoding, which knows them.
        if !closed(schema) || names_elsewhere(schema) {
            return Self(None);
        }
        let mut names = Vec::new();
        collect_properties(schema.as_value(), &mut names);
        let alternatives = ["oneOf", "anyOf", "allOf"];
        for alternative in alternatives.iter().filter_map(|key| schema.get(*key)) {
            for branch in alternative.as_array().into_iter().flatten() {
                collect_properties(branch, &mut names);
            }
        }
        // An object schema names its parameters, even none (`{"type": "object"}`
        // takes no arguments); a schema that is not about objects names nothing, and
        // then admits anything.
        let about_objects = schema.get("type").is_some_and(|kind| kind == "object")
            || schema.get("properties").is_some()
            || !names.is_empty();
        Self(about_objects.then(|| names.into()))
    }

    /// Refuses the first argument the schema does not name.
    pub fn check(&self, args: &Args) -> Result<(), ArgsError> {
        let Some(names) = &self.0 else {
            return Ok(());
        };
        match args.keys().find(|arg| !names.contains(arg)) {
            Some(unknown) => Err(ArgsError::unknown(unknown, names)),
            None => Ok(()),
        }
    }

    /// Whether a call may carry `arg`.
    pub fn admits(&self, arg: &str) -> bool {
        self.0
            .as_ref()
            .is_none_or(|names| names.iter().any(|name| name == arg))
    }
}

/// Whether some of `schema`'s top-level property names are behind a `$ref`:
/// its own, or one of its `oneOf` / `anyOf` / `allOf` alternatives'.
fn names_elsewhere(schema: &Schema) -> bool {
    let refers = |value: &Value| value.get("$ref").is_some();
    refers(schema.as_value())
        || ["oneOf", "anyOf", "allOf"]
            .iter()
            .filter_map(|key| schema.get(*key)?.as_array())
            .flatten()
            .any(refers)
}

fn collect_properties(schema: &Value, names: &mut Vec<String>) {
    let properties = schema.get("properties").and_then(Value::as_object);
    for name in properties.into_iter().flat_map(Map::keys) {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
}

/// What `value` is not, of what the property `name` of `schema` says in its
/// `type` (a type or a list of them) and its numeric `minimum` / `maximum`:
/// `None` when it fits, or when the schema says neither (a `$ref`, `anyOf`:
/// the extension's own decoding still checks those when called).
pub(crate) fn misfit(schema: &Schema, name: &str, value: &Value) -> Option<String> {
    let property = schema.as_object()?.get("properties")?.get(name)?;
    let says = |key: &str| property.get(key);
    let type_of = |value: &Value| match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let is = type_of(value);
    let admits = |expected: &str| expected == is || (expected == "number" && is == "integer");
    let expected: Vec<&str> = match says("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !expected.is_empty() && !expected.iter().any(|expected| admits(expected)) {
        return Some(format!("a {}, not a {is}", expected.join(" or ")));
    }
    let number = value.as_f64()?;
    if let Some(minimum) = says("minimum").and_then(Value::as_f64)
        && number < minimum
    {
        return Some(format!("at least {minimum}"));
    }
    if let Some(maximum) = says("maximum").and_then(Value::as_f64)
        && number > maximum
    {
        return Some(format!("at most {maximum}"));
    }
    None
}

/// Whether an object schema forbids the properties it does not name, as JSON
/// Schema reads it (`additionalProperties` or `unevaluatedProperties` false).
pub(crate) fn closed(schema: &Schema) -> bool {
    ["additionalProperties", "unevaluatedProperties"]
        .iter()
        .any(|key| schema.get(*key) == Some(&Value::Bool(false)))
}

/// Whether an object schema says it accepts properties beyond those it names
/// (an `additionalProperties` other than `false`).
pub(crate) fn open_ended(schema: &Schema) -> bool {
    match schema.as_bool() {
        Some(accepts_anything) => accepts_anything,
        None => match schema.get("additionalProperties") {
            None | Some(Value::Bool(false)) => false,
            Some(_) => true,
        },
    }
}

/// Why reserved params cannot be added to a layer input's schema.
#[derive(Debug, PartialEq)]
pub(crate) enum ReservedConflict {
    /// The layer input already takes a parameter of that name.
    Exists(String),
    /// The reserved param's schema refers to definitions elsewhere.
    NotInline(String),
    /// The layer input's schema cannot take properties.
    Malformed(String),
}

/// `below` plus the properties and `required` entries of `reserved` (rule `reserved-params`).
pub(crate) fn with_reserved(below: &Schema, reserved: &Schema) -> Result<Schema, ReservedConflict> {
    let mut merged = below.clone();
    let target = merged.ensure_object();
    let empty = Map::new();
    let own = reserved
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let properties = target
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(properties) = properties else {
        return Err(ReservedConflict::Malformed(format!(
            "its `properties` is `{properties}`, not an object"
        )));
    };
    for (param, schema) in own {
        if properties.contains_key(param) {
            return Err(ReservedConflict::Exists(param.clone()));
        }
        if refers_elsewhere(schema) {
            return Err(ReservedConflict::NotInline(param.clone()));
        }
        properties.insert(param.clone(), schema.clone());
    }
    if let Some(Value::Array(required)) = reserved.get("required")
        && !required.is_empty()
    {
        let target_required = target
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        let Value::Array(target_required) = target_required else {
            return Err(ReservedConflict::Malformed(format!(
                "its `required` is `{target_required}`, not a list"
            )));
        };
        target_required.extend(required.iter().cloned());
    }
    Ok(merged)
}

/// [`with_reserved`] of shared schemas, shared: binding the same reserved params
/// over the same layer schema (every tool of one input type, every combo of one
/// tool) derives the merged schema once, and every branch holds that one.
pub(crate) fn with_reserved_shared(
    below: &Arc<Schema>,
    reserved: &Arc<Schema>,
) -> Result<Arc<Schema>, ReservedConflict> {
    derived("with-reserved", below, Some(reserved), || {
        with_reserved(below, reserved)
    })
}

/// The schema `derive` makes of `from` (and `and`), made once while it is in use:
/// `what` names the derivation, which must depend on nothing else.
///
/// Remembered by the identity of the inputs. The memo holds them (and the result)
/// weakly: a `Weak` keeps its allocation, so an address it remembers cannot be
/// handed to another schema while it is remembered, and a value under a live `Arc`
/// never changes; nothing outlives the branches that use it but a few empty
/// allocations, and the memo is a short ring, so it cannot grow.
///
/// What a transformer that derives its schema from the layer's (as `batch` does)
/// uses, so that a thousand tools of one input type derive it once:
///
/// ```
/// use std::sync::Arc;
/// use toolgraft::schema::{derived, Schema};
/// let item: Arc<Schema> = Arc::new(schemars::json_schema!({"type": "string"}));
/// let list = || Ok::<_, std::convert::Infallible>(schemars::json_schema!({"type": "array"}));
/// let once = derived("example-list", &item, None, list)?;
/// let again = derived("example-list", &item, None, list)?;
/// assert!(Arc::ptr_eq(&once, &again));
/// # Ok::<(), std::convert::Infallible>(())
/// ```
pub fn derived<E>(
    what: &'static str,
    from: &Arc<Schema>,
    and: Option<&Arc<Schema>>,
    derive: impl FnOnce() -> Result<Schema, E>,
) -> Result<Arc<Schema>, E> {
    static MEMO: Mutex<Derived> = Mutex::new(Derived::new());
    if let Some(known) = MEMO
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(what, from, and)
    {
        return Ok(known);
    }
    // Derived outside the lock: a panic in it cannot poison the memo for the rest.
    let made = Arc::new(derive()?);
    MEMO.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .put(what, from, and, &made);
    Ok(made)
}

/// How many derivations [`derived`] remembers: the distinct ones one binding runs
/// through in a row.
const DERIVED: usize = 16;

/// A ring of derived schemas, by the identity of their inputs.
struct Derived {
    slots: [Option<DerivedSlot>; DERIVED],
    next: usize,
}

struct DerivedSlot {
    what: &'static str,
    from: Weak<Schema>,
    and: Option<Weak<Schema>>,
    made: Weak<Schema>,
}

impl Derived {
    const fn new() -> Self {
        Self {
            slots: [const { None }; DERIVED],
            next: 0,
        }
    }

    fn get(
        &self,
        what: &str,
        from: &Arc<Schema>,
        and: Option<&Arc<Schema>>,
    ) -> Option<Arc<Schema>> {
        self.slots.iter().flatten().find_map(|slot| {
            let same = slot.what == what
                && std::ptr::eq(slot.from.as_ptr(), Arc::as_ptr(from))
                && match (&slot.and, and) {
                    (Some(slot), Some(and)) => std::ptr::eq(slot.as_ptr(), Arc::as_ptr(and)),
                    (slot, and) => slot.is_none() && and.is_none(),
                };
            same.then(|| slot.made.upgrade()).flatten()
        })
    }

    fn put(
        &mut self,
        what: &'static str,
        from: &Arc<Schema>,
        and: Option<&Arc<Schema>>,
        made: &Arc<Schema>,
    ) {
        self.slots[self.next] = Some(DerivedSlot {
            what,
            from: Arc::downgrade(from),
            and: and.map(Arc::downgrade),
            made: Arc::downgrade(made),
        });
        self.next = (self.next + 1) % DERIVED;
    }
}

/// `presented` minus the properties (and `required` entries) named in `reserved`.
pub(crate) fn without(presented: &Schema, reserved: &[String]) -> Schema {
    let mut stripped = presented.clone();
    if let Some(Value::Object(properties)) = stripped.get_mut("properties") {
        for name in reserved {
            properties.remove(name);
        }
    }
    if let Some(Value::Array(required)) = stripped.get_mut("required") {
        required.retain(|name| !reserved.iter().any(|r| name == r.as_str()));
    }
    stripped
}

/// The first difference between two schemas, as a sentence; `None` when they are
/// equal. An empty `required` (or `properties`) equals an absent one.
pub(crate) fn difference(expected: &Schema, presented: &Schema) -> Option<String> {
    let expected = normalized(expected);
    let presented = normalized(presented);
    let expected_props = expected.get("properties").and_then(Value::as_object);
    let presented_props = presented.get("properties").and_then(Value::as_object);
    if let (Some(expected_props), Some(presented_props)) = (expected_props, presented_props) {
        if let Some(extra) = presented_props
            .keys()
            .find(|k| !expected_props.contains_key(*k))
        {
            return Some(format!(
                "it presents a parameter `{extra}` that the layer input does not take"
            ));
        }
        if let Some(missing) = expected_props
            .keys()
            .find(|k| !presented_props.contains_key(*k))
        {
            return Some(format!("it drops the parameter `{missing}`"));
        }
    }
    first_difference(expected.as_value(), presented.as_value(), String::new()).map(|path| {
        format!(
            "it differs at `{}`",
            if path.is_empty() { "/" } else { &path }
        )
    })
}

/// A schema with the spellings of "nothing" dropped (an empty `required` or
/// `properties` says what their absence says), and `required` in one order (it is
/// a set).
fn normalized(schema: &Schema) -> Schema {
    let mut schema = schema.clone();
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    }
    if let Some(Value::Array(required)) = schema.get("required")
        && required.is_empty()
    {
        schema.remove("required");
    }
    if let Some(Value::Object(properties)) = schema.get("properties")
        && properties.is_empty()
    {
        schema.remove("properties");
    }
    schema
}

fn first_difference(a: &Value, b: &Value, path: String) -> Option<String> {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            for key in keys {
                let inner = format!("{path}/{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => {
                        if let Some(found) = first_difference(x, y, inner) {
                            return Some(found);
                        }
                    }
                    _ => return Some(inner),
                }
            }
            None
        }
        (a, b) if a == b => None,
        _ => Some(path),
    }
}

/// Whether a schema is a concrete object schema (named properties, or none at all
/// for zero parameters) rather than a bare "any JSON" passthrough. On failure, says
/// what it is instead.
pub(crate) fn concrete_object(schema: &Schema) -> Result<(), String> {
    if let Some(value) = schema.as_bool() {
        return Err(format!("the boolean schema `{value}` (any JSON)"));
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => return Err(format!("a schema of type {other}, not an object")),
        None => return Err("a schema without a type (any JSON)".to_owned()),
    }
    let named = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|props| !props.is_empty());
    if !named && open_ended(schema) {
        return Err("an object that takes any properties (any JSON)".to_owned());
    }
    Ok(())
}

fn refers_elsewhere(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.contains_key("$ref")
                || map.contains_key("$defs")
                || map.values().any(refers_elsewhere)
        }
        Value::Array(items) => items.iter().any(refers_elsewhere),
        _ => false,
    }
}

/// Builds a root schema that nests other root schemas: each nested schema's `$defs`
/// move to the root (so its `$ref`s still resolve), and its `$schema` is dropped.
///
/// ```
/// use toolgraft::schema::Nest;
/// let item = schemars::json_schema!({
///     "$schema": "https://json-schema.org/draft/2020-12/schema",
///     "type": "object",
///     "properties": {"unit": {"$ref": "#/$defs/Unit"}},
///     "$defs": {"Unit": {"enum": ["c", "f"]}}
/// });
/// let mut nest = Nest::default();
/// let items = nest.nested(&item);
/// let root = nest.root(serde_json::json!({"type": "array", "items": items}));
/// assert_eq!(root.get("$defs").unwrap()["Unit"]["enum"][0], "c");
/// assert!(root.get("items").unwrap().get("$schema").is_none());
/// ```
#[derive(Debug, Default)]
pub struct Nest {
    defs: Map<String, Value>,
}

impl Nest {
    /// `schema` without `$schema` and `$defs`; its definitions are kept for the root
    /// (see [`Nest`]'s example).
    pub fn nested(&mut self, schema: &Schema) -> Value {
        let mut value = schema.as_value().clone();
        if let Value::Object(map) = &mut value {
            map.remove("$schema");
            if let Some(Value::Object(defs)) = map.remove("$defs") {
                self.defs.extend(defs);
            }
        }
        value
    }

    /// The root schema `body`, carrying every collected definition (see [`Nest`]'s
    /// example).
    pub fn root(self, body: Value) -> Schema {
        let mut schema = Schema::try_from(body).unwrap_or_else(|_| Schema::default());
        if !self.defs.is_empty() {
            schema.insert("$defs".to_owned(), Value::Object(self.defs));
        }
        schema
    }
}
