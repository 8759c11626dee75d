//! A call's outcome as MCP wants it: a result, an `isError` result, or a
//! protocol error.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ContentBlock, InputRequest, InputRequests, InputRequiredResult, JsonObject,
    MetaObject,
};
use serde_json::{Value, json};

use toolgraft::ToolError;
use toolgraft::context::InputRequired;
use toolgraft::error::{ArgsErrorKind, Detailed, Transient};
use toolgraft::rulebook::Rule;

use crate::content::McpContent;
use crate::tool::{OutputShape, Rendering};

/// The input-required result a call answers with, when a layer or the body
/// asked its caller first ([`InputRequired`]) and the client's protocol has such
/// results (2026-07-28 and later; an older client sees the error as any other).
pub(crate) fn input_required(
    outcome: &Result<Value, ToolError>,
    shape: OutputShape,
) -> Option<InputRequiredResult> {
    if shape != OutputShape::AnyJson {
        return None;
    }
    let needed = outcome.as_ref().err()?.downcast_ref::<InputRequired>()?;
    // Asking for nothing is no question a client can answer: the error stands.
    let requests = input_requests(needed).filter(|requests| !requests.is_empty())?;
    Some(InputRequiredResult::new(
        Some(requests),
        needed.state.clone(),
    ))
}

/// What `needed` asks, as MCP input requests: a question is an elicitation
/// (a form); a protocol request goes as it is. `None` when one is not a request
/// MCP has (the call is then answered with the error).
pub(crate) fn input_requests(needed: &InputRequired) -> Option<InputRequests> {
    needed
        .requests
        .iter()
        .map(|(key, request)| {
            let request = match request {
                toolgraft::context::InputRequest::Ask(question) => json!({
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": question.message,
                        "requestedSchema": question.schema,
                    },
                }),
                toolgraft::context::InputRequest::Protocol { method, params } => {
                    json!({"method": method, "params": params})
                }
                // Kinds newer than this crate.
                _ => return None,
            };
            let request: InputRequest = serde_json::from_value(request).ok()?;
            Some((key.clone(), request))
        })
        .collect()
}

/// The text rendering of a result: a string is the text itself (what a model
/// should read), anything else its JSON.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A toolset's outcome as MCP wants it: a result (success or `isError: true`) or a
/// protocol error.
pub(crate) fn to_mcp(
    outcome: Result<Value, ToolError>,
    called: &str,
    rendering: Rendering,
    bad_arguments: BadArguments,
) -> Result<CallToolResult, ErrorData> {
    let error = match outcome {
        Ok(value) => return Ok(answer(value, rendering)),
        Err(error) => error,
    };
    let message = error.to_string();
    // The rulebook's section the error cites, where it cites one.
    let rule = error.rule();
    let with_rule = |mut data: Value| {
        if let (Some(rule), Some(fields)) = (rule, data.as_object_mut()) {
            fields.insert("rule".to_owned(), json!(rule));
        }
        Some(data)
    };
    match error {
        // `tool` is the name the client called (the published one), whichever
        // layer found the arguments wrong.
        ToolError::InvalidArguments { field, kind, .. } => {
            let kind = match kind {
                ArgsErrorKind::UnknownField => "unknown_field",
                ArgsErrorKind::MissingField => "missing_field",
                ArgsErrorKind::TooDeep => "too_deep",
                // `InvalidValue`, and kinds newer than this crate.
                _ => "invalid_value",
            };
            let data = json!({"tool": called, "field": field, "kind": kind});
            if bad_arguments == BadArguments::AsToolResult {
                let mut meta = rule.map(rule_meta).unwrap_or_default();
                meta.insert(ERROR_META.to_owned(), data);
                let result = CallToolResult::error(vec![ContentBlock::text(message)]);
                return Ok(result.with_meta(Some(meta)));
            }
            Err(ErrorData::invalid_params(message, with_rule(data)))
        }
        // MCP lists an unknown tool among the invalid-params protocol errors.
        ToolError::UnknownTool { name } => Err(ErrorData::invalid_params(
            message,
            with_rule(json!({"tool": name})),
        )),
        // Refused before any work, for want of scopes the caller may be granted:
        // the client (not the model) can bring them, with a new token.
        ToolError::Unauthorized { name, denied } => Err(ErrorData::new(
            rmcp::model::ErrorCode(INSUFFICIENT_SCOPE),
            message,
            with_rule(json!({
                "tool": name,
                "error": "insufficient_scope",
                "scopes": denied.missing.scopes(),
            })),
        )),
        // A body that failed with a protocol error of its own (an rmcp tool's
        // `Err(ErrorData)`, a missing client capability) is answered with it, as
        // rmcp answers for its own tools.
        ToolError::Body { source, .. } if protocol_error(source.as_ref()).is_some() => {
            Err(protocol_error(source.as_ref())
                .unwrap_or_else(|| ErrorData::internal_error(message, None)))
        }
        // `Body`, `Panicked`, `Refused`, `Relocation`, `TimedOut`, `Reported`,
        // `Extension`, `Output` (and variants newer than this crate): the tool ran
        // and failed, which MCP reports in the result.
        _ => {
            let result = CallToolResult::error(vec![ContentBlock::text(message)]);
            let mut meta = rule.map(rule_meta).unwrap_or_default();
            // A client that retries reads when from here, not from the prose.
            if let Some(wait) = error.retry_after() {
                // Rounded up, as the message says it: a client told 499 ms for a
                // wait of 499.9 ms comes back early and is refused again.
                let millis = u64::try_from(wait.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
                meta.insert(RETRY_AFTER_META.to_owned(), json!(millis));
            }
            Ok(if meta.is_empty() {
                result
            } else {
                result.with_meta(Some(meta))
            })
        }
    }
}

/// The scopes a call's answer says the caller lacks, when it was refused with a
/// step-up ([`INSUFFICIENT_SCOPE`]).
#[cfg(feature = "http")]
pub(crate) fn missing_scopes(refused: &ErrorData) -> Option<Vec<String>> {
    let data = refused.data.as_ref()?;
    if refused.code.0 != INSUFFICIENT_SCOPE || data.get("error")? != "insufficient_scope" {
        return None;
    }
    serde_json::from_value(data.get("scopes")?.clone()).ok()
}

/// The key of a [`Detailed`] error's data that holds a JSON-RPC error (an
/// imported rmcp tool's, kept whole wherever its body ran).
pub(crate) const JSONRPC_ERROR: &str = "jsonrpcError";

/// The protocol error a body failed with: an rmcp [`ErrorData`] of its own, one
/// a [`Detailed`] error keeps (from an imported rmcp tool, in process or from a
/// worker), either marked [`Transient`] or not.
fn protocol_error(error: &(dyn std::error::Error + 'static)) -> Option<ErrorData> {
    let error = match error.downcast_ref::<Transient>() {
        Some(marked) => marked.error(),
        None => error,
    };
    if let Some(error) = error.downcast_ref::<ErrorData>() {
        return Some(error.clone());
    }
    let kept = error
        .downcast_ref::<Detailed>()?
        .data()
        .get(JSONRPC_ERROR)?;
    serde_json::from_value(kept.clone()).ok()
}

/// A value as the answer a client on `rendering` reads.
fn answer(value: Value, rendering: Rendering) -> CallToolResult {
    match rendering {
        Rendering::Structured => CallToolResult::structured(value),
        // A value under McpContent's schema that is not one (a layer that
        // changed the value and kept the schema) is an error the model reads,
        // not an answer made up.
        Rendering::Content => match serde_json::from_value::<McpContent>(value) {
            Ok(content) => content.0,
            Err(error) => CallToolResult::error(vec![ContentBlock::text(format!(
                "the tool's answer is not the MCP content its schema says: {error}"
            ))]),
        },
        Rendering::Text => CallToolResult::success(vec![ContentBlock::text(text_of(&value))]),
    }
}

/// The `_meta` of a failed call's result that cites a rule of the rulebook.
fn rule_meta(rule: Rule) -> MetaObject {
    let mut meta = JsonObject::new();
    meta.insert(RULE_META.to_owned(), json!(rule));
    MetaObject(meta)
}

/// The `_meta` key of a failed call's result that names the rule it cites:
/// `{"_meta": {"toolgraft/rule": "locality-inside-relocation"}}`.
///
/// ```
/// assert_eq!(toolgraft_mcp::RULE_META, "toolgraft/rule");
/// ```
pub const RULE_META: &str = "toolgraft/rule";

/// The JSON-RPC error code of a call refused for want of scopes the caller's
/// authorization server may grant (a [step-up](toolgraft::access::Denied::step_up)):
/// its `data` is `{"tool", "error": "insufficient_scope", "scopes"}`, the scopes
/// the caller lacks. Over Streamable HTTP the same reply comes with `403` and a
/// `WWW-Authenticate: Bearer error="insufficient_scope", scope=".."` challenge,
/// on which a client asks for a new token.
///
/// ```
/// # use toolgraft::{Tool, Toolset};
/// use toolgraft::access::Scopes;
/// use toolgraft_mcp::{INSUFFICIENT_SCOPE, OutputShape, ToolsetServer};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Note { text: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let write = Tool::builder().name("write_note").description("Write a note.")
/// #     .body(|n: Note| async move { Ok(n.text) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((write.combo(),))?;
/// toolset.edit().authorize("write_note", Scopes::all(["notes:write"]).with_step_up()).commit()?;
/// let server = ToolsetServer::new(toolset);
/// let refused = server.call("write_note", None, OutputShape::AnyJson).await.unwrap_err();
/// assert_eq!(refused.code.0, INSUFFICIENT_SCOPE);
/// assert_eq!(refused.data.unwrap()["scopes"], serde_json::json!(["notes:write"]));
/// # Ok(()) }
/// ```
pub const INSUFFICIENT_SCOPE: i32 = -32003;

/// The `_meta` key of a failed call's result that says, in milliseconds, when
/// the call may be made again: a limit that refused it
/// ([`ToolError::Overloaded`] with a `retry_after`), or a body that said when.
///
/// ```
/// assert_eq!(toolgraft_mcp::RETRY_AFTER_META, "toolgraft/retryAfterMs");
/// ```
pub const RETRY_AFTER_META: &str = "toolgraft/retryAfterMs";

/// The `_meta` key of a result that reports bad arguments
/// ([`BadArguments::AsToolResult`]): `{"tool", "field", "kind"}`, what the
/// `-32602` error's `data` holds otherwise.
///
/// ```
/// assert_eq!(toolgraft_mcp::ERROR_META, "toolgraft/error");
/// ```
pub const ERROR_META: &str = "toolgraft/error";

/// How a call with bad arguments is answered ([`ToolsetServer::with_bad_arguments`](crate::ToolsetServer::with_bad_arguments)).
///
/// ```
/// use toolgraft_mcp::BadArguments;
/// assert_eq!(BadArguments::default(), BadArguments::AsProtocolError);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadArguments {
    /// A JSON-RPC error `-32602` (invalid params) with `{tool, field, kind}` as
    /// its `data`: the request was wrong, and the client sees it as such.
    #[default]
    AsProtocolError,
    /// A result with `isError: true`: the message as text, for the model to read
    /// and call again, and `{tool, field, kind}` in `_meta` under [`ERROR_META`].
    /// What the protocol recommends from `2025-11-25` on, and what rmcp's own
    /// tools do.
    AsToolResult,
}

/// What the server does with an argument a tool's input schema does not name
/// ([`ToolsetServer::with_unknown_arguments`](crate::ToolsetServer::with_unknown_arguments)).
///
/// ```
/// use toolgraft_mcp::UnknownArguments;
/// assert_eq!(UnknownArguments::default(), UnknownArguments::AsSchemaSays);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownArguments {
    /// As each tool's input schema says: refused where it says
    /// `"additionalProperties": false` (`#[serde(deny_unknown_fields)]`), taken
    /// and left unread otherwise, as rmcp takes them.
    #[default]
    AsSchemaSays,
    /// Refused for every tool of the toolset whose schema names its properties
    /// and says nothing of others: it is listed with `"additionalProperties":
    /// false`, and a call naming a top-level property it does not is answered as
    /// bad arguments ([`BadArguments`]) before any layer runs. A schema that
    /// composes others (`oneOf`, `allOf`, `$ref`) or takes more by a schema of its
    /// own is left as it says; the handler's own tools are the handler's.
    Refuse,
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgraft::Name;
    use toolgraft::context::Question;

    fn asking() -> Result<Value, ToolError> {
        let needed = InputRequired::ask(
            "approve",
            Question::new(
                "Run `wipe`?",
                json!({"type": "object", "properties": {"approve": {"type": "boolean"}}}),
            ),
            "tg1.sealed",
        );
        Err(ToolError::extension(
            Name::new("wipe").unwrap(),
            Name::new("approve").unwrap(),
            needed,
        ))
    }

    #[test]
    fn a_question_is_an_input_required_result_where_the_protocol_has_them() {
        let result =
            input_required(&asking(), OutputShape::AnyJson).expect("an input-required result");
        assert_eq!(
            serde_json::to_value(&result).unwrap(),
            json!({
                "resultType": "input_required",
                "inputRequests": {"approve": {"method": "elicitation/create", "params": {
                    "mode": "form",
                    "message": "Run `wipe`?",
                    "requestedSchema": {"type": "object", "properties": {"approve": {"type": "boolean"}}},
                }}},
                "requestState": "tg1.sealed",
            })
        );
        // An older client sees the error; other errors and results are not questions.
        assert!(input_required(&asking(), OutputShape::ObjectOnly).is_none());
        assert!(input_required(&Ok(json!("done")), OutputShape::AnyJson).is_none());
        let other = ToolError::extension(
            Name::new("wipe").unwrap(),
            Name::new("approve").unwrap(),
            std::fmt::Error,
        );
        assert!(input_required(&Err(other), OutputShape::AnyJson).is_none());
    }

    /// `_meta` agrees with the message, and a client that waits the time given
    /// is not early (the job wire rounds up for the same reason).
    #[test]
    fn retry_after_meta_is_rounded_up_like_the_message() {
        let error = ToolError::Overloaded {
            tool: Name::new("ping_rate_limit").unwrap(),
            extension: Name::new("rate_limit").unwrap(),
            reason: "over 2 calls per 1s".into(),
            retry_after: Some(std::time::Duration::from_micros(499_999)),
        };
        assert!(error.to_string().ends_with("retry after 500 ms"), "{error}");
        let result = to_mcp(
            Err(error),
            "ping_rate_limit",
            crate::tool::Rendering::Text,
            BadArguments::default(),
        )
        .unwrap();
        let meta = result.meta.expect("meta");
        assert_eq!(
            meta.0[RETRY_AFTER_META],
            json!(500),
            "a client told 499 ms comes back early and is refused again"
        );
    }
}
