//! What a client is told about a tool beyond its description and schemas.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::annotations::Annotations;

/// What a client is told about a tool beyond its name, description and schemas:
/// a display title, hints about what calling it does (MCP's tool annotations),
/// and fields of a protocol's own, kept as they were given (MCP's `icons` and
/// `_meta`, for a tool imported from an MCP server).
///
/// Every branch of a base presents what the base does: toolgraft reads none of
/// it (the hints do not change what a combo may hold).
///
/// ```
/// use serde_json::json;
/// use toolgraft::Tool;
/// use toolgraft::tool::{Annotations, BaseTool};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Query { q: String }
/// let search = Tool::builder().name("search").description("Search the notes.")
///     .title("Search notes")
///     .annotations(Annotations { read_only: Some(true), ..Annotations::default() })
///     .extra("icons", json!([{"src": "https://example.com/search.png"}]))
///     .body(|i: Query| async move { Ok(i.q) })
///     .build()?;
/// let presentation = &search.spec().presentation;
/// assert_eq!(presentation.title.as_deref(), Some("Search notes"));
/// assert_eq!(presentation.annotations.read_only, Some(true));
/// assert!(presentation.extra.contains_key("icons"));
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Presentation {
    /// A name for people (a model reads the tool's name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Hints about what a call does.
    #[serde(skip_serializing_if = "Annotations::is_empty")]
    pub annotations: Annotations,
    /// Fields of a protocol's own, by their name there (`icons`, `_meta`): passed
    /// through as they are.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}
