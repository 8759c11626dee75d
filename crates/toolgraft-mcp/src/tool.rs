//! What a client sees of a bound name: an MCP tool, shaped for the protocol
//! version it speaks.

use rmcp::model::{JsonObject, ProtocolVersion, Tool};
use schemars::Schema;
use serde_json::{Value, json};

use toolgraft::tool::{Annotations, Presentation};
use toolgraft::toolset::{Published, ToolInfo};

use crate::content::is_content_schema;

/// Which output schemas and structured results a client can take, by the protocol
/// version it negotiated.
///
/// Protocol versions before `2026-07-28` require an output schema to be an object
/// schema (root `"type": "object"`) and structured content to be a JSON object.
/// toolgraft output schemas need not be: a tool returning a `String`, a `batch`
/// branch returning a list, a `serde_json::Value` (no `type` at all). For those
/// clients such a tool is listed **without** `outputSchema`, and its results come
/// back as text only. Wrapping the value (`{"result": ...}`) would also fit, but
/// then the same tool would return differently shaped data depending on the
/// client, and the model would read a wrapper the tool never returned. From
/// `2026-07-28` (SEP-2106) any JSON Schema and any JSON value are allowed, so the
/// schema is advertised as it is and results are structured.
///
/// ```
/// use toolgraft_mcp::OutputShape;
/// use rmcp::model::ProtocolVersion;
///
/// assert_eq!(OutputShape::for_protocol(Some(&ProtocolVersion::V_2025_06_18)), OutputShape::ObjectOnly);
/// assert_eq!(OutputShape::for_protocol(Some(&ProtocolVersion::V_2026_07_28)), OutputShape::AnyJson);
/// assert_eq!(OutputShape::for_protocol(None), OutputShape::ObjectOnly);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputShape {
    /// Only object output schemas (before protocol version `2026-07-28`).
    ObjectOnly,
    /// Any output schema and any structured value (`2026-07-28` and later).
    AnyJson,
}

impl OutputShape {
    /// The shape a client on `version` takes; an unknown version is treated as an
    /// older one, which every client can read.
    ///
    /// ```
    /// use toolgraft_mcp::OutputShape;
    /// use rmcp::model::ProtocolVersion;
    /// assert_eq!(OutputShape::for_protocol(Some(&ProtocolVersion::V_2025_11_25)), OutputShape::ObjectOnly);
    /// ```
    pub fn for_protocol(version: Option<&ProtocolVersion>) -> Self {
        // Versions are ISO dates, so they order lexically (as rmcp compares them).
        match version {
            Some(version) if version.as_str() >= ProtocolVersion::V_2026_07_28.as_str() => {
                Self::AnyJson
            }
            _ => Self::ObjectOnly,
        }
    }

    fn admits(self, schema: &Schema) -> bool {
        match self {
            Self::AnyJson => true,
            Self::ObjectOnly => is_object_schema(schema),
        }
    }
}

/// The MCP tool for a bound name, as a client on `shape` sees it (see the
/// [crate docs](crate) for what goes where).
///
/// ```
/// use serde_json::json;
/// use toolgraft::ext::Batch;
/// use toolgraft_mcp::{OutputShape, mcp_tool};
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct City { city: String }
/// #[derive(serde::Serialize, schemars::JsonSchema)]
/// struct Forecast { celsius: f64 }
///
/// let weather = Tool::builder().name("weather").description("Tomorrow's forecast.")
///     .body(|_: City| async move { Ok(Forecast { celsius: 21.5 }) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((weather.combo().with(Batch::default()),))?;
///
/// let base = mcp_tool(&toolset.info("weather").unwrap(), OutputShape::ObjectOnly);
/// assert_eq!(base.description.as_deref(), Some("Tomorrow's forecast."));
/// assert_eq!(base.output_schema.unwrap()["type"], "object");
///
/// // A batch returns a list: older clients get no output schema, newer ones do.
/// let batch = toolset.info("weather_batch").unwrap();
/// assert!(mcp_tool(&batch, OutputShape::ObjectOnly).output_schema.is_none());
/// assert_eq!(mcp_tool(&batch, OutputShape::AnyJson).output_schema.unwrap()["type"], "array");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn mcp_tool(info: &ToolInfo, shape: OutputShape) -> Tool {
    let mut input = schema_object(&info.input_schema);
    if !input.contains_key("type") {
        input.insert("type".into(), "object".into());
    }
    let description = (!info.description.is_empty()).then(|| info.description.clone().into());
    let mut tool = Tool::new_with_raw(info.name.to_string(), description, input);
    if let Some(output) = structured_schema(info, shape) {
        tool = tool.with_raw_output_schema(schema_object(output).into());
    }
    present(tool, &info.presentation)
}

/// The MCP tool for a published name: the bound name's, under the name
/// clients call.
pub(crate) fn published_tool(published: &Published, shape: OutputShape) -> Tool {
    let mut tool = mcp_tool(&published.info, shape);
    if published.name != published.info.name {
        tool.name = published.name.to_string().into();
    }
    tool
}

/// The tool with the base's title, annotations, icons and `_meta`. A protocol
/// field that does not read as MCP's (an `icons` that is no list of icons) is
/// left out rather than sent malformed.
fn present(mut tool: Tool, presentation: &Presentation) -> Tool {
    tool.title.clone_from(&presentation.title);
    if !presentation.annotations.is_empty() {
        let Annotations {
            title,
            read_only,
            destructive,
            idempotent,
            open_world,
        } = &presentation.annotations;
        let hints = json!({
            "title": title, "readOnlyHint": read_only, "destructiveHint": destructive,
            "idempotentHint": idempotent, "openWorldHint": open_world,
        });
        tool.annotations = serde_json::from_value(without_nulls(hints)).ok();
    }
    let field = |name: &str| presentation.extra.get(name).cloned();
    tool.icons = field("icons").and_then(|icons| serde_json::from_value(icons).ok());
    tool.meta = field("_meta").and_then(|meta| serde_json::from_value(meta).ok());
    tool
}

/// What an MCP tool tells a client beyond its name, description and schemas,
/// as toolgraft keeps it: the inverse of what [`mcp_tool`] sends.
pub(crate) fn presentation_of(tool: &Tool) -> Presentation {
    let mut presentation = Presentation {
        title: tool.title.clone(),
        ..Presentation::default()
    };
    if let Some(hints) = &tool.annotations {
        presentation.annotations = Annotations {
            title: hints.title.clone(),
            read_only: hints.read_only_hint,
            destructive: hints.destructive_hint,
            idempotent: hints.idempotent_hint,
            open_world: hints.open_world_hint,
        };
    }
    let extra = [
        ("icons", tool.icons.as_ref().map(serde_json::to_value)),
        ("_meta", tool.meta.as_ref().map(serde_json::to_value)),
    ];
    for (name, value) in extra {
        if let Some(Ok(value)) = value {
            presentation.extra.insert(name.to_owned(), value);
        }
    }
    presentation
}

fn without_nulls(mut value: Value) -> Value {
    if let Some(object) = value.as_object_mut() {
        object.retain(|_, field| !field.is_null());
    }
    value
}

/// How results of a name are answered for a client: the one place that decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rendering {
    /// As text (a string itself, anything else its JSON).
    Text,
    /// As `structuredContent`, plus its JSON as text.
    Structured,
    /// As the content blocks of an [`McpContent`](crate::McpContent), as they are.
    Content,
}

impl Rendering {
    pub(crate) fn of(info: &ToolInfo, shape: OutputShape) -> Self {
        match &info.output_schema {
            Some(schema) if is_content_schema(schema) => Self::Content,
            Some(schema) if shape.admits(schema) => Self::Structured,
            _ => Self::Text,
        }
    }
}

/// The output schema a client on `shape` is shown, if any.
fn structured_schema(info: &ToolInfo, shape: OutputShape) -> Option<&Schema> {
    let structured = Rendering::of(info, shape) == Rendering::Structured;
    info.output_schema.as_deref().filter(|_| structured)
}

/// Whether a schema is one that clients before `2026-07-28` accept as an output
/// schema. The same test rmcp applies when it strips output for those clients, so
/// the two never disagree.
fn is_object_schema(schema: &Schema) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// A schema as the JSON object MCP carries; `true` and `false` become their object
/// spellings, which mean the same.
fn schema_object(schema: &Schema) -> JsonObject {
    match schema.as_object() {
        Some(object) => object.clone(),
        None if schema.as_bool() == Some(false) => {
            json!({"not": {}}).as_object().cloned().unwrap_or_default()
        }
        None => JsonObject::new(),
    }
}

/// The `_meta` key, `true` on a tool imported
/// [`per_session`](crate::import::per_session): its answers are the session's.
/// A cache on it keeps one answer per session (the server keys its calls by
/// their session), so no session reads another's.
///
/// ```
/// assert_eq!(toolgraft_mcp::import::PER_SESSION_META, "toolgraft/perSession");
/// ```
pub const PER_SESSION_META: &str = "toolgraft/perSession";
