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

use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;

use crate::access::PolicySpec;
use crate::bind::Publish;
pub use crate::bind::element::{ComboSpec, ElementSpec};
use crate::error::shorten;
use crate::limits::deeper_than;
use crate::tool::Annotations;

mod read;

use read::{StrictValue, audiences_of, combos_of, entry_of, matches_of, shown};

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
