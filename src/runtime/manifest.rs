//! Manifest files: which combos each base tool carries, as an operator writes them
//! ([manifest-shape](crate::rulebook#manifest-shape)), in JSON or TOML.
//!
//! ```json
//! { "tools": {
//!     "weather": [["cache", "batch"], [{"name": "output_schema", "config": {"schema": {"type": "object"}}}]],
//!     "search":  ["trace"]
//! } }
//! ```
//!
//! A flat list is one combo: `["trace"]` is `[["trace"]]`.
//!
//! A tool's combos and its [published names](crate::rulebook#published-names)
//! together are an object:
//!
//! ```json
//! { "tools": {
//!     "search": {"combos": [["cache", "timeout"]], "publish": {"search": "search_cache_timeout"}},
//!     "fetch":  {"combos": [["proxy"], ["trace"]], "publish": "outermost"}
//! } }
//! ```
//!
//! So are the hints an operator sets for a tool (MCP's annotations by their names
//! there; each one said replaces the tool's own, [side-effects](crate::rulebook#side-effects)):
//!
//! ```json
//! { "tools": {
//!     "lookup": {"combos": [["retry"]], "annotations": {"idempotentHint": true}}
//! } }
//! ```
//!
//! And the [access policies](crate::access) on a tool's names (the tool's own
//! name decides all of them; a branch's or a published name's, that name):
//!
//! ```json
//! { "tools": {
//!     "notes": {"combos": [["cache", "authorize"]],
//!               "access": {"notes": {"claims": {"tenant": "acme"}},
//!                          "notes_cache_authorize": {"scopes": ["notes:read"], "step_up": true}}}
//! } }
//! ```
//!
//! A policy's `when` is a CEL expression over the caller, the name called and
//! the arguments (toolgraft's `cel` feature; see [`PolicySpec`]):
//!
//! ```json
//! { "tools": {
//!     "search": {"combos": [],
//!                "access": {"search": {"claims": {"tenant": "acme"},
//!                                      "when": "arguments.limit <= 100 || 'search:bulk' in scopes"}}}
//! } }
//! ```
//!
//! And [audiences](crate::toolset::Edit::audience): groups of callers, each
//! decided by a policy of the same form, shown what a tool's `"publish_to"`
//! publishes to them in place of its `"publish"`. A caller is in the first
//! audience, in the manifest's order, whose policy allows it; the manifest's
//! `"audiences"` are the toolset's, when it has the key:
//!
//! ```json
//! { "audiences": [{"name": "pro", "access": {"claims": {"plan": "pro"}}}],
//!   "tools": {
//!     "search": {"combos": [["cache", "rate_limit"]],
//!                "publish": {"search": "search_cache_rate_limit"},
//!                "publish_to": {"pro": {"search": "search_cache"}}}
//! } }
//! ```
//!
//! An operator who does not know the tools' names in advance (an upstream MCP
//! server's) puts combos on them by what they are: `"match"` is a list of
//! entries, each with combos and optional conditions, a name `prefix` and
//! `annotations` (MCP's four hints, compared with what the tool says, MCP's
//! defaults where it says nothing: not read-only, destructive, not idempotent,
//! open-world). A tool named under `"tools"` takes exactly its entry there;
//! any other takes the combos of every entry it meets, in order
//! ([`Manifest::combos_for`]; a combo given twice is refused when it binds, as
//! in one entry). `"tools"` may be left out when `"match"` is given:
//!
//! ```json
//! { "tools": {"fs_read_file": ["cache"]},
//!   "match": [
//!     {"prefix": "fs_", "annotations": {"readOnlyHint": false}, "combos": [["approve"]]},
//!     {"annotations": {"readOnlyHint": true}, "combos": [["cache"]]}
//! ] }
//! ```

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

use crate::access::PolicySpec;
use crate::bind::Publish;
pub use crate::bind::element::{ComboSpec, ElementSpec};
use crate::error::{shorten, shorten_json};
use crate::limits::deeper_than;
use crate::name::{MAX_NAME_LEN, Name};
use crate::tool::Annotations;

/// The combos of every base tool, in file order.
///
/// ```
/// use toolgraft::runtime::manifest::Manifest;
/// let manifest = Manifest::from_json(r#"{"tools": {"weather": ["chain"], "search": [["trace"], ["cache", "batch"]]}}"#)?;
/// assert_eq!(manifest.tools[0].0, "weather");
/// assert_eq!(manifest.tools[0].1, Manifest::from_json(r#"{"tools": {"weather": [["chain"]]}}"#)?.tools[0].1);
/// assert_eq!(manifest.tools[1].1.len(), 2);
/// # Ok::<(), toolgraft::runtime::manifest::ManifestError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Manifest {
    /// Each base tool's name with its combos.
    pub tools: Vec<(String, Vec<ComboSpec>)>,
    /// The tools whose published names the manifest sets, with them; a tool
    /// it does not list here keeps what it publishes.
    pub publish: Vec<(String, Publish)>,
    /// The tools whose hints the operator sets (`"annotations"`), with the hints
    /// said: each one said replaces the tool's own, the others stay the tool's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<(String, Annotations)>,
    /// The access policies a tool's entry puts on its names (`"access"`: the
    /// tool's own name, a branch, or a name it publishes), by tool: who may call
    /// and see each (see [`access`](crate::access)).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<(String, Vec<(String, PolicySpec)>)>,
    /// The toolset's audiences (`"audiences"`), in the order callers are
    /// matched against them, each with the policy that decides who is in it;
    /// `None` when the manifest does not say (the toolset keeps its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audiences: Option<Vec<(String, PolicySpec)>>,
    /// What a tool's entry publishes to each audience (`"publish_to"`), by
    /// tool: the tool's whole per-audience publication; a tool it does not
    /// list here keeps its own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub publish_to: Vec<(String, Vec<(String, Publish)>)>,
    /// The combos for tools by what they are (`"match"`), in order: a tool the
    /// manifest does not name under `"tools"` takes those of every entry it
    /// meets ([`combos_for`](Self::combos_for)).
    #[serde(rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<MatchEntry>,
}

/// An entry of a manifest's `"match"`: combos for every tool the manifest does
/// not name that meets its conditions, a name `prefix` and hints, each
/// optional (none: every such tool).
///
/// ```
/// use toolgraft::runtime::manifest::Manifest;
/// use toolgraft::tool::Annotations;
/// let manifest = Manifest::from_json(r#"{"match": [{"prefix": "fs_", "annotations": {"readOnlyHint": false}, "combos": [["approve"]]}]}"#)?;
/// let writes = &manifest.matches[0];
/// assert!(writes.matches("fs_write", &Annotations::default()));
/// let read_only = Annotations { read_only: Some(true), ..Annotations::default() };
/// assert!(!writes.matches("fs_read", &read_only));
/// assert!(!writes.matches("web_post", &Annotations::default()));
/// # Ok::<(), toolgraft::runtime::manifest::ManifestError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MatchEntry {
    /// What a tool's name must start with, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The hints a tool must have, each said one equal to the tool's (MCP's
    /// default where the tool says nothing); `title` is never a condition.
    #[serde(skip_serializing_if = "Annotations::is_empty")]
    pub annotations: Annotations,
    /// The combos a tool that meets the conditions takes.
    pub combos: Vec<ComboSpec>,
}

impl MatchEntry {
    /// Whether a tool named `tool` with the hints `hints` (as it says them:
    /// MCP's defaults stand in for those it does not) meets this entry's
    /// conditions. See the type's example.
    pub fn matches(&self, tool: &str, hints: &Annotations) -> bool {
        let hints = hints.with_mcp_defaults();
        let wanted = &self.annotations;
        let meets = |want: Option<bool>, has: Option<bool>| want.is_none() || want == has;
        self.prefix
            .as_deref()
            .is_none_or(|prefix| tool.starts_with(prefix))
            && meets(wanted.read_only, hints.read_only)
            && meets(wanted.destructive, hints.destructive)
            && meets(wanted.idempotent, hints.idempotent)
            && meets(wanted.open_world, hints.open_world)
    }
}

/// A manifest that cannot be used. Shape errors name the tool key and say what to
/// write instead.
///
/// ```
/// use toolgraft::runtime::manifest::Manifest;
/// let err = Manifest::from_json(r#"{"tools": {"x": "chain"}}"#).unwrap_err();
/// assert_eq!(err.to_string(),
///     r#"tool `x`: expected a list of combos, found "chain"; write ["chain"] for one combo, or [["a", "b"], ["c"]] for several"#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The text is not valid JSON or TOML.
    #[error("the manifest is not valid {format}: {problem}")]
    Syntax {
        /// `JSON` or `TOML`.
        format: &'static str,
        /// The parser's message.
        problem: String,
    },
    /// The top level is not `{"tools": {...}}` (with `"audiences": [...]`
    /// and `"match": [...]` beside it, optionally; `"tools"` may be left out
    /// when `"match"` is given).
    #[error(
        "the manifest must be an object with the key `tools`, mapping tool names to combos, and optionally `audiences` and `match`: {problem}"
    )]
    TopLevel {
        /// What was found instead.
        problem: String,
    },
    /// An entry of `"match"` breaks the manifest shape.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::Manifest;
    /// let err = Manifest::from_json(r#"{"match": [{"combos": ["trace"]}, {"prefix": 3, "combos": ["trace"]}]}"#).unwrap_err();
    /// assert!(err.to_string().starts_with("match[1]: has a `prefix` of 3, not a string;"), "{err}");
    /// ```
    #[error("match[{entry}]: {problem}")]
    Match {
        /// The entry's place in `"match"`, from 0.
        entry: usize,
        /// What is wrong, and what to write instead.
        problem: String,
    },
    /// A tool's value breaks the manifest shape.
    #[error("tool `{tool}`: {problem}")]
    Shape {
        /// The tool key.
        tool: String,
        /// What is wrong, and what to write instead.
        problem: String,
    },
    /// The manifest nests deeper than [`MAX_DEPTH`] levels (JSON and TOML parsers
    /// stop earlier; a manifest built from a `Value` in code may not).
    #[error("the manifest nests more than {limit} levels deep; no manifest needs that many")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// The file could not be read, or its format is not known from its extension.
    #[error("cannot load the manifest {path}: {problem}")]
    File {
        /// The file.
        path: String,
        /// Why.
        problem: String,
    },
}

impl ManifestError {
    /// The section of the [rulebook](crate::rulebook) this error enforces:
    /// [`Rule::ManifestShape`](crate::rulebook::Rule::ManifestShape) for a manifest
    /// of the wrong shape; `None` for text that does not parse, a limit, or a file.
    ///
    /// ```
    /// use toolgraft::rulebook::Rule;
    /// use toolgraft::runtime::manifest::Manifest;
    /// let err = Manifest::from_json(r#"{"tools": {"x": "chain"}}"#).unwrap_err();
    /// assert_eq!(err.rule(), Some(Rule::ManifestShape));
    /// assert_eq!(Manifest::from_json("{").unwrap_err().rule(), None);
    /// ```
    pub fn rule(&self) -> Option<crate::rulebook::Rule> {
        match self {
            Self::TopLevel { .. } | Self::Shape { .. } | Self::Match { .. } => {
                Some(crate::rulebook::Rule::ManifestShape)
            }
            Self::Syntax { .. } | Self::TooDeep { .. } | Self::File { .. } => None,
        }
    }
}

impl Manifest {
    /// Parses a JSON manifest.
    ///
    /// A key written twice in one object is an error (a JSON parser would keep the
    /// last one silently).
    pub fn from_json(text: &str) -> Result<Self, ManifestError> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let value = serde::Deserializer::deserialize_any(&mut deserializer, StrictValue)
            .and_then(|value| deserializer.end().map(|()| value))
            .map_err(|err| ManifestError::Syntax {
                format: "JSON",
                problem: err.to_string(),
            })?;
        Self::from_value(&value)
    }

    /// Parses a TOML manifest (`[tools]` with one array per tool).
    ///
    /// ```
    /// use toolgraft::runtime::manifest::Manifest;
    /// let toml = Manifest::from_toml(r#"
    ///     [tools]
    ///     weather = [["cache", "batch"], [{ name = "output_schema", config = { schema = { type = "object" } } }]]
    ///     search = ["trace"]
    /// "#)?;
    /// let json = Manifest::from_json(r#"{"tools": {
    ///     "weather": [["cache", "batch"], [{"name": "output_schema", "config": {"schema": {"type": "object"}}}]],
    ///     "search": ["trace"]}}"#)?;
    /// assert_eq!(toml, json);
    /// # Ok::<(), toolgraft::runtime::manifest::ManifestError>(())
    /// ```
    pub fn from_toml(text: &str) -> Result<Self, ManifestError> {
        let value: Value = toml::from_str(text).map_err(|err| ManifestError::Syntax {
            format: "TOML",
            problem: err.to_string(),
        })?;
        Self::from_value(&value)
    }

    /// Reads a `.json` or `.toml` manifest file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ManifestError> {
        let path = path.as_ref();
        let file_error = |problem: String| ManifestError::File {
            path: path.display().to_string(),
            problem,
        };
        let text = std::fs::read_to_string(path).map_err(|err| file_error(err.to_string()))?;
        let extension = path
            .extension()
            .and_then(|ext| ext.to_str())
            .map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("json") => Self::from_json(&text),
            Some("toml") => Self::from_toml(&text),
            _ => Err(file_error(
                "name it *.json or *.toml (YAML is not read)".to_owned(),
            )),
        }
    }

    /// The hints the manifest sets for `tool`, if it sets any.
    pub(crate) fn annotations_of(&self, tool: &str) -> Option<&Annotations> {
        self.annotations
            .iter()
            .find(|(name, _)| name == tool)
            .map(|(_, annotations)| annotations)
    }

    /// The policies the manifest puts on `tool`'s names.
    pub(crate) fn access_of(&self, tool: &str) -> &[(String, PolicySpec)] {
        self.access
            .iter()
            .find(|(name, _)| name == tool)
            .map_or(&[], |(_, policies)| policies.as_slice())
    }

    /// What the manifest says `tool` publishes to each audience, if it says.
    pub(crate) fn publish_to_of(&self, tool: &str) -> Option<&[(String, Publish)]> {
        self.publish_to
            .iter()
            .find(|(name, _)| name == tool)
            .map(|(_, publish_to)| publish_to.as_slice())
    }

    /// What the manifest says `tool` publishes, if it says.
    pub(crate) fn publish_of(&self, tool: &str) -> Option<&Publish> {
        self.publish
            .iter()
            .find(|(name, _)| name == tool)
            .map(|(_, publish)| publish)
    }

    /// The combos the manifest gives the base tool `tool`, whose own hints are
    /// `hints` (as its presentation says them): its entry under `"tools"` if
    /// it has one, exactly; otherwise those of every `"match"` entry it meets
    /// ([`MatchEntry::matches`], on its hints after the manifest's
    /// `"annotations"` for it), in order. A combo two entries give is listed
    /// twice, which binding refuses ([`BindError::AlreadyAttached`](crate::BindError::AlreadyAttached)).
    /// For a tool that appears after the manifest was applied.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::{ElementSpec, Manifest};
    /// use toolgraft::tool::Annotations;
    /// let manifest = Manifest::from_json(r#"{
    ///     "tools": {"fs_read_file": ["trace"]},
    ///     "match": [{"prefix": "fs_", "annotations": {"readOnlyHint": false}, "combos": [["approve"]]},
    ///               {"annotations": {"readOnlyHint": true}, "combos": [["cache"]]}]}"#)?;
    /// let read_only = Annotations { read_only: Some(true), ..Annotations::default() };
    /// let one = |name: &str| vec![vec![ElementSpec::named(name)]];
    /// assert_eq!(manifest.combos_for("fs_read_file", &read_only), one("trace"));
    /// assert_eq!(manifest.combos_for("fs_list", &read_only), one("cache"));
    /// assert_eq!(manifest.combos_for("fs_delete", &Annotations::default()), one("approve"));
    /// assert!(manifest.combos_for("web_post", &Annotations::default()).is_empty());
    /// # Ok::<(), toolgraft::runtime::manifest::ManifestError>(())
    /// ```
    pub fn combos_for(&self, tool: &str, hints: &Annotations) -> Vec<ComboSpec> {
        if let Some((_, combos)) = self.tools.iter().find(|(name, _)| name == tool) {
            return combos.clone();
        }
        let hints = match self.annotations_of(tool) {
            Some(said) => hints.overridden_by(said),
            None => hints.clone(),
        };
        self.matches
            .iter()
            .filter(|entry| entry.matches(tool, &hints))
            .flat_map(|entry| entry.combos.iter().cloned())
            .collect()
    }

    /// Whether the manifest names `tool` under `"tools"`.
    pub(crate) fn names(&self, tool: &str) -> bool {
        self.tools.iter().any(|(name, _)| name == tool)
    }

    /// Reads a manifest from a JSON value of the [manifest shape](crate::rulebook#manifest-shape), normalizing flat
    /// lists to one combo.
    pub fn from_value(value: &Value) -> Result<Self, ManifestError> {
        // Reading the manifest clones configs, which recurses once per level.
        if deeper_than(value, MAX_DEPTH) {
            return Err(ManifestError::TooDeep { limit: MAX_DEPTH });
        }
        let top = value.as_object().ok_or_else(|| ManifestError::TopLevel {
            problem: format!("found {}", shown(value)),
        })?;
        if let Some(extra) = top
            .keys()
            .find(|key| !["tools", "audiences", "match"].contains(&key.as_str()))
        {
            return Err(ManifestError::TopLevel {
                problem: format!("unexpected key `{}`", shorten(extra)),
            });
        }
        let no_tools = Map::new();
        let tools = match (top.get("tools"), top.contains_key("match")) {
            (Some(tools), _) => tools.as_object().ok_or_else(|| ManifestError::TopLevel {
                problem: "`tools` is not an object".to_owned(),
            })?,
            // Tools by what they are only: no name is known in advance.
            (None, true) => &no_tools,
            (None, false) => {
                return Err(ManifestError::TopLevel {
                    problem: "`tools` is missing".to_owned(),
                });
            }
        };
        let mut manifest = Self {
            audiences: top.get("audiences").map(audiences_of).transpose()?,
            matches: top
                .get("match")
                .map(matches_of)
                .transpose()?
                .unwrap_or_default(),
            ..Self::default()
        };
        for (tool, value) in tools {
            let combos = match value {
                Value::Object(fields) => {
                    let entry = entry_of(tool, fields)?;
                    manifest
                        .publish
                        .extend(entry.publish.map(|publish| (tool.clone(), publish)));
                    manifest
                        .annotations
                        .extend(entry.annotations.map(|hints| (tool.clone(), hints)));
                    if !entry.access.is_empty() {
                        manifest.access.push((tool.clone(), entry.access));
                    }
                    if let Some(publish_to) = entry.publish_to {
                        manifest.publish_to.push((tool.clone(), publish_to));
                    }
                    entry.combos
                }
                combos => combos_of(tool, combos)?,
            };
            manifest.tools.push((tool.clone(), combos));
        }
        Ok(manifest)
    }
}

fn shape(tool: &str, problem: String) -> ManifestError {
    ManifestError::Shape {
        tool: shorten(tool).into_owned(),
        problem,
    }
}

/// A tool's entry in the object form: its combos (none is its base alone), what
/// it publishes and the hints the operator sets, if it says.
struct EntrySpec {
    combos: Vec<ComboSpec>,
    publish: Option<Publish>,
    annotations: Option<Annotations>,
    access: Vec<(String, PolicySpec)>,
    publish_to: Option<Vec<(String, Publish)>>,
}

/// A tool's `{"combos": [...], "publish": ..., "annotations": {..}, "access": {..}, "publish_to": {..}}`.
fn entry_of(tool: &str, fields: &Map<String, Value>) -> Result<EntrySpec, ManifestError> {
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
fn audiences_of(value: &Value) -> Result<Vec<(String, PolicySpec)>, ManifestError> {
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
fn matches_of(value: &Value) -> Result<Vec<MatchEntry>, ManifestError> {
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

fn combos_of(tool: &str, value: &Value) -> Result<Vec<ComboSpec>, ManifestError> {
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
fn shown(value: &Value) -> String {
    shorten_json(value)
}

/// How deep a manifest may nest: what `serde_json` parses by default.
///
/// ```
/// use serde_json::Value;
/// use toolgraft::runtime::manifest::{MAX_DEPTH, Manifest, ManifestError};
/// let mut deep = Value::Null;
/// for _ in 0..MAX_DEPTH { deep = Value::Array(vec![deep]); }
/// let manifest = serde_json::json!({"tools": {"x": [[{"name": "a", "config": {"c": deep}}]]}});
/// assert!(matches!(Manifest::from_value(&manifest), Err(ManifestError::TooDeep { .. })));
/// ```
pub const MAX_DEPTH: usize = 128;

/// A JSON value, refusing a key written twice in one object.
struct StrictValue;

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
