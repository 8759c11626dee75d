//! An upstream's tool list as base tools: each tool's name taken into the
//! upstream's namespace, what it says of itself kept, and what cannot be a
//! tool here refused, one by one.

use std::collections::HashSet;
use std::sync::Arc;

use rmcp::model::Tool;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;
use toolgraft::runtime::DynTool;
use toolgraft::schema::Args;
use toolgraft::tool::BaseTool;

use super::config::UpstreamConfig;
use super::error::Refused;
use super::forward::{Forwarder, Shape};
use crate::content::McpContent;
use crate::tool::presentation_of;

/// The base tools of `listed` (the first `max_tools` of them), and the tools
/// refused.
pub(super) fn bases(
    listed: &[Tool],
    config: &UpstreamConfig,
    forwarder: &Arc<Forwarder>,
) -> (Vec<(DynTool, Tool)>, Vec<Refused>) {
    let mut taken = Vec::new();
    let mut refused = Vec::new();
    let mut seen = HashSet::new();
    for tool in listed.iter().take(config.max_tools) {
        let refuse = |problem: String| Refused {
            tool: tool.name.chars().take(128).collect(),
            problem,
        };
        if !seen.insert(tool.name.as_ref()) {
            refused.push(refuse("the upstream lists two tools of this name".into()));
            continue;
        }
        match base(tool, config, forwarder) {
            Ok(base) => taken.push((base, tool.clone())),
            Err(problem) => refused.push(refuse(problem)),
        }
    }
    if listed.len() > config.max_tools {
        refused.push(Refused {
            tool: format!("(the tools after the first {})", config.max_tools),
            problem: format!(
                "the upstream lists more than `max_tools` ({}); the first are taken",
                config.max_tools
            ),
        });
    }
    taken.sort_by(|(a, _), (b, _)| a.spec().name.cmp(&b.spec().name));
    (taken, refused)
}

/// One upstream tool as a base tool named into the namespace.
fn base(
    tool: &Tool,
    config: &UpstreamConfig,
    forwarder: &Arc<Forwarder>,
) -> Result<DynTool, String> {
    let input = Value::Object(rmcp::model::JsonObject::clone(&tool.input_schema));
    let output = tool
        .output_schema
        .as_ref()
        .map(|schema| Value::Object(rmcp::model::JsonObject::clone(schema)));
    let size = serde_json::to_vec(&input).map_or(usize::MAX, |bytes| bytes.len())
        + output.as_ref().map_or(0, |output| {
            serde_json::to_vec(output).map_or(usize::MAX, |bytes| bytes.len())
        });
    if size > config.max_schema_bytes {
        return Err(format!(
            "its schemas are {size} bytes, more than `max_schema_bytes` ({})",
            config.max_schema_bytes
        ));
    }
    // An output schema may describe any JSON (protocol `2026-07-28`);
    // arguments are always an object.
    object_schema(&input)?;
    let shape = match &output {
        None => Shape::Content,
        Some(schema) if schema.get("type") == Some(&Value::from("string")) => Shape::Text,
        Some(_) => Shape::Json,
    };
    let output_schema = match &output {
        Some(Value::Object(schema)) => Schema::from(schema.clone()),
        _ => McpContent::json_schema(&mut SchemaGenerator::default()),
    };
    let name: Arc<str> = Arc::from(tool.name.as_ref());
    let forwarder = forwarder.clone();
    let body = move |args: Args| forwarder.clone().call(name.clone(), shape, args);
    let Value::Object(input) = input else {
        unreachable!("made from an object")
    };
    DynTool::builder()
        .name(config.name_here(&tool.name))
        .description(tool.description.as_deref().unwrap_or_default())
        .input_schema(Schema::from(input))
        .output_schema(output_schema)
        .presentation(presentation_of(tool))
        .body(body)
        .build()
        .map_err(|invalid| invalid.to_string())
}

/// MCP's input schemas describe objects (a call's arguments are one): a
/// `type` other than `object`, or `properties` that are not an object, is a
/// schema no call could meet.
fn object_schema(schema: &Value) -> Result<(), String> {
    match schema.get("type") {
        None => {}
        Some(Value::String(kind)) if kind == "object" => {}
        Some(other) => {
            return Err(format!(
                "its input schema's `type` is {other}, where MCP requires \"object\""
            ));
        }
    }
    if let Some(properties) = schema.get("properties")
        && !properties.is_object()
    {
        return Err("its input schema's `properties` is not an object".to_owned());
    }
    Ok(())
}
