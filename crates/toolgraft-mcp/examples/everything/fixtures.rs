//! The suite's tools that talk back to the client, written as an rmcp author
//! writes them (`#[tool_router]`, `Peer`, `RequestContext`) and brought into the
//! toolset whole by `toolgraft_mcp::import::tools`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, CreateMessageRequestParams,
    ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, LoggingMessageNotificationParam, SamplingMessage,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::author::RED_PIXEL_PNG;

/// A WAV file of silence, base64.
const SILENT_WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

/// The tools' service: they keep no state of their own.
#[derive(Clone, Debug, Default)]
pub struct Fixtures;

#[derive(Deserialize, JsonSchema)]
pub struct Prompt {
    /// What to ask the client's model.
    #[serde(default)]
    prompt: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct Message {
    /// What to ask the client's user.
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct Header {
    /// Sent in the body and, base64 or not, in the `Mcp-Param-Value` header.
    #[schemars(extend("x-mcp-header" = "Value"))]
    value: String,
}

#[tool_router(vis = "pub")]
impl Fixtures {
    #[tool(description = "Returns an image.", annotations(read_only_hint = true))]
    async fn test_image_content(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::image(RED_PIXEL_PNG, "image/png")])
    }

    #[tool(description = "Returns audio.", annotations(read_only_hint = true))]
    async fn test_audio_content(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::audio(SILENT_WAV, "audio/wav")])
    }

    #[tool(description = "Asks the client's model, by sampling.")]
    async fn test_sampling(
        &self,
        peer: Peer<RoleServer>,
        Parameters(input): Parameters<Prompt>,
    ) -> CallToolResult {
        let prompt = input.prompt.unwrap_or_else(|| "Hello".to_owned());
        let request =
            CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], 100);
        match peer.create_message(request).await {
            Ok(answer) => {
                let text = answer.message.content.first().and_then(|c| c.as_text());
                let text = text.map_or("no text", |text| text.text.as_str());
                CallToolResult::success(vec![ContentBlock::text(format!("LLM response: {text}"))])
            }
            Err(error) => failed(format!("Sampling error: {error}")),
        }
    }

    #[tool(description = "Asks the client's user for a username and an email.")]
    async fn test_elicitation(
        &self,
        peer: Peer<RoleServer>,
        Parameters(input): Parameters<Message>,
    ) -> CallToolResult {
        let message = input
            .message
            .unwrap_or_else(|| "Please provide your information".to_owned());
        let schema = json!({
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        });
        elicit(&peer, message, schema, "User response").await
    }

    #[tool(description = "Asks the client's user for values that all have defaults (SEP-1034).")]
    async fn test_elicitation_sep1034_defaults(&self, peer: Peer<RoleServer>) -> CallToolResult {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User's name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User's age", "default": 30},
                "score": {"type": "number", "description": "User's score", "default": 95.5},
                "status": {
                    "type": "string", "description": "User's status",
                    "enum": ["active", "inactive", "pending"], "default": "active",
                },
                "verified": {"type": "boolean", "description": "Whether user is verified", "default": true},
            },
        });
        let message = "Please provide values (all have defaults)".to_owned();
        elicit(&peer, message, schema, "Elicitation completed").await
    }

    #[tool(description = "Asks the client's user to choose, in every enum form (SEP-1330).")]
    async fn test_elicitation_sep1330_enums(&self, peer: Peer<RoleServer>) -> CallToolResult {
        let titled = |prefix: &str, titles: [&str; 3]| -> Vec<Value> {
            (1..=3)
                .zip(titles)
                .map(|(n, title)| json!({"const": format!("{prefix}{n}"), "title": title}))
                .collect()
        };
        let schema = json!({
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {"type": "string", "oneOf": titled("value", ["First Option", "Second Option", "Third Option"])},
                "legacyEnum": {
                    "type": "string", "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {"type": "array", "items": {"anyOf": titled("value", ["First Choice", "Second Choice", "Third Choice"])}},
            },
        });
        let message = "Test enum schema improvements".to_owned();
        elicit(&peer, message, schema, "Enum elicitation completed").await
    }

    #[tool(description = "Needs the client's sampling capability, or refuses the call.")]
    async fn test_missing_capability(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let declared = context.meta.client_capabilities().unwrap_or_default();
        if declared.sampling.is_none() {
            let needed = ClientCapabilities::builder().enable_sampling().build();
            return Err(ErrorData::missing_required_client_capability(needed));
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "Required capability declared",
        )]))
    }

    #[tool(description = "Logs at the level the request asks for, and only then.")]
    async fn test_logging_tool(&self, context: RequestContext<RoleServer>) -> CallToolResult {
        if let Some(level) = context.meta.log_level() {
            let message =
                LoggingMessageNotificationParam::new(level, json!("logLevel was requested"))
                    .with_logger("everything");
            let _ = context.peer.notify_logging_message(message).await;
        }
        CallToolResult::success(vec![ContentBlock::text("Logging tool completed")])
    }

    #[tool(description = "Returns the value it was sent.")]
    async fn test_custom_header(&self, Parameters(input): Parameters<Header>) -> String {
        input.value
    }

    /// toolgraft answers an input-required result with an error result until it
    /// serves them (the next issue of work): still no request on the stream.
    #[tool(description = "Asks for input with an input-required result, never on the stream.")]
    async fn test_streaming_elicitation(&self) -> Result<CallToolResponse, ErrorData> {
        let mut requests = InputRequests::new();
        let schema: ElicitationSchema = serde_json::from_value(json!({
            "type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"],
        }))
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        requests.insert(
            "streaming_elicitation".into(),
            InputRequest::Elicitation(ElicitRequest::new(
                ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: "Provide a value".into(),
                    requested_schema: schema,
                },
            )),
        );
        Ok(InputRequiredResult::from_input_requests(requests).into())
    }
}

/// Asks the client's user `message` for values of `schema`, and says what came
/// back after `said`.
async fn elicit(
    peer: &Peer<RoleServer>,
    message: String,
    schema: Value,
    said: &str,
) -> CallToolResult {
    let schema: ElicitationSchema = match serde_json::from_value(schema) {
        Ok(schema) => schema,
        Err(error) => return failed(format!("Elicitation schema: {error}")),
    };
    let request = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    };
    match peer.create_elicitation(request).await {
        Ok(answer) => {
            let action = match answer.action {
                ElicitationAction::Accept => "accept",
                ElicitationAction::Decline => "decline",
                ElicitationAction::Cancel => "cancel",
                _ => "unknown",
            };
            let content = answer.content.map(|content| content.to_string());
            let content = content.unwrap_or_default();
            CallToolResult::success(vec![ContentBlock::text(format!(
                "{said}: action={action}, content={content}"
            ))])
        }
        Err(error) => failed(format!("Elicitation error: {error}")),
    }
}

fn failed(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}
